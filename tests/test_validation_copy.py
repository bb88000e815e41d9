"""The validation records the tests and benchmarks read live in the repository
(benchmarks/data/validation, a copy of the project's shared set) so a fresh clone runs them. The copy is
pinned by the SHA-256 sums its SOURCES.md lists (written when it was copied from the shared set), so
an edit by hand, or a new copy whose sums were not recorded, fails here. Nothing here reads outside
the repository."""

import hashlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COPY = REPO / "benchmarks" / "data" / "validation"
FILES = ("README.md", "measured_dev.json", "published_measurements.json", "serving_dev.csv")


def _recorded_sums() -> dict:
    text = (COPY / "SOURCES.md").read_text()
    return {name: digest for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", text, flags=re.M)}


@pytest.mark.parametrize("name", FILES)
def test_the_copy_is_in_the_repository(name):
    assert (COPY / name).stat().st_size > 1000


@pytest.mark.parametrize("name", FILES)
def test_the_copy_matches_the_sums_recorded_when_it_was_copied(name):
    recorded = _recorded_sums()
    assert name in recorded, f"benchmarks/data/validation/SOURCES.md records no SHA-256 for {name}"
    actual = hashlib.sha256((COPY / name).read_bytes()).hexdigest()
    assert actual == recorded[name], \
        f"benchmarks/data/validation/{name} differs from the copy recorded in SOURCES.md: copy it again and update the sums"
