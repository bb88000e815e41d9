"""More rows of the Hub family table (`hub_families.py` merges them into FAMILIES):
decoder families whose modelling code differs from the common shapes in norms,
biases, block layout or experts. Each row follows the transformers modelling code
it names (which projections are `nn.Linear(..., bias=...)`, which norms a block
holds, whether the MLP is gated).
"""

from __future__ import annotations

from typing import Dict

from llm_analysis.hub.families.bases import (ATTENTION_BIAS, BERT, BIASES, FULL_WIDTH_EXPERTS, GELU_TANH, GEMMA, GPT2,
                        LAYERNORM, LLAMA, LLAMA_NO_BIAS_NO_TYPES, NO_BIASES, QWEN3)
from llm_analysis.hub.hooks import mpt_attention
from llm_analysis.hub.spec import Act, Family, Flag, MoeRule, Opt, Refuse, Req, Same, When, Window
from llm_analysis.hub.source import Fields, Src

__all__ = ["MORE_FAMILIES", "COHERE", "ERNIE4_5"]

_USE_BIAS = Flag("use_bias", default=False)
# OLMo-2 (Olmo2DecoderLayer): norms after attention and after the MLP (still two),
# q_norm/k_norm over all heads (RMSNorm(heads x head_dim))
_OLMO2 = {**LLAMA, "qk_norm": True, "qk_norm_per_head": True}
# Cohere (CohereDecoderLayer): one bias-free LayerNorm feeding attention and MLP in
# parallel, gated SiLU MLP, tied; optional per-head q/k LayerNorms (use_qk_norm)
COHERE = {**LLAMA, "norm_type": "layernorm", "norm_bias": False, "parallel_attn_mlp": True,
           "num_norms_per_layer": 1, "qk_norm": Flag("use_qk_norm", default=False),
           "qk_norm_per_head": True, "tie_word_embeddings": Flag("tie_word_embeddings", default=True)}
# ERNIE 4.5: every linear biased or not by use_bias, tied by default
ERNIE4_5 = {**LLAMA, "qkv_bias": _USE_BIAS, "attn_out_bias": _USE_BIAS, "mlp_bias": _USE_BIAS,
            "tie_word_embeddings": Flag("tie_word_embeddings", default=True)}
_GRANITE_EXPERTS = MoeRule(**FULL_WIDTH_EXPERTS, top_k=Req("num_experts_per_tok"),
                           width=Same("ffn_embed_dim"), shared_width=Opt("shared_intermediate_size"))
# StarCoder2 / Jais2 style: LayerNorm with bias, non-gated MLP, biases from one flag
_LN_PLAIN_MLP = {**LLAMA, **LAYERNORM, "mlp_gated_linear_units": False}

_ABSOLUTE_POSITIONS = Refuse("position_embedding_type", ("absolute", None), default="absolute",
                              reason="relative position embeddings")
# pre-LN BERTs (MegatronBertLayer, XLMRobertaXLLayer): a norm before attention and
# before the MLP, a final encoder norm, none after the embeddings
_PRE_LN_BERT = {**BERT, "embedding_norm": False, "final_norm": True}

def _phimoe_two_experts(src: Src, f: Fields, what: str) -> None:
    """PhimoeTopKRouter's sparsemixer picks exactly two experts per token (the best, then
    the best of the rest), whatever num_experts_per_tok says."""
    if f.get("moe_num_experts"):
        f["moe_top_k"] = 2


MORE_FAMILIES: Dict[str, Family] = {
    "megatron-bert": Family(_PRE_LN_BERT, checks=(_ABSOLUTE_POSITIONS,)),
    "xlm-roberta-xl": Family(_PRE_LN_BERT, checks=(_ABSOLUTE_POSITIONS,)),
    # RoBERTa-PreLayerNorm: pre-LN layers, the embedding LayerNorm and a final LayerNorm
    "roberta-prelayernorm": Family({**BERT, "final_norm": True}, checks=(_ABSOLUTE_POSITIONS,)),
    # ERNIE (1.0/2.0/3.0): BERT, plus task-type embeddings when use_task_id
    "ernie": Family(BERT, checks=(_ABSOLUTE_POSITIONS, Refuse(
        "use_task_id", (False,), default=False, as_bool=True, reason="task-type embeddings"))),
    # ELECTRA (ElectraEmbeddings): word, position and token-type embeddings and their
    # LayerNorm at embedding_size, then embeddings_project (with bias) to hidden; no pooler
    "electra": Family({**BERT, "embedding_dim": Opt("embedding_size"), "pooler": False,
                       "factorized_embeddings": True, "embedding_proj_bias": True},
                      checks=(_ABSOLUTE_POSITIONS,)),
    # DistilBERT (TransformerBlock): post-LN BERT layers without token types or pooler
    "distilbert": Family(
        {**BERT, "num_layers": Req("n_layers"), "n_head": Req("n_heads"), "hidden_dim": Req("dim"),
         "ffn_embed_dim": Req("hidden_dim"), "activation": Act("activation", default="gelu"),
         "type_vocab_size": 0, "pooler": False}),
    # OLMo (OlmoLayerNorm): LayerNorms without any weight; optional q/k/v clipping is elementwise
    "olmo": Family({**LLAMA, "norm_type": "layernorm", "norm_bias": False, "norm_affine": False}),
    "olmo2": Family(_OLMO2),
    "olmo3": Family(_OLMO2),
    # OLMoE: OLMo-2-style q/k norms, full-router experts of intermediate_size on every layer
    "olmoe": Family({**LLAMA, "qk_norm": True, "qk_norm_per_head": True}, steps=(MoeRule(
        experts=Req("num_experts"), top_k=Req("num_experts_per_tok"), width=Same("ffn_embed_dim")),)),
    "flex_olmo": Family(_OLMO2, steps=(MoeRule(
        experts=Req("num_experts"), top_k=Req("num_experts_per_tok"), width=Same("ffn_embed_dim")),)),
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
    "glm": Family({**LLAMA, "qkv_bias": ATTENTION_BIAS, "attn_out_bias": False}),
    # GLM-4 adds post_self_attn_layernorm and post_mlp_layernorm (4 norms)
    "glm4": Family({**LLAMA, "qkv_bias": ATTENTION_BIAS, "attn_out_bias": False,
                    "num_norms_per_layer": 4}),
    # Phi (PhiDecoderLayer): one LayerNorm, attention and GELU MLP in parallel, biases
    # everywhere incl. lm_head; qk_layernorm: one LayerNorm(head_dim) with bias for q and k
    "phi": Family({**LLAMA, **BIASES, **LAYERNORM, "mlp_gated_linear_units": False,
                   "activation": Act("hidden_act", default="gelu_new"),
                   "parallel_attn_mlp": True, "num_norms_per_layer": 1,
                   "qk_norm": Flag("qk_layernorm", default=False), "qk_norm_bias": True,
                   "lm_head_bias": True, ("sliding_window", "layer_types"): Window(None)}),
    # PhiMoE: Mixtral with LayerNorms (bias), q/k/v/o biases from attention_bias, lm_head bias
    "phimoe": Family(
        {**LLAMA_NO_BIAS_NO_TYPES, **LAYERNORM, "qkv_bias": ATTENTION_BIAS,
         "attn_out_bias": ATTENTION_BIAS, "lm_head_bias": Flag("lm_head_bias", default=True)},
        steps=(MoeRule(**FULL_WIDTH_EXPERTS, top_k=Req("num_experts_per_tok"),
                       width=Same("ffn_embed_dim")), _phimoe_two_experts)),
    # Granite: Llama with scalar multipliers (no parameters); GraniteMoe(Shared): full-width
    # experts (ParallelExperts), an optional shared MLP of shared_intermediate_size
    "granite": Family({**LLAMA, "mlp_bias": Flag("mlp_bias", default=False)}),
    "granitemoe": Family(LLAMA, steps=(_GRANITE_EXPERTS,)),
    "granitemoeshared": Family(LLAMA, steps=(_GRANITE_EXPERTS,)),
    # Granite-SWA: one learned attention sink per head
    "granite_swa": Family({**LLAMA, "mlp_bias": Flag("mlp_bias", default=False),
                           "attn_sinks": True}),
    "granitemoe_swa": Family({**LLAMA, "attn_sinks": True}, steps=(_GRANITE_EXPERTS,)),
    # EXAONE 4: q/k RMSNorm(head_dim), norms after attention and MLP (two)
    "exaone4": Family(QWEN3),
    # Seed-OSS: q/k/v biases from attention_bias, o_proj's from attention_out_bias
    # SeedOssMLP: gate/up/down_proj biased when mlp_bias is set
    "seed_oss": Family({**LLAMA, "attn_out_bias": Flag("attention_out_bias", default=False),
                        "mlp_bias": Flag("mlp_bias", default=False)}),
    "ernie4_5": Family(ERNIE4_5),
    # Arcee: Llama with a non-gated ReLU^2 MLP
    "arcee": Family({**LLAMA, "mlp_gated_linear_units": False,
                     "mlp_bias": Flag("mlp_bias", default=False)}),
    "jais2": Family({**_LN_PLAIN_MLP, "mlp_bias": Flag("mlp_bias", default=True)}),
    # SmolLM3: Llama; the NoPE layers (no_rope_layers) only skip the (parameter-free) rotation
    "smollm3": Family({**LLAMA, "mlp_bias": Flag("mlp_bias", default=False)}),
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
    # CodeGen (CodeGenBlock): GPT-J layout (parallel, one LayerNorm), bias-free attention,
    # biased MLP and lm_head, rotary, untied
    "codegen": Family({**GPT2, "max_seq_len": Opt("n_positions", "max_position_embeddings"),
                       "qkv_bias": False, "attn_out_bias": False,
                       "position_embedding_type": "rotary", "num_position_embeddings": None,
                       "parallel_attn_mlp": True, "num_norms_per_layer": 1,
                       "tie_word_embeddings": Flag("tie_word_embeddings", default=False),
                       "lm_head_bias": True}),
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
    "hyperclovax": Family({**LLAMA, "mlp_bias": Flag("mlp_bias", default=False),
                           "num_norms_per_layer": When(Flag("use_post_norm", default=True), 4, 2)}),
    # MiniMax-M2: q/k RMSNorm over all heads, full-router experts on every layer
    "minimax_m2": Family({**LLAMA, "qk_norm": True, "qk_norm_per_head": True}, steps=(MoeRule(
        **FULL_WIDTH_EXPERTS, top_k=Req("num_experts_per_tok"), width=Same("ffn_embed_dim")),)),
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
}
