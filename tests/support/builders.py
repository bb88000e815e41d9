"""The analysis builder many tests share: names or configs in, an LLMAnalysis out; and the custom-architecture
example (examples/custom_architecture.py) loaded as a module."""

from __future__ import annotations

import importlib.util
from pathlib import Path

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


CUSTOM_ARCHITECTURE_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_architecture.py"


def custom_architecture_example(module_name: str = "custom_architecture_example"):
    """examples/custom_architecture.py loaded as a fresh module: a test may set its class attributes (the
    adapter's rank) without reaching another test's copy."""
    spec = importlib.util.spec_from_file_location(module_name, CUSTOM_ARCHITECTURE_EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
