"""Fit the shipped calibration profiles on the validation records.

    python benchmarks/fit_profiles.py [--write] [--generations ampere,hopper] [--half fit|all]
                                      [--scope framework|all|ampere-era]
    python benchmarks/fit_profiles.py --operators [--write]

Two steps, in this order (issue 27 items 3 and 5):
1. `--operators`: the operator efficiencies (GEMM plateaus by dtype, flash-attention prefill on
   executed FLOPs, HBM streaming, decode KV streaming, NCCL ring and NVLink-SHARP bus bandwidth) are read off the
   measured operator tables (benchmarks/measured_operator_values.py) into every generation with
   measurements, each value with its source; generations without measured data keep theirs.
2. The end-to-end fit below, of only what end-to-end runs can tell (framework terms: kernel
   floors, weight-only dequantisation, the training share of the kernel rates): PARAMETERS.

For each GPU generation with records, least-squares fit (cost/calibrate.py) of the
parameters below on the records' measured times, the predictor being the public API
(`LLMAnalysis(..., perf_model=<trial Profile>)` through accuracy_records' cases).
`--half fit` (the default) fits on the fit half of the records (benchmarks/accuracy.py
`split_of`: first byte of sha256(id) even); `--half all` on every record. With --write the
fitted values are stored in llm_analysis/cost/profiles/<generation>.json with their source.
`benchmarks/accuracy.py --loso` refits with `fit_generation` once per held-out source
(leave-one-source-out) and is what model changes are judged by.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterable, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import load_records, split_of, validation_dir  # noqa: E402
from accuracy_records import TRAINING_FAMILIES, Case, Skip, case_of, family, gpu_of  # noqa: E402

from llm_analysis.cost.calibrate import calibrate  # noqa: E402
from llm_analysis.cost.profiles import PROFILE_DIR, Profile, generation_of, load_profile, save_profile  # noqa: E402
from llm_analysis.errors import LLMAnalysisError  # noqa: E402

# What end-to-end records can pin down, per generation (at least ~10 records per parameter): only
# framework terms. The operator efficiencies (GEMM plateaus, HBM streaming, flash prefill, decode KV
# streaming, NCCL bus bandwidth) come from the measured operator tables (--operators), not refitted here;
# NCCL latencies stay at their nccl-tests-anchored values (tests/test_nccl_model.py).
_TRAINING = "training_compute_efficiency"  # training steps below the kernel benchmarks' rate
PARAMETERS = {
    # the kernel floors are host launch work; weight-only dequantisation has no operator table. The eager
    # floor is not fitted: no eager-launched record pins it (the C++ engines' runs, FasterTransformer and
    # TensorRT-LLM's GptSession, have the native floor; training steps hardly depend on it)
    # (the graph floor is assumed as Hopper's since round 37: fitted, it fell to 0.58 us and an A100
    # decoded faster than an H100; ampere.json states it)
    "ampere": ("kernel_floor_native_s", "weight_only_int8_stream_factor",
               "weight_only_int4_stream_factor", _TRAINING),
    # kernel_floor_eager_s is not fitted here: one fit-half record (a batch-1 first token) would pin it;
    # Hopper takes Ampere's fitted host launch floor (hopper.json states it)
    "hopper": (_TRAINING,),
    # ada: nothing to fit (its two fit-half L40S records are inference, its operators measured or assumed)
    # the GB200 NeMo recipes (dgxc-benchmarking v25.05): training steps only
    "blackwell": (_TRAINING,),
}

# Physically plausible bands the fit may not leave (a parameter pinned at a band edge says the
# records hold an effect the model does not describe: exclude or model it, do not absorb it).
_TRAINING_BAND = (0.6, 1.0)  # a GPU at its power limit still sustains its base clock (H100 SXM5 base /
# boost 1,590 / 1,980 MHz = 0.80, A100 SXM4 1,095 / 1,410 MHz = 0.78: NVIDIA H100 / A100 datasheets and
# whitepapers), and overlapped NCCL kernels hold a minority of the SMs (NCCL's default 16-32 channels)
BOUNDS = {gen: {_TRAINING: _TRAINING_BAND} for gen in ("ampere", "hopper", "blackwell")}

# `--scope all` (issue 27's comparison, benchmarks/accuracy.py --loso --scope all): an end-to-end refit
# of the operator efficiencies too, started from their measured values (the shipped profiles) as prior
# and kept inside the bands the measurements and papers allow; the parameters of the first end-to-end
# fit (commit 4b13640) plus the training share. Blackwell's only records are one source's (dgxc GB200).
OPERATOR_PARAMETERS = {
    "ampere": ("gemm_plateau_efficiency", "gemm_k_half", "hbm_efficiency", "attn_prefill_efficiency"),
    "hopper": ("gemm_plateau_efficiency", "gemm_fp8_plateau_efficiency", "hbm_efficiency",
               "attn_prefill_efficiency", "attn_decode_hbm_efficiency"),
}
OPERATOR_BOUNDS = {
    # H100 SXM device-local copies stream 2,570-2,578 GB/s of the 3,350 GB/s spec (0.77;
    # p2pBandwidthLatencyTest diagonal in NVIDIA/nccl#1264); refresh/ECC keep any GPU below ~0.92
    "hopper": {"hbm_efficiency": (0.75, 0.92),
               # FlashAttention-2 reaches ~35% of the H100 dense peak, FlashAttention-3 up to 75%
               # (Shah et al. 2024, arXiv 2407.08608)
               "attn_prefill_efficiency": (0.30, 0.75),
               # a KV-cache read streams at most as fast as a copy; vLLM's paged kernel is 20-26% slower
               # than FasterTransformer's contiguous one (Kwon et al. 2023, arXiv 2309.06180 Sec. 7)
               "attn_decode_hbm_efficiency": (0.5, 0.92)},
}
_FRAMEWORK_PARAMETERS = dict(PARAMETERS)


SCOPES = ("framework", "all", "ampere-era")


def use_scope(scope: str) -> None:
    """Which parameters the end-to-end fit moves: 'framework' (framework terms only), 'all' (the
    operator efficiencies too, OPERATOR_PARAMETERS) or 'ampere-era' (Ampere's operator efficiencies
    too: its records ran 2021-2023 libraries, older than the measured tables; Hopper and Blackwell
    keep the measured ones). Updates PARAMETERS and BOUNDS in place, so every importer (accuracy.py's
    leave-one-source-out) fits the same set."""
    PARAMETERS.clear()
    PARAMETERS.update(_FRAMEWORK_PARAMETERS)
    if scope in ("all", "ampere-era"):
        for gen, names in OPERATOR_PARAMETERS.items():
            if scope == "ampere-era" and gen != "ampere":
                continue
            PARAMETERS[gen] = names + PARAMETERS[gen]
            BOUNDS[gen].update(OPERATOR_BOUNDS.get(gen, {}))


def generation_cases(generation: str, keep: Callable[[dict], bool], records: Optional[Iterable[dict]] = None
                     ) -> Dict[str, Case]:
    """record id -> Case for the records of one generation that `keep` accepts and the API expresses."""
    out = {}
    for rec in load_records(validation_dir()) if records is None else records:
        if not keep(rec):
            continue
        try:
            if generation_of(gpu_of(rec["setup"].get("gpu", "?")).name) != generation:
                continue
            case = case_of(rec)
            if not case.fitted_on:
                continue
            case.run({"perf_model": "calibrated"})
        except (Skip, LLMAnalysisError, KeyError):
            continue
        out[rec["id"]] = case
    return out


def fit_generation(generation: str, cases: Dict[str, Case], names: Optional[Tuple[str, ...]] = None,
                   iterations: int = 50) -> Tuple[Profile, str]:
    """(the generation's shipped profile with `names` (default PARAMETERS) fitted on `cases`, the
    rms log error note); the shipped profile unchanged when there are fewer cases than parameters.

    Two stages when the sustained share (`training_compute_efficiency`) is among them: the share on
    the training records alone (long steps, where it is
    identifiable: an inference run's compute time trades against its launch floors, and the
    FasterTransformer rows, a third of the records, would set it for every training source), then
    the other names on every record with the share fixed. inference() applies it to runs launched
    without CUDA graphs (cost/choice.py `inference`)."""
    names = PARAMETERS[generation] if names is None else names
    base = load_profile(generation)
    if len(cases) < len(names):
        return base, f"{len(cases)} records for {len(names)} parameters: not fitted"
    training = {rid: c for rid, c in cases.items() if family(rid) in TRAINING_FAMILIES}
    if _TRAINING in names and training:
        share, note = _fit_on(generation, training, base, (_TRAINING,), iterations)
        rest = tuple(n for n in names if n != _TRAINING)
        return _fit_on(generation, cases, share, rest, iterations) if rest else (share, note)
    return _fit_on(generation, cases, base, names, iterations)


def _fit_on(generation: str, cases: Dict[str, Case], start: Profile, names: Tuple[str, ...],
            iterations: int) -> Tuple[Profile, str]:
    """`start` with `names` least-squares fitted on `cases` (cost/calibrate.py), the rms note."""
    meas = [{"id": rid, "setup": {"record": rid}, "value": c.measured_s, "unit": "s"} for rid, c in cases.items()]

    def predict(setup, profile):
        return cases[setup["record"]].run({"perf_model": profile})
    bands = {n: b for n, b in BOUNDS.get(generation, {}).items() if n in names}
    fitted = calibrate(meas, predict, start, names, bounds=bands, iterations=iterations)
    return fitted, fitted.sources[names[0]].split("rms log error")[-1].strip()


def _edge_note(value: float, band) -> str:
    """'; at the lower/upper edge of its band ...' when the fit stopped on a BOUNDS edge, else ''."""
    if band is None:
        return ""
    for edge, word in ((band[0], "lower"), (band[1], "upper")):
        if abs(value / edge - 1) < 1e-6:
            return (f"; stopped at the {word} edge of its plausible band [{band[0]}, {band[1]}] "
                    "(benchmarks/fit_profiles.py BOUNDS): the records pull beyond it, from effects the model does not describe")
    return ""


def fit(generation: str, write: bool, half: str) -> None:
    keep = (lambda rec: split_of(rec["id"]) == "fit") if half == "fit" else (lambda rec: True)
    cases = generation_cases(generation, keep)
    names = PARAMETERS[generation]
    if len(cases) < len(names):
        print(f"{generation}: {len(cases)} records for {len(names)} parameters: not fitted")
        return
    base = load_profile(generation)
    t0 = time.perf_counter()
    fitted, rms_note = fit_generation(generation, cases)
    which = "fit half (ids hashed: first byte of sha256(id) even)" if half == "fit" else "every record"
    source = (f"fitted on {len(cases)} records of measured_dev.json + published_measurements.json, {which} "
              f"(benchmarks/fit_profiles.py), rms log error {rms_note}")
    out = base
    n_training = sum(family(rid) in TRAINING_FAMILIES for rid in cases)
    for n in names:  # a value at a band edge says so in its source
        stage = (f"; on its {n_training} training records alone, the other terms then on all with it fixed "
                 "(fit_generation)") if n == _TRAINING else ""
        out = out.with_values({n: fitted.values[n]}, source + stage + _edge_note(fitted.values[n],
                                                                                 BOUNDS.get(generation, {}).get(n)))
    for n in names:
        print(f"  {generation}.{n}: {base.values[n]:.4g} -> {out.values[n]:.4g}")
    print(f"{generation}: {len(cases)} records, {rms_note} ({time.perf_counter() - t0:.0f} s)")
    if write:
        save_profile(out, PROFILE_DIR / f"{generation}.json")
        load_profile.cache_clear()


def write_operator_values(write: bool) -> None:
    """Step 1: the measured operator values into the profiles (a derived profile gets them as its own
    values over its base's), printed old -> new; written with --write."""
    import json
    from measured_operator_values import generation_values, left_out, measured_docs, _generation
    for gen in sorted({_generation(g) for g in measured_docs()} - {""}):
        path = PROFILE_DIR / f"{gen}.json"
        doc = json.loads(path.read_text())
        old = load_profile(gen)
        for key, (value, source) in sorted(generation_values(gen).items()):
            print(f"  {gen}.{key}: {old.values[key]:.4g} -> {value:.4g}")
            doc["parameters"][key] = {"value": value, "source": source}
        for key, note in left_out(gen):
            print(f"  {gen}.{key}: kept {old.values[key]:.4g} ({note})")
        if write:
            doc["parameters"] = dict(sorted(doc["parameters"].items()))
            path.write_text(json.dumps(doc, indent=1) + "\n")
    load_profile.cache_clear()


def main(argv=None) -> int:
    logging.disable(logging.WARNING)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--generations", default=",".join(PARAMETERS))
    ap.add_argument("--scope", choices=SCOPES, default="framework",
                    help="the end-to-end fit moves framework terms only, or all operator efficiencies too")
    ap.add_argument("--half", choices=("fit", "all"), default="fit")
    ap.add_argument("--operators", action="store_true",
                    help="step 1: read the operator efficiencies off the measured tables (no end-to-end fit)")
    args = ap.parse_args(argv)
    use_scope(args.scope)
    if args.operators:
        write_operator_values(args.write)
        return 0
    if not (validation_dir() / "measured_dev.json").exists():
        print(f"validation records not found in {validation_dir()}; nothing fitted")
        return 0
    for gen in args.generations.split(","):
        fit(gen, args.write, args.half)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
