"""Rewrite the golden CLI outputs (run from the repository root after a change
that is meant to alter what the README commands print)."""

import subprocess
import sys
from pathlib import Path

from commands import COMMANDS

here = Path(__file__).parent
for name, args in COMMANDS.items():
    out = subprocess.run([sys.executable, "-m", "llm_analysis.analysis", *args], capture_output=True, text=True,
                         check=True).stdout
    (here / f"{name}.txt").write_text(out)
    print("wrote", name)
