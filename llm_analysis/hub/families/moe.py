"""Rows of the Hub family table for mixture-of-experts decoders and decoders with DeepSeek's
multi-head latent attention (MLA, arXiv 2405.04434; the dense MLA rows sit beside the DeepSeek rows
whose attention they reuse). Each row follows the transformers modelling code it names; the variant
fields (issue 14) are documented in `schema/model.py`.

Routers whose `e_score_correction_bias` is a buffer hold no parameter; where it (or AFMoE's
`expert_bias`, ERNIE 4.5's per-expert correction) is an `nn.Parameter` it holds one value per
expert: counted as the router's bias (`moe_router_bias`; added to the scores, no matmul).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, Optional

from llm_analysis.hub.errors import UnmappableConfig, not_modelled
from llm_analysis.hub.families.bases import (ATTENTION_BIAS, COHERE, DEEPSEEK_MLA, ERNIE4_5, FULL_WIDTH_EXPERTS,
                                             LAYERNORM, LLAMA, LLAMA_NO_BIAS_NO_TYPES, MLP_BIAS, NO_BIASES, OLMO2,
                                             QWEN3, QWEN_MOE_EXPERTS)
from llm_analysis.hub.hooks import RawWindowPattern, qwen_window
from llm_analysis.hub.source import Fields, Src, attention_layout, moe_layout
from llm_analysis.hub.spec import (Act, Either, Family, Flag, MoeRule, Opt, Quotient, Refuse, Req, Same, When,
                                   Window)

__all__ = ["MOE_FAMILIES"]



def _experts(experts: Opt, layers: str, width: Any = Req("moe_intermediate_size"), shared: Optional[str] = None,
             **rest: Any) -> MoeRule:
    """Routed experts whose top-k (num_experts_per_tok) is read only when the config has experts.
    `shared`: the key of a DeepSeek-style shared-expert count, all routed-width (HF builds one MLP of
    n_shared * moe_intermediate_size: the same shapes as n_shared MLPs)."""
    if shared is not None:
        rest.update(shared_count=Opt(shared, default=0), shared_width=Same("moe_ffn_embed_dim"))
    return MoeRule(experts=experts, top_k=Req("num_experts_per_tok"), top_k_first=False, layers=layers,
                   width=width, **rest)


# Mixtral-style: a full router, every layer MoE, each expert a full-width MLP
_FULL_WIDTH = MoeRule(**FULL_WIDTH_EXPERTS, top_k=Req("num_experts_per_tok"), width=Same("ffn_embed_dim"))
_OLMOE_EXPERTS = MoeRule(experts=Req("num_experts"), top_k=Req("num_experts_per_tok"), width=Same("ffn_embed_dim"))


def _shared_experts_one_mlp(src: Src, f: Fields, what: str) -> None:
    """AriaSharedExpertsMLP (intermediate_size * moe_num_shared_experts) and ERNIE 4.5's
    shared_experts (moe_intermediate_size * moe_num_shared_experts) are ONE MLP: the same
    weights as that many experts, but one set of biases when the MLP has biases."""
    count = f.get("moe_num_shared_experts")
    if count and count > 1:
        f.update(moe_num_shared_experts=1, moe_shared_expert_ffn_dim=count * f["moe_shared_expert_ffn_dim"])


def _cohere2_moe_dense_width(src: Src, f: Fields, what: str) -> None:
    """Cohere2MoeDecoderLayer: "dense" layers are an MLP of prefix_dense_intermediate_size,
    experts are intermediate_size wide; ModelConfig has one dense width."""
    kinds = src.get("mlp_layer_types", default=None) or []
    dense = src.opt_int("prefix_dense_intermediate_size", default=None)
    if "dense" in kinds and dense != f.get("ffn_embed_dim"):
        raise UnmappableConfig(f"{what}: dense layers of prefix_dense_intermediate_size={dense} next "
                               f"to experts of intermediate_size={f.get('ffn_embed_dim')} (per-layer "
                               "MLP widths) cannot be described by ModelConfig")


def _hy_v3_zero_shared(src: Src, f: Fields, what: str) -> None:
    """HYV3MLP(intermediate_size=moe_intermediate_size * num_shared_experts) falls back
    to config.intermediate_size when that product is 0 (`intermediate_size or ...`):
    without shared experts each MoE layer still holds one intermediate_size-wide MLP."""
    if f.get("moe_num_experts", 1) > 1 and not src.opt_int("num_shared_experts", default=0):
        f.update(moe_num_shared_experts=1, moe_shared_expert_ffn_dim=f["ffn_embed_dim"])


def _deepseek_experts(layers: str) -> MoeRule:
    return _experts(Opt("n_routed_experts"), layers, shared="n_shared_experts")


@dataclass(frozen=True)
class DenseFirst:
    """A step: the first `key` layers are dense, experts on every later one (AFMoE's
    `moe_enabled = layer_idx >= num_dense_layers`)."""
    key: str

    def __call__(self, src: Src, f: Fields, what: str) -> None:
        if f.get("moe_num_experts", 1) > 1:
            f["moe_first_dense_layers"] = src.opt_int(self.key, default=0) or 0
            f["moe_layer_freq"] = 1


@dataclass(frozen=True)
class UniformList:
    """A check: a per-layer list under `key` (when present) must repeat `scalar`'s value;
    ModelConfig has one head count for every layer."""
    key: str
    scalar: str

    def __call__(self, src: Src, f: Fields, what: str) -> None:
        values = src.get(self.key, default=None)
        one = src.get(self.scalar, default=None)
        if values is not None and any(v != one for v in values):
            raise not_modelled(f"{what}: {self.key}={list(values)!r} (per-layer head counts) differ from "
                                     f"{self.scalar}={one!r}; ModelConfig has one head count")


# the name the DSA layers had before transformers' layer-type rename (configuration_utils
# _LEGACY_LAYER_TYPE_REMAP: "deepseek_sparse_attention" -> "indexed_attention"; GLM-5.2-NVFP4)
_INDEXED_LAYER_NAMES = ("indexed_attention", "deepseek_sparse_attention")


def _indexer_kinds_from_schedule(src: Src, num_layers: int) -> list:
    """GlmMoeDsaConfig.__post_init__'s default when a (raw) config lists no indexer_types:
    index_topk_pattern ("F"/"S" letters, or the names), else layer i is "full" when
    max(i - index_skip_topk_offset + 1, 0) is a multiple of index_topk_freq."""
    pattern = src.get("index_topk_pattern", default=None)
    if pattern is not None:
        letters = {"F": "full", "S": "shared"}
        return [letters.get(c, c) for c in pattern] if isinstance(pattern, str) else list(pattern)
    freq = max(src.opt_int("index_topk_freq", default=1), 1)
    offset = src.opt_int("index_skip_topk_offset", default=2)
    return ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(num_layers)]


@dataclass(frozen=True)
class SparseAttentionIndexer:
    """A step: DeepSeek sparse attention's lightning indexer (DeepseekV32Indexer,
    GlmMoeDsaIndexer). Every layer must be an indexed-attention layer. `shared_layers`
    (GLM-5.2's IndexCache, GlmMoeDsaAttention): `indexer_types` names each layer "full"
    (runs its own indexer) or "shared" (reuses the previous full layer's top-k: no
    indexer module), mapped to ModelConfig.layer_indexer; without it (DeepSeek-V3.2,
    whose config has no such list) one indexer on every layer."""
    shared_layers: bool

    def __call__(self, src: Src, f: Fields, what: str) -> None:
        f.update(index_n_heads=src.req_int("index_n_heads"), index_head_dim=src.req_int("index_head_dim"),
                 index_topk=src.req_int("index_topk"))
        kinds = src.get("layer_types", default=None)
        if kinds is not None and any(k not in _INDEXED_LAYER_NAMES for k in kinds):
            raise not_modelled(f"{what}: layer_types = {sorted(set(map(str, kinds)))}: only layers that all are "
                                     "'indexed_attention' are described (DeepSeek sparse attention on every layer)")
        indexers = src.get("indexer_types", default=None)
        if not self.shared_layers:
            if indexers is not None and any(k != "full" for k in indexers):
                raise not_modelled(f"{what}: indexer_types = {sorted(set(map(str, indexers)))}: this model type has "
                                         "one indexer on every layer ('full' only)")
            return
        layers = f.get("num_layers")
        if indexers is None and layers is not None:  # the raw config.json, without transformers
            indexers = _indexer_kinds_from_schedule(src, layers)
        if indexers is None:
            return
        indexers = [str(k) for k in indexers]
        if (set(indexers) - {"full", "shared"} or len(indexers) != layers
                or (indexers and indexers[0] != "full")):
            raise UnmappableConfig(f"{what}: indexer_types = {indexers!r} must name each of the "
                                   f"num_hidden_layers = {layers} layers 'full' or 'shared', the first "
                                   "'full' (a shared layer reuses the top-k of an earlier full layer)")
        if "shared" in indexers:  # all 'full' leaves the default (an indexer on every layer)
            f["layer_indexer"] = [k == "full" for k in indexers]


def _longcat_qk_head_dim(src: Src, f: Fields, what: str) -> None:
    """LongcatFlashMLA sizes q_b_proj by config.qk_head_dim: it must be nope + rope."""
    qk = src.get("qk_head_dim", default=None)
    parts = (src.get("qk_nope_head_dim", default=0) or 0) + (src.get("qk_rope_head_dim", default=0) or 0)
    if qk is not None and qk != parts:
        raise not_modelled(f"{what}: qk_head_dim={qk!r} differs from qk_nope_head_dim + qk_rope_head_dim = "
                                 f"{parts}; ModelConfig has no separate query width")


def _every_other_layer(src: Src, f: Fields, what: str) -> None:
    """LongCat's MoE sits in the first (even) half of every described layer pair."""
    if f.get("moe_num_experts", 1) > 1:
        f.update(moe_first_dense_layers=0, moe_layer_freq=2)


def _several_experts(src: Src, f: Fields, what: str) -> None:
    """JetMoE builds its router, bias and expert modules even for one expert; ModelConfig
    describes experts only from two on."""
    n = src.get("num_local_experts", default=None)
    if isinstance(n, int) and n < 2:
        raise not_modelled(f"{what}: num_local_experts={n}: a mixture of one expert (router and output "
                                 "bias around a single MLP) is not modelled")


def _mimo_layer_attention(src: Src, f: Fields, what: str) -> None:
    """MiMoV2FlashAttention: sliding layers have 2 * num_key_value_heads key/value heads and
    one sink logit per head; full layers num_key_value_heads and no sinks."""
    kv = f.get("num_key_value_heads") or f["n_head"]
    sliding = [t == "sliding_attention" for t in (f.get("layer_types") or ["full_attention"] * f["num_layers"])]
    f.update(layer_kv_heads=[2 * kv if s else kv for s in sliding], layer_attn_sinks=sliding)


def _laguna_gate(src: Src, f: Fields, what: str) -> None:
    """LagunaAttention: g_proj is always built; one gate per head when `gating` is True or
    "per-head", else one per element (n_head * head_dim)."""
    gating = src.get("gating", default=True)
    f["attn_output_gate"] = "per_head" if gating is True or gating == "per-head" else "per_element"


def _phimoe_two_experts(src: Src, f: Fields, what: str) -> None:
    """PhimoeTopKRouter's sparsemixer picks exactly two experts per token (the best, then
    the best of the rest), whatever num_experts_per_tok says."""
    if f.get("moe_num_experts"):
        f["moe_top_k"] = 2


def _llama4_several_experts(src: Src, f: Fields, what: str) -> None:
    """Llama4TextMoe builds its router, experts and shared expert on every MoE layer whatever the
    expert count; ModelConfig describes experts only from two on."""
    n = src.opt_int("num_local_experts", default=16)
    if n < 2:
        raise not_modelled(f"{what}: num_local_experts={n}: a Llama 4 MoE layer of one routed expert (router and "
                                 "shared expert around it) is not modelled")


def _llama4_layers(src: Src, f: Fields, what: str) -> None:
    """Llama4TextConfig.__post_init__'s per-layer defaults, read from the raw config.json:
    RoPE on layer i unless (i + 1) % no_rope_layer_interval == 0 (`no_rope_layers`, 1 = RoPE),
    the RoPE layers "chunked_attention" (attention_chunk_size C) and the NoPE ones
    "full_attention" (`layer_types`); experts on `moe_layers`, by default every
    interleave_moe_layer_step-th layer from step - 1 (Maverick: the odd layers; the others
    dense MLPs of intermediate_size_mlp). Chunked layers are ModelConfig's sliding layers
    with window C, marked chunked (sliding_window_chunked): the eager forward and its cache
    are a window of C; the chunk's pairs count under the causal conventions."""
    n = f["num_layers"]
    interval = src.opt_int("no_rope_layer_interval", default=4) or 4
    rope = src.get("no_rope_layers", default=None) or [int((i + 1) % interval != 0) for i in range(n)]
    kinds = src.get("layer_types", default=None)
    if kinds is None:
        kinds = ["chunked_attention" if r else "full_attention" for r in rope]
    kinds = [str(k) for k in kinds]
    if len(kinds) != n or set(kinds) - {"chunked_attention", "full_attention"}:
        raise UnmappableConfig(f"{what}: layer_types = {sorted(set(kinds))} ({len(kinds)} entries) must name "
                               f"each of the num_hidden_layers = {n} layers 'chunked_attention' or 'full_attention'")
    # transformers' default is 8192; a config that sets it to null has no chunk length (its
    # chunked layers then fail in create_chunked_causal_mask): Src reads null as absent, so ask the raw
    # config and the built one
    unset = (src.raw.get("attention_chunk_size", 0) is None
             or (src.obj is not None and getattr(src.obj, "attention_chunk_size", 0) is None))
    chunk = None if unset else src.opt_int("attention_chunk_size", default=8192)
    if "chunked_attention" in kinds and not chunk:
        raise UnmappableConfig(f"{what}: layer_types names chunked_attention layers but attention_chunk_size = "
                               f"{chunk!r}; give the chunk length in tokens")
    window, types = attention_layout(["sliding_attention" if k == "chunked_attention" else k for k in kinds],
                                     chunk, n, what)
    f.update(sliding_window=window, layer_types=types, sliding_window_chunked=window is not None)
    if f.get("moe_num_experts", 1) > 1:
        step = src.opt_int("interleave_moe_layer_step", default=1) or 1
        layers = src.get("moe_layers", default=None)
        layers = list(range(step - 1, n, step)) if layers is None else layers
        f["moe_first_dense_layers"], f["moe_layer_freq"] = moe_layout(layers, n, what)


_LLAMA4_ATTENTION = {k: v for k, v in LLAMA.items() if k != ("sliding_window", "layer_types")}

_GRANITE_EXPERTS = replace(_FULL_WIDTH, shared_width=Opt("shared_intermediate_size"))

# DeepSeek-V2/V3: multi-head latent attention (arXiv 2405.04434), the first
# first_k_dense_replace layers dense, n_shared_experts of moe_intermediate_size
# (HF builds one MLP of n_shared * moe_intermediate_size: the same shapes)
_DEEPSEEK_V2 = Family({**DEEPSEEK_MLA, "mlp_bias": MLP_BIAS}, steps=(_deepseek_experts("dense_first"),))
_QWEN3_MOE = Family(QWEN3, steps=(qwen_window, MoeRule(experts=Opt("num_experts", "num_local_experts"),
                                                       **QWEN_MOE_EXPERTS)))

MOE_FAMILIES: Dict[str, Family] = {
    # Llama 4 text (Llama4TextDecoderLayer, transformers 5.23): Llama attention whose RoPE layers
    # attend in chunks of attention_chunk_size and whose NoPE layers (every
    # no_rope_layer_interval-th) attend globally; use_qk_norm is an L2 norm without weights and
    # the temperature tuning of NoPE layers element-wise (no parameters, no matmul FLOPs). MoE
    # layers (Llama4TextMoe): a bias-free router [hidden x num_local_experts] (sigmoid of the
    # top-k logits), experts and one ungated shared expert of intermediate_size; dense layers
    # an MLP of intermediate_size_mlp. The eager forward runs every token through every expert
    # (moe_eager_all_experts: counted under the eager conventions, top-k under the executed ones).
    "llama4_text": Family(
        {**_LLAMA4_ATTENTION, "ffn_embed_dim": Opt("intermediate_size_mlp", default=16384),
         "max_seq_len": Opt("max_position_embeddings", default=131072), "moe_eager_all_experts": True},
        checks=(_llama4_several_experts,),
        steps=(MoeRule(experts=Opt("num_local_experts", default=16), top_k=Opt("num_experts_per_tok", default=1),
                       width=Req("intermediate_size"), shared_width=Same("moe_ffn_embed_dim")),
               _llama4_layers)),
    # Qwen2-MoE: one shared expert behind a sigmoid gate
    "qwen2_moe": Family(
        {**LLAMA, "qkv_bias": Flag("qkv_bias", default=True), "attn_out_bias": False},
        steps=(qwen_window, MoeRule(experts=Opt("num_experts"), **QWEN_MOE_EXPERTS,
                                    shared_width=Opt("shared_expert_intermediate_size"),
                                    shared_gate=True))),
    "qwen3_moe": _QWEN3_MOE,
    # the language model of Qwen3-VL-MoE (Qwen3VLMoeTextModel): Qwen3-MoE's layers (fused expert weights)
    "qwen3_vl_moe_text": _QWEN3_MOE,
    # Mixtral: every layer MoE, each expert a full-width SwiGLU MLP
    "mixtral": Family(LLAMA_NO_BIAS_NO_TYPES, steps=(_FULL_WIDTH,)),
    "deepseek_v2": _DEEPSEEK_V2,
    "deepseek_v3": Family(DEEPSEEK_MLA, steps=_DEEPSEEK_V2.steps),  # bias-free MLPs
    # MiniCPM3 (MiniCPM3Attention): DeepSeek-V2's MLA without experts; scale_emb/scale_depth are scalars
    "minicpm3": _DEEPSEEK_V2,
    # gpt-oss: attention sinks, biased router and experts, alternating 128-token windows
    "gpt_oss": Family(
        {**LLAMA, "qkv_bias": Flag("attention_bias", default=True),
         "attn_out_bias": Flag("attention_bias", default=True),
         "attn_sinks": True, "moe_router_bias": True, "moe_expert_bias": True,
         "moe_ffn_embed_dim": Same("ffn_embed_dim")},
        steps=(RawWindowPattern(period=2, default_window=128), MoeRule(
            **FULL_WIDTH_EXPERTS, top_k=Req("num_experts_per_tok", "experts_per_token")))),
    # OLMoE: OLMo-2-style q/k norms, full-router experts of intermediate_size on every layer
    "olmoe": Family({**LLAMA, "qk_norm": True, "qk_norm_per_head": True}, steps=(_OLMOE_EXPERTS,)),
    "flex_olmo": Family(OLMO2, steps=(_OLMOE_EXPERTS,)),
    # PhiMoE: Mixtral with LayerNorms (bias), q/k/v/o biases from attention_bias, lm_head bias
    "phimoe": Family(
        {**LLAMA_NO_BIAS_NO_TYPES, **LAYERNORM, "qkv_bias": ATTENTION_BIAS,
         "attn_out_bias": ATTENTION_BIAS, "lm_head_bias": Flag("lm_head_bias", default=True)},
        steps=(_FULL_WIDTH, _phimoe_two_experts)),
    # GraniteMoe(Shared): Granite's layers with full-width experts (ParallelExperts), an
    # optional shared MLP of shared_intermediate_size
    "granitemoe": Family(LLAMA, steps=(_GRANITE_EXPERTS,)),
    "granitemoeshared": Family(LLAMA, steps=(_GRANITE_EXPERTS,)),
    # GraniteMoe-SWA: one learned attention sink per head
    "granitemoe_swa": Family({**LLAMA, "attn_sinks": True}, steps=(_GRANITE_EXPERTS,)),
    # MiniMax-M2: q/k RMSNorm over all heads, full-router experts on every layer
    "minimax_m2": Family({**LLAMA, "qk_norm": True, "qk_norm_per_head": True, "qk_norm_across_heads": True},
                         steps=(_FULL_WIDTH,)),
    # GLM-4-MoE (Glm4MoeAttention): q/k/v biased by attention_bias, o_proj never;
    # optional q/k RMSNorm(head_dim); experts from first_k_dense_replace on
    "glm4_moe": Family(
        {**LLAMA, "qkv_bias": ATTENTION_BIAS, "attn_out_bias": False,
         "qk_norm": Flag("use_qk_norm", default=False),
         # Glm4MoeAttention: getattr(config, "head_dim", hidden_size // num_attention_heads)
         "head_dim": Either(Opt("head_dim"), Quotient("hidden_dim", "n_head"))},
        steps=(_deepseek_experts("dense_first"),)),
    # Solar Open: GLM-4-MoE's attention without q/k norms, experts on every layer
    "solar_open": Family(
        {**LLAMA, "ffn_embed_dim": Req("moe_intermediate_size"), "qkv_bias": ATTENTION_BIAS,
         "attn_out_bias": False},
        steps=(_deepseek_experts("all"),)),
    # EXAONE-MoE: EXAONE 4 attention (q/k RMSNorm(head_dim), no biases), mlp_layer_types
    "exaone_moe": Family(QWEN3, steps=(_experts(Opt("num_experts"), "listed", shared="num_shared_experts"),)),
    # HY-V3: q/k RMSNorm(head_dim), biases from attention_bias / mlp_bias, mlp_layer_types
    "hy_v3": Family({**QWEN3, "attn_out_bias": ATTENTION_BIAS, "mlp_bias": MLP_BIAS},
                    steps=(_experts(Opt("num_experts", "num_local_experts"), "listed", shared="num_shared_experts"),
                           _hy_v3_zero_shared)),
    # ERNIE 4.5 MoE: experts on (layer+1) % interval == 0 within [start, end], shared
    # experts of moe_intermediate_size, a per-expert e_score_correction_bias parameter
    "ernie4_5_moe": Family(
        # Ernie4_5_MoeForCausalLM: lm_head = nn.Linear(..., bias=config.use_bias)
        {**ERNIE4_5, "moe_router_bias": True, "lm_head_bias": Flag("use_bias", default=False)},
        steps=(MoeRule(experts=Opt("moe_num_experts", "num_experts"), top_k=Req("moe_k"),
                       top_k_first=False, layers="interval_range",
                       width=Req("moe_intermediate_size"),
                       shared_count=Opt("moe_num_shared_experts", default=0),
                       shared_width=Same("moe_ffn_embed_dim")), _shared_experts_one_mlp)),
    # Aria (AriaTextMoELayer): experts and shared experts of intermediate_size on every layer
    "aria_text": Family(
        {**LLAMA, "mlp_bias": MLP_BIAS},
        steps=(MoeRule(experts=Req("moe_num_experts"), top_k=Req("moe_topk"), layers="all",
                       width=Same("ffn_embed_dim"),
                       shared_count=Opt("moe_num_shared_experts", default=0),
                       shared_width=Same("ffn_embed_dim")), _shared_experts_one_mlp)),
    # Flint: Qwen3-style attention with one learned sink per head, Qwen-MoE layer
    # pattern (decoder_sparse_step, mlp_only_layers), an ungated shared expert
    "flint": Family(
        {**QWEN3, "attn_out_bias": ATTENTION_BIAS, "attn_sinks": True},
        steps=(_experts(Opt("num_experts"), "sparse_step", shared_width=Opt("shared_expert_intermediate_size")),)),
    # Kolibri-1: bias-free attention with q/k RMSNorm(head_dim), four norms per layer,
    # experts on every layer and one shared expert of shared_expert_intermediate_size
    "kolibri1": Family(
        {**QWEN3, **NO_BIASES, "ffn_embed_dim": Req("moe_intermediate_size"),
         "num_norms_per_layer": 4},
        steps=(_experts(Opt("num_local_experts", "num_experts"), "all",
                        shared_width=Opt("shared_expert_intermediate_size")),)),
    # Mellum: Qwen3-style attention (biases from attention_bias), experts per
    # mlp_layer_types, no shared expert; its MTP weights are not built by transformers
    "mellum": Family({**QWEN3, "attn_out_bias": ATTENTION_BIAS},
                     steps=(_experts(Opt("num_local_experts", "num_experts"), "listed"),)),
    # Cohere2-MoE: Cohere's parallel block on one bias-free LayerNorm (RMSNorm when
    # rms_norm_eps is set: the same weights), experts of intermediate_size per
    # mlp_layer_types, shared experts one MLP of num_shared * intermediate_size
    "cohere2_moe": Family(
        {**COHERE, "qk_norm": False,
         "norm_type": When(Flag("rms_norm_eps", default=None), "rmsnorm", "layernorm")},
        steps=(_cohere2_moe_dense_width, _experts(
            Opt("num_experts"), "listed", width=Same("ffn_embed_dim"),
            shared_count=Opt("num_shared_experts", default=0), shared_width=Same("ffn_embed_dim")))),
    # GLM-4.7-Flash (Glm4MoeLite): DeepseekV3Attention, Glm4Moe experts per mlp_layer_types
    # (default: the first layer dense)
    "glm4_moe_lite": Family(DEEPSEEK_MLA, steps=(_deepseek_experts("listed"),)),
    # Youtu-LLM (YoutuDecoderLayer = Llama's layer around DeepseekV3Attention): dense, tied
    "youtu": Family({**DEEPSEEK_MLA, "tie_word_embeddings": Flag("tie_word_embeddings", default=True)}),
    # A.X-K1 (AXK1MoE): DeepSeek-V3 with a post_mlp_layernorm on the MoE block's output;
    # experts per mlp_layer_types (derived from first_k_dense_replace / moe_layer_freq)
    "axk1": Family({**DEEPSEEK_MLA, "moe_output_norm": True}, steps=(_deepseek_experts("listed"),)),
    # DeepSeek-V3.2 (DeepseekV32Attention): DeepSeek-V3 plus the lightning indexer on
    # every layer; experts per mlp_layer_types (default: after first_k_dense_replace)
    "deepseek_v32": Family(DEEPSEEK_MLA, steps=(_deepseek_experts("listed"), SparseAttentionIndexer(False))),
    # GLM-5 (GlmMoeDsa): the same layers with GLM's interleaved rotary (no shape change);
    # GLM-5.2's indexer_types: "shared" layers reuse the previous full layer's top-k and
    # hold no indexer (IndexCache, arXiv 2603.12201)
    "glm_moe_dsa": Family(DEEPSEEK_MLA, steps=(_deepseek_experts("listed"), SparseAttentionIndexer(True))),
    # LongCat-Flash (LongcatFlashDecoderLayer): each of num_layers layers holds two MLA
    # sublayers, each followed by a dense MLP of ffn_hidden_size, and one MoE whose
    # input is the first sublayer's MLP input and whose output joins the layer's end
    # (the "shortcut"). Described as num_hidden_layers = 2 * num_layers layers: even
    # ones with the MoE beside the first MLP (a shared expert of the same input), odd
    # ones dense. Experts of expert_ffn_hidden_size, top moe_topk of n_routed_experts +
    # zero_expert_num, the zero experts' unused gate/up weights allocated
    "longcat_flash": Family(
        {**DEEPSEEK_MLA, "moe_zero_experts": Opt("zero_expert_num", default=0),
         "moe_zero_experts_hold_weights": True, "moe_router_bias": Flag("router_bias", default=False)},
        checks=(_longcat_qk_head_dim,),
        steps=(MoeRule(experts=Opt("n_routed_experts"), top_k=Req("moe_topk"), top_k_first=False,
                       layers="all", width=Req("expert_ffn_hidden_size"), shared_width=Same("ffn_embed_dim")),
               _every_other_layer)),
    # AFMoE (AfmoeDecoderLayer): q/k RMSNorm(head_dim), a sigmoid gate Linear(hidden,
    # heads*head_dim) on the attention output, four norms per layer, sliding layers from
    # layer_types; experts from num_dense_layers on with shared experts of
    # num_shared * moe_intermediate_size and an expert_bias parameter
    "afmoe": Family(
        {**QWEN3, "qkv_bias": ATTENTION_BIAS, "attn_out_bias": ATTENTION_BIAS,
         "num_norms_per_layer": 4, "attn_output_gate": "per_element", "moe_router_bias": True},
        steps=(_experts(Opt("num_experts"), "all", shared="num_shared_experts"), DenseFirst("num_dense_layers"))),
    # Beam (BeamAttention): Qwen3-style attention with a sigmoid gate Linear(hidden,
    # heads*head_dim) plus one gate bias per head, four norms per layer; experts per
    # mlp_layer_types, no shared expert, the correction bias a buffer
    "beam": Family(
        {**QWEN3, "qkv_bias": ATTENTION_BIAS, "attn_out_bias": ATTENTION_BIAS,
         "num_norms_per_layer": 4, "attn_output_gate": "per_element", "attn_output_gate_head_bias": True},
        steps=(_experts(Opt("num_experts"), "listed"),)),
    # MiniMax-M3 text (MiniMaxM3VLTextModel): bias-free GQA with q/k RMSNorm(head_dim),
    # experts of intermediate_size plus one shared MLP of shared_intermediate_size, dense
    # layers of dense_intermediate_size per mlp_layer_types; the clamped SwiGLU is
    # element-wise. Its block-sparse indexer layers ("minimax_m3_sparse" in layer_types)
    # are not described: the Window reader refuses that layer kind.
    "minimax_m3_vl_text": Family(
        {**QWEN3, "qkv_bias": False, "attn_out_bias": False,
         "ffn_embed_dim": Req("dense_intermediate_size")},
        steps=(_experts(Opt("num_local_experts"), "listed", width=Req("intermediate_size"),
                        shared_width=Opt("shared_intermediate_size")),)),
    # JetMoE (JetMoeAttention, JetMoeMoE): mixture of attention heads, num_local_experts
    # q/o expert pairs of num_key_value_heads * kv_channels (the config derives
    # num_attention_heads = kv_heads * top_k), one shared kv_proj, one output bias after
    # the merge; gated experts of intermediate_size with one output bias; tied
    "jetmoe": Family(
        {"num_layers": Req("num_hidden_layers"), "n_head": Req("num_attention_heads"),
         "hidden_dim": Req("hidden_size"), "num_key_value_heads": Req("num_key_value_heads"),
         "head_dim": Req("kv_channels"), "vocab_size": Req("vocab_size"),
         "max_seq_len": Opt("max_position_embeddings"), "ffn_embed_dim": Req("intermediate_size"),
         "mlp_gated_linear_units": True, "activation": Act("activation_function", default="silu"),
         "qkv_bias": False, "attn_out_bias": True, "mlp_bias": False, "norm_type": "rmsnorm",
         "norm_bias": False, "position_embedding_type": "rotary",
         "tie_word_embeddings": Flag("tie_word_embeddings", default=True),
         "attn_experts": Req("num_local_experts"), "moe_output_bias": True},
        checks=(_several_experts,),
        steps=(MoeRule(experts=Req("num_local_experts"), top_k=Req("num_experts_per_tok"), layers="all",
                       width=Same("ffn_embed_dim")),)),
    # Laguna (LagunaAttention): q/k RMSNorm(head_dim), a softplus gate g_proj on the
    # attention output; experts per mlp_layer_types with one shared expert of
    # shared_expert_intermediate_size and an e_score_correction_bias parameter
    "laguna": Family(
        {**QWEN3, ("sliding_window", "layer_types"): Window(), "qkv_bias": False, "attn_out_bias": False,
         "moe_router_bias": True},
        checks=(Refuse("attention_bias", (False,), False, "biased attention projections", as_bool=True),
                UniformList("num_attention_heads_per_layer", "num_attention_heads")),
        steps=(_laguna_gate, _experts(Opt("num_experts"), "listed",
                                      shared_width=Opt("shared_expert_intermediate_size")))),
    # MiMo-V2-Flash (MiMoV2FlashAttention, transformers 5.23): GQA with queries/keys of
    # head_dim and values of v_head_dim, o_proj bias-free; per layer_types, sliding layers
    # double the KV heads and hold sinks (_mimo_layer_attention); values scaled by
    # attention_value_scale (element-wise); DeepSeek-V3 experts without shared experts per
    # mlp_layer_types, the correction bias a buffer; dense layers of intermediate_size
    "mimo_v2_flash": Family(
        {**LLAMA, "attn_out_bias": False, "v_head_dim": Opt("v_head_dim")},
        steps=(_mimo_layer_attention, _experts(Opt("n_routed_experts"), "listed"))),
}
