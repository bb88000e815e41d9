"""Checks every family row passes after its fields are read: config keys that change the shapes in any
transformers model that honours them, which a row may not read. Found by the varied-config check
(scripts/generate_variant_truth.py, issue 14): a published checkpoint may set e.g. `add_cross_attention` on
a GPT-2 decoder (GPT2Block then holds a cross-attention block); a row that does not model such a key must
refuse it rather than count without it.
"""

from __future__ import annotations

from typing import Tuple

from llm_analysis.hub.errors import not_modelled
from llm_analysis.hub.source import Fields, Src

__all__ = ["check_unread_shape_keys"]


def check_unread_shape_keys(src: Src, f: Fields, what: str, ignored: Tuple[str, ...] = ()) -> None:
    """Refuse a config whose shape-changing keys the row's fields do not describe (keys in
    `ignored` are ones the family's own code never reads: Family.ignores)."""
    if "add_cross_attention" not in ignored and bool(src.get("add_cross_attention", default=False)) \
            and not f.get("cross_attention"):
        raise not_modelled(f"{what}: add_cross_attention=True (a cross-attention block in every "
                           "layer of this decoder) is not read by this family's mapping")
