"""The validation records the tests and benchmarks read live in the repository
(benchmarks/data/validation, a copy of the project's shared set) so a fresh clone runs them; where the
shared set sits beside the repository, the copy must equal it (a new round's records are copied in)."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COPY = REPO / "benchmarks" / "data" / "validation"
SHARED = REPO.parent / "shared" / "validation"
FILES = ("README.md", "measured_dev.json", "published_measurements.json", "serving_dev.csv")


@pytest.mark.parametrize("name", FILES)
def test_the_copy_is_in_the_repository(name):
    assert (COPY / name).stat().st_size > 1000


@pytest.mark.skipif(not SHARED.is_dir(), reason="no shared validation set beside the repository to compare with")
@pytest.mark.parametrize("name", FILES)
def test_the_copy_equals_the_shared_set(name):
    assert (COPY / name).read_bytes() == (SHARED / name).read_bytes(), \
        f"benchmarks/data/validation/{name} differs from ../shared/validation: copy it again"
