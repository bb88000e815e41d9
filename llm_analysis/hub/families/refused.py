"""Rows of the Hub family table that refuse every config of their `model_type`, naming what it
holds beyond ModelConfig (transformers 5.23 modelling code), rather than listing the config keys the
generic mapping does not know. Left out of SUPPORTED_MODEL_TYPES.
"""

from __future__ import annotations

from typing import Dict

from llm_analysis.hub.spec import Family, NotModelled

__all__ = ["REFUSED_FAMILIES"]


# model_type -> what it has beyond ModelConfig ("it has ..., which ModelConfig does not describe")
_HAS = {
    # dense decoders with parts ModelConfig has no field for
    "hrm_text": "two layer stacks run for H_cycles x L_cycles recurrent iterations per forward "
                "(parameters shared across the iterations)",
    "cpmant": "prompt tokens prepended to every input, segment embeddings and a bucketed relative position bias",
    "git": "a CLIP vision encoder and visual projection inside the causal-LM class, with BERT-style post-LN "
           "text layers",
    "neomme": "factorized embeddings with patch embeddings, gated output projections, exclusive self-attention "
              "and per-layer residual lambdas",
    "blt": "byte-level local encoder/decoder stacks with cross-attention to patches, hash n-gram embeddings "
           "and an entropy patcher model",
    # FuyuForCausalLM takes the wrapper config: a linear projection of image patches
    # (vision_embed_tokens, patch_size^2 x num_channels -> hidden) beside its Persimmon decoder
    "fuyu": "a linear patch embedding of image patches (vision_embed_tokens) inside the causal-LM class "
            "(vision tower not modelled)",
    "phi4_multimodal": "vision and audio encoders inside the causal-LM class (embed_tokens_extend)",
    "mllama_text_model": "cross-attention layers (cross_attention_layers) that replace self-attention in some "
                         "layers, with tanh gates, and skip their whole block (MLP included) without vision "
                         "states (ModelConfig.cross_attention adds a cross-attention block to every layer)",
    # HunYuanDenseV1Attention / HunYuanMoEV1Attention: RMSNorm(head_dim) on each head's query and key
    # applied after the rotary embedding (ModelConfig's qk_norm normalises before it, as Qwen3)
    "hunyuan_v1_dense": "RMSNorms on each head's query and key applied after the rotary embedding "
                        "(query_layernorm / key_layernorm)",
    # mixture-of-experts decoders
    "hunyuan_v1_moe": "RMSNorms on each head's query and key applied after the rotary embedding (query_layernorm "
                      "/ key_layernorm), beside its experts (moe_topk of num_experts, a shared MLP on every layer)",
}
# model_type -> the whole refusal, for decoders whose named feature is absent from ModelConfig
_NOT_MODELLED = {
    "deepseek_v4": "DeepSeek-V4's hyper-connections (hc_mult streams mixed per sublayer), compressed attention "
                   "(compress_rates, the compressor projections) and output low-rank projections "
                   "(o_a_proj/o_b_proj) are not modelled",
    "hy_v4": "HY-V4's hyper-connections (hc_mult streams mixed per sublayer) and its indexer on only some "
             "layers are not modelled",
    "dots3_note_text": "dots3's per-layer attention shapes (per_layer_config: heads, kv_lora_rank per layer "
                       "kind) and its indexer on only the indexed_attention layers are not modelled",
    "axk2": "A.X-K2's gated RMSNorms (a low-rank gate MLP of gated_norm_rank inside the norms) and its fused "
            "query/gate projection from the concatenated q latent are not modelled",
    "inkling_text": "Inkling's short convolutions around attention and MLP (attn_sconv, mlp_sconv), relative "
                    "position logits (d_rel) and local layers are not modelled",
    "inkling2_text": "Inkling-2's key/value convolutions, relative position logits (d_rel), sink projections "
                     "and post-sublayer convolutions are not modelled",
}

REFUSED_FAMILIES: Dict[str, Family] = {
    **{t: Family({}, checks=(NotModelled(f"it has {features}, which ModelConfig does not describe"),))
       for t, features in _HAS.items()},
    **{t: Family({}, checks=(NotModelled(reason),)) for t, reason in _NOT_MODELLED.items()},
}
