"""Checks of the ModelConfig fields that describe encoder variants: extra lookup tables
(`extra_embedding_tables`), the embedding projection's input width, bottleneck adapters
and layers shared across the depth (`num_unique_layers`).

Kept out of `schema/model.py` so that module stays about shapes; raises ValueError,
which `StrictModel` turns into the package's ConfigError naming field and value.
"""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

import llm_analysis.schema.options as _lim
from llm_analysis.schema.base import StrictModel

__all__ = ["check_encoder_fields", "EntityInputs", "RelativeAttention"]


class RelativeAttention(StrictModel):
    """DeBERTa-v2's disentangled attention (arXiv 2006.03654 §3.1; transformers'
    DisentangledSelfAttention): besides content-to-content scores, queries meet projected
    relative-position embeddings (c2p) and keys meet them (p2c). A table of 2 x `span`
    position embeddings (hidden wide, optionally LayerNorm-ed) lives in the encoder;
    every layer projects all of its rows through its key (c2p) / query (p2c)
    projections, its own (`shared_projections` False) or the content ones (both then
    run), and multiplies them with every query / key: 2 x span scores per token and head.
    DeBERTa v1 projects only the 2 x min(sequence length, span) central rows
    (`span_follows_length`) and its c2p projection has no bias (`c2p_bias`)."""

    span: int  # position_buckets, else max_relative_positions
    c2p: bool = True
    p2c: bool = True
    shared_projections: bool = False  # share_att_key
    table_norm: bool = False  # norm_rel_ebd contains "layer_norm"
    span_follows_length: bool = False  # DeBERTa v1: min(max(q_len, kv_len), span) rows each side
    c2p_bias: bool = True  # DeBERTa v1's pos_proj has none

    @model_validator(mode="after")
    def _check(self) -> "RelativeAttention":
        if not 1 <= self.span <= _lim.MAX_SEQ_LEN:
            raise ValueError(f"field 'relative_attention.span' = {self.span!r} must be a whole number in "
                             f"1..{_lim.MAX_SEQ_LEN}")
        return self


class EntityInputs(StrictModel):
    """LUKE's entity inputs (arXiv 2010.01057 §3; transformers' LukeEntityEmbeddings and
    LukeSelfAttention): an entity table of `vocab_size` rows and `emb_dim` columns,
    projected to hidden without a bias when `emb_dim` differs from it, entity position
    (`position_rows`) and token-type (`type_rows`) tables and a LayerNorm, all hidden
    wide; with `aware_attention`, three more hidden x hidden query projections per layer
    (word-to-entity, entity-to-word, entity-to-entity, biased as the q projection).
    They are parameters only: the phases analysed run word tokens, and without entity
    tokens LUKE runs none of them (LukeModel skips the entity embeddings, its attention
    the extra queries)."""

    vocab_size: int
    emb_dim: int
    position_rows: int
    type_rows: int
    aware_attention: bool = True

    @model_validator(mode="after")
    def _check(self) -> "EntityInputs":
        for f, lo in (("vocab_size", 1), ("emb_dim", 1), ("position_rows", 0), ("type_rows", 0)):
            v = getattr(self, f)
            if not lo <= v <= _lim.MAX_DIM:
                raise ValueError(f"field 'entity_inputs.{f}' = {v!r} must be a whole number in "
                                 f"{lo}..{_lim.MAX_DIM}")
        return self


def check_encoder_fields(m: Any) -> None:
    """Validate the encoder-variant fields of ModelConfig `m`."""
    for i, table in enumerate(m.extra_embedding_tables):
        rows, width = table
        for what, v in (("rows", rows), ("width", width)):
            if not 1 <= v <= _lim.MAX_DIM:
                raise ValueError(f"field 'extra_embedding_tables'[{i}] = {list(table)!r}: {what} = {v} must be "
                                 f"a whole number in 1..{_lim.MAX_DIM} (each table is [rows, width])")
    n = m.num_unique_layers
    if n is not None:
        if not 1 <= n <= m.num_layers or m.num_layers % n:
            raise ValueError(f"field 'num_unique_layers' = {n!r} must divide num_layers = {m.num_layers} "
                             "(num_layers layer executions run over num_unique_layers distinct layers, "
                             "each repeated num_layers / num_unique_layers times)")
