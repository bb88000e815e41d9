"""The distilled operator measurements (llm_analysis/cost/profiles/measured/, written by
benchmarks/distil_operator_data.py from ai-dynamo/aiconfigurator, Apache-2.0): every table names
its source (repository, commit, path, licence), its axes increase strictly (interpolation needs
them to), and no value comes from the held-out silicon_sample.csv."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

MEASURED = Path(__file__).resolve().parents[2] / "llm_analysis" / "cost" / "profiles" / "measured"
FILES = sorted(MEASURED.glob("*.json"))


def _sources(doc):
    yield from (t["source"] for t in doc["gemm"].values())
    for key in ("attention_prefill", "attention_decode"):
        if key in doc:
            yield doc[key]["source"]
    if "nccl" in doc:
        yield doc["nccl_source"]


def _strictly_increasing(axis):
    return all(b > a for a, b in zip(axis, axis[1:]))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_measured_table_is_sourced_and_monotone(path):
    doc = json.loads(path.read_text())
    assert doc["gpu"] == path.stem
    for src in _sources(doc):
        assert src["repository"] == "github:ai-dynamo/aiconfigurator" and len(src["commit"]) == 40
        assert src["licence"].startswith("Apache-2.0") and "silicon_sample" not in src["path"]
    for t in doc["gemm"].values():
        assert _strictly_increasing(t["m"]) and len(t["efficiency"]) == len(t["n_k"])
        assert all(e is None or 0 < e <= 1 for row in t["efficiency"] for e in row)  # achieved / dense spec
    if "attention_prefill" in doc:
        assert _strictly_increasing(doc["attention_prefill"]["seq_len"])
    if "attention_decode" in doc:
        assert _strictly_increasing(doc["attention_decode"]["kv_len"])
    for by_group in doc.get("nccl", {}).values():
        for table in by_group.values():
            assert _strictly_increasing(table["bytes"])
            assert all(math.isfinite(x) and x > 0 for x in table["busbw_over_line_rate"])


def test_there_are_measured_tables():
    assert len(FILES) >= 8
