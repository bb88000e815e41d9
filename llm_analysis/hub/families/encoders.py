"""Rows of the Hub family table for BERT-style encoders whose backbone differs from
BERT's only in its embeddings, biases, positions or MLP (`hub_families.py` merges
them into FAMILIES). Each row describes the bare encoder (the `*Model` class: no
LM head), following the transformers modelling code it names; attention variants
whose FLOPs are not those of dense attention are refused by a check.
"""

from __future__ import annotations

from typing import Dict

from llm_analysis.hub.families.bases import BERT, NO_BIASES
from llm_analysis.hub.errors import UnmappableConfig
from llm_analysis.hub.source import Fields, Src
from llm_analysis.hub.spec import Act, Family, Flag, Opt, Refuse, Req, Same, Total

__all__ = ["ENCODER_FAMILIES"]

_ABSOLUTE = Refuse("position_embedding_type", ("absolute", None), default="absolute",
                   reason="relative position embeddings")
# is_decoder + add_cross_attention adds a cross-attention block to every layer
_NO_CROSS = Refuse("add_cross_attention", (False,), default=False, as_bool=True,
                   reason="cross-attention to an encoder")
_BERT_CHECKS = (_ABSOLUTE, _NO_CROSS)
# Rotary post-LN encoders (JinaEmbeddingsV3Layer, GteLayer, NomicBertLayer): BERT's
# embedding LayerNorm and post-attention / post-MLP LayerNorms, no position table
_ROTARY_BERT = {**BERT, "position_embedding_type": "rotary", "num_position_embeddings": None,
                "head_dim": Opt("head_dim"), "type_vocab_size": Opt("type_vocab_size", default=0)}


def _rembert_mapping(src: Src, f: Fields, what: str) -> None:
    """RemBertEncoder always holds `embedding_hidden_mapping_in`, even when the input
    embeddings are as wide as hidden."""
    f["embedding_proj_in_dim"] = f.get("embedding_dim")


def _yoso_attention(src: Src, f: Fields, what: str) -> None:
    """YosoSelfAttention: with `use_expectation` it computes the LSH collision
    expectation over every query/key pair (dense-attention matmuls); the sampled
    hashing path and the optional depthwise conv (`conv_window`) are not described."""
    if not bool(src.get("use_expectation", default=True)) or src.get("conv_window", default=None):
        raise UnmappableConfig(f"{what}: YOSO with use_expectation=False (sampled LSH attention) or "
                               "a conv_window cannot be described by ModelConfig")


ENCODER_FAMILIES: Dict[str, Family] = {
    # BertGenerationEncoder: word + position embeddings (no token types), no pooler
    "bert-generation": Family({**BERT, "type_vocab_size": 0, "pooler": False},
                              checks=_BERT_CHECKS),
    # RemBERT (RemBertEmbeddings): embeddings of input_embedding_size, projected to
    # hidden with a bias (embedding_hidden_mapping_in); output_embedding_size is the
    # LM head's only
    "rembert": Family({**BERT, "embedding_dim": Req("input_embedding_size"),
                       "factorized_embeddings": True, "embedding_proj_bias": True},
                      checks=_BERT_CHECKS, steps=(_rembert_mapping,)),
    # TAPAS (TapasEmbeddings): one token-type table per entry of type_vocab_sizes, all
    # hidden wide and summed: their rows add up
    "tapas": Family({**BERT, "type_vocab_size": Total("type_vocab_sizes")}, checks=_BERT_CHECKS),
    # BigBird with full attention (attention_type="original_full"): BERT with a q/k/v
    # bias flag; block-sparse attention has other FLOPs
    "big_bird": Family({**BERT, "qkv_bias": Flag("use_bias", default=True)},
                       checks=_BERT_CHECKS + (Refuse(
                           "attention_type", ("original_full",), default="block_sparse",
                           reason="block-sparse attention"),)),
    # YOSO (YosoEmbeddings): positions offset by 2 rows, no pooler
    "yoso": Family({**BERT, "num_position_embeddings": Same("max_seq_len", plus=2),
                    "pooler": False}, checks=_BERT_CHECKS + (_yoso_attention,)),
    # Jina Embeddings v3: rotary BERT with biases everywhere and a pooler
    "jina_embeddings_v3": Family(_ROTARY_BERT),
    # GTE (GteMLP): gated MLP, only down_proj biased; no pooler in GteModel's default
    "gte": Family({**_ROTARY_BERT, "mlp_gated_linear_units": True, "mlp_bias": False,
                   "mlp_down_bias": True, "pooler": False}),
    # NomicBERT: no linear biases (the norms keep theirs), gated MLP, no pooler by default
    "nomic_bert": Family({**_ROTARY_BERT, **NO_BIASES, "mlp_gated_linear_units": True,
                          "activation": Act("hidden_act", default="silu"), "pooler": False}),
}
