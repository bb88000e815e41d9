"""Rows of the Hub family table for mixture-of-experts decoders whose layers are
Llama-, Qwen3- or Cohere-shaped and whose experts differ in naming, layer pattern
(dense-first layers, `mlp_layer_types` lists, interval ranges) or shared experts
(`hub_families.py` merges them into FAMILIES). Each row follows the transformers
modelling code it names. Routers whose `e_score_correction_bias` is a buffer hold
no parameter; ERNIE 4.5's is a parameter of one value per expert, counted as the
router's bias (it adds to the scores; no matmul).
"""

from __future__ import annotations

from typing import Dict

from llm_analysis.hub.families.bases import ATTENTION_BIAS, LLAMA, NO_BIASES, QWEN3
from llm_analysis.hub.errors import UnmappableConfig
from llm_analysis.hub.families.unsorted import ERNIE4_5, COHERE
from llm_analysis.hub.source import Fields, Src
from llm_analysis.hub.spec import Either, Family, Flag, MoeRule, Opt, Quotient, Req, Same, When

__all__ = ["MOE_FAMILIES"]

_MLP_BIAS = Flag("mlp_bias", default=False)
# DeepSeek-style routed + shared experts, all moe_intermediate_size wide; the shared
# ones are one MLP of n_shared * moe_intermediate_size (the same shapes)
_DEEPSEEK_STYLE = dict(top_k=Req("num_experts_per_tok"), top_k_first=False,
                       width=Req("moe_intermediate_size"), shared_width=Same("moe_ffn_embed_dim"))


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


MOE_FAMILIES: Dict[str, Family] = {
    # GLM-4-MoE (Glm4MoeAttention): q/k/v biased by attention_bias, o_proj never;
    # optional q/k RMSNorm(head_dim); experts from first_k_dense_replace on
    "glm4_moe": Family(
        {**LLAMA, "qkv_bias": ATTENTION_BIAS, "attn_out_bias": False,
         "qk_norm": Flag("use_qk_norm", default=False),
         # Glm4MoeAttention: getattr(config, "head_dim", hidden_size // num_attention_heads)
         "head_dim": Either(Opt("head_dim"), Quotient("hidden_dim", "n_head"))},
        steps=(MoeRule(experts=Opt("n_routed_experts"), layers="dense_first",
                       shared_count=Opt("n_shared_experts", default=0), **_DEEPSEEK_STYLE),)),
    # Solar Open: GLM-4-MoE's attention without q/k norms, experts on every layer
    "solar_open": Family(
        {**LLAMA, "ffn_embed_dim": Req("moe_intermediate_size"), "qkv_bias": ATTENTION_BIAS,
         "attn_out_bias": False},
        steps=(MoeRule(experts=Opt("n_routed_experts"), layers="all",
                       shared_count=Opt("n_shared_experts", default=0), **_DEEPSEEK_STYLE),)),
    # EXAONE-MoE: EXAONE 4 attention (q/k RMSNorm(head_dim), no biases), mlp_layer_types
    "exaone_moe": Family(QWEN3, steps=(MoeRule(
        experts=Opt("num_experts"), layers="listed",
        shared_count=Opt("num_shared_experts", default=0), **_DEEPSEEK_STYLE),)),
    # HY-V3: q/k RMSNorm(head_dim), biases from attention_bias / mlp_bias, mlp_layer_types
    "hy_v3": Family({**QWEN3, "attn_out_bias": ATTENTION_BIAS, "mlp_bias": _MLP_BIAS},
                    steps=(MoeRule(experts=Opt("num_experts", "num_local_experts"), layers="listed",
                                   shared_count=Opt("num_shared_experts", default=0),
                                   **_DEEPSEEK_STYLE), _hy_v3_zero_shared)),
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
        {**LLAMA, "mlp_bias": _MLP_BIAS},
        steps=(MoeRule(experts=Req("moe_num_experts"), top_k=Req("moe_topk"), layers="all",
                       width=Same("ffn_embed_dim"),
                       shared_count=Opt("moe_num_shared_experts", default=0),
                       shared_width=Same("ffn_embed_dim")), _shared_experts_one_mlp)),
    # Flint: Qwen3-style attention with one learned sink per head, Qwen-MoE layer
    # pattern (decoder_sparse_step, mlp_only_layers), an ungated shared expert
    "flint": Family(
        {**QWEN3, "attn_out_bias": ATTENTION_BIAS, "attn_sinks": True},
        steps=(MoeRule(experts=Opt("num_experts"), top_k=Req("num_experts_per_tok"),
                       top_k_first=False, layers="sparse_step", width=Req("moe_intermediate_size"),
                       shared_width=Opt("shared_expert_intermediate_size")),)),
    # Kolibri-1: bias-free attention with q/k RMSNorm(head_dim), four norms per layer,
    # experts on every layer and one shared expert of shared_expert_intermediate_size
    "kolibri1": Family(
        {**QWEN3, **NO_BIASES, "ffn_embed_dim": Req("moe_intermediate_size"),
         "num_norms_per_layer": 4},
        steps=(MoeRule(experts=Opt("num_local_experts", "num_experts"),
                       top_k=Req("num_experts_per_tok"), top_k_first=False, layers="all",
                       width=Req("moe_intermediate_size"),
                       shared_width=Opt("shared_expert_intermediate_size")),)),
    # Mellum: Qwen3-style attention (biases from attention_bias), experts per
    # mlp_layer_types, no shared expert; its MTP weights are not built by transformers
    "mellum": Family({**QWEN3, "attn_out_bias": ATTENTION_BIAS}, steps=(MoeRule(
        experts=Opt("num_local_experts", "num_experts"), top_k=Req("num_experts_per_tok"),
        top_k_first=False, layers="listed", width=Req("moe_intermediate_size")),)),
    # Cohere2-MoE: Cohere's parallel block on one bias-free LayerNorm (RMSNorm when
    # rms_norm_eps is set: the same weights), experts of intermediate_size per
    # mlp_layer_types, shared experts one MLP of num_shared * intermediate_size
    "cohere2_moe": Family(
        {**COHERE, "qk_norm": False,
         "norm_type": When(Flag("rms_norm_eps", default=None), "rmsnorm", "layernorm")},
        checks=(),
        steps=(_cohere2_moe_dense_width, MoeRule(
            experts=Opt("num_experts"), top_k=Req("num_experts_per_tok"), top_k_first=False,
            layers="listed", width=Same("ffn_embed_dim"),
            shared_count=Opt("num_shared_experts", default=0), shared_width=Same("ffn_embed_dim"))),
    ),
}
