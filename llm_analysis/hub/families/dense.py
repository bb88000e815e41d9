"""Rows of the Hub family table (`hub_families.py` merges them into FAMILIES) for dense
decoder variants whose layers hold something the common shapes do not: learned
activation scalars (Apertus), sub-norms (BitNet), differential attention (DiffLlama),
dynamic-mask attention (Doge), a bias on one layer only (GPT-NeoX-Japanese), a fused
gated MLP and one extra embedding row (Moshi), sinusoidal positions with a biased head
(CTRL). Each row follows the transformers 5.23 modelling code it names; the operators
are in `operators/dense_variants.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Dict

from llm_analysis.hub.families.bases import GEMMA2, GPT2, LAYERNORM, LLAMA, NO_BIASES
from llm_analysis.hub.errors import UnmappableConfig, UnsupportedArchitecture
from llm_analysis.hub.source import Fields, Src, as_int
from llm_analysis.hub.spec import Family, Flag, NotModelled, Opt, Reader, Refuse, Req, Same, Window

__all__ = ["DENSE2_FAMILIES", "REFUSED_FAMILIES"]


@dataclass(frozen=True)
class ActivationParams(Reader):
    """Learned scalars of the activation named by `key` (transformers' XIELUActivation
    holds alpha_p and alpha_n; the other activations hold none)."""
    key: str = "hidden_act"

    def read(self, src: Src, f: Fields, what: str) -> int:
        act = src.get(self.key, default="")
        return 2 if isinstance(act, str) and act.lower() == "xielu" else 0


@dataclass(frozen=True)
class ScaledWidth(Reader):
    """int(f[field] * config[key]) (GPTNeoXJapaneseMLP: hidden_size * intermediate_multiple_size)."""
    field: str
    key: str
    default: float = 4

    def read(self, src: Src, f: Fields, what: str) -> int:
        ratio = src.get(self.key, default=self.default)
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or ratio <= 0:
            raise UnmappableConfig(f"{what}: {self.key}={ratio!r} must be a positive number")
        return int(f[self.field] * ratio) if f.get(self.field) else None


@dataclass(frozen=True)
class HalfOf(Reader):
    """config[key] // 2: a fused gate+up projection of width `key` (MoshiGatingMLP: fc1 is
    [hidden -> ffn_dim], fc2 [ffn_dim // 2 -> hidden]: a gated MLP of width ffn_dim // 2)."""
    key: str

    def read(self, src: Src, f: Fields, what: str) -> int:
        v = src.get(self.key)
        return None if v is None else as_int(v, self.key) // 2


# the per-layer overrides transformers 5.23 reads (Gemma4TextAttention: head_dim and
# num_key_value_heads; Gemma4TextMLP reads the global intermediate_size)
# a check like `Refuse` whose refusal names a feature of a well-formed config (UnsupportedArchitecture)
RefuseFeature = partial(Refuse, unsupported=True)


def _has(features: str) -> NotModelled:
    """A check that refuses every config of the type, naming what it holds beyond ModelConfig."""
    return NotModelled(f"it has {features}, which ModelConfig does not describe")


_PER_LAYER_KEYS = {"head_dim": "layer_head_dims"}


def needs_layer_types(src: Src, f: Fields, what: str) -> None:
    """Without the transformers config class (raw config.json), the attention pattern must
    be listed: Gemma 3n / 4's classes derive it (and force the last layer to full attention)."""
    if src.obj is None and not src.raw.get("layer_types"):
        raise UnmappableConfig(f"{what}: no layer_types; transformers' configuration class derives "
                               "the attention pattern (not installed, or it failed on this config)")


def gemma4_per_layer_widths(src: Src, f: Fields, what: str) -> None:
    """Gemma 4's `per_layer_config` ({"05": {"head_dim": 512}, ...}: overrides of the
    text config for single layers, read by Gemma4TextAttention) as per-layer head widths;
    per-layer KV head counts that differ, and overrides of anything else, are refused."""
    n = f.get("num_layers")
    if src.obj is not None:
        try:
            overrides = src.obj.to_dict().get("per_layer_config")
        except Exception:  # a config object that cannot serialise: its raw keys only
            overrides = src.raw.get("per_layer_config")
    else:
        overrides = src.raw.get("per_layer_config")
    if overrides is None or not n:
        # the config class derives it from global_head_dim; without the class, refuse
        raise UnmappableConfig(f"{what}: no per_layer_config (per-layer attention widths) to read; "
                               "transformers' Gemma 4 configuration class derives it")
    if not isinstance(overrides, dict):
        raise UnmappableConfig(f"{what}: per_layer_config={overrides!r} must map layer indices to overrides")
    base = {"head_dim": f.get("head_dim"), "num_key_value_heads": f.get("num_key_value_heads")}
    lists = {k: [base[k]] * n for k in _PER_LAYER_KEYS}
    for key, override in overrides.items():
        i = int(key) if str(key).isdigit() else -1
        if not 0 <= i < n or not isinstance(override, dict):
            raise UnmappableConfig(f"{what}: per_layer_config entry {key!r}: {override!r} is not an "
                                   f"override of one of the {n} layers")
        for k, v in override.items():
            if k == "num_key_value_heads" and v in (None, base[k]):
                continue
            if k not in _PER_LAYER_KEYS:
                raise UnsupportedArchitecture(f"{what}: per_layer_config overrides {k}={v!r} of layer {i}; "
                                       f"ModelConfig describes per-layer {', '.join(_PER_LAYER_KEYS)} only")
            lists[k][i] = as_int(v, f"per_layer_config.{key}.{k}")
    for k, field in _PER_LAYER_KEYS.items():
        if len(set(lists[k])) > 1:
            f[field] = lists[k]


def gemma4_double_wide(src: Src, f: Fields, what: str) -> None:
    """Gemma4TextMLP: with use_double_wide_mlp, the KV-sharing layers (the last
    num_kv_shared_layers) have MLPs of twice intermediate_size."""
    n, shared, width = f.get("num_layers"), f.get("kv_shared_layers") or 0, f.get("ffn_embed_dim")
    if shared and n and width and bool(src.get("use_double_wide_mlp", default=False)):
        f["layer_ffn_dims"] = [width * (2 if i >= n - shared else 1) for i in range(n)]


# Gemma 4 (Gemma4TextDecoderLayer): Gemma 3's layers (four norms, q/k RMSNorm, GELU-tanh
# gated MLP) with per-layer head widths, per-layer embeddings (PLE) and KV sharing in the
# last num_kv_shared_layers layers; v_norm has no weight, final_logit_softcapping no parameter
_GEMMA4_CHECKS = (
    RefuseFeature("attention_k_eq_v", (False,), default=False, reason="keys reused as values, per-layer KV heads"),
    RefuseFeature("enable_moe_block", (False,), default=False, reason="the MoE block beside the MLP"),
    RefuseFeature("use_bidirectional_attention", (None, "vision"), default=None, reason="bidirectional attention"))
_GEMMA4 = {**GEMMA2, "qk_norm": True, "kv_shared_layers": Opt("num_kv_shared_layers", default=0),
           "per_layer_input_dim": Opt("hidden_size_per_layer_input", default=0),
           "per_layer_input_vocab_size": Opt("vocab_size_per_layer_input")}

@dataclass(frozen=True)
class PerLayerFfn(Reader):
    """(ffn_embed_dim, layer_ffn_dims) from `key`, an int or one width per layer
    (Gemma3nTextMLP: intermediate_size[layer_idx]); the list only when widths differ,
    ffn_embed_dim then the widest (what activation-memory estimates read)."""
    key: str = "intermediate_size"

    def read(self, src: Src, f: Fields, what: str):
        v, n = src.get(self.key), f.get("num_layers")
        if v is None:
            return None, None
        if not isinstance(v, (list, tuple)):
            return as_int(v, self.key), None
        widths = [as_int(w, self.key) for w in v]
        if n is not None and len(widths) != n:
            raise UnmappableConfig(f"{what}: {self.key} lists {len(widths)} widths for {n} layers")
        return max(widths), (widths if len(set(widths)) > 1 else None)


# Gemma 3n (Gemma3nTextDecoderLayer): Gemma 3's four norms and q/k RMSNorm, per-layer MLP
# widths, per-layer embeddings, AltUp streams, a LAuReL block and KV sharing in the last
# num_kv_shared_layers layers (Gemma3nTextAttention: no k/v projections or k_norm there);
# activation sparsity and logit soft-capping hold no parameter and no matmul
_GEMMA3N = {**{k: v for k, v in GEMMA2.items() if k != "ffn_embed_dim"}, "qk_norm": True,
            ("ffn_embed_dim", "layer_ffn_dims"): PerLayerFfn(),
            "per_layer_input_dim": Opt("hidden_size_per_layer_input", default=0),
            "per_layer_input_vocab_size": Opt("vocab_size_per_layer_input"),
            "altup_num_inputs": Opt("altup_num_inputs", default=0),
            "laurel_rank": Opt("laurel_rank", default=0),
            "kv_shared_layers": Opt("num_kv_shared_layers", default=0)}

_NO_WINDOW = {("sliding_window", "layer_types"): Window(None)}


def _helium_o_proj(src: Src, f: Fields, what: str) -> None:
    """HeliumAttention: o_proj = nn.Linear(hidden_size, hidden_size) reads the attention
    output of heads x head_dim: only a config where the two agree is a working model."""
    width = (f.get("head_dim") or f["hidden_dim"] // f["n_head"]) * f["n_head"]
    if width != f["hidden_dim"]:
        raise UnsupportedArchitecture(
            f"{what}: num_attention_heads x head_dim = {width} != hidden_size = {f['hidden_dim']} "
            "(Helium's o_proj is hidden_size x hidden_size) cannot be described by ModelConfig")

DENSE2_FAMILIES: Dict[str, Family] = {
    # Helium (HeliumAttention / HeliumMLP): Llama with a bias-free o_proj whatever
    # attention_bias says, mlp_bias on the MLP
    "helium": Family({**LLAMA, "attn_out_bias": False, "mlp_bias": Flag("mlp_bias", default=False)},
                     steps=(_helium_o_proj,)),
    # Apertus (ApertusDecoderLayer): Llama with a non-gated MLP under xIELU (two learned
    # scalars per layer), q/k RMSNorm(head_dim), bias-free MLP
    "apertus": Family({**LLAMA, "mlp_gated_linear_units": False, "qk_norm": True,
                       "mlp_act_params": ActivationParams()}),
    # BitNet (BitNetAttention / BitNetMLP): Llama with attn_sub_norm before o_proj and
    # ffn_sub_norm before down_proj; gated ReLU^2
    "bitnet": Family({**LLAMA, "sub_norms": True}),
    # DiffLlama (DiffLlamaAttention): Llama with differential attention (the group norm
    # over 2*head_dim has no weight)
    "diffllama": Family({**LLAMA, "differential_attention": True}),
    # Doge (DogeDecoderLayer): q/k RMSNorm(head_dim), dynamic-mask dt_proj and A, two
    # [hidden] residual weights per layer; the CDMoE MLP (is_moe) is not described
    "doge": Family({**LLAMA, "qk_norm": True, "mlp_bias": Flag("mlp_bias", default=False),
                    "attn_dynamic_mask": True, "residual_scale_vectors": 2, **_NO_WINDOW},
                   checks=(RefuseFeature("is_moe", (False,), default=False, as_bool=True,
                                  reason="Doge's CDMoE mixture of product-key experts"),
                           RefuseFeature("sliding_window", (None,), default=None,
                                  reason="a sliding window with Doge's dynamic mask"))),
    # GPT-NeoX-Japanese: pre-LN with bias, fused bias-free qkv and dense, bias-free GELU
    # MLP of hidden * intermediate_multiple_size, a dense_bias on the last layer only, rotary
    "gpt_neox_japanese": Family(
        {**LLAMA, **LAYERNORM, **NO_BIASES, "num_key_value_heads": None, "head_dim": None,
         "mlp_gated_linear_units": False,
         "ffn_embed_dim": ScaledWidth("hidden_dim", "intermediate_multiple_size"),
         "last_layer_attn_out_bias": True, **_NO_WINDOW,
         "tie_word_embeddings": Flag("tie_word_embeddings", default=True)}),
    # Moshi's text decoder (MoshiForCausalLM; the depth decoder and audio codec belong to
    # MoshiForConditionalGeneration): Llama layers with the fused gated MLP, vocab_size + 1
    # input embeddings, full causal attention (create_causal_mask ignores sliding_window)
    "moshi": Family({**LLAMA, "ffn_embed_dim": HalfOf("ffn_dim"), **NO_BIASES, **_NO_WINDOW,
                     "embedding_vocab_size": Same("vocab_size", plus=1)}),
    # CTRL (EncoderLayer): pre-LN with bias, biased q/k/v/dense and ReLU MLP of dff,
    # sinusoidal positions (a buffer), final LayerNorm, tied head with a bias
    "ctrl": Family({**GPT2, "hidden_dim": Req("n_embd"), "max_seq_len": Opt("n_positions"),
                    "ffn_embed_dim": Req("dff"), "activation": "relu",
                    "position_embedding_type": "sinusoidal", "num_position_embeddings": None,
                    "lm_head_bias": True}),
    "gemma4_text": Family(_GEMMA4, checks=_GEMMA4_CHECKS + (needs_layer_types,),
                          steps=(gemma4_per_layer_widths, gemma4_double_wide)),
    "gemma4_unified_text": Family(_GEMMA4, checks=_GEMMA4_CHECKS + (needs_layer_types,),
                                  steps=(gemma4_per_layer_widths, gemma4_double_wide)),
    "gemma3n_text": Family(_GEMMA3N, checks=(RefuseFeature(
        "altup_num_inputs", tuple(range(2, 65)), default=4, reason="AltUp needs at least two streams"),
        needs_layer_types)),
}

#: types refused with what they hold beyond ModelConfig (transformers 5.23 modelling
#: code): rows of FAMILIES, not listed as supported
REFUSED_FAMILIES: Dict[str, Family] = {
    "hrm_text": Family({}, checks=(_has(
        "two layer stacks run for H_cycles x L_cycles recurrent iterations per forward "
        "(parameters shared across the iterations)"),)),
    "cpmant": Family({}, checks=(_has(
        "prompt tokens prepended to every input, segment embeddings and a bucketed "
        "relative position bias"),)),
    "git": Family({}, checks=(_has("a CLIP vision encoder and visual projection inside the "
                                         "causal-LM class, with BERT-style post-LN text layers"),)),
    "neomme": Family({}, checks=(_has(
        "factorized embeddings with patch embeddings, gated output projections, exclusive "
        "self-attention and per-layer residual lambdas"),)),
    "blt": Family({}, checks=(_has(
        "byte-level local encoder/decoder stacks with cross-attention to patches, hash "
        "n-gram embeddings and an entropy patcher model"),)),
    "phi4_multimodal": Family({}, checks=(_has(
        "vision and audio encoders inside the causal-LM class (embed_tokens_extend)"),)),
    "mllama_text_model": Family({}, checks=(_has(
        "cross-attention layers (cross_attention_layers) that replace self-attention in some "
        "layers, with tanh gates, and skip their whole block (MLP included) without vision states "
        "(ModelConfig.cross_attention adds a cross-attention block to every layer)"),)),
}
