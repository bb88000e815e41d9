"""Predicted vs measured times on the shared validation records, per family.

    python benchmarks/accuracy.py [--perf_model roofline|calibrated] [--max_records N] [--per_record REGEX]
                                  [--holdout FILE]
                                  [--loso [--loso_source NAME]]

Reads benchmarks/data/validation/measured_dev.json (every record) and the
inference/training records of benchmarks/data/validation/published_measurements.json
(gpt-fast, Megatron, Korthikanti), both located next to the repository root
(or in $LLM_ANALYSIS_VALIDATION_DIR); skips with a message when absent. Each
record is rebuilt through the public API (`LLMAnalysis(...).inference()` /
`.training()`, ModelConfig from the record's dims: benchmarks/accuracy_records.py).

Printed per family: records used / skipped (reasons), the share of records where
the roofline time at efficiency 1 is <= measured (a true lower bound must give
100%), and median / p90 of |predicted/measured - 1| for the chosen predictor.
Records are split deterministically by a hash of their id into a fit half and a
report half, and both halves are printed; parameters may only be fitted on the
fit half. The predictor is pluggable: `roofline` (efficiency 1), or
`calibrated` / a profile path, passed as LLMAnalysis(perf_model=...).

`--holdout benchmarks/holdout_records.json` scores another file of records instead, all of
them held out (never fitted on): published tables that are not among the validation records.

`--loso` validates leave-one-source-out, the figure model changes are chosen by: for each
source (family) S, the profiles of the GPU generations S's records run on are refitted
(benchmarks/fit_profiles.py `fit_generation`, its parameters) on every record of the other
sources, and S's records are predicted with them. Printed per source: records, the share with
roofline <= measured, median and p90 of |error| held out; and all sources together (each
record predicted by the fold that held its source out). A generation with no parameters to fit
keeps its shipped profile; one with too few other-source records (Blackwell, whose only records are
the dgxc GB200 runs) would otherwise keep values fitted on the held-out source itself, so its fitted
parameters are borrowed from the generations refitted in the same fold (`borrowed_profile`). Each fold starts from the shipped
values and takes at most `--loso_iterations` Levenberg-Marquardt steps (the full fit's 50 would
take tens of minutes on two cores; from a start near the optimum a few steps converge).
`--scope` chooses what the folds refit (benchmarks/fit_profiles.py `use_scope`): framework terms only (the
shipped choice), all operator efficiencies too, or Ampere's too (docs/validation.md compares them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy_records import Skip, case_of, family  # noqa: E402

from llm_analysis.errors import LLMAnalysisError  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PUBLISHED_FAMILIES = ("gpt-fast", "Megatron", "Korthikanti", "DeepSpeed ZeRO-3")


def validation_dir() -> Path:
    return Path(os.environ.get("LLM_ANALYSIS_VALIDATION_DIR", REPO / "benchmarks" / "data" / "validation"))


def load_records(folder: Path) -> list[dict]:
    recs = json.loads((folder / "measured_dev.json").read_text())
    published = folder / "published_measurements.json"
    if published.exists():
        recs += [r for r in json.loads(published.read_text())
                 if r.get("kind") in ("inference", "training") and family(r["id"]) in PUBLISHED_FAMILIES]
    return recs


def split_of(rid: str) -> str:
    """Deterministic half: the first byte of sha256(id) is even -> 'fit', odd -> 'report'."""
    return "fit" if hashlib.sha256(rid.encode()).digest()[0] % 2 == 0 else "report"


def predictor_kwargs(perf_model: str) -> dict:
    """Keyword arguments of LLMAnalysis for the chosen predictor (a bad name is refused by
    LLMAnalysis itself, naming the valid ones)."""
    if perf_model == "roofline":
        return dict(flops_efficiency=1.0, hbm_memory_efficiency=1.0)
    return dict(perf_model=perf_model)


def evaluate(recs: list[dict], kw: dict) -> tuple[list[tuple], list[tuple]]:
    """-> rows (family, split, id, measured_s, roofline_s, predicted_s), skipped (family, id, reason)."""
    rows, skipped = [], []
    roof_kw = predictor_kwargs("roofline")
    for rec in recs:
        fam = family(rec["id"]) or "other"
        try:
            case = case_of(rec)
            roof = case.run(roof_kw)
            pred = roof if kw == roof_kw else case.run(kw)
        except Skip as e:
            skipped.append((fam, rec["id"], str(e)))
            continue
        except LLMAnalysisError as e:
            skipped.append((fam, rec["id"], f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"))
            continue
        rows.append((fam, split_of(rec["id"]), rec["id"], case.measured_s, roof, pred))
    return rows, skipped


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def summarise(rows: list[tuple]) -> dict:
    errs = [abs(pred / meas - 1) for _, _, _, meas, _, pred in rows]
    bound = [roof <= meas for _, _, _, meas, roof, _ in rows]
    return {"n": len(rows), "bound_share": sum(bound) / len(bound) if bound else float("nan"),
            "median": statistics.median(errs) if errs else float("nan"), "p90": _pct(errs, 0.9)}


def print_table(rows: list[tuple], skipped: list[tuple], splits=("fit", "report")) -> None:
    fams = sorted({r[0] for r in rows} | {s[0] for s in skipped})
    skip_count = Counter(s[0] for s in skipped)
    fmt = "{:<18} {:>5} {:>5}" + " | {:>6} {:>9} {:>8} {:>8}" * len(splits)
    label = {"fit": "fit n", "report": "rep n", "holdout": "held n"}
    print(fmt.format("family", "used", "skip", *[c for h in splits for c in (label[h], "roof<=m", "median", "p90")]))
    for fam in fams + ["ALL"]:
        mine = [r for r in rows if fam in ("ALL", r[0])]
        halves = [summarise([r for r in mine if r[1] == h]) for h in splits]
        cells = []
        for s in halves:
            cells += [s["n"], f"{s['bound_share']:.0%}", f"{s['median']:.1%}", f"{s['p90']:.1%}"]
        print(fmt.format(fam, len(mine), sum(skip_count.values()) if fam == "ALL" else skip_count[fam], *cells))


def print_skips(skipped: list[tuple]) -> None:
    reasons = defaultdict(list)
    for fam, rid, why in skipped:
        reasons[(fam, why)].append(rid)
    print("\nskipped (family: reason x count, e.g. first id):")
    for (fam, why), ids in sorted(reasons.items(), key=lambda kv: (kv[0][0], -len(kv[1]))):
        print(f"  {fam}: {why} x{len(ids)} (e.g. {ids[0]})")


def print_records(rows: list[tuple], pattern: str) -> None:
    """One line per used record whose id matches `pattern` (a regular expression)."""
    rx = re.compile(pattern)
    print(f"\nper record (id ~ {pattern!r}): split, measured s, roofline s, predicted s, predicted/measured")
    for fam, half, rid, meas, roof, pred in rows:
        if rx.search(rid):
            print(f"  {rid:<70} {half:<6} {meas:10.4g} {roof:10.4g} {pred:10.4g} {pred / meas:6.2f}")


def leave_one_source_out(recs: list[dict], iterations: int, only: str | None = None) -> tuple[list[tuple], list[tuple]]:
    """-> rows (source, 'holdout', id, measured_s, roofline_s, predicted_s) with each record predicted by
    profiles fitted without its source, and the records skipped (source, id, reason). `only`: run
    that source's fold alone (the others' records still fit it)."""
    from fit_profiles import PARAMETERS, fit_generation, generation_cases  # (imports this module)
    from accuracy_records import gpu_of
    from llm_analysis.cost.profiles import generation_of, load_profile
    roof_kw = predictor_kwargs("roofline")
    held, skipped = defaultdict(list), []  # source -> [(rid, generation, case, roofline s)]
    for rec in recs:
        fam = family(rec["id"]) or "other"
        try:
            case = case_of(rec)
            gen = generation_of(gpu_of(rec["setup"].get("gpu", "?")).name)
            held[fam].append((rec, gen, case, case.run(roof_kw)))
        except Skip as e:
            skipped.append((fam, rec["id"], str(e)))
        except LLMAnalysisError as e:
            skipped.append((fam, rec["id"], f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"))
    rows = []
    if only is not None and only not in held:
        raise SystemExit(f"--loso_source {only!r}: no such source; valid: {', '.join(sorted(held))}")
    for fam, members in sorted(held.items()):
        if only is not None and fam != only:
            continue
        t0 = time.perf_counter()
        profiles, unfitted, refitted = {}, [], []
        for gen in sorted({g for _, g, _, _ in members} & set(PARAMETERS)):
            others = generation_cases(gen, lambda rec, fam=fam: (family(rec["id"]) or "other") != fam, recs)
            if len(others) < len(PARAMETERS[gen]):
                unfitted.append(gen)
                continue
            profiles[gen] = fit_generation(gen, others, iterations=iterations)[0]
            refitted.append(gen)
        for gen in unfitted:  # its shipped values were fitted on the held-out source itself
            profiles[gen] = borrowed_profile(gen, profiles)
        if "ampere" in profiles:  # the others state Ampere's fitted native floor (host work): the fold's
            native = {"kernel_floor_native_s": profiles["ampere"].values["kernel_floor_native_s"]}
            for gen in {g for _, g, _, _ in members} - {"ampere"}:
                if "kernel_floor_native_s" in load_profile(gen).values:
                    profiles[gen] = profiles.get(gen, load_profile(gen)).with_values(
                        native, "Ampere's native floor, refitted in this fold")
        for rec, gen, case, roof in members:
            try:
                pred = case.run({"perf_model": profiles.get(gen, "calibrated")})
            except LLMAnalysisError as e:
                skipped.append((fam, rec["id"], f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"))
                continue
            rows.append((fam, "holdout", rec["id"], case.measured_s, roof, pred))
        print(f"  fold {fam}: refitted {', '.join(refitted) or 'nothing'} without it"
              f"{'; borrowed for ' + ', '.join(unfitted) if unfitted else ''} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    if only is not None:
        skipped = [s for s in skipped if s[0] == only]
    return rows, skipped


def borrowed_profile(generation: str, fold_profiles: dict):
    """The profile of a generation whose only records are the held-out source's (Blackwell: the dgxc
    GB200 runs), with every parameter it fits end to end taken from other generations instead of its
    shipped fit: the mean over the generations refitted in this fold, or, where none fits it, over the
    shipped profiles of the generations that fit it."""
    from fit_profiles import PARAMETERS
    from llm_analysis.cost.profiles import load_profile
    values = {}
    for key in PARAMETERS[generation]:
        donors = [p for g, p in fold_profiles.items() if key in PARAMETERS[g]] or \
                 [load_profile(g) for g in PARAMETERS if g != generation and key in PARAMETERS[g]]
        if donors:
            values[key] = sum(p.values[key] for p in donors) / len(donors)
    return load_profile(generation).with_values(values, "borrowed from other generations (leave-one-source-out)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--perf_model", default="roofline")
    ap.add_argument("--max_records", type=int, default=None)
    ap.add_argument("--per_record", default=None, metavar="REGEX",
                    help="also print every used record whose id matches REGEX (measured, roofline, predicted)")
    ap.add_argument("--holdout", default=None, metavar="FILE",
                    help="score the records of FILE instead, all held out (e.g. benchmarks/holdout_records.json)")
    ap.add_argument("--loso", action="store_true",
                    help="leave-one-source-out: each source predicted by profiles refitted on the others")
    ap.add_argument("--loso_iterations", type=int, default=8,
                    help="Levenberg-Marquardt steps per fold and generation (default 8)")
    ap.add_argument("--loso_source", default=None, metavar="NAME",
                    help="with --loso: run only the fold of this source (e.g. FasterTransformer)")
    ap.add_argument("--scope", choices=("framework", "all", "ampere-era"), default="framework",
                    help="with --loso: refit framework terms only (shipped) or all operator efficiencies too")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.holdout:
        recs, splits = json.loads(Path(args.holdout).read_text())[: args.max_records], ("holdout",)
    else:
        folder = validation_dir()
        if not (folder / "measured_dev.json").exists():
            print(f"validation records not found in {folder} (expected benchmarks/data/validation in the "
                  "repository); skipping")
            return 0
        recs, splits = load_records(folder)[: args.max_records], ("fit", "report")
    if args.loso:
        import logging
        logging.disable(logging.WARNING)
        from fit_profiles import use_scope
        use_scope(args.scope)
        rows, skipped = leave_one_source_out(recs, args.loso_iterations, args.loso_source)
        print(f"leave-one-source-out: {len(recs)} records, {len(rows)} used, {len(skipped)} skipped; errors are "
              "|predicted/measured - 1| of profiles fitted without the record's source\n")
        print_table(rows, skipped, ("holdout",))
        print_skips(skipped)
        if args.per_record:
            print_records(rows, args.per_record)
        print(f"({time.perf_counter() - t0:.1f} s)")
        return 0
    rows, skipped = evaluate(recs, predictor_kwargs(args.perf_model))
    if args.holdout:
        rows = [row[:1] + ("holdout",) + row[2:] for row in rows]
    print(f"perf_model={args.perf_model}: {len(recs)} records, {len(rows)} used, {len(skipped)} skipped; "
          "errors are |predicted/measured - 1|; roof<=m is the share with roofline(eff=1) <= measured\n")
    print_table(rows, skipped, splits)
    print_skips(skipped)
    if args.per_record:
        print_records(rows, args.per_record)
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
