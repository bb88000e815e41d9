"""Exact verification against the real model code (optional extra `[exact]`: torch).

    from llm_analysis.exact import verify_hf_config
    verify_hf_config(config_json_dict, model_id="org/name", revision="main")

builds the `transformers` model of the config on the meta device, compares the
engine's parameters and prefill FLOPs with it, and raises
`UnsupportedArchitectureError` naming what differs. Verdicts are cached on disk
(`LLM_ANALYSIS_CACHE`, default ~/.cache/llm_analysis). Nothing here imports torch
or transformers at import time; only a verification that is not cached does.

    from llm_analysis.exact import analysis_from_hf
    analysis_from_hf("org/name", gpu_config)   # or a config.json dict / path / directory

derives the operator description of any model transformers can build from its
module tree (derive.py), verifies it exactly (derive_check.py), caches it, and
returns an LLMAnalysis that runs torch-free from the cached description. Families
whose modules the generic reading cannot describe have one module each in
architectures/, registered by transformers class name.
"""

from llm_analysis.exact.entry import analysis_from_hf, exact_analysis_class
from llm_analysis.exact.verify import verify_hf_config

__all__ = ["analysis_from_hf", "exact_analysis_class", "verify_hf_config"]
