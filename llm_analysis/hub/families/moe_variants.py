"""Rows of the Hub family table for MLA and MoE decoders with a variant the base rows
do not have (issue 14): DeepSeek-style MLA under other model types, a norm on the MoE
output, gated attention outputs, the sparse-attention indexer. `hub_families.py`
merges them into FAMILIES. Each row follows the transformers 5.23 modelling code it
names; the variant fields are documented in `model_schema.py`.

Routers whose `e_score_correction_bias` (or AFMoE's `expert_bias`) is an
`nn.Parameter` hold one value per expert: counted as the router's bias
(`moe_router_bias`; it is added to the scores, no matmul).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

from llm_analysis.hub.families.bases import ATTENTION_BIAS, DEEPSEEK_MLA, LLAMA, QWEN3
from llm_analysis.hub.errors import UnsupportedArchitecture, not_modelled
from llm_analysis.hub.source import Fields, Src
from llm_analysis.hub.spec import Act, Family, Flag, MoeRule, NotModelled, Opt, Refuse, Req, Same, Window

__all__ = ["MOE2_FAMILIES", "NOT_MODELLED_FAMILIES"]


def _refuse(what: str, detail: str) -> UnsupportedArchitecture:
    return not_modelled(f"{what}: {detail}")


def _deepseek_experts(layers: str, **extra) -> MoeRule:
    """DeepSeek-V3's routed experts and shared experts (one MLP of n_shared *
    moe_intermediate_size: the same shapes as n_shared MLPs)."""
    return MoeRule(experts=Opt("n_routed_experts"), top_k=Req("num_experts_per_tok"), top_k_first=False,
                   layers=layers, width=Req("moe_intermediate_size"),
                   shared_count=Opt("n_shared_experts", default=0), shared_width=Same("moe_ffn_embed_dim"),
                   **extra)


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
            raise _refuse(what, f"{self.key}={list(values)!r} (per-layer head counts) differ from "
                                f"{self.scalar}={one!r}; ModelConfig has one head count")


def _sparse_attention_indexer(src: Src, f: Fields, what: str) -> None:
    """DeepSeek sparse attention (DeepseekV32Indexer): one indexer per layer. Every layer
    must be "indexed_attention" and, where the config lists indexer_types (GLM-5),
    "full": a "shared" layer reuses another layer's top-k and holds no indexer."""
    f.update(index_n_heads=src.req_int("index_n_heads"), index_head_dim=src.req_int("index_head_dim"),
             index_topk=src.req_int("index_topk"))
    for key, only in (("layer_types", "indexed_attention"), ("indexer_types", "full")):
        kinds = src.get(key, default=None)
        if kinds is not None and any(k != only for k in kinds):
            raise _refuse(what, f"{key} = {sorted(set(map(str, kinds)))}: only layers that all are "
                                f"{only!r} are described (one indexer on every layer)")


def _longcat_qk_head_dim(src: Src, f: Fields, what: str) -> None:
    """LongcatFlashMLA sizes q_b_proj by config.qk_head_dim: it must be nope + rope."""
    qk = src.get("qk_head_dim", default=None)
    parts = (src.get("qk_nope_head_dim", default=0) or 0) + (src.get("qk_rope_head_dim", default=0) or 0)
    if qk is not None and qk != parts:
        raise _refuse(what, f"qk_head_dim={qk!r} differs from qk_nope_head_dim + qk_rope_head_dim = "
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
        raise _refuse(what, f"num_local_experts={n}: a mixture of one expert (router and output "
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


MOE2_FAMILIES: Dict[str, Family] = {
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
    "deepseek_v32": Family(DEEPSEEK_MLA, steps=(_deepseek_experts("listed"), _sparse_attention_indexer)),
    # GLM-5 (GlmMoeDsa): the same layers with GLM's interleaved rotary (no shape change)
    "glm_moe_dsa": Family(DEEPSEEK_MLA, steps=(_deepseek_experts("listed"), _sparse_attention_indexer)),
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
        steps=(MoeRule(experts=Opt("num_experts"), top_k=Req("num_experts_per_tok"), top_k_first=False,
                       layers="all", width=Req("moe_intermediate_size"),
                       shared_count=Opt("num_shared_experts", default=0),
                       shared_width=Same("moe_ffn_embed_dim")),
               DenseFirst("num_dense_layers"))),
    # Beam (BeamAttention): Qwen3-style attention with a sigmoid gate Linear(hidden,
    # heads*head_dim) plus one gate bias per head, four norms per layer; experts per
    # mlp_layer_types, no shared expert, the correction bias a buffer
    "beam": Family(
        {**QWEN3, "qkv_bias": ATTENTION_BIAS, "attn_out_bias": ATTENTION_BIAS,
         "num_norms_per_layer": 4, "attn_output_gate": "per_element", "attn_output_gate_head_bias": True},
        steps=(MoeRule(experts=Opt("num_experts"), top_k=Req("num_experts_per_tok"), top_k_first=False,
                       layers="listed", width=Req("moe_intermediate_size")),)),
    # MiniMax-M3 text (MiniMaxM3VLTextModel): bias-free GQA with q/k RMSNorm(head_dim),
    # experts of intermediate_size plus one shared MLP of shared_intermediate_size, dense
    # layers of dense_intermediate_size per mlp_layer_types; the clamped SwiGLU is
    # element-wise. Its block-sparse indexer layers ("minimax_m3_sparse" in layer_types)
    # are not described: the Window reader refuses that layer kind.
    "minimax_m3_vl_text": Family(
        {**QWEN3, "qkv_bias": False, "attn_out_bias": False,
         "ffn_embed_dim": Req("dense_intermediate_size")},
        steps=(MoeRule(experts=Opt("num_local_experts"), top_k=Req("num_experts_per_tok"), top_k_first=False,
                       layers="listed", width=Req("intermediate_size"),
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
        steps=(_laguna_gate, MoeRule(
            experts=Opt("num_experts"), top_k=Req("num_experts_per_tok"), top_k_first=False,
            layers="listed", width=Req("moe_intermediate_size"),
            shared_width=Opt("shared_expert_intermediate_size")))),
    # MiMo-V2-Flash (MiMoV2FlashAttention, transformers 5.23): GQA with queries/keys of
    # head_dim and values of v_head_dim, o_proj bias-free; per layer_types, sliding layers
    # double the KV heads and hold sinks (_mimo_layer_attention); values scaled by
    # attention_value_scale (element-wise); DeepSeek-V3 experts without shared experts per
    # mlp_layer_types, the correction bias a buffer; dense layers of intermediate_size
    "mimo_v2_flash": Family(
        {**LLAMA, "attn_out_bias": False, "v_head_dim": Opt("v_head_dim")},
        steps=(_mimo_layer_attention,
               MoeRule(experts=Opt("n_routed_experts"), top_k=Req("num_experts_per_tok"), top_k_first=False,
                       layers="listed", width=Req("moe_intermediate_size")))),
}

#: Types refused with the reason (each named feature is absent from ModelConfig): rows so
#: the refusal names the feature rather than listing config keys; not "supported" types
NOT_MODELLED_FAMILIES: Dict[str, Family] = {
    "llama4_text": Family({}, checks=(NotModelled(
        "Llama 4 as transformers implements it runs every token through every routed expert "
        "(Llama4TextMoe scales the inputs by the router scores; its FLOPs are not top-k's), and "
        "its chunked attention (attention_chunk_size) and interleaved MoE/dense widths "
        "(intermediate_size_mlp) are not modelled"),)),
    "deepseek_v4": Family({}, checks=(NotModelled(
        "DeepSeek-V4's hyper-connections (hc_mult streams mixed per sublayer), compressed "
        "attention (compress_rates, the compressor projections) and output low-rank projections "
        "(o_a_proj/o_b_proj) are not modelled"),)),
    "hy_v4": Family({}, checks=(NotModelled(
        "HY-V4's hyper-connections (hc_mult streams mixed per sublayer) and its indexer on only "
        "some layers are not modelled"),)),
    "dots3_note_text": Family({}, checks=(NotModelled(
        "dots3's per-layer attention shapes (per_layer_config: heads, kv_lora_rank per layer kind) "
        "and its indexer on only the indexed_attention layers are not modelled"),)),
    "axk2": Family({}, checks=(NotModelled(
        "A.X-K2's gated RMSNorms (a low-rank gate MLP of gated_norm_rank inside the norms) and its "
        "fused query/gate projection from the concatenated q latent are not modelled"),)),
    "inkling_text": Family({}, checks=(NotModelled(
        "Inkling's short convolutions around attention and MLP (attn_sconv, mlp_sconv), relative "
        "position logits (d_rel) and local layers are not modelled"),)),
    "inkling2_text": Family({}, checks=(NotModelled(
        "Inkling-2's key/value convolutions, relative position logits (d_rel), sink projections "
        "and post-sublayer convolutions are not modelled"),)),
}
