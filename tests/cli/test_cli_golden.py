"""The README's commands print exactly what tests/golden/ pins. These files are the CLI's
own output, kept so that a refactoring changes no printed figure (they were written before
the one-way-layers restructuring of issue 9 and held through it). A change meant to alter the
output regenerates them with `python tests/golden/regenerate.py` and says why in its commit
(done when serving conventions became the default and when cross-node collectives moved to
the NCCL tree latency)."""

from __future__ import annotations

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
    assert run.stdout == expected
