"""Varied configs of every model type the table path imports exactly: exact or refused.

Issue 14: "the same check is also run ... on other configurations of these model
types". tests/test_architecture_coverage.py checks each type's DEFAULT config; here
every variant recorded in tests/data/variant_truth.json.gz (derived from the default by
scripts/architecture_variants.py: fewer layers, GQA/MHA, tied embeddings and biases
flipped, other widths / head_dim / expert counts / top-k / shared experts, rope
scaling, sliding window on/off, another per-layer pattern, ...) is imported through
the table path and compared with the real transformers model built from the same
config on the meta device (parameters per module and FlopCounterMode prefill FLOPs,
recorded by scripts/generate_variant_truth.py). A variant must be exact (parameters
and prefill FLOPs) or refused with the package's own error; a number that differs is
a silent error and fails here.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from architecture_variants import small_base, variants  # noqa: E402
from variant_coverage import (VARIANT_TRUTH_PATH, classify_variants, counts,  # noqa: E402
                              load_variant_truth)

if not VARIANT_TRUTH_PATH.exists():  # pragma: no cover
    pytest.skip("tests/data/variant_truth.json.gz missing: run scripts/generate_variant_truth.py",
                allow_module_level=True)

DOC = load_variant_truth()
if DOC["transformers_version"] != metadata.version("transformers"):  # pragma: no cover
    pytest.skip(f"variant truth was generated with transformers {DOC['transformers_version']}, "
                f"{metadata.version('transformers')} is installed: rerun "
                "scripts/generate_variant_truth.py", allow_module_level=True)


@pytest.fixture(scope="module")
def outcomes():
    return classify_variants(DOC)


def test_no_variant_is_silently_wrong(outcomes):
    bad = {k: o for k, o in outcomes.items() if o["outcome"] not in ("exact", "refused")}
    assert not bad, "\n".join(f"{k}: {o['outcome']}: {o['detail'][:300]} (causes: {o.get('causes')})"
                              for k, o in sorted(bad.items()))


def test_summary(outcomes, capsys):
    c = counts(outcomes)
    with capsys.disabled():
        print(f"\nvariant coverage over {len(outcomes)} buildable variants of {len(DOC['types'])} "
              f"model types (transformers {DOC['transformers_version']}): {c}")
    # the check must keep its reach: a regenerated truth with few types or variants, or
    # a change that turns exact variants into refusals, fails here
    assert len(DOC["types"]) >= 150, len(DOC["types"])
    assert len(outcomes) >= 1500, len(outcomes)
    assert c.get("exact", 0) >= 0.8 * len(outcomes), c


LLAMA_LIKE = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
              "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32,
              "head_dim": 128, "vocab_size": 32000, "tie_word_embeddings": False,
              "attention_bias": False, "use_cache": True, "bos_token_id": 1,
              "layer_types": ["full_attention" if i % 3 == 2 else "sliding_attention" for i in range(32)],
              "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}


def test_variants_change_one_thing_each():
    """Hand-checked on a Llama-like dict: the small base cuts every per-layer list, and
    each variant differs from the base in the keys its name says (hand-derived values)."""
    base = small_base(LLAMA_LIKE)
    assert base["num_hidden_layers"] == 6 and len(base["layer_types"]) == 6
    got = dict(variants(LLAMA_LIKE))
    assert got["layers"] == base
    changed = {name: {k for k in d if d[k] != base.get(k)} for name, d in got.items()}
    assert changed["flip:tie_word_embeddings"] == {"tie_word_embeddings"}
    assert got["flip:attention_bias"]["attention_bias"] is True
    assert got["int:num_key_value_heads"]["num_key_value_heads"] == 8  # MHA -> GQA (32 // 4)
    assert got["int:head_dim"]["head_dim"] == 64
    assert got["int:intermediate_size"]["intermediate_size"] == 5504  # a width: halved
    assert got["rope_scaling"]["rope_parameters"]["rope_type"] == "yarn"
    assert got["layer_types"]["layer_types"] == list(reversed(base["layer_types"]))
    assert "flip:use_cache" not in got and "int:bos_token_id" not in got
    assert all(len(c) >= 1 for n, c in changed.items() if n != "layers")
