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

from .hub_bases import ATTENTION_BIAS, DEEPSEEK_MLA, QWEN3
from .hub_errors import UnmappableConfig
from .hub_source import Fields, Src
from .hub_spec import Family, Flag, MoeRule, Opt, Refuse, Req, Same, Window

__all__ = ["MOE2_FAMILIES"]


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
            raise UnmappableConfig(f"{what}: {self.key}={list(values)!r} (per-layer head counts) differ "
                                   f"from {self.scalar}={one!r}; ModelConfig has one head count")


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
}
