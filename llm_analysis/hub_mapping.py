"""Map a Hugging Face config (dict, plus the transformers config object when the
library can build it) to a ModelConfig: unwrap multimodal configs to their language
model, pick the family row of `hub_families.py` by `model_type` (or the generic
mapping), read the fields, and validate them.

Anything the ModelConfig fields cannot describe exactly raises `UnmappableConfig`
rather than being approximated silently; malformed attribute values too.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from .errors import ConfigError
from .hub_errors import HubImportError, UnmappableConfig
from .hub_families import FAMILIES
from .hub_source import Fields, Src, activation, attention_layout, logger, transformers_config
from .hub_spec import Either, MoeRule, Opt, Req, read_family
from .schema import ModelConfig, build_config

__all__ = ["map_hf_config", "map_generic"]

# an unknown family: experts under any of the usual keys, every layer MoE
_GENERIC_MOE = MoeRule(experts=Opt("num_local_experts", "num_experts", "n_routed_experts"),
                       top_k=Req("num_experts_per_tok"), top_k_first=False, layers="all",
                       width=Either(Opt("moe_intermediate_size"), None))


def map_generic(src: Src, what: str) -> Fields:
    """Unknown family: read the common keys; architecture details are inferred from
    hints in the config and logged as assumptions."""
    n = src.req_int("num_hidden_layers", "n_layer", "num_layers")
    heads = src.req_int("num_attention_heads", "n_head", "num_heads")
    h = src.req_int("hidden_size", "n_embd", "d_model")
    vocab = src.req_int("vocab_size")
    rms = src.has("rms_norm_eps")
    act = src.get("hidden_act", "hidden_activation", "activation_function", default=None)
    gated = rms and isinstance(act, str) and act.lower() in ("silu", "swish", "gelu_pytorch_tanh")
    rotary = any(src.has(k) for k in ("rope_theta", "rope_parameters", "rope_scaling", "rotary_dim",
                                      "partial_rotary_factor", "rotary_pct"))
    mpe = src.opt_int("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                      default=None)
    bias_default = not rms
    ab = bool(src.get("attention_bias", "bias", default=bias_default))
    window, lt = attention_layout(src.get("layer_types", default=None),
                                  src.get("sliding_window", default=None), n, what)
    f: Fields = dict(
        num_layers=n, n_head=heads, hidden_dim=h, vocab_size=vocab, max_seq_len=mpe,
        num_key_value_heads=src.opt_int("num_key_value_heads", default=None),
        ffn_embed_dim=src.opt_int("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size",
                                  default=None),
        head_dim=src.opt_int("head_dim", default=None),
        mlp_gated_linear_units=bool(gated), activation=activation(act or "gelu"),
        qkv_bias=ab, attn_out_bias=ab, mlp_bias=bool(src.get("mlp_bias", "bias", default=bias_default)),
        norm_type="rmsnorm" if rms else "layernorm", norm_bias=not rms,
        position_embedding_type="rotary" if rotary else ("learned" if mpe else "none"),
        sliding_window=window, layer_types=lt,
        tie_word_embeddings=bool(src.get("tie_word_embeddings", default=True)),
    )
    if n:
        _GENERIC_MOE(src, f, what)
    if not src.missing:
        logger.warning(
            "%s: model_type %r has no dedicated mapping; assumed %s, %s MLP (%s), %s positions, "
            "%s biases. Check the result against the model code.", what,
            src.raw.get("model_type"), f["norm_type"],
            "gated" if f["mlp_gated_linear_units"] else "non-gated", f["activation"],
            f["position_embedding_type"], "with" if ab else "no")
    return f


def _language_model(d: Dict[str, Any], obj: Any, *, name: str, what: str
                    ) -> Tuple[Any, Dict[str, Any], Optional[str]]:
    """(config object, raw dict, model_type) of the part to map: the config itself, or the
    language model (`text_config`) of a multimodal wrapper (Gemma 3, LLaVA-style)."""
    model_type = d.get("model_type")
    mt = getattr(obj, "model_type", None) or model_type
    text_cfg = getattr(obj, "text_config", None) if obj is not None else None
    if text_cfg is None and isinstance(d.get("text_config"), dict) and "num_hidden_layers" not in d:
        text_cfg = d["text_config"]
    if text_cfg is None or mt in FAMILIES:
        return obj, d, mt
    if isinstance(text_cfg, dict):
        raw = dict(text_cfg)
        sub_obj = transformers_config(raw, name=name, revision=None, trust_remote_code=False,
                                      what=what) if raw.get("model_type") else None
    else:
        sub_obj = text_cfg
        try:
            raw = text_cfg.to_dict()
        except Exception:
            raw = {}
    mt = getattr(sub_obj, "model_type", None) or raw.get("model_type") or (
        "gemma3_text" if model_type == "gemma3" else None)
    logger.info("%s is a multimodal %r config; mapping its language model (%r) only",
                what, model_type, mt)
    return sub_obj, raw, mt


def _read_fields(src: Src, mt: Any, model_type: Any, what: str) -> Fields:
    family = FAMILIES.get(mt) if isinstance(mt, str) else None
    try:
        fields = read_family(family, src, what) if family else map_generic(src, what)
    except HubImportError:
        raise
    except (TypeError, ValueError, KeyError, IndexError) as exc:  # malformed attribute values
        raise UnmappableConfig(f"Cannot map the config of {what} (model_type {model_type!r}): "
                               f"{type(exc).__name__}: {exc}") from None
    if src.missing:
        missing = sorted(set(src.missing))
        raise UnmappableConfig(
            f"Cannot map the config of {what} (model_type {model_type!r}): it lacks the attribute"
            f"{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    return fields


def map_hf_config(d: Dict[str, Any], *, name: str, source: str, what: str, trust_remote_code: bool,
                  revision: Optional[str]) -> ModelConfig:
    """The ModelConfig of config dict `d` of model `name` (`what` names it in messages)."""
    model_type = d.get("model_type")
    obj = transformers_config(d, name=name, revision=revision,
                              trust_remote_code=trust_remote_code, what=what)
    obj, raw, mt = _language_model(d, obj, name=name, what=what)
    src = Src(obj, raw)
    fields = _read_fields(src, mt, model_type, what)
    top_tie = d.get("tie_word_embeddings")
    if top_tie is not None and raw is not d:
        fields["tie_word_embeddings"] = bool(top_tie)
    fields = {k: v for k, v in fields.items() if v is not None}
    fields.update(name=name, source=source, model_type=str(model_type) if model_type else None)
    if fields["model_type"] is None:
        fields.pop("model_type")
    try:
        return build_config(ModelConfig, fields, source=None)
    except ConfigError as exc:
        raise UnmappableConfig(f"The config of {what} (model_type {model_type!r}) maps to an "
                               f"invalid ModelConfig: {exc}") from None
