"""The generic mapping of a `model_type` without a family row: it maps a config only when it is exactly
the Llama decoder (LlamaDecoderLayer: pre-norm RMSNorm without bias, q/k/v/o projections with GQA, a gated
SiLU MLP or Mixtral-style experts on every layer, rotary positions), that is when
1. every key it holds (in config.json and in the config object's defaults) is one this mapping reads or
   one known to change neither the parameters nor the matmul FLOPs (`HARMLESS_KEYS`, `HARMLESS_IF`), and
2. its model_type is not one whose modelling code differs from Llama although its keys look the same
   (`NOT_LLAMA_SHAPED`, measured by tests/hub/test_architecture_coverage.py).
Anything else raises `UnsupportedArchitecture` naming what it does not model and pointing at the `[exact]`
extra; no number is guessed.
"""

from __future__ import annotations

import difflib
from typing import Any, Dict, List, Tuple

from llm_analysis.hub.errors import EXACT_HINT, UnsupportedArchitecture
from llm_analysis.hub.source import Fields, Src, activation, attention_layout, logger, unknown_to_transformers
from llm_analysis.hub.spec import Either, MoeRule, Opt, Req
from llm_analysis.errors import warn

__all__ = ["map_generic", "unmodelled_keys", "NOT_LLAMA_SHAPED", "HARMLESS_KEYS"]

# keys the generic mapping reads
_READ_KEYS = frozenset({
    "num_hidden_layers", "num_attention_heads", "hidden_size", "vocab_size", "intermediate_size",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "hidden_act", "rms_norm_eps",
    "attention_bias", "mlp_bias", "layer_types", "sliding_window", "tie_word_embeddings",
    "num_local_experts", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
})

# keys that change neither a parameter nor a matmul: token ids, dropout, initialisation,
# numerics, rotary scaling (rotary has no parameters), routing losses, bookkeeping
HARMLESS_KEYS = frozenset({
    "model_type", "architectures", "transformers_version", "_name_or_path", "auto_map",
    "dtype", "torch_dtype", "use_cache", "return_dict", "output_attentions",
    "output_hidden_states", "output_router_logits", "torchscript", "chunk_size_feed_forward",
    "id2label", "label2id", "num_labels", "problem_type", "finetuning_task", "tokenizer_class",
    "prefix", "task_specific_params", "quantization_config", "_attn_implementation_autoset",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "cls_token_id",
    "unk_token_id", "mask_token_id", "decoder_start_token_id", "forced_bos_token_id",
    "forced_eos_token_id",
    "attention_dropout", "hidden_dropout", "dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop",
    "classifier_dropout", "initializer_range", "init_std", "initializer_factor",
    "rope_theta", "rope_parameters", "rope_scaling", "partial_rotary_factor",
    "router_aux_loss_coef", "router_z_loss_coef", "router_jitter_noise", "norm_topk_prob",
    "pretraining_tp", "max_window_layers", "num_logits_to_keep", "embedding_dropout",
    "residual_dropout", "classifier_pooling", "activation_dropout", "attention_probs_dropout_prob",
    "hidden_dropout_prob", "classifier_dropout_prob", "layerdrop", "encoder_layerdrop",
    "decoder_layerdrop",
})

# keys harmless only at these values (anything else changes the architecture)
HARMLESS_IF: Dict[str, Tuple[Any, ...]] = {
    "is_encoder_decoder": (False, None), "add_cross_attention": (False, None),
    "is_decoder": (False, True, None), "tie_encoder_decoder": (False, None),
    "cross_attention_hidden_size": (None,), "pruned_heads": ({}, None),
    "use_sliding_window": (False, None), "use_bidirectional_attention": (False, None),
}

# keys the mapping reads whose non-default values were seen to mean more than in Llama:
# EuroBERT's mlp_bias also gives its lm_head a bias (EuroBertForMaskedLM); the generic
# shape is verified only where these keys take these values
VERIFIED_ONLY_AT: Dict[str, Tuple[Any, ...]] = {"mlp_bias": (False, None)}

#: transformers 5.23 text model types whose keys look like Llama's but whose modelling
#: code differs (what differs, from the meta model's per-module parameter breakdown).
#: Empty for transformers 5.23: every such type has its own row. When the architecture
#: truth is regenerated for a newer transformers, a new type the coverage test finds
#: silently wrong gets a row or an entry here.
NOT_LLAMA_SHAPED: Dict[str, str] = {}

_LLAMA_ACTIVATIONS = ("silu", "swish")

# Mixtral-style experts: every layer MoE, full router without bias, no shared experts
_GENERIC_MOE = MoeRule(experts=Opt("num_local_experts", "num_experts"),
                       top_k=Req("num_experts_per_tok"), top_k_first=False, layers="all",
                       width=Either(Opt("moe_intermediate_size"), None))


def _config_keys(src: Src) -> List[str]:
    keys = set(src.raw)
    if src.obj is not None:
        try:
            keys |= set(src.obj.to_dict())
        except Exception:  # a config object that cannot serialise: its raw keys only
            pass
    return sorted(keys)


def unmodelled_keys(src: Src) -> List[str]:
    """Keys of the config the generic mapping neither reads nor knows to be harmless,
    with their values for keys harmless only at some values."""
    out = []
    for k in _config_keys(src):
        if (k in _READ_KEYS and k not in VERIFIED_ONLY_AT) or k in HARMLESS_KEYS:
            continue
        if k in HARMLESS_IF or k in VERIFIED_ONLY_AT:
            v = src.get(k, default=None)
            if v in HARMLESS_IF.get(k, VERIFIED_ONLY_AT.get(k)):
                continue
            out.append(f"{k}={v!r}")
            continue
        out.append(k)
    return out


# what a key the generic mapping does not model usually means (named first in refusals)
_FEATURE_HINTS: Dict[str, str] = {
    "is_encoder_decoder": "an encoder-decoder model (the decoder cross-attends to the encoder)",
    "add_cross_attention": "cross-attention to an encoder",
    "decoder_layers": "an encoder-decoder model (the decoder cross-attends to the encoder)",
    "mamba_d_state": "Mamba state-space mixer layers", "ssm_state_size": "state-space mixer layers",
    "state_size": "state-space mixer layers",
    "attn_layer_period": "hybrid attention / state-space layers",
    "conv_kernel": "convolution mixer layers", "linear_conv_kernel_dim": "linear-attention layers",
    "num_hidden_groups": "layers shared across the depth (ALBERT)",
    "n_shared_experts": "shared experts", "num_shared_experts": "shared experts",
    "kv_lora_rank": "multi-head latent attention",
    # mixers model/mixers.py does not describe (named so a refusal says which)
    "conv_L_cache": "short-convolution mixer layers", "block_types": "recurrent (RG-LRU) mixer layers",
    "rescale_every": "RWKV time-mix / channel-mix layers", "chunkwise_kernel": "xLSTM (mLSTM) mixer layers",
    "linear_attn_alpha_factor": "lightning (linear) attention layers",
    "cca_time0": "convolutional compressed attention", "adapter_rank": "shared attention blocks with adapters",
}


def _refuse(src: Src, what: str, features: List[str]) -> None:
    mt = src.raw.get("model_type")
    raise UnsupportedArchitecture(
        f"{what}: {_unmapped_type_text(mt)} and the generic (Llama-shaped) mapping cannot count it exactly: "
        f"{'; '.join(features)}. Describe it with a ModelConfig by hand, or {EXACT_HINT}.")


def _unmapped_type_text(model_type: Any) -> str:
    """What is wrong with a model_type no family row maps: none stated, one nobody knows (a typo: the closest
    names of the families mapped here), or one transformers knows but no row here maps."""
    if model_type is None:
        return "the config states no model_type (give the one its modelling code registers, e.g. 'llama')"
    version = unknown_to_transformers(model_type)
    if version is None:
        return f"model_type {model_type!r} has no dedicated mapping"
    from llm_analysis.hub.families.table import FAMILIES
    close = difflib.get_close_matches(str(model_type), sorted(FAMILIES), n=5, cutoff=0.5)
    return (f"model_type {model_type!r} is neither one of the {len(FAMILIES)} families mapped here nor one "
            f"transformers {version} knows" + (f" (closest mapped: {', '.join(close)})" if close else ""))


def _check_shape(src: Src, what: str) -> None:
    mt = src.raw.get("model_type")
    if isinstance(mt, str) and mt in NOT_LLAMA_SHAPED:
        _refuse(src, what, [f"its modelling code has {NOT_LLAMA_SHAPED[mt]}"])
    keys = unmodelled_keys(src)
    features = list(dict.fromkeys(h for k, h in _FEATURE_HINTS.items()
                                  if any(x.split("=")[0] == k for x in keys)))
    if keys:
        features.append(f"config keys it does not model: {', '.join(keys)}")
    if not src.has("rms_norm_eps"):
        features.append("no rms_norm_eps (not an RMSNorm model)")
    act = src.get("hidden_act", default="silu")
    if not (isinstance(act, str) and act.lower() in _LLAMA_ACTIVATIONS):
        features.append(f"hidden_act={act!r} (the Llama shape is a gated SiLU MLP)")
    if features:
        _refuse(src, what, features)


def map_generic(src: Src, what: str) -> Fields:
    """A config without a family row, mapped as a Llama decoder when it is exactly that
    shape (see the module docstring); raises UnsupportedArchitecture otherwise."""
    n = src.req_int("num_hidden_layers")
    f: Fields = dict(
        num_layers=n, n_head=src.req_int("num_attention_heads"),
        hidden_dim=src.req_int("hidden_size"), vocab_size=src.req_int("vocab_size"),
        ffn_embed_dim=src.req_int("intermediate_size"))
    if src.missing and not unmodelled_keys(src):  # the caller names every missing attribute
        return f
    _check_shape(src, what)
    bias = bool(src.get("attention_bias", default=False))
    window, lt = attention_layout(src.get("layer_types", default=None),
                                  src.get("sliding_window", default=None), n, what)
    f.update(
        max_seq_len=src.opt_int("max_position_embeddings", default=None),
        num_key_value_heads=src.opt_int("num_key_value_heads", default=None),
        head_dim=src.opt_int("head_dim", default=None),
        mlp_gated_linear_units=True, activation=activation(src.get("hidden_act", default="silu")),
        qkv_bias=bias, attn_out_bias=bias, mlp_bias=bool(src.get("mlp_bias", default=False)),
        norm_type="rmsnorm", norm_bias=False, position_embedding_type="rotary",
        sliding_window=window, layer_types=lt,
        tie_word_embeddings=bool(src.get("tie_word_embeddings", default=True)))
    _GENERIC_MOE(src, f, what)
    warn(logger, 
        "%s: model_type %r has no dedicated mapping; every key of its config matches the Llama "
        "shape, so it is assumed to be one (pre-norm RMSNorm, gated %s MLP, rotary positions, "
        "%s biases). If in doubt, %s.", what, src.raw.get("model_type"), f["activation"],
        "with" if bias else "no", EXACT_HINT)
    return f
