"""Import every varied config of tests/data/variant_truth.json.gz through the table path
and report how many are exact / refused / silently wrong, which varied keys cause the
silent errors, and why variants are refused.

    python scripts/variant_coverage_report.py                  # print
    python scripts/variant_coverage_report.py --truth f.json   # another truth file (or
        the `.partial.jsonl` checkpoint of a generation still running)
    python scripts/variant_coverage_report.py --exact llama,gpt2  # also the [exact] path
        (llm_analysis.exact, needs torch) on the variants of these types
    python scripts/variant_coverage_report.py --json out.json  # every outcome
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from variant_coverage import (VARIANT_TRUTH_PATH, buildable, classify_variants,  # noqa: E402
                              counts, load_variant_truth)


def read_truth(path: Path) -> dict:
    if path.suffix == ".gz":
        return load_variant_truth(path)
    if path.suffix != ".jsonl":
        return json.loads(path.read_text())
    doc: dict = {"types": {}}
    for line in path.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            doc["types"].setdefault(rec["type"], {})[rec["variant"]] = rec["result"]
    return doc


def _refusal_reason(detail: str) -> str:
    """The refusal message without the model name, shortened, to group similar ones."""
    text = re.sub(r"model 'variant/[^']*'", "<model>", detail)
    return re.sub(r"\d[\d,]*", "N", text)[:140]


def report_table_path(doc: dict, out_json: str) -> None:
    outcomes = classify_variants(doc)
    n_types = len(doc["types"])
    unbuildable = sum(1 for v in doc["types"].values() for r in v.values() if r["status"] != "ok")
    print(f"{len(outcomes)} buildable variants of {n_types} model types "
          f"({unbuildable} variants transformers cannot build): {counts(outcomes)}\n")
    wrong = {k: o for k, o in outcomes.items() if o["outcome"] in ("silently wrong", "crashed")}
    by_key = Counter(k.split("/", 1)[1] for k in wrong)
    print("silently wrong / crashed by varied key: " + ", ".join(f"{k} {n}" for k, n in by_key.most_common()))
    for k, o in sorted(wrong.items()):
        print(f"  {k}: {o['outcome']}: {o['detail'][:240]} causes={o.get('causes')}")
    reasons = Counter(_refusal_reason(o["detail"]) for o in outcomes.values() if o["outcome"] == "refused")
    print(f"\nrefusals ({sum(reasons.values())}), by message:")
    for reason, n in reasons.most_common(40):
        print(f"  {n:4d} {reason}")
    if out_json:
        Path(out_json).write_text(json.dumps(outcomes, indent=1, default=str))


def report_exact_path(doc: dict, types: list) -> None:
    import os
    import tempfile
    os.environ["LLM_ANALYSIS_CACHE"] = tempfile.mkdtemp(prefix="variant-exact-")  # a fresh cache
    from exact_coverage import exact_outcome
    rows = [(mt, name, truth) for mt, name, truth in buildable(doc) if mt in types]
    tally: Counter = Counter()
    for mt, name, truth in rows:
        o = exact_outcome(truth)
        tally[o["outcome"]] += 1
        if o["outcome"] != "exact":
            print(f"  [exact] {mt}/{name}: {o['outcome']}: {o['detail'][:200]}")
    print(f"[exact] path over {len(rows)} variants of {', '.join(types)}: {dict(tally)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--truth", default=str(VARIANT_TRUTH_PATH))
    ap.add_argument("--json", default="")
    ap.add_argument("--exact", default="", help="comma-separated types to run through [exact]")
    ap.add_argument("--types", default="", help="only these types (comma-separated)")
    args = ap.parse_args()
    doc = read_truth(Path(args.truth))
    if args.types:
        keep = set(args.types.split(","))
        doc["types"] = {mt: v for mt, v in doc["types"].items() if mt in keep}
    report_table_path(doc, args.json)
    if args.exact:
        report_exact_path(doc, [t for t in args.exact.split(",") if t])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
