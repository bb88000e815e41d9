"""scripts/test_power_mutants.json stays runnable: every mutant's text occurs exactly once in its file (so
`python scripts/test_power.py` breaks the rule it names, not nothing and not two places) and every test
path it runs exists. A code change that moves a mutant's text fails here: update the entry with the code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MUTANTS = json.loads((REPO / "scripts" / "test_power_mutants.json").read_text())["mutants"]


def test_ids_are_unique():
    ids = [m["id"] for m in MUTANTS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m["id"] for m in MUTANTS])
def test_each_mutant_applies_once_and_its_tests_exist(mutant):
    source = (REPO / mutant["file"]).read_text()
    assert source.count(mutant["old"]) == 1, f"{mutant['id']}: its text occurs {source.count(mutant['old'])} times"
    assert mutant["old"] != mutant["new"] and mutant["rule"]
    for path in mutant["tests"]:
        assert (REPO / path.split("::")[0]).exists(), path
