"""The README's commands print exactly what tests/golden/ pins. These files are the CLI's
own output, kept so that a refactoring changes no printed figure (they were written before
the one-way-layers restructuring of issue 9 and held through it). A change meant to alter the
output regenerates them with `python tests/golden/regenerate.py` and says why in its commit
(done when serving conventions became the default and when cross-node collectives moved to
the NCCL tree latency). JSON floats compare within 1e-12 relative, the readable text exactly."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
sys.path.insert(0, str(GOLDEN))
from commands import COMMANDS  # noqa: E402


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_readme_command_output_unchanged(name):
    run = subprocess.run([sys.executable, "-m", "llm_analysis.analysis", *COMMANDS[name]],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    expected = (GOLDEN / f"{name}.txt").read_text()
    if name.endswith("_json"):  # base-unit floats: equal within 1e-12 relative (arithmetic may be reordered)
        assert _close(json.loads(run.stdout), json.loads(expected)), name
    else:  # the readable report prints rounded figures: exactly
        assert run.stdout == expected


def _close(a, b, rel=1e-12) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return a == b or math.isclose(a, b, rel_tol=rel)
    return a == b and type(a) is type(b)
