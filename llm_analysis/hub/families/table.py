"""The Hub family table: one row per Hugging Face `model_type` we map exactly.

Each row says which config keys feed which ModelConfig field, the family's fixed
flags (gated MLP, norm kind and bias, projection biases, tied embeddings, positions,
block layout), its per-layer attention pattern and its MoE rule; the vocabulary is
documented in `hub_spec.py`, the few odd details are the named hooks of
`hub_hooks.py`. The flags follow the modelling code of `transformers` (which
projections are `nn.Linear(..., bias=...)`, how many norms a block holds, whether
the MLP is gated). A family of the common shape is one row, e.g. a Llama-style model
with biased q/k/v: `"newfam": Family({**LLAMA, "qkv_bias": True})`.
"""

from __future__ import annotations

from typing import Dict

from llm_analysis.hub.hooks import (GptNeoWindow, RawWindowPattern, falcon_decoder_architecture,
                        opt_projection_and_final_norm, qwen_window)
from llm_analysis.hub.families.bases import (BERT, BIASES, FULL_WIDTH_EXPERTS, GELU_TANH, GEMMA,
                        DEEPSEEK_MLA, GEMMA2, GPT2, LAYERNORM, LLAMA, LLAMA_NO_BIAS_NO_TYPES, QWEN3,
                        QWEN_MOE_EXPERTS)
from llm_analysis.hub.families.dense import DENSE2_FAMILIES, REFUSED_FAMILIES
from llm_analysis.hub.families.encoders import ENCODER_FAMILIES
from llm_analysis.hub.families.encoders_rest import ENCODER_FAMILIES_2
from llm_analysis.hub.families.entities import ENTITY_FAMILIES
from llm_analysis.hub.families.hybrid import HYBRID_FAMILIES
from llm_analysis.hub.families.unsorted import MORE_FAMILIES
from llm_analysis.hub.families.moe import MOE_FAMILIES
from llm_analysis.hub.families.seq2seq import SEQ2SEQ_FAMILIES
from llm_analysis.hub.families.moe_variants import MOE2_FAMILIES, NOT_MODELLED_FAMILIES
from llm_analysis.hub.spec import (Act, Either, Family, Flag, MoeRule, Opt, Refuse, Req, Same, When,
                       Window)

__all__ = ["FAMILIES", "SUPPORTED_MODEL_TYPES", "GPT2", "LLAMA"]

FAMILIES: Dict[str, Family] = {
    "gpt2": Family(GPT2),
    # GPTBigCode: GPT-2 with multi-query attention (one KV head) unless multi_query=False
    "gpt_bigcode": Family({**GPT2, "activation": Act("activation_function", default=GELU_TANH),
                           "num_key_value_heads": When(Flag("multi_query", default=True), 1)}),
    # GPT-J: parallel attention + MLP on one LayerNorm, rotary, bias-free attention,
    # biased MLP and lm_head, untied
    "gptj": Family({**GPT2, "max_seq_len": Opt("n_positions", "max_position_embeddings"),
                    "qkv_bias": False, "attn_out_bias": False, "position_embedding_type": "rotary",
                    "num_position_embeddings": None, "parallel_attn_mlp": True,
                    "num_norms_per_layer": 1,
                    "tie_word_embeddings": Flag("tie_word_embeddings", default=False),
                    "lm_head_bias": True}),
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
    # BERT-style encoders: token types, embedding LayerNorm, pooler, no lm_head
    **{t: Family(BERT, checks=(Refuse("position_embedding_type", ("absolute", None),
                                       default="absolute",
                                       reason="relative position embeddings"),))
       for t in ("bert", "roberta", "xlm-roberta", "camembert", "data2vec-text", "ibert")},
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
    "llama": Family({**LLAMA, "mlp_bias": Flag("mlp_bias", default=False)}),
    # MistralAttention/MistralMLP have no biases; HF Mistral (and Phi-3) ignore layer_types
    "mistral": Family(LLAMA_NO_BIAS_NO_TYPES),
    "phi3": Family(LLAMA_NO_BIAS_NO_TYPES),
    "qwen2": Family({**LLAMA, "qkv_bias": True, "attn_out_bias": False}, steps=(qwen_window,)),
    "qwen3": Family(QWEN3, steps=(qwen_window,)),
    # Qwen2-MoE: one shared expert behind a sigmoid gate
    "qwen2_moe": Family(
        {**LLAMA, "qkv_bias": Flag("qkv_bias", default=True), "attn_out_bias": False},
        steps=(qwen_window, MoeRule(experts=Opt("num_experts"), **QWEN_MOE_EXPERTS,
                                    shared_width=Opt("shared_expert_intermediate_size"),
                                    shared_gate=True))),
    "qwen3_moe": Family(QWEN3, steps=(qwen_window, MoeRule(
        experts=Opt("num_experts", "num_local_experts"), **QWEN_MOE_EXPERTS))),
    # Mixtral: every layer MoE, each expert a full-width SwiGLU MLP
    "mixtral": Family(LLAMA_NO_BIAS_NO_TYPES, steps=(MoeRule(
        **FULL_WIDTH_EXPERTS, top_k=Req("num_experts_per_tok"), width=Same("ffn_embed_dim")),)),
    "gemma": Family({**GEMMA, ("sliding_window", "layer_types"): Window(None)}),
    "gemma2": Family(GEMMA2, steps=(RawWindowPattern(period=2),)),
    "gemma3_text": Family({**GEMMA2, "qk_norm": True}, steps=(
        RawWindowPattern(period=6, period_key="sliding_window_pattern"),)),
    # DeepSeek-V2/V3: multi-head latent attention (arXiv 2405.04434), the first
    # first_k_dense_replace layers dense, n_shared_experts of moe_intermediate_size
    # (HF builds one MLP of n_shared * moe_intermediate_size: the same shapes)
    "deepseek_v2": Family({**DEEPSEEK_MLA, "mlp_bias": Flag("mlp_bias", default=False)},
        steps=(MoeRule(experts=Opt("n_routed_experts"), top_k=Req("num_experts_per_tok"),
                       top_k_first=False, layers="dense_first", width=Req("moe_intermediate_size"),
                       shared_count=Opt("n_shared_experts", default=0),
                       shared_width=Same("moe_ffn_embed_dim")),)),
    # gpt-oss: attention sinks, biased router and experts, alternating 128-token windows
    "gpt_oss": Family(
        {**LLAMA, "qkv_bias": Flag("attention_bias", default=True),
         "attn_out_bias": Flag("attention_bias", default=True),
         "attn_sinks": True, "moe_router_bias": True, "moe_expert_bias": True,
         "moe_ffn_embed_dim": Same("ffn_embed_dim")},
        steps=(RawWindowPattern(period=2, default_window=128), MoeRule(
            **FULL_WIDTH_EXPERTS, top_k=Req("num_experts_per_tok", "experts_per_token")))),
}
FAMILIES["deepseek_v3"] = Family(DEEPSEEK_MLA, steps=FAMILIES["deepseek_v2"].steps)  # bias-free MLPs
# MiniCPM3 (MiniCPM3Attention): DeepSeek-V2's MLA without experts; scale_emb/scale_depth are scalars
FAMILIES["minicpm3"] = FAMILIES["deepseek_v2"]
FAMILIES.update(MORE_FAMILIES)
FAMILIES.update(ENCODER_FAMILIES)
FAMILIES.update(ENCODER_FAMILIES_2)
FAMILIES.update(ENTITY_FAMILIES)
FAMILIES.update(MOE_FAMILIES)
FAMILIES.update(SEQ2SEQ_FAMILIES)
FAMILIES.update(DENSE2_FAMILIES)
FAMILIES.update(MOE2_FAMILIES)
FAMILIES.update(HYBRID_FAMILIES)
# rows that refuse, naming what is not modelled
FAMILIES.update(REFUSED_FAMILIES)
FAMILIES.update(NOT_MODELLED_FAMILIES)

#: model types mapped family by family (others go through the generic mapping)
SUPPORTED_MODEL_TYPES = tuple(sorted(set(FAMILIES) - set(REFUSED_FAMILIES) - set(NOT_MODELLED_FAMILIES))) + ("gemma3",)
