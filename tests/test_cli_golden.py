"""The README's commands print exactly what they printed before the one-way-layers
restructuring (issue 9): the files under tests/golden/ were written by the CLI at
commit 92f204a, before any module moved. A refactoring that changes a printed
figure fails here; a change that means to alter output must regenerate them with
`python tests/golden/regenerate.py` and say why in its commit."""

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
