"""Import every model type of tests/data/architecture_truth.json.gz through the loopback
Hub and report: how many are exact / refused / silently wrong, and for the silently
wrong ones the likely causes (from the per-module parameter breakdown).

    python scripts/architecture_coverage_report.py                 # print
    python scripts/architecture_coverage_report.py --update-test   # also rewrite
        the SILENTLY_WRONG list of tests/test_architecture_coverage.py
    python scripts/architecture_coverage_report.py --json out.json # every outcome
    python scripts/architecture_coverage_report.py --exact         # also the exact path
        (llm_analysis.exact, needs torch; several minutes): how many types it
        derives exactly, refuses, or gets wrong
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from architecture_coverage import (classify_all, counts, flops_wrong, load_truth,  # noqa: E402
                                   silently_wrong)

TEST_FILE = ROOT / "tests" / "test_architecture_coverage.py"
def _list_pattern(var: str):
    return re.compile(var + r" = \[\n.*?\n?\]", re.DOTALL)


def python_list(names, var: str = "SILENTLY_WRONG") -> str:
    lines, line = [], "   "
    for n in names:
        item = f" {n!r},"
        if len(line) + len(item) > 100:
            lines.append(line)
            line = "   "
        line += item
    if line.strip():
        lines.append(line)
    return f"{var} = [\n" + "\n".join(lines) + ("\n" if lines else "") + "]"


def by_cause(outcomes):
    groups = {}
    for mt, o in outcomes.items():
        if o["outcome"] == "silently wrong":
            primary = (o.get("causes") or ["unexplained"])[0]
            groups.setdefault(primary, []).append(mt)
    return groups


def report_exact(doc) -> None:
    from exact_coverage import exact_outcomes
    outcomes = exact_outcomes(doc)
    print(f"exact path ([exact]): {len(outcomes)} buildable model types: {counts(outcomes)}")
    for kind in ("silently wrong", "crashed", "refused"):
        for mt, o in outcomes.items():
            if o["outcome"] == kind:
                print(f"  {kind} {mt}: {o['detail'][:300]}".replace("\n", " | "))
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update-test", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--exact", action="store_true")
    args = ap.parse_args()
    if args.exact:
        report_exact(load_truth())
    doc = load_truth()
    outcomes = classify_all(doc)
    print(f"{len(outcomes)} model types (transformers {doc['transformers_version']}): "
          f"{counts(outcomes)}\n")
    for cause, types in sorted(by_cause(outcomes).items(), key=lambda kv: -len(kv[1])):
        print(f"## {cause} ({len(types)})")
        for mt in types:
            o = outcomes[mt]
            print(f"  {mt}: {o['detail'][:260]}\n      all causes: {', '.join(o['causes'])}")
    for kind in ("refused", "crashed", "no truth"):
        names = [mt for mt, o in outcomes.items() if o["outcome"] == kind]
        print(f"\n## {kind} ({len(names)}): " + ", ".join(names))
    lists = {"SILENTLY_WRONG": silently_wrong(outcomes), "FLOPS_WRONG": flops_wrong(outcomes)}
    for mt in lists["FLOPS_WRONG"]:
        v = outcomes[mt]["verdict"]
        print(f"  FLOPs {mt}: engine {v['engine_flops']:,} vs FlopCounterMode {v['model_flops']:,} "
              f"({v['engine_flops'] / v['model_flops'] - 1:+.2%})")
    for var, names in lists.items():
        print("\n" + python_list(names, var))
    if args.update_test:
        text = TEST_FILE.read_text()
        for var, names in lists.items():
            text = _list_pattern(var).sub(lambda _m: python_list(names, var), text, count=1)
        TEST_FILE.write_text(text)
        print(f"\nupdated {TEST_FILE.relative_to(ROOT)}")
    if args.json:
        Path(args.json).write_text(json.dumps(outcomes, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
