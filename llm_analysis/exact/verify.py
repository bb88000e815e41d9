"""Verify the engine's (Hub import's) description of a config against the real model:
parameters, total and per part, and one small prefill's matmul FLOPs (FlopCounterMode)
of the transformers model on the meta device. A difference raises
`UnsupportedArchitectureError` naming the parts; verdicts are cached (cache.py).
"""

from __future__ import annotations

import copy
from typing import Any, Dict, Optional

from llm_analysis.errors import HubImportError, UnsupportedArchitectureError
import llm_analysis.exact.cache as cache

_GPU = "a100-sxm-80gb"  # any GPU: parameters and FLOPs do not depend on it


def _config_dict(hf_config: Any) -> Dict[str, Any]:
    if isinstance(hf_config, dict):
        return copy.deepcopy(hf_config)
    to_dict = getattr(hf_config, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    raise UnsupportedArchitectureError(
        "hf_config must be a config.json dict or a transformers PretrainedConfig, got "
        f"{type(hf_config).__name__}")


def _engine_config(d: Dict[str, Any], name: str, model_config: Any):
    if model_config is not None:
        return model_config
    from llm_analysis.hub.entry import model_config_from_hf_dict
    return model_config_from_hf_dict(d, name=name)


def _analysis(model_config: Any):
    from llm_analysis.config import get_gpu_config_by_name
    from llm_analysis.facade import LLMAnalysis
    return LLMAnalysis(model_config, get_gpu_config_by_name(_GPU))


def _summary(what: str, verdict: Dict[str, Any]) -> str:
    lines = []
    if not verdict["params_exact"]:
        e, m = verdict["engine_params"], verdict["model_params"]
        lines.append(f"parameters: engine {e:,}, transformers model {m:,} ({(e - m) / m:+.2%})")
        lines += [f"  {d}" for d in verdict["param_differences"]]
    if verdict["flops_exact"] is False:
        e, m = verdict["engine_flops"], verdict["model_flops"]
        lines.append(f"prefill matmul FLOPs (batch 1, 16 tokens): engine {e:,}, FlopCounterMode "
                     f"{m:,} ({(e - m) / m:+.2%})")
    return (f"{what}: the engine's description differs from the transformers model code; "
            "refusing rather than printing a wrong number.\n" + "\n".join(lines))


def _verdict(d: Dict[str, Any], what: str, model_config: Any) -> Dict[str, Any]:
    from llm_analysis.exact.compare import compare
    from llm_analysis.exact.truth import architecture_truth
    truth = architecture_truth(d)  # imports torch and transformers
    verdict = compare(_analysis(model_config), truth)
    verdict["exact"] = verdict["params_exact"] and verdict["flops_exact"] is not False
    verdict["lm_class"] = truth["lm_class"]
    verdict["message"] = None if verdict["exact"] else _summary(what, verdict)
    return verdict


def verify_hf_config(hf_config: Any, model_id: Optional[str] = None, revision: Optional[str] = None,
                     model_config: Any = None, use_cache: bool = True) -> Dict[str, Any]:
    """The verdict for `hf_config` (a config.json dict or a transformers config).

    Returns {"exact": True, "engine_params", "model_params", "engine_flops",
    "model_flops", "flops_exact" (None when FlopCounterMode could not run the model
    on meta tensors; "flops_note" says why), "lm_class", "cached"}.
    Raises UnsupportedArchitectureError when parameters or FLOPs differ (the message
    names the parts) or when transformers cannot build the model; HubImportError when
    the config cannot be mapped at all."""
    d = _config_dict(hf_config)
    name = model_id or str(d.get("_name_or_path") or d.get("model_type") or "model")
    what = f"model {name!r}" + (f" (revision {revision!r})" if revision else "")
    given = model_config.model_dump() if model_config is not None else None
    key = cache.cache_key(model_id, revision, d, given)
    record = cache.load(key) if use_cache else None
    if record is None:
        record = _verdict(d, what, _engine_config(d, name, model_config))
        cache.store(key, record)
        record["cached"] = False
    else:
        record["cached"] = True
    if not record["exact"]:
        raise UnsupportedArchitectureError(record["message"])
    return record


__all__ = ["verify_hf_config", "HubImportError", "UnsupportedArchitectureError"]
