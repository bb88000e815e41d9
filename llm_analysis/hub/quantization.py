"""What a checkpoint's config.json says of its quantisation: the weight format (`checkpoint_weight_format`) and
which weights it covers (`checkpoint_quantized_weights`)."""

from __future__ import annotations

import logging
from fnmatch import fnmatchcase
from typing import Any, Dict, List, Optional, Sequence

from llm_analysis.errors import warn

logger = logging.getLogger("llm_analysis.hub.entry")  # (hub/source.py's: the import's messages under one name)


def _quantization_config(d: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The quantization_config at the top level, or a wrapper's text_config's."""
    q = d.get("quantization_config")
    if not isinstance(q, dict) and isinstance(d.get("text_config"), dict):
        q = d["text_config"].get("quantization_config")
    return q if isinstance(q, dict) else None


def _is_modelopt(q: Dict[str, Any]) -> bool:
    """Whether a quantization_config is ModelOpt's: its quant_method, or (no quant_method) ModelOpt named as its
    producer (see `checkpoint_weight_format`)."""
    method = str(q.get("quant_method", "")).lower()
    producer = q.get("producer")
    return method == "modelopt" or (not method and isinstance(producer, dict)
                                    and str(producer.get("name", "")).lower() == "modelopt")


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
    if _is_modelopt(q):
        method = "modelopt"
    if method == "mxfp4":
        return "mxfp4"
    if method == "modelopt":  # one algorithm for every quantised layer (MIXED_PRECISION lists several: None)
        return {"NVFP4": "nvfp4", "FP8": "fp8"}.get(algo)
    if method == "fp8" and not algo:
        return "fp8"
    return None


def with_modelopt_sidecar(d: Dict[str, Any], sidecar: Any) -> Dict[str, Any]:
    """`d` (a config.json) with the quantisation a ModelOpt release's hf_quant_config.json (`sidecar`, parsed)
    states, where config.json states none: its "quantization" block read as vLLM reads it, quant_method
    "modelopt" (vLLM docs, features/quantization/modelopt.md: "vLLM detects ModelOpt checkpoints via
    hf_quant_config.json"). Older NVIDIA releases (nvidia/DeepSeek-V3.1-NVFP4) carry it only there."""
    block = sidecar.get("quantization") if isinstance(sidecar, dict) else None
    if "quantization_config" in d or not isinstance(block, dict):
        return d
    return {**d, "quantization_config": {"quant_method": "modelopt", **block}}


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


def checkpoint_quantized_weights(d: Dict[str, Any], what: str, model: Any) -> Optional[str]:
    """Which weights a checkpoint's low-bit format covers: "routed_experts" or None (the default, "all").
    MXFP4 (transformers' Mxfp4Config): from modules_to_not_convert (`_mxfp4_quantized_weights`); ModelOpt
    (NVFP4, FP8): from its ignore / exclude_modules list, layer by layer against `model`, the ModelConfig the
    rest of the config maps to (`_modelopt_quantized_weights`); any other format: None."""
    q = _quantization_config(d)
    if q is None or checkpoint_weight_format(d) is None:
        return None
    if checkpoint_weight_format(d) == "mxfp4":
        return _mxfp4_quantized_weights(q, what)
    if _is_modelopt(q):
        return _modelopt_quantized_weights(q, what, model)
    return None


def _mxfp4_quantized_weights(q: Dict[str, Any], what: str) -> Optional[str]:
    """Which weights an MXFP4 checkpoint's format covers, from its quantization_config's
    modules_to_not_convert (transformers' Mxfp4Config): "routed_experts" when the list keeps attention, router,
    embeddings and LM head out of it (gpt-oss), None (the default, "all") without a list, and for a list naming
    only the embeddings and LM head (held at the dtype's 16-bit embedding width anyway). Any other list is
    warned of, naming it, and counted as "all": the rule does not read it."""
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


# ModelOpt's ignore (config.json) / exclude_modules (hf_quant_config.json) lists name the modules left at 16 bits
# by glob pattern, matched against each module's full name (nvidia/MiniMax-M2.5-NVFP4: "lm_head",
# "model.layers.0.self_attn*", "model.layers.0.block_sparse_moe.gate", ... for every layer). A layer part counts
# as left out when a pattern matches the name of one of its linears, written the ways transformers' decoders
# name them:
_ATTENTION_LINEARS = ("self_attn.q_proj", "attn.wq", "linear_attn.in_proj_qkv", "self_attention.query")
# a MoE layer's shared experts, or the dense MLP beside its experts (Gemma 4 counts it as a shared expert)
_NON_ROUTED_MLP_LINEARS = ("mlp.shared_experts.up_proj", "mlp.shared_expert.up_proj", "ffn.shared_experts.w1",
                           "block_sparse_moe.shared_experts.up_proj", "mlp.up_proj")
_DENSE_MLP_LINEARS = ("mlp.up_proj", "mlp.gate_proj", "ffn.w1", "block_sparse_moe.up_proj")
# where a decoder keeps its routed experts, by model_type (transformers' module names); the rest: mlp.experts
_ROUTED_EXPERT_LINEAR = {"gemma4": "experts.0.up_proj", "gemma4_text": "experts.0.up_proj",
                         "minimax_m2": "block_sparse_moe.experts.0.w1", "deepseek_v4": "ffn.experts.0.w1"}
_DEFAULT_ROUTED_EXPERT_LINEAR = "mlp.experts.0.up_proj"


def _layer_names(pattern: str, layer: int, linears: Sequence[str]) -> List[str]:
    """Full names of `linears` in decoder layer `layer`, under the prefix `pattern` writes before "layers."
    (language_model.model., model.language_model., model.; "model." for a pattern that names no layer path)."""
    prefix = pattern[:pattern.index("layers.")] if "layers." in pattern else "model."
    return [f"{prefix}layers.{layer}.{name}" for name in linears]


def _names_mtp_layers(pattern: str) -> bool:
    """Whether `pattern` names the multi-token-prediction module's layers (mtp.layers.0*, Qwen3.5), not the
    decoder's: those are not counted."""
    return "layers." in pattern and "mtp" in pattern[:pattern.index("layers.")].split(".")


def _names_decoder_layers(pattern: str, num_layers: int) -> bool:
    """Whether `pattern` can name a module inside one of the decoder's layers: its index after "layers." matches
    one (model.layers.7.self_attn.q_a_proj, model.layers.*.mlp.gate), or it is a glob over every name
    (*.mlp.shared_expert.*); not the LM head, embeddings, vision tower or the MTP module's layers."""
    if "layers." not in pattern:
        return pattern.startswith("*")
    if _names_mtp_layers(pattern):
        return False
    index = pattern[pattern.index("layers.") + len("layers."):].split(".")[0]
    return any(fnmatchcase(str(i), index) for i in range(num_layers))


def _left_out(patterns: Sequence[str], layer: int, linears: Sequence[str]) -> bool:
    """Whether some pattern matches one of `linears` of decoder layer `layer` (fnmatch, case kept)."""
    return any(fnmatchcase(name, p) for p in patterns if not _names_mtp_layers(p)
               for name in _layer_names(p, layer, linears))


def _modelopt_quantized_weights(q: Dict[str, Any], what: str, model: Any) -> Optional[str]:
    """"routed_experts" when a ModelOpt checkpoint's list leaves every layer part but the routed experts at 16
    bits: each layer's attention, each MoE layer's shared experts (or the dense MLP beside its experts), each
    dense layer's MLP (or the whole layer) -- NVIDIA's NVFP4 releases of MiniMax-M2.5, Kimi-K2.6, GLM-5.1 and
    Gemma-4-26B-A4B. The router counts 16-bit either way (DeepSeek-style gates are not linears ModelOpt
    quantises; a linear router is under 0.1% of a layer's weights). None ("all") when the list names no layer
    part (only the LM head, embeddings, the vision tower or MTP layers: "lm_head" is held at the dtype's 16-bit
    embedding width anyway). A hybrid's mixer layers count as attention (Qwen3.5's linear_attn: listed; a Mamba
    mixer's in_proj is named by none of _ATTENTION_LINEARS, so a list leaving it out is not read). Any other list
    (attention alone at 16 bits, a dense model's attention) is warned of and counted "all": the rules hold
    either every layer weight or only the routed experts in the low-bit format."""
    listed = q.get("ignore", q.get("exclude_modules")) or []
    patterns = [p for p in (listed if isinstance(listed, list) else [listed]) if isinstance(p, str)]
    if not any(_names_decoder_layers(p, model.num_layers) for p in patterns):
        return None
    if _only_routed_experts_quantised(patterns, model):
        return "routed_experts"
    shown = patterns if len(patterns) <= 6 else patterns[:6] + [f"... {len(patterns) - 6} more"]
    warn(logger, "%s: quantization_config's ModelOpt list of modules left unquantised %r is not one llm-analysis "
                 "reads (every layer's attention, shared experts and dense MLPs: the routed experts alone in the "
                 "low-bit format, checkpoint_quantized_weights='routed_experts'); every layer weight is counted "
                 "in the checkpoint's format (checkpoint_quantized_weights='all'): set the field in a config file "
                 "to say otherwise", what, shown)
    return None


def _only_routed_experts_quantised(patterns: Sequence[str], model: Any) -> bool:
    """Whether `patterns` leave every layer part of `model` but its routed experts out of the low-bit format."""
    if not model.is_moe:
        return False
    routed = (_ROUTED_EXPERT_LINEAR.get(model.model_type, _DEFAULT_ROUTED_EXPERT_LINEAR),)
    for i in range(model.num_layers):
        if model.layer_attention_type(i) != "mlp" and not _left_out(patterns, i, _ATTENTION_LINEARS):
            return False
        if model.is_moe_layer(i):
            if _left_out(patterns, i, routed):
                return False
            if model.moe_num_shared_experts and not _left_out(patterns, i, _NON_ROUTED_MLP_LINEARS):
                return False
        elif model.layer_has_mlp(i) and not _left_out(patterns, i, _DENSE_MLP_LINEARS):
            return False
    return True
