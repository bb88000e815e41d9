"""The analysis builder many tests share: names or configs in, an LLMAnalysis out."""

from __future__ import annotations

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig, get_dtype_config_by_name,
                                 get_gpu_config_by_name, get_model_config_by_name)

_PARALLELISM_FIELDS = set(ParallelismConfig.model_fields)


def build_analysis(model, gpu="a100-sxm-80gb", dtype="w16a16e16", parallelism=None, **kw) -> LLMAnalysis:
    """`model`, `gpu`, `dtype`: catalogue names or configs; ParallelismConfig fields (tp_size=...) may be
    given as keywords beside LLMAnalysis' own options (perf_model=..., flops_efficiency=...)."""
    m = model if isinstance(model, ModelConfig) else get_model_config_by_name(model)
    g = gpu if isinstance(gpu, GPUConfig) else get_gpu_config_by_name(gpu)
    d = dtype if isinstance(dtype, DtypeConfig) else get_dtype_config_by_name(dtype)
    par = {k: kw.pop(k) for k in list(kw) if k in _PARALLELISM_FIELDS}
    return LLMAnalysis(m, g, d, parallelism or ParallelismConfig(**par), **kw)
