"""Rows of the Hub family table for encoder-decoder models: each describes the decoder side, the
model's `*ForCausalLM` class, following the transformers modelling code it names. The encoder is not
described; the encoder length is an input of the analysis (`encoder_seq_len`, model/cross_attention.py).

Every decoder layer (BartDecoderLayer and its copies) holds self-attention, cross-attention, a
non-gated MLP and three norms. The families differ around the layers: the position table (learned
with BART's 2-row offset, learned without, or a sinusoidal table that transformers stores as a frozen
`nn.Embedding` weight, so a parameter), a norm after the embeddings, a norm after the last layer,
biases and tying. `scale_embedding` is a scalar; `final_logits_bias` is a buffer of the
ForConditionalGeneration classes only.
"""

from __future__ import annotations

from typing import Dict

from llm_analysis.hub.families.bases import BIASES, LAYERNORM
from llm_analysis.hub.errors import UnsupportedArchitecture
from llm_analysis.hub.source import Fields, Src
from llm_analysis.hub.spec import Act, Family, Flag, Opt, Refuse, Req, Same

__all__ = ["SEQ2SEQ_FAMILIES"]

# BartDecoder: learned positions, no norm after the embeddings or the last layer
_DECODER = {
    "num_layers": Req("decoder_layers"), "n_head": Req("decoder_attention_heads"),
    "hidden_dim": Req("d_model"), "vocab_size": Req("vocab_size"),
    "max_seq_len": Req("max_position_embeddings"), "ffn_embed_dim": Req("decoder_ffn_dim"),
    "activation": Act("activation_function", default="gelu"),
    **BIASES, **LAYERNORM, "mlp_gated_linear_units": False,
    "position_embedding_type": "learned", "num_position_embeddings": Same("max_seq_len"),
    "embedding_norm": False, "final_norm": False, "cross_attention": True,
    "tie_word_embeddings": Flag("tie_word_embeddings", default=True),
}
# BartLearnedPositionalEmbedding: max_position_embeddings + 2 rows (the offset of
# fairseq's padding positions); layernorm_embedding after the embeddings
_BART = {**_DECODER, "num_position_embeddings": Same("max_seq_len", plus=2), "embedding_norm": True}
# Marian / Pegasus (*SinusoidalPositionalEmbedding subclasses nn.Embedding): a fixed
# table of max_position_embeddings rows, frozen yet a parameter of the model
_SINUSOIDAL_TABLE = {"num_position_embeddings": Same("max_seq_len")}


def _prophetnet(src: Src, f: Fields, what: str) -> None:
    """ProphetNet's decoder runs a main stream and `ngram` predicting streams through
    every layer (ProphetNetNgramSelfAttention), with bucketed relative positions."""
    raise UnsupportedArchitecture(
        f"{what}: ProphetNet's decoder (n-gram predicting streams through every layer, relative "
        "position buckets in its self-attention) is not modelled; its parameters and FLOPs would be "
        "wrong. Use llm-analysis[exact] (--exact) to count it from the transformers model")


def _trocr_positions(src: Src, f: Fields, what: str) -> None:
    """TrOCRLearnedPositionalEmbedding has BART's 2-row offset; the sinusoidal one keeps
    its table as a plain tensor (not a parameter)."""
    if bool(src.get("use_learned_position_embeddings", default=True)):
        f.update(position_embedding_type="learned", num_position_embeddings=f["max_seq_len"] + 2)
    else:
        f.update(position_embedding_type="sinusoidal", num_position_embeddings=None)


SEQ2SEQ_FAMILIES: Dict[str, Family] = {
    "bart": Family(_BART),
    # PLBart: BART's decoder (scale_embedding is a scalar)
    "plbart": Family(_BART),
    # MVP: BART's decoder; use_prompt adds prompt tables and MLPs to every layer
    "mvp": Family(_BART, checks=(Refuse("use_prompt", (False,), default=False, as_bool=True,
                                        reason="layer-wise prompts"),)),
    # mBART: pre-LN, so a layer_norm after the last layer too
    "mbart": Family({**_BART, "final_norm": True}),
    # Marian: sinusoidal table, its own decoder vocabulary, no extra norms
    "marian": Family({**_DECODER, **_SINUSOIDAL_TABLE, "vocab_size": Req("decoder_vocab_size", "vocab_size")}),
    # Pegasus: sinusoidal table, pre-LN with a final layer_norm
    "pegasus": Family({**_DECODER, **_SINUSOIDAL_TABLE, "final_norm": True}),
    # Blenderbot (BlenderbotLearnedPositionalEmbedding, no offset): pre-LN, final layer_norm
    "blenderbot": Family({**_DECODER, "final_norm": True}),
    # Blenderbot-small: layernorm_embedding, no final norm, positions without offset
    "blenderbot-small": Family({**_DECODER, "embedding_norm": True}),
    # BigBird-Pegasus decoder: full attention (block-sparse is the encoder's), q/k/v/out
    # biases from use_bias, the decoder's layernorm_embedding applied after the last layer;
    # BigBirdPegasusForCausalLM declares no tied weights: its lm_head is always separate
    "bigbird_pegasus": Family({**_DECODER, "qkv_bias": Flag("use_bias", default=False),
                               "attn_out_bias": Flag("use_bias", default=False),
                               "activation": Act("activation_function", default="gelu_new"),
                               "final_norm": True, "tie_word_embeddings": False}),
    # TrOCR: the decoder of an image encoder, whose width (cross_attention_hidden_size)
    # the cross-attention k/v projections read; layernorm_embedding optional
    "trocr": Family({**_DECODER, "embedding_norm": Flag("layernorm_embedding", default=True),
                     "cross_attention_dim": Opt("cross_attention_hidden_size")},
                    steps=(_trocr_positions,)),
    # Whisper (WhisperDecoder): learned positions of max_target_positions rows, k_proj
    # without bias (self and cross), a final layer_norm
    "whisper": Family({**_DECODER, "max_seq_len": Req("max_target_positions"), "k_proj_bias": False,
                       "final_norm": True}),
    "prophetnet": Family({}, checks=(_prophetnet,)),
}
