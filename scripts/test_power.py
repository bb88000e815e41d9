"""Does the suite notice a broken rule? Break one rule at a time in the package, run the tests, restore.

    python scripts/test_power.py [--only ID ...] [--tests PATH ...]

Each mutant in scripts/test_power_mutants.json names a file, a text that occurs once in it, what replaces
it (one rule broken: a factor, a missing term, a floor for a ceiling) and the rule in words. For each, the
file is rewritten, `pytest -x -q` runs on the mutant's test paths (or `--tests`), and the file is put back
as it was (also when the run is interrupted). A mutant is *caught* when some test fails, *survived*
when all pass; a mutant whose text no longer occurs once is reported as stale (the code moved on: update
the entry). The last line is the tally. Run it on a clean checkout: it rewrites package files while
it runs (docs/testing.md, "Test power"); and the checkout the package is installed from (`pip install -e .`):
tests that run the command line as a subprocess from a temporary folder import the installed package, so in
another clone their mutants seem to survive (round 31: S04).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MUTANTS = Path(__file__).with_name("test_power_mutants.json")


def run_mutant(mutant: dict, tests: list) -> str:
    path = REPO / mutant["file"]
    original = path.read_text()
    if original.count(mutant["old"]) != 1:
        return "stale"
    path.write_text(original.replace(mutant["old"], mutant["new"]))
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                              cwd=REPO, capture_output=True, text=True)
    finally:
        path.write_text(original)
    return "caught" if proc.returncode else "survived"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=None, help="mutant ids to run (default: all)")
    ap.add_argument("--tests", nargs="*", default=None, help="test paths instead of each mutant's own")
    args = ap.parse_args(argv)
    mutants = json.loads(MUTANTS.read_text())["mutants"]
    if args.only:
        mutants = [m for m in mutants if m["id"] in args.only]
    tally: dict = {}
    for m in mutants:
        start = time.time()
        verdict = run_mutant(m, args.tests or m["tests"])
        tally[verdict] = tally.get(verdict, 0) + 1
        print(f"{m['id']:4s} {verdict:8s} {time.time() - start:5.0f} s  {m['file']}: {m['rule']}", flush=True)
    print(", ".join(f"{n} {v}" for v, n in sorted(tally.items())) + f" of {len(mutants)} mutants")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
