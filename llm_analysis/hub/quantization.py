"""What a checkpoint's config.json says of its quantisation: the weight format (`checkpoint_weight_format`) and
which weights it covers (`checkpoint_quantized_weights`)."""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional

from llm_analysis.errors import warn

logger = logging.getLogger("llm_analysis.hub.entry")  # (hub/source.py's: the import's messages under one name)


def _quantization_config(d: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The quantization_config at the top level, or a wrapper's text_config's."""
    q = d.get("quantization_config")
    if not isinstance(q, dict) and isinstance(d.get("text_config"), dict):
        q = d["text_config"].get("quantization_config")
    return q if isinstance(q, dict) else None


def checkpoint_weight_format(d: Dict[str, Any]) -> Optional[str]:
    """The weight format a checkpoint's quantization_config states (top level, or a wrapper's text_config):
    Mxfp4Config (quant_method "mxfp4", gpt-oss), ModelOpt (quant_method "modelopt", quant_algo "NVFP4" or
    "FP8"), FineGrainedFP8Config (quant_method "fp8"); None for anything else (mixed precision,
    compressed-tensors). A ModelOpt export whose quantization_config names ModelOpt only as its producer
    (producer.name "modelopt", no quant_method: Qwen/Qwen3-32B-FP8-Static-PerTensor) is read as ModelOpt: the
    engines detect such a checkpoint by its hf_quant_config.json (vLLM docs, features/quantization/modelopt.md:
    "vLLM detects ModelOpt checkpoints via hf_quant_config.json"), which states the same quant_algo."""
    q = _quantization_config(d)
    if q is None:
        return None
    method, algo = str(q.get("quant_method", "")).lower(), str(q.get("quant_algo", "")).upper()
    producer = q.get("producer")
    if not method and isinstance(producer, dict) and str(producer.get("name", "")).lower() == "modelopt":
        method = "modelopt"
    if method == "mxfp4":
        return "mxfp4"
    if method == "modelopt":  # one algorithm for every quantised layer (MIXED_PRECISION lists several: None)
        return {"NVFP4": "nvfp4", "FP8": "fp8"}.get(algo)
    if method == "fp8" and not algo:
        return "fp8"
    return None


# the parts of a decoder a modules_to_not_convert entry can name, by its last module name: a layer's attention
# and router count only as every layer's (a `*` for the layer index), embeddings and LM head as themselves
_LAYER_PARTS = {"self_attn": "attention", "router": "router"}
_MODEL_PARTS = {"embed_tokens": "embeddings", "lm_head": "lm_head"}
# what the gpt-oss releases keep in bf16: model.layers.*.self_attn, model.layers.*.mlp.router,
# model.embed_tokens, lm_head -- everything but the routed experts
_ALL_BUT_ROUTED_EXPERTS = frozenset({"attention", "router", "embeddings", "lm_head"})
# parts the count already holds at 16 bits whatever the weight dtype (`embedding_bits` of the mxfp4 dtypes)
_COUNTED_AT_EMBEDDING_BITS = frozenset({"embeddings", "lm_head"})


def _kept_part(entry: Any) -> Optional[str]:
    """The part a modules_to_not_convert entry keeps out of the low-bit format, or None when it names
    something else (a layer's experts, one layer, a pattern the rule does not read)."""
    if not isinstance(entry, str):
        return None
    names = entry.split(".")
    if names[-1] in _MODEL_PARTS:
        return _MODEL_PARTS[names[-1]]
    if "*" in names[:-1] and names[-1] in _LAYER_PARTS:
        return _LAYER_PARTS[names[-1]]
    return None


def checkpoint_quantized_weights(d: Dict[str, Any], what: str) -> Optional[str]:
    """Which weights an MXFP4 checkpoint's format covers, from its quantization_config's
    modules_to_not_convert (transformers' Mxfp4Config): "routed_experts" when the list keeps attention, router,
    embeddings and LM head out of it (gpt-oss), None (the default, "all") without a list, for a list naming
    only the embeddings and LM head (held at the dtype's 16-bit embedding width anyway), and for any other
    format. Any other list is warned of, naming it, and counted as "all": the rule does not read it."""
    q = _quantization_config(d)
    if checkpoint_weight_format(d) != "mxfp4" or q is None:
        return None
    kept: List[Any] = q.get("modules_to_not_convert") or []
    if not isinstance(kept, list):
        kept = [kept]
    parts = [_kept_part(entry) for entry in kept]
    if parts and None not in parts:
        if set(parts) == _ALL_BUT_ROUTED_EXPERTS:
            return "routed_experts"
        if set(parts) <= _COUNTED_AT_EMBEDDING_BITS:
            return None
    if kept:
        warn(logger, "%s: quantization_config.modules_to_not_convert = %r is not a list llm-analysis reads (every "
                     "layer's self_attn and mlp.router, embed_tokens and lm_head: the routed experts alone in "
                     "MXFP4, checkpoint_quantized_weights='routed_experts'); every layer weight is counted in the "
                     "mxfp4 dtype (checkpoint_quantized_weights='all'): set the field in a config file to say "
                     "otherwise", what, kept)
    return None
