"""Fit DeepSpeed v0.3's ZeRO-3 traffic terms on the fit half of its records.

    python benchmarks/fit_framework_terms.py [--write]

The DeepSpeed ZeRO-3 rows of Narayanan et al. 2021 (arXiv 2104.04473, Table 2)
split by benchmarks/accuracy.py `split_of`; on the fit half, a grid search of
`zero3_gather_bytes_per_s` (15-30 GB/s by 0.5) and `overlap_dp_comm` (0-1 by 0.02)
minimising the squared log error of the calibrated model's iteration time (the public
API through accuracy_records' cases, `zero3_recompute_gather` held True: it is read
from DeepSpeed's code, not fitted). With --write the values and their sources go to
benchmarks/framework_terms.json; the report half is scored by benchmarks/accuracy.py.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import load_records, split_of, validation_dir  # noqa: E402
from accuracy_records import FRAMEWORK_TERMS, case_megatron, family  # noqa: E402

RATES_BYTES_PER_S = [r * 0.5e9 for r in range(30, 61)]
SHARES = [s / 50 for s in range(51)]


def _fit_cases() -> dict:
    return {r["id"]: r for r in load_records(validation_dir())
            if family(r["id"]) == "DeepSpeed ZeRO-3" and split_of(r["id"]) == "fit"}


def _error(recs: dict, rate: float, share: float) -> float:
    """Sum of squared log(predicted / measured) over the records at these terms."""
    terms = {"zero3_gather_bytes_per_s": rate, "overlap_dp_comm": share, "zero3_recompute_gather": True}
    total = 0.0
    for rec in recs.values():
        case = case_megatron(rec, zero3_terms=terms)  # (the family's records are Megatron-style cases)
        total += math.log(case.run({"perf_model": "calibrated"}) / case.measured_s) ** 2
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="store the fitted values in framework_terms.json")
    args = ap.parse_args(argv)
    recs = _fit_cases()
    best = min((_error(recs, r, s), r, s) for r in RATES_BYTES_PER_S for s in SHARES)
    err, rate, share = best
    rms = math.sqrt(err / len(recs))
    print(f"fit on {len(recs)} records ({', '.join(sorted(recs))}): zero3_gather_bytes_per_s = {rate / 1e9:g} GB/s, "
          f"overlap_dp_comm = {share:g}, rms log error {rms:.3f}")
    if args.write:
        doc = json.loads(FRAMEWORK_TERMS.read_text())
        terms = doc["deepspeed-0.3-zero3"]
        terms["zero3_gather_bytes_per_s"]["value"] = rate
        terms["overlap_dp_comm"]["value"] = share
        FRAMEWORK_TERMS.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"written to {FRAMEWORK_TERMS.name} (the sources' text states the fit: update it if the records change)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
