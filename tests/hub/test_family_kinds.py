"""The Hub family table is kept by kind (hub/families/: dense, moe, hybrid, encoders,
seq2seq, refused): each row sits in the file of what its architecture is, and a
model_type has one row.

The kind of a row is read from the row itself, by the rules of DESIGN section 3, not
from the file it is in: experts (a MoeRule step) or DeepSeek's latent attention
(kv_lora_rank) make a MoE/MLA row; state-space or mixer layers (a MixerLayers step,
ssm_* or gdn_* fields) a hybrid; encoder_only a bare encoder; cross_attention the decoder
of an encoder-decoder model; a row that refuses every config (no fields, a NotModelled
check) a refused type; anything else a dense decoder.
"""

from __future__ import annotations

import pytest

from llm_analysis.hub.families.dense import DENSE_FAMILIES
from llm_analysis.hub.families.encoders import ENCODER_FAMILIES
from llm_analysis.hub.families.hybrid import HYBRID_FAMILIES, MixerLayers
from llm_analysis.hub.families.moe import MOE_FAMILIES
from llm_analysis.hub.families.refused import REFUSED_FAMILIES
from llm_analysis.hub.families.seq2seq import SEQ2SEQ_FAMILIES
from llm_analysis.hub.families.table import FAMILIES, SUPPORTED_MODEL_TYPES, _merge
from llm_analysis.hub.spec import Family, MoeRule, NotModelled

KINDS = {"dense": DENSE_FAMILIES, "moe": MOE_FAMILIES, "hybrid": HYBRID_FAMILIES,
         "encoders": ENCODER_FAMILIES, "seq2seq": SEQ2SEQ_FAMILIES, "refused": REFUSED_FAMILIES}


def _field_names(family: Family) -> set:
    names = set()
    for key in family.fields:
        names.update(key if isinstance(key, tuple) else (key,))
    return names


def kind_of(family: Family) -> str:
    """The kind of a row, from what it describes."""
    fields, names = family.fields, _field_names(family)
    if not fields and any(isinstance(c, NotModelled) for c in family.checks):
        return "refused"
    if any(isinstance(s, MixerLayers) for s in family.steps) or any(
            n.startswith(("ssm_", "gdn_")) for n in names):
        return "hybrid"
    if any(isinstance(s, MoeRule) for s in family.steps) or "kv_lora_rank" in names:
        return "moe"
    if fields.get("encoder_only") is True:
        return "encoders"
    if fields.get("cross_attention") is True:
        return "seq2seq"
    return "dense"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_row_is_in_the_file_of_its_kind(kind):
    # ProphetNet's decoder refuses by a check of its own (a step reading the config), kept
    # among the encoder-decoder rows it belongs to
    misplaced = {t: kind_of(f) for t, f in KINDS[kind].items()
                 if kind_of(f) != kind and not (kind == "seq2seq" and t == "prophetnet")}
    assert not misplaced, f"rows of {kind}.py whose kind is another: {misplaced}"


def test_the_table_is_the_kinds_merged():
    assert sum(len(rows) for rows in KINDS.values()) == len(FAMILIES)
    for rows in KINDS.values():
        assert all(FAMILIES[t] is f for t, f in rows.items())
    assert set(SUPPORTED_MODEL_TYPES) == (set(FAMILIES) - set(REFUSED_FAMILIES)) | {"gemma3"}


def test_a_model_type_in_two_kinds_is_refused():
    row = Family({})
    with pytest.raises(AssertionError, match="llama"):
        _merge({"llama": row}, {"mistral": row}, {"llama": row})
