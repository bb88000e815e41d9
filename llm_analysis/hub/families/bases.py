"""Shared pieces of the Hub family table (the rows by kind in `hub/families/dense.py`,
`moe.py`, `hybrid.py`, `encoders.py`, `seq2seq.py`): the common row shapes (GPT-2, Llama,
Gemma, BERT, ...), the shapes that rows of two kinds share (a dense family and its MoE
variant: OLMo-2, Cohere, ERNIE 4.5; ModernBERT's encoder and decoder) and fixed flag
groups, each following the transformers modelling code it names."""

from __future__ import annotations

from functools import partial

from llm_analysis.hub.spec import Act, Either, Flag, Opt, Refuse, Req, Same, Sum, Window

__all__ = ["GELU_TANH", "MLP_BIAS", "BIASES", "NO_BIASES", "LAYERNORM", "ATTENTION_BIAS", "GPT2", "LLAMA",
           "LLAMA_NO_BIAS_NO_TYPES", "QWEN3", "GEMMA", "GEMMA2", "BERT", "QWEN_MOE_EXPERTS",
           "FULL_WIDTH_EXPERTS", "DEEPSEEK_MLA", "OLMO2", "COHERE", "ERNIE4_5", "MODERNBERT",
           "RefuseFeature"]

# a check like `Refuse` whose refusal names a feature of a well-formed config
# (UnsupportedArchitecture, with the [exact] hint) rather than a config the row cannot read
RefuseFeature = partial(Refuse, unsupported=True)

GELU_TANH = "gelu_pytorch_tanh"
BIASES = dict(qkv_bias=True, attn_out_bias=True, mlp_bias=True)
NO_BIASES = dict(qkv_bias=False, attn_out_bias=False, mlp_bias=False)
LAYERNORM = dict(norm_type="layernorm", norm_bias=True)
ATTENTION_BIAS = Flag("attention_bias", default=False)
MLP_BIAS = Flag("mlp_bias", default=False)

# GPT-2 (GPT2Block): pre-LN, learned positions, 4x GELU MLP, biases everywhere, tied
GPT2 = {
    "hidden_dim": Req("n_embd", "hidden_size"),
    "max_seq_len": Req("n_positions", "max_position_embeddings"),
    "num_layers": Req("n_layer", "num_hidden_layers"),
    "n_head": Req("n_head", "num_attention_heads"),
    "vocab_size": Req("vocab_size"),
    "ffn_embed_dim": Either(Opt("n_inner"), Same("hidden_dim", times=4)),
    "activation": Act("activation_function", default="gelu_new"),
    **BIASES, **LAYERNORM,
    "position_embedding_type": "learned",
    "num_position_embeddings": Same("max_seq_len"),
    "tie_word_embeddings": Flag("tie_word_embeddings", default=True),
}

# Llama and descendants (LlamaDecoderLayer): pre-norm RMSNorm without bias, gated MLP,
# rotary positions, per-layer attention kinds from layer_types, untied by default
LLAMA = {
    "num_layers": Req("num_hidden_layers"),
    "n_head": Req("num_attention_heads"),
    "hidden_dim": Req("hidden_size"),
    ("sliding_window", "layer_types"): Window(),
    "num_key_value_heads": Opt("num_key_value_heads"),
    "vocab_size": Req("vocab_size"),
    "max_seq_len": Opt("max_position_embeddings"),
    "ffn_embed_dim": Req("intermediate_size"),
    "mlp_gated_linear_units": True,
    "activation": Act("hidden_act", default="silu"),
    "head_dim": Opt("head_dim"),
    "qkv_bias": ATTENTION_BIAS, "attn_out_bias": ATTENTION_BIAS,
    "mlp_bias": False, "qk_norm": False,
    "norm_type": "rmsnorm", "norm_bias": False, "num_norms_per_layer": 2,
    "position_embedding_type": "rotary",
    "tie_word_embeddings": Flag("tie_word_embeddings", default=False),
}
LLAMA_NO_BIAS_NO_TYPES = {**LLAMA, **NO_BIASES, ("sliding_window", "layer_types"): Window(None)}
QWEN3 = {**LLAMA, "qk_norm": True}
# Gemma: GELU-tanh gated MLP under hidden_activation, tied; Gemma 2/3 add a post-norm
# after attention and after the MLP (4 norms per layer)
GEMMA = {**LLAMA, "activation": Act("hidden_activation", "hidden_act", default=GELU_TANH),
          "tie_word_embeddings": Flag("tie_word_embeddings", default=True)}
GEMMA2 = {**GEMMA, "num_norms_per_layer": 4}

BERT = {
    "num_layers": Req("num_hidden_layers"), "n_head": Req("num_attention_heads"),
    "hidden_dim": Req("hidden_size"), "vocab_size": Req("vocab_size"),
    "max_seq_len": Req("max_position_embeddings"), "ffn_embed_dim": Req("intermediate_size"),
    "activation": Act("hidden_act", default="gelu"),
    **BIASES, **LAYERNORM, "embedding_norm": True,
    "position_embedding_type": "learned", "num_position_embeddings": Same("max_seq_len"),
    "type_vocab_size": Opt("type_vocab_size", default=2),
    "encoder_only": True, "pooler": True, "lm_head": False, "final_norm": False,
    "tie_word_embeddings": Flag("tie_word_embeddings", default=True),
}

QWEN_MOE_EXPERTS = dict(top_k=Opt("num_experts_per_tok"), layers="sparse_step",
                         width=Req("moe_intermediate_size"))
FULL_WIDTH_EXPERTS = dict(experts=Req("num_local_experts", "num_experts"), layers="all")

# DeepSeek-V3 attention and dense MLP (DeepseekV3Attention, DeepseekV3MLP): multi-head
# latent attention (arXiv 2405.04434), RMSNorm, gated SiLU MLP, untied; the MoE rule is per row
DEEPSEEK_MLA = {
    "num_layers": Req("num_hidden_layers"), "n_head": Req("num_attention_heads"),
    "hidden_dim": Req("hidden_size"),
    "num_key_value_heads": Same("n_head"),  # MLA: every head has its own (decompressed) K and V
    "vocab_size": Req("vocab_size"), "max_seq_len": Opt("max_position_embeddings"),
    "ffn_embed_dim": Req("intermediate_size"), "mlp_gated_linear_units": True,
    "activation": Act("hidden_act", default="silu"),
    "qkv_bias": ATTENTION_BIAS, "attn_out_bias": ATTENTION_BIAS,
    "mlp_bias": False,  # DeepseekV3MLP: bias-free (DeepSeek-V2's and MiniCPM3's read mlp_bias)
    "norm_type": "rmsnorm", "norm_bias": False, "position_embedding_type": "rotary",
    "q_lora_rank": Opt("q_lora_rank"), "kv_lora_rank": Req("kv_lora_rank"),
    "qk_nope_head_dim": Req("qk_nope_head_dim"), "qk_rope_head_dim": Req("qk_rope_head_dim"),
    "v_head_dim": Req("v_head_dim"),
    "tie_word_embeddings": Flag("tie_word_embeddings", default=False),
    "head_dim": Sum("qk_nope_head_dim", "qk_rope_head_dim"),
}

# OLMo-2 (Olmo2DecoderLayer): norms after attention and after the MLP (still two),
# q_norm/k_norm over all heads (RMSNorm(heads x head_dim)); FlexOlmo's experts sit on it
OLMO2 = {**LLAMA, "qk_norm": True, "qk_norm_per_head": True}
# Cohere (CohereDecoderLayer): one bias-free LayerNorm feeding attention and MLP in
# parallel, gated SiLU MLP, tied; optional per-head q/k LayerNorms (use_qk_norm)
COHERE = {**LLAMA, "norm_type": "layernorm", "norm_bias": False, "parallel_attn_mlp": True,
          "num_norms_per_layer": 1, "qk_norm": Flag("use_qk_norm", default=False),
          "qk_norm_per_head": True, "tie_word_embeddings": Flag("tie_word_embeddings", default=True)}
# ERNIE 4.5: every linear biased or not by use_bias, tied by default
_USE_BIAS = Flag("use_bias", default=False)
ERNIE4_5 = {**LLAMA, "qkv_bias": _USE_BIAS, "attn_out_bias": _USE_BIAS, "mlp_bias": _USE_BIAS,
            "tie_word_embeddings": Flag("tie_word_embeddings", default=True)}

# ModernBertModel (arXiv 2412.13663): pre-LN, embedding norm, bias-free fused q/k/v and
# GeGLU MLP by default, rotary, alternating global / local layers (local_attention is
# the whole window), a final norm; layer 0 has no norm before attention
MODERNBERT = {
    "num_layers": Req("num_hidden_layers"), "n_head": Req("num_attention_heads"),
    "hidden_dim": Req("hidden_size"), "vocab_size": Req("vocab_size"),
    ("sliding_window", "layer_types"): Window(window_key="local_attention"),
    "max_seq_len": Opt("max_position_embeddings"), "ffn_embed_dim": Req("intermediate_size"),
    "mlp_gated_linear_units": True, "activation": Act("hidden_activation", default="gelu"),
    "qkv_bias": Flag("attention_bias", default=False), "attn_out_bias": Flag("attention_bias", default=False),
    "mlp_bias": MLP_BIAS, "norm_type": "layernorm",
    "norm_bias": Flag("norm_bias", default=False), "embedding_norm": True,
    "position_embedding_type": "rotary", "first_layer_attn_norm": False,
    "encoder_only": True, "lm_head": False,
}
