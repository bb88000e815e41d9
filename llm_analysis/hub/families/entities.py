"""The Hub family row of LUKE (arXiv 2010.01057): a RoBERTa-shaped encoder with
entity inputs (`hub_families.py` merges it into FAMILIES). The row describes the bare
encoder (LukeModel: no LM head, a pooler), whose entity embeddings and entity-aware
query projections are parameters the word-token phases never run
(`ModelConfig.entity_inputs`, operators/entity_inputs.py).
"""

from __future__ import annotations

from typing import Dict

from llm_analysis.hub.families.bases import BERT
from llm_analysis.hub.source import Fields, Src
from llm_analysis.hub.spec import Family

__all__ = ["ENTITY_FAMILIES"]


def _luke_entities(src: Src, f: Fields, what: str) -> None:
    """LukeEntityEmbeddings: [entity_vocab_size x entity_emb_size] entities, position
    and token-type tables as wide as hidden with the word ones' rows; LukeSelfAttention
    adds three query projections with use_entity_aware_attention."""
    f["entity_inputs"] = dict(
        vocab_size=src.req_int("entity_vocab_size"), emb_dim=src.req_int("entity_emb_size"),
        position_rows=f["num_position_embeddings"], type_rows=f["type_vocab_size"],
        aware_attention=bool(src.get("use_entity_aware_attention", default=True)))


ENTITY_FAMILIES: Dict[str, Family] = {
    # LukeModel: BERT embeddings, post-LN BERT layers, a pooler; its code reads neither
    # position_embedding_type nor add_cross_attention (always absolute, never cross)
    "luke": Family(BERT, steps=(_luke_entities,), ignores=("add_cross_attention",)),
}
