"""Rows of the Hub family table for dense decoders (one MLP per layer, no experts): the common
shapes of bases.py, the decoders whose norms, biases or block layout differ from them, and the
variants whose layers hold more (operators in `model/dense_variants.py`). Each row follows the
transformers modelling code it names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

from llm_analysis.hub.errors import UnmappableConfig, UnsupportedArchitecture
from llm_analysis.hub.families.bases import (ATTENTION_BIAS, BERT, BIASES, COHERE, ERNIE4_5, GELU_TANH, GEMMA,
                                             GEMMA2, GPT2, LAYERNORM, LLAMA, LLAMA_NO_BIAS_NO_TYPES, MLP_BIAS,
                                             MODERNBERT, NO_BIASES, OLMO2, QWEN3, RefuseFeature)
from llm_analysis.hub.hooks import (GptNeoWindow, RawWindowPattern, falcon_decoder_architecture, mpt_attention,
                                    opt_projection_and_final_norm, qwen_window)
from llm_analysis.hub.source import Fields, Src, as_int
from llm_analysis.hub.spec import Act, Either, Family, Flag, Opt, Reader, Refuse, Req, Same, When, Window

__all__ = ["DENSE_FAMILIES"]


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
# num_key_value_heads; Gemma4TextMLP reads the global intermediate_size). Gemma4TextConfig
# derives them for the full-attention layers: head_dim = global_head_dim and, with
# attention_k_eq_v, num_key_value_heads = num_global_key_value_heads
_PER_LAYER_KEYS = {"head_dim": "layer_head_dims", "num_key_value_heads": "layer_kv_heads"}


def needs_layer_types(src: Src, f: Fields, what: str) -> None:
    """Without the transformers config class (raw config.json), the attention pattern must
    be listed: Gemma 3n / 4's classes derive it (and force the last layer to full attention)."""
    if src.obj is None and not src.raw.get("layer_types"):
        raise UnmappableConfig(f"{what}: no layer_types; transformers' configuration class derives "
                               "the attention pattern (not installed, or it failed on this config)")


def gemma4_per_layer_widths(src: Src, f: Fields, what: str) -> None:
    """Gemma 4's `per_layer_config` ({"05": {"head_dim": 512, "num_key_value_heads": 2}, ...}:
    overrides of the text config for single layers, read by Gemma4TextAttention) as per-layer
    head widths and KV head counts; overrides of anything else are refused."""
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
            if k == "num_key_value_heads" and v is None:  # no override: the text config's count
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


def gemma4_values_from_keys(src: Src, f: Fields, what: str) -> None:
    """Gemma4TextAttention with attention_k_eq_v: the full-attention layers have no v_proj,
    their values are k_proj's output (v_norm, no rotary); sliding layers project values."""
    if not bool(src.get("attention_k_eq_v", default=False)):
        return
    # no list: every layer is of one kind (ModelConfig.layer_attention_type's rule)
    every = "sliding_attention" if f.get("sliding_window") else "full_attention"
    types = f.get("layer_types") or [every] * f["num_layers"]
    f["layer_values_from_keys"] = [t != "sliding_attention" for t in types]


def gemma4_moe_block(src: Src, f: Fields, what: str) -> None:
    """Gemma4TextDecoderLayer with enable_moe_block: in every layer the dense MLP
    (intermediate_size) runs beside num_experts routed experts (moe_intermediate_size,
    top_k_experts per token), on every token: described as one shared expert. The router
    (Gemma4TextRouter) norms its input without weight, scales it by a learned [hidden] vector,
    projects to the experts without bias and scales the top-k weights by a learned
    [num_experts] vector; three more norms (post_feedforward_layernorm_1 / _2,
    pre_feedforward_layernorm_2) make seven per layer."""
    if not bool(src.get("enable_moe_block", default=False)):
        return
    keys = ("num_experts", "top_k_experts", "moe_intermediate_size")
    experts, top_k, width = (src.get(k, default=None) for k in keys)
    missing = [k for k, v in zip(keys, (experts, top_k, width)) if v is None]
    if missing:
        raise UnmappableConfig(f"{what}: enable_moe_block=True needs {', '.join(missing)} "
                               "(the routed experts' count, top-k and width)")
    f.update(moe_num_experts=as_int(experts, "num_experts"), moe_top_k=as_int(top_k, "top_k_experts"),
             moe_ffn_embed_dim=as_int(width, "moe_intermediate_size"), moe_num_shared_experts=1,
             moe_shared_expert_ffn_dim=f["ffn_embed_dim"], moe_router_scales=True, num_norms_per_layer=7)


# Gemma 4 (Gemma4TextDecoderLayer): Gemma 3's layers (four norms, q/k RMSNorm, GELU-tanh
# gated MLP) with per-layer head widths and KV heads, keys reused as values in full-attention
# layers (attention_k_eq_v), an MoE block beside the MLP (enable_moe_block), per-layer
# embeddings (PLE) and KV sharing in the last num_kv_shared_layers layers; v_norm has no
# weight, final_logit_softcapping and the layer_scalar buffer no parameter
_GEMMA4 = Family(
    {**GEMMA2, "qk_norm": True, "kv_shared_layers": Opt("num_kv_shared_layers", default=0),
     "per_layer_input_dim": Opt("hidden_size_per_layer_input", default=0),
     "per_layer_input_vocab_size": Opt("vocab_size_per_layer_input")},
    checks=(RefuseFeature("use_bidirectional_attention", (None, "vision"), default=None,
                          reason="bidirectional attention"), needs_layer_types),
    steps=(gemma4_per_layer_widths, gemma4_double_wide, gemma4_values_from_keys, gemma4_moe_block))


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


# GPT-J (GPTJBlock): parallel attention + MLP on one LayerNorm, rotary, bias-free attention,
# biased MLP and lm_head, untied
_GPTJ = {**GPT2, "max_seq_len": Opt("n_positions", "max_position_embeddings"), "qkv_bias": False,
         "attn_out_bias": False, "position_embedding_type": "rotary", "num_position_embeddings": None,
         "parallel_attn_mlp": True, "num_norms_per_layer": 1,
         "tie_word_embeddings": Flag("tie_word_embeddings", default=False), "lm_head_bias": True}
_LLAMA_MLP_BIAS = {**LLAMA, "mlp_bias": MLP_BIAS}
_GLM = {**LLAMA, "qkv_bias": ATTENTION_BIAS, "attn_out_bias": False}

# StarCoder2 / Jais2 style: LayerNorm with bias, non-gated MLP, biases from one flag
_LN_PLAIN_MLP = {**LLAMA, **LAYERNORM, "mlp_gated_linear_units": False}


DENSE_FAMILIES: Dict[str, Family] = {
    "gpt2": Family(GPT2),
    # GPTBigCode: GPT-2 with multi-query attention (one KV head) unless multi_query=False
    "gpt_bigcode": Family({**GPT2, "activation": Act("activation_function", default=GELU_TANH),
                           "num_key_value_heads": When(Flag("multi_query", default=True), 1)}),
    "gptj": Family(_GPTJ),
    # GPT-Neo: bias-free q/k/v, local (windowed) and global layers
    "gpt_neo": Family({
        "hidden_dim": Req("hidden_size"), "num_layers": Req("num_layers", "num_hidden_layers"),
        ("sliding_window", "layer_types"): GptNeoWindow(),
        "max_seq_len": Req("max_position_embeddings"),
        "n_head": Req("num_heads", "num_attention_heads"), "vocab_size": Req("vocab_size"),
        "ffn_embed_dim": Either(Opt("intermediate_size"), Same("hidden_dim", times=4)),
        "activation": Act("activation_function", default="gelu_new"),
        **BIASES, "qkv_bias": False, **LAYERNORM, "position_embedding_type": "learned",
        "num_position_embeddings": Same("max_seq_len"),
        "tie_word_embeddings": Flag("tie_word_embeddings", default=True)}),
    # GPT-NeoX / Pythia: rotary, parallel residual by default, yet both norms
    # (input_layernorm and post_attention_layernorm) exist even when parallel
    "gpt_neox": Family({
        "num_layers": Req("num_hidden_layers"), "n_head": Req("num_attention_heads"),
        "hidden_dim": Req("hidden_size"), "vocab_size": Req("vocab_size"),
        "max_seq_len": Opt("max_position_embeddings"), "ffn_embed_dim": Req("intermediate_size"),
        "activation": Act("hidden_act", default="gelu"),
        "qkv_bias": Flag("attention_bias", default=True),
        "attn_out_bias": Flag("attention_bias", default=True), "mlp_bias": True,
        **LAYERNORM, "position_embedding_type": "rotary",
        "parallel_attn_mlp": Flag("use_parallel_residual", default=True),
        "num_norms_per_layer": 2,
        "tie_word_embeddings": Flag("tie_word_embeddings", default=False)}),
    # OPT: learned positions with an offset of 2 rows (OPTLearnedPositionalEmbedding)
    "opt": Family(
        {"hidden_dim": Req("hidden_size"), "max_seq_len": Req("max_position_embeddings"),
         "num_layers": Req("num_hidden_layers"), "n_head": Req("num_attention_heads"),
         "vocab_size": Req("vocab_size"), "ffn_embed_dim": Req("ffn_dim"),
         "activation": Act("activation_function", default="relu"),
         "qkv_bias": Flag("enable_bias", default=True),
         "attn_out_bias": Flag("enable_bias", default=True),
         "mlp_bias": Flag("enable_bias", default=True),
         **LAYERNORM, "position_embedding_type": "learned",
         "num_position_embeddings": Same("max_seq_len", plus=2),
         "tie_word_embeddings": Flag("tie_word_embeddings", default=True)},
        checks=(Refuse("layer_norm_elementwise_affine", (True,), default=True, as_bool=True,
                       reason="LayerNorms without weights"),),
        steps=(opt_projection_and_final_norm,)),
    # BLOOM: ALiBi, a LayerNorm right after the embeddings, 4x GELU-tanh MLP
    "bloom": Family({
        "hidden_dim": Req("hidden_size", "n_embed"),
        "num_layers": Req("n_layer", "num_hidden_layers"),
        "n_head": Req("n_head", "num_attention_heads"), "vocab_size": Req("vocab_size"),
        "max_seq_len": Opt("seq_length", "max_position_embeddings"),
        "ffn_embed_dim": Same("hidden_dim", times=4), "activation": "gelu_tanh",
        **BIASES, **LAYERNORM, "embedding_norm": True, "position_embedding_type": "alibi",
        "tie_word_embeddings": Flag("tie_word_embeddings", default=True)}),
    "falcon": Family(
        {"hidden_dim": Req("hidden_size", "n_embed"), "n_head": Req("num_attention_heads", "n_head"),
         "num_layers": Req("num_hidden_layers", "n_layer"), "vocab_size": Req("vocab_size"),
         "max_seq_len": Opt("max_position_embeddings"),
         "ffn_embed_dim": Either(Opt("ffn_hidden_size"), Same("hidden_dim", times=4)),
         "activation": Act("activation", default="gelu"),
         "qkv_bias": Flag("bias", default=False), "attn_out_bias": Flag("bias", default=False),
         "mlp_bias": Flag("bias", default=False), **LAYERNORM,
         "position_embedding_type": When(Flag("alibi", default=False), "alibi", "rotary"),
         "tie_word_embeddings": Flag("tie_word_embeddings", default=True)},
        steps=(falcon_decoder_architecture,)),
    "llama": Family(_LLAMA_MLP_BIAS),
    # MistralAttention/MistralMLP have no biases; HF Mistral (and Phi-3) ignore layer_types
    "mistral": Family(LLAMA_NO_BIAS_NO_TYPES),
    "phi3": Family(LLAMA_NO_BIAS_NO_TYPES),
    "qwen2": Family({**LLAMA, "qkv_bias": True, "attn_out_bias": False}, steps=(qwen_window,)),
    "qwen3": Family(QWEN3, steps=(qwen_window,)),
    # the language model of Qwen3-VL (Qwen3VLTextModel): Qwen3's layers (q/k norms), its rotary split over
    # the text / height / width positions (mrope_section) changes no shape
    "qwen3_vl_text": Family(QWEN3, steps=(qwen_window,)),
    "gemma": Family({**GEMMA, ("sliding_window", "layer_types"): Window(None)}),
    "gemma2": Family(GEMMA2, steps=(RawWindowPattern(period=2),)),
    "gemma3_text": Family({**GEMMA2, "qk_norm": True}, steps=(
        RawWindowPattern(period=6, period_key="sliding_window_pattern"),)),
    # OLMo (OlmoLayerNorm): LayerNorms without any weight; optional q/k/v clipping is elementwise
    "olmo": Family({**LLAMA, "norm_type": "layernorm", "norm_bias": False, "norm_affine": False}),
    # OLMo-2 / OLMo-3 and Cohere / Cohere-2: the shapes of bases.py (shared with their MoE rows)
    "olmo2": Family(OLMO2),
    "olmo3": Family(OLMO2),
    "cohere": Family(COHERE),
    "cohere2": Family(COHERE),
    # StableLM (StableLmDecoderLayer): LayerNorm with bias, gated SiLU MLP, q/k/v biases
    # from use_qkv_bias; use_parallel_residual drops the second norm
    "stablelm": Family(
        {**LLAMA, **LAYERNORM, "qkv_bias": Flag("use_qkv_bias", default=False),
         "attn_out_bias": False, "parallel_attn_mlp": Flag("use_parallel_residual", default=False),
         "num_norms_per_layer": When(Flag("use_parallel_residual", default=False), 1, 2)},
        checks=(Refuse("qk_layernorm", (False,), default=False, as_bool=True,
                       reason="per-head q/k LayerNorms"),)),
    # GLM (GlmAttention): q/k/v biased, o_proj not; gate_up_proj is one fused linear
    "glm": Family(_GLM),
    # GLM-4 adds post_self_attn_layernorm and post_mlp_layernorm (4 norms)
    "glm4": Family({**_GLM, "num_norms_per_layer": 4}),
    # Phi (PhiDecoderLayer): one LayerNorm, attention and GELU MLP in parallel, biases
    # everywhere incl. lm_head; qk_layernorm: one LayerNorm(head_dim) with bias for q and k
    "phi": Family({**LLAMA, **BIASES, **LAYERNORM, "mlp_gated_linear_units": False,
                   "activation": Act("hidden_act", default="gelu_new"),
                   "parallel_attn_mlp": True, "num_norms_per_layer": 1,
                   "qk_norm": Flag("qk_layernorm", default=False), "qk_norm_bias": True,
                   "lm_head_bias": True, ("sliding_window", "layer_types"): Window(None)}),
    # Granite: Llama with scalar multipliers (no parameters)
    "granite": Family(_LLAMA_MLP_BIAS),
    # Granite-SWA: one learned attention sink per head
    "granite_swa": Family({**_LLAMA_MLP_BIAS, "attn_sinks": True}),
    # EXAONE 4: q/k RMSNorm(head_dim), norms after attention and MLP (two)
    "exaone4": Family(QWEN3),
    # Seed-OSS: q/k/v biases from attention_bias, o_proj's from attention_out_bias
    # SeedOssMLP: gate/up/down_proj biased when mlp_bias is set
    "seed_oss": Family({**_LLAMA_MLP_BIAS, "attn_out_bias": Flag("attention_out_bias", default=False)}),
    "ernie4_5": Family(ERNIE4_5),
    # Arcee: Llama with a non-gated ReLU^2 MLP
    "arcee": Family({**_LLAMA_MLP_BIAS, "mlp_gated_linear_units": False}),
    "jais2": Family({**_LN_PLAIN_MLP, "mlp_bias": Flag("mlp_bias", default=True)}),
    # SmolLM3: Llama; the NoPE layers (no_rope_layers) only skip the (parameter-free) rotation
    "smollm3": Family(_LLAMA_MLP_BIAS),
    "starcoder2": Family({**_LN_PLAIN_MLP, "qkv_bias": Flag("use_bias", default=True),
                          "attn_out_bias": Flag("use_bias", default=True),
                          "mlp_bias": Flag("use_bias", default=True),
                          "activation": Act("hidden_act", default=GELU_TANH),
                          "tie_word_embeddings": Flag("tie_word_embeddings", default=True),
                          ("sliding_window", "layer_types"): Window(None)}),
    # VaultGemma: Gemma's two pre-norms (no post-norms), per-layer windows from layer_types
    "vaultgemma": Family(GEMMA),
    # MPT (MptBlock): ALiBi, expansion_ratio x d_model GELU MLP, always tied; transformers
    # builds every linear and LayerNorm without bias whatever `no_bias` says
    "mpt": Family(
        {"num_layers": Req("n_layers"), "n_head": Req("n_heads"), "hidden_dim": Req("d_model"),
         "vocab_size": Req("vocab_size"), "max_seq_len": Opt("max_seq_len"),
         "ffn_embed_dim": Same("hidden_dim", times=4), "activation": "gelu",
         **NO_BIASES, "norm_type": "layernorm", "norm_bias": False,
         "position_embedding_type": "alibi",
         # MptForCausalLM ties lm_head to wte only when the config says so
         "tie_word_embeddings": Flag("tie_word_embeddings", default=True)},
        checks=(Refuse("expansion_ratio", (4, 4.0), default=4, reason="MLP width"),
                mpt_attention)),
    # CodeGen (CodeGenBlock): GPT-J's layout
    "codegen": Family(_GPTJ),
    # Persimmon (and Fuyu's language model): LayerNorm with bias, ReLU^2 MLP, biases
    # everywhere, q/k LayerNorm(head_dim) with bias shared by the heads, untied, multi-head
    # attention whatever num_key_value_heads says
    "persimmon": Family({**_LN_PLAIN_MLP, **BIASES, "activation": Act("hidden_act", default="relu2"),
                         "num_key_value_heads": None,  # fused MHA query_key_value, no GQA
                         "qk_norm": Flag("qk_layernorm", default=True), "qk_norm_bias": True,
                         ("sliding_window", "layer_types"): Window(None)}),
    # BioGPT (BioGptDecoderLayer): pre-LN, learned positions offset by 2 rows, biases, tied
    "biogpt": Family({**BERT, "position_embedding_type": "learned",
                      "num_position_embeddings": Same("max_seq_len", plus=2), "type_vocab_size": 0,
                      "embedding_norm": False, "final_norm": True, "encoder_only": False,
                      "pooler": False, "lm_head": True}),
    # GPT-1 (openai-gpt Block): post-LN, so no final norm
    "openai-gpt": Family({**GPT2, "activation": Act("afn", default="gelu"), "final_norm": False}),
    # nanochat: RMSNorms without weights, non-gated ReLU^2 MLP, untied
    "nanochat": Family({**LLAMA, "mlp_gated_linear_units": False, "norm_affine": False}),
    # HyperCLOVA X: Peri-LN (use_post_norm: a norm after attention and after the MLP too)
    "hyperclovax": Family({**_LLAMA_MLP_BIAS, "num_norms_per_layer": When(Flag("use_post_norm", default=True), 4, 2)}),
    # XGLM (XGLMDecoderLayer): pre-LN, sinusoidal positions (no parameters), biases, tied
    "xglm": Family(
        {"num_layers": Req("num_layers"), "n_head": Req("attention_heads"),
         "hidden_dim": Req("d_model"), "vocab_size": Req("vocab_size"),
         "max_seq_len": Opt("max_position_embeddings"), "ffn_embed_dim": Req("ffn_dim"),
         "activation": Act("activation_function", default="gelu"), **BIASES, **LAYERNORM,
         "position_embedding_type": "sinusoidal",
         "tie_word_embeddings": Flag("tie_word_embeddings", default=True)},
        checks=(Refuse("add_cross_attention", (False,), default=False, as_bool=True,
                       reason="cross-attention to an encoder"),)),
    # Helium (HeliumAttention / HeliumMLP): Llama with a bias-free o_proj whatever
    # attention_bias says, mlp_bias on the MLP
    "helium": Family({**_LLAMA_MLP_BIAS, "attn_out_bias": False}, steps=(_helium_o_proj,)),
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
    "doge": Family({**_LLAMA_MLP_BIAS, "qk_norm": True, "attn_dynamic_mask": True, "residual_scale_vectors": 2,
                    **_NO_WINDOW},
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
    "gemma4_text": _GEMMA4,
    "gemma4_unified_text": _GEMMA4,
    "gemma3n_text": Family(_GEMMA3N, checks=(RefuseFeature(
        "altup_num_inputs", tuple(range(2, 65)), default=4, reason="AltUp needs at least two streams"),
        needs_layer_types)),
    # ModernBertDecoderForCausalLM: ModernBERT's blocks with causal attention (separate
    # q/k/v), sliding_window keys in local layers, and lm_head = dense + activation +
    # norm before the tied decoder (biased by decoder_bias)
    "modernbert-decoder": Family({
        **MODERNBERT, ("sliding_window", "layer_types"): Window(), "encoder_only": False, "lm_head": True,
        "tie_word_embeddings": Flag("tie_word_embeddings", default=True),
        "lm_head_bias": Flag("decoder_bias", default=True),
        "lm_head_transform": When(Flag("classifier_bias", default=False), "dense_bias", "dense")}),
}
