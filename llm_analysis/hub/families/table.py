"""The Hub family table: one row per Hugging Face `model_type` we map exactly.

A row says which config keys feed which ModelConfig field, the family's fixed flags, its per-layer
attention pattern and its MoE rule (vocabulary: `hub/spec.py`; odd details: `hub/hooks.py`). The
flags follow the modelling code of `transformers` (which projections are `nn.Linear(..., bias=...)`,
how many norms a block holds, whether the MLP is gated). A family of a common shape is one row, e.g.
`"newfam": Family({**LLAMA, "qkv_bias": True})`. The rows live by kind (dense.py, moe.py, hybrid.py,
encoders.py, seq2seq.py, refused.py); the shapes they share are in `bases.py`.
"""

from __future__ import annotations

from typing import Dict

from llm_analysis.hub.families.bases import GPT2, LLAMA
from llm_analysis.hub.families.dense import DENSE_FAMILIES
from llm_analysis.hub.families.encoders import ENCODER_FAMILIES
from llm_analysis.hub.families.hybrid import HYBRID_FAMILIES
from llm_analysis.hub.families.moe import MOE_FAMILIES
from llm_analysis.hub.families.refused import REFUSED_FAMILIES
from llm_analysis.hub.families.seq2seq import SEQ2SEQ_FAMILIES
from llm_analysis.hub.spec import Family

__all__ = ["FAMILIES", "SUPPORTED_MODEL_TYPES", "GPT2", "LLAMA"]


def _merge(*kinds: Dict[str, Family]) -> Dict[str, Family]:
    """One table from the rows of every kind; a model_type in two kinds is a mistake."""
    merged: Dict[str, Family] = {}
    for rows in kinds:
        twice = sorted(set(merged) & set(rows))
        if twice:
            raise AssertionError(f"model types with a row in two kinds: {twice}")
        merged.update(rows)
    return merged


FAMILIES: Dict[str, Family] = _merge(DENSE_FAMILIES, MOE_FAMILIES, HYBRID_FAMILIES, ENCODER_FAMILIES,
                                     SEQ2SEQ_FAMILIES, REFUSED_FAMILIES)

#: model types mapped family by family (others go through the generic mapping); "gemma3"
#: is read through its text config (gemma3_text)
SUPPORTED_MODEL_TYPES = tuple(sorted(set(FAMILIES) - set(REFUSED_FAMILIES))) + ("gemma3",)
