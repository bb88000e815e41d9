"""Accuracy of `LLMAnalysis.serve()` against measured closed-loop serving runs.

Reads benchmarks/data/validation/serving_dev.csv (a quarter of the configurations of
ai-dynamo/aiconfigurator's silicon_sample.csv, Apache-2.0, NVIDIA; see that folder's README and
SOURCES.md), or $LLM_ANALYSIS_VALIDATION_DIR/serving_dev.csv. Scores the rows served by one
tensor-parallel group per worker (mode agg, attention_dp_size 1, moe_ep_size 1 or a dense
model), split deterministically into a fit half and a report half by a hash of the
configuration (every column but the run's id, source, concurrency and measurements: every
concurrency point of a configuration falls on the same side). Rows whose tp_size cannot split the
model's attention heads (the worker's GPU count with an unstated layout: tp_splits_the_heads) and
configurations whose measurements contradict the physics of serving (inconsistent_configs: TTFT above a
quarter of E2E at <= 8 clients) are left out, each by a rule on the row alone, and counted. benchmarks/fit_engine_profiles.py
fits the engine profiles on the fit half; this script reports the report half (and the fit half
beside it, marked).

Per engine: median and p90 |error| of TTFT and TPOT, the median signed error (bias: + means
predicted too slow), and the share of rows answered (a row is refused, with its reason, when its
model or GPU is not in the catalogue or the setup does not fit; reasons are printed by count).
Also by concurrency band, precision and input x output length.

    python benchmarks/serving_accuracy.py [--half report|fit|all] [--perf_model calibrated|roofline] [--rows]
    python benchmarks/serving_accuracy.py --speed   (time of a closed-loop call and of a 10,000-request simulation)
    python benchmarks/serving_accuracy.py --offsets [--half all]   (each configuration's time to first token
        beyond the engine's work: what a single fitted API latency has to stand for; see offsets())
    python benchmarks/serving_accuracy.py --by_model [--half all] [--with_layouts] [--max_concurrency 8]
        (TPOT bias per model family and precision, by engine and GPU, at low concurrency; see by_model())
    python benchmarks/serving_accuracy.py --growth [--half all]   (per engine, kind of run and model, how much
        of the TTFT growth with concurrency the starting burst explains: what benchmark_rounds stands for; see growth())
    python benchmarks/serving_accuracy.py --simulated_means 1 [--half fit]   (the simulation's means, with this
        share of the closed form's starting burst, scored instead of the closed form's: tried in round 31, not kept)
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llm_analysis.analysis import LLMAnalysis  # noqa: E402
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,  # noqa: E402
                                 get_model_config_by_name)
from llm_analysis.errors import LLMAnalysisError  # noqa: E402
from llm_analysis.serving.engine import FRAMEWORKS, PROFILE_DIR  # noqa: E402
from llm_analysis.serving.rank import build_rank  # noqa: E402
from llm_analysis.serving.steady_state import solve_closed_loop  # noqa: E402
from llm_analysis.serving.workload import make_workload  # noqa: E402

def model_of(model_path: str):
    """The catalogue model a row names (its model_path resolves offline: a catalogue entry or a checkpoint
    variant of one, llm_analysis/catalogue/checkpoint_variants.json); Refused when it does not."""
    try:
        return get_model_config_by_name(model_path)
    except LLMAnalysisError as err:
        raise Refused(f"{model_path}: {str(err)[:80]}") from None


GPUS = {"h100_sxm": "h100-sxm-80gb", "h200_sxm": "h200-sxm-141gb", "b200_sxm": "b200-180gb", "b300_sxm": "b300-270gb",
        "gb200": "gb200-nvl72-186gb", "gb300": "gb300-nvl72-279gb"}
HOPPER = ("h100_sxm", "h200_sxm")
CONFIG_COLUMNS = ("backend", "backend_version", "model_path", "system", "precision", "mode", "isl", "osl",
                  "gemm_quant_mode", "moe_quant_mode", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size",
                  "moe_ep_size")


def validation_csv() -> Path:
    base = Path(os.environ.get("LLM_ANALYSIS_VALIDATION_DIR", REPO / "benchmarks" / "data" / "validation"))
    return base / "serving_dev.csv"


@dataclass
class Row:
    id: str
    backend: str
    model_path: str
    system: str
    precision: str
    isl: int
    osl: int
    tp: int
    concurrency: int
    ttft_s: float
    tpot_s: float
    half: str  # "fit" | "report"
    config: str
    harness: str = ""  # which kind of benchmark run measured it (harness_of)


def harness_of(source: str) -> str:
    """The kind of run a row's silicon_data_source names: "workflow" for the database dumps and dated
    files of CI workflow runs (workflow_run_id, config_id and a container image; the ISL x OSL grid
    1024x1024 / 1024x8192 / 8192x1024 of InferenceMAX, whose scripts run 10 requests per client with
    lengths drawn in [0.8 L, L]: they look like its runs, which the rows do not state; docs/validation.md,
    round 25), "sweep" for per-engine-version files of
    a GPU / backend / version tree (aiconfigurator's own gap-analysis sweeps), "other" for the rest."""
    head = source.split(";")[0]
    if head.startswith("db-dump") or "workflow_run_id" in source or head.startswith("source_file=20"):
        return "workflow"
    if head.startswith("source_file=") and head.count("/") >= 4:
        return "sweep"
    return "other"


def _concurrency(raw: Dict[str, str]) -> int:
    for part in raw["silicon_data_source"].split(";"):
        key, _, value = part.strip().partition("=")
        if key == "silicon_concurrency":
            return int(value)
    from_id = raw["id"].split("_c")[-1].split("_")[0]
    if from_id.isdigit():
        return int(from_id)
    # neither states it (some rows' ids read "_c_"): batch_size is C per attention-DP rank
    return int(raw["batch_size"]) * (int(raw["attention_dp_size"] or 0) or 1)


def half_of(config: str) -> str:
    """'fit' or 'report', by the configuration's hash (every concurrency point on the same side)."""
    return "fit" if int(hashlib.sha256(config.encode()).hexdigest(), 16) % 2 == 0 else "report"


def tp_splits_the_heads(raw: Dict[str, str]) -> bool:
    """Whether the row's tp_size can be one tensor-parallel group of its model (it divides the attention
    heads). Some aggregated rows (source 2026-04-06, DeepSeek-R1 on GB200: tp_size 24, 36, 48, 52, 72 with
    128 heads, id "..._tp48_ep1_...") state the worker's GPU count there, with a layout the row does not
    give (attention data parallelism or wide expert parallelism over the NVL72 rack): they are not the
    layouts this script scores, and benchmarks/serving_layout_accuracy.py lists them as unstated. A model
    the catalogue lacks is taken at its word."""
    try:
        model = model_of(raw["model_path"])
    except Refused:
        return True
    return model.n_head % int(raw["tp_size"]) == 0


# a layout column's "one": some sources leave attention_dp_size or moe_ep_size empty, or write 0, for
# "not used" (every such row of serving_dev.csv is one tensor-parallel group: Llama-3.1-8B, Qwen3-32B)
ONE = ("1", "", "0")


def eligible(raw: Dict[str, str]) -> bool:
    """Served by one tensor-parallel group per worker: aggregated, no attention-DP, no expert parallelism,
    and a tp_size that splits the attention heads."""
    return (raw["mode"] == "agg" and raw["attention_dp_size"] in ONE and raw["moe_ep_size"] in ONE
            and raw["pp_size"] in ONE and raw["moe_tp_size"] in ONE + (raw["tp_size"],) and tp_splits_the_heads(raw))


def load_rows() -> List[Row]:
    rows = []
    with open(validation_csv(), newline="") as f:
        for raw in csv.DictReader(f):
            if not eligible(raw):
                continue
            config = "|".join(raw[c] for c in CONFIG_COLUMNS)
            rows.append(Row(raw["id"], raw["backend"], raw["model_path"], raw["system"], raw["precision"],
                            int(raw["isl"]), int(raw["osl"]), int(raw["tp_size"]), _concurrency(raw),
                            float(raw["silicon_ttft_ms"]) / 1e3, float(raw["silicon_tpot_ms"]) / 1e3,
                            half_of(config), config, harness_of(raw["silicon_data_source"])))
    return rows


LOW_CONCURRENCY = 8  # clients: at most 7 other prompts can be ahead of a request
FIRST_TOKEN_SHARE_LIMIT = 0.25  # of the end-to-end latency, at low concurrency


def inconsistent_configs(rows: List[Row]) -> Dict[str, str]:
    """Configurations whose measurements contradict the physics of serving, by a rule on the measurements
    alone (fixed before any prediction was looked at), with the reason.

    At concurrency <= 8 a request waits for at most 7 other prefills and its own; a prefill token costs a
    small share of a decode step (a decode step of <= 8 sequences streams all the weights for <= 8 tokens,
    a prefill chunk streams them once for thousands), so even 8 prompts of 8192 tokens take well under
    the time of 1023 decode steps: TTFT above a quarter of the end-to-end latency (a third of the decode
    phase) cannot be prefill and queueing, but time outside the engine's work. The offset is a property
    of the run (the same rows show it at every concurrency, not growing with load), so the whole
    configuration is left out. On serving_dev.csv this leaves out SGLang DeepSeek-R1 fp4 on B200
    8192 x 1024 (tp 4 and tp 8, source 2026-04-06: 5-9 s TTFT at 4 clients with 12-15 ms TPOT)."""
    why: Dict[str, str] = {}
    for r in rows:
        e2e = r.ttft_s + (r.osl - 1) * r.tpot_s
        if r.concurrency <= LOW_CONCURRENCY and r.ttft_s > FIRST_TOKEN_SHARE_LIMIT * e2e:
            why.setdefault(r.config, f"{r.id}: TTFT {r.ttft_s:.2f} s of E2E {e2e:.1f} s at {r.concurrency} clients")
    return why


class Refused(Exception):
    pass


def dtype_name(row: Row) -> str:
    """The catalogue dtype of a row's precision: fp8 (fp8 and fp8_block GEMMs), nvfp4 on Blackwell; gpt-oss's
    MXFP4 experts run with 16-bit activations on Hopper (no FP4 units) and 8-bit ones on Blackwell."""
    if row.precision == "bf16":
        return "w16a16e16"
    if row.precision == "" and not any(q in row.model_path.upper() for q in ("FP8", "FP4", "AWQ", "GPTQ")):
        # some sources leave precision empty (Llama-3.1-8B-Instruct and Qwen3-32B on H100 / GB200): the
        # checkpoint named is the 16-bit one and no quantisation column is set, so the engine serves it in bf16
        return "w16a16e16"
    if row.precision == "fp8":
        return "fp8"
    if row.precision == "fp4":
        if row.model_path == "openai/gpt-oss-120b":
            return "w4a16e16-mxfp4" if row.system in HOPPER else "w4a8e16-mxfp4"
        if row.system in HOPPER:
            raise Refused("fp4 on Hopper (no FP4 units)")
        return "nvfp4"
    raise Refused(f"precision {row.precision!r} not mapped")


_ANALYSES: Dict[tuple, LLMAnalysis] = {}


def analysis_for(row: Row, perf_model: str) -> LLMAnalysis:
    if row.system not in GPUS:
        raise Refused(f"{row.system}: no catalogue GPU")
    key = (row.model_path, row.system, row.precision, row.tp, perf_model)
    a = _ANALYSES.get(key)
    if a is None:
        a = _ANALYSES[key] = LLMAnalysis(model_of(row.model_path), get_gpu_config_by_name(GPUS[row.system]),
                                         get_dtype_config_by_name(dtype_name(row)),
                                         ParallelismConfig(tp_size=row.tp), perf_model=perf_model)
    return a


def predict(row: Row, perf_model: str = "calibrated", **options) -> Tuple[float, float]:
    """(TTFT, TPOT) seconds of the row's setup: the closed loop's steady-state means."""
    a = analysis_for(row, perf_model)
    s = a.serve(concurrency=row.concurrency, input_len=row.isl, output_len=row.osl, framework=row.backend,
                num_requests=0, **options)
    return s["ttft_s"], s["tpot_s"]


def predict_simulated(row: Row, burst_share: float) -> Tuple[float, float]:
    """(TTFT, TPOT) seconds as the means of the seeded simulation of the row's steady state (1,500 requests,
    clients spread over the steady state's E2E as serve() starts them), plus `burst_share` x the closed form's
    share of the starting burst in the TTFT: what the closed loop would answer with its means taken from the
    simulation, whose clients of one length return in clumps (docs/serving.md, "Means from the simulation")."""
    plain = analysis_for(row, "calibrated")
    a = plain.with_conventions(plain.conventions_named(None))  # as serve() runs it
    lengths = make_workload(a.model_config, row.concurrency, None, row.isl, row.osl, None).lengths
    replica, _ = build_rank(a, a.parallelism_config, row.backend, {"num_requests": 1500}, lengths)
    engine = replica.engine
    state = solve_closed_loop(replica.timer, engine, replica.pool, replica.shape, row.concurrency,
                              engine.api_latency_s)
    sim = replica.simulate(concurrency=row.concurrency, seed=engine.seed, spread_s=state.e2e_s - state.queue_wait_s)
    return float(sim.ttft_s.mean()) + burst_share * state.burst_s, float(sim.tpot_s.mean())


def band(c: int) -> str:
    return "c<=8" if c <= 8 else "c16-32" if c <= 32 else "c64-128" if c <= 128 else "c>128"


def median_p90(errors: List[float]) -> Tuple[float, float]:
    """Median and p90 of |error| (the p90 as the benchmarks state it: the sorted value at 0.9 n)."""
    e = sorted(abs(x) for x in errors)
    return statistics.median(e), e[min(len(e) - 1, int(0.9 * len(e)))]


def _stats(errors: List[float]) -> str:
    """Median and p90 of |error|, and the median signed error (bias: + predicted too slow)."""
    if not errors:
        return "   -      -       -   "
    med, p90 = median_p90(errors)
    return f"{100 * med:5.1f}% {100 * p90:5.1f}% {100 * statistics.median(errors):+6.1f}%"


def score_row(row, keys, groups, refusals, show_rows: bool, predicted) -> None:
    """One row into its groups: counted in each, its relative TTFT/TPOT errors added where `predicted()`
    answers, its refusal reason counted where it does not (shared with serving_layout_accuracy.py)."""
    for k in keys:
        groups[k]["n"] += 1
    try:
        ttft, tpot = predicted()
    except Refused as why:
        refusals[str(why)] += 1
        return
    except LLMAnalysisError as err:
        refusals[f"{type(err).__name__}: {str(err)[:110]}"] += 1
        return
    e_ttft, e_tpot = ttft / row.ttft_s - 1, tpot / row.tpot_s - 1
    for k in keys:
        groups[k]["ok"] += 1
        groups[k]["ttft"].append(e_ttft)
        groups[k]["tpot"].append(e_tpot)
    if show_rows:
        print(f"{row.id[-58:]:58s} c={row.concurrency:5d} ttft {row.ttft_s * 1e3:8.1f} -> {ttft * 1e3:8.1f} ms "
              f"({100 * e_ttft:+6.1f}%)  tpot {row.tpot_s * 1e3:6.2f} -> {tpot * 1e3:6.2f} ms ({100 * e_tpot:+6.1f}%)")


def score(rows: List[Row], perf_model: str, show_rows: bool = False, options_by_engine=None,
          simulated_burst_share=None) -> Dict[str, dict]:
    """Print and return the errors per engine (and by band and precision) of `rows` (with
    `simulated_burst_share`, of predict_simulated's means instead of the closed form's)."""
    groups: Dict[Tuple[str, str], Dict[str, list]] = defaultdict(lambda: {"ttft": [], "tpot": [], "n": 0, "ok": 0})
    refusals: Dict[str, int] = defaultdict(int)
    for row in rows:
        keys = [("engine", row.backend), ("band", f"{row.backend} {band(row.concurrency)}"),
                ("precision", f"{row.backend} {row.precision}"), ("lengths", f"{row.backend} {row.isl}x{row.osl}"),
                ("harness", f"{row.backend} {row.harness} runs"), ("all", "all")]
        if simulated_burst_share is not None:
            score_row(row, keys, groups, refusals, show_rows, lambda: predict_simulated(row, simulated_burst_share))
            continue
        score_row(row, keys, groups, refusals, show_rows,
                  lambda: predict(row, perf_model, **((options_by_engine or {}).get(row.backend, {}))))
    print(f"{'group':28s} {'rows':>5s} {'answered':>9s}   TTFT med   p90    bias   TPOT med   p90    bias")
    for kind in ("engine", "all", "band", "precision", "lengths", "harness"):
        for (k, name), g in sorted(groups.items()):
            if k != kind:
                continue
            print(f"{name:28s} {g['n']:5d} {g['ok'] / g['n']:8.0%}    {_stats(g['ttft'])}    {_stats(g['tpot'])}")
    if refusals:
        print("refused:")
        for why, n in sorted(refusals.items(), key=lambda kv: -kv[1]):
            print(f"  {n:4d}  {why}")
    return {name: g for (k, name), g in groups.items() if k in ("engine", "all")}


def accuracy_of(group: Dict[str, list]) -> Dict[str, float]:
    """A scored group's figures as a profile states them: rows, share answered, median and p90 of |error|."""
    ttft, tpot = median_p90(group["ttft"]), median_p90(group["tpot"])
    return {"rows": group["n"], "answered": round(group["ok"] / group["n"], 3), "ttft_median": round(ttft[0], 3),
            "ttft_p90": round(ttft[1], 3), "tpot_median": round(tpot[0], 3), "tpot_p90": round(tpot[1], 3)}


def write_accuracy(groups: Dict[str, dict]) -> None:
    """State each engine's report-half figures in its profile (`measured_accuracy`), which serve() prints
    beside its calibrated answers."""
    for engine in FRAMEWORKS:
        if engine not in groups or not groups[engine]["ok"]:
            continue
        path = PROFILE_DIR / f"{engine}.json"
        profile = json.loads(path.read_text())
        profile["measured_accuracy"] = dict(accuracy_of(groups[engine]), source=(
            "benchmarks/serving_accuracy.py --write_accuracy: the report half of serving_dev.csv (aiconfigurator's "
            "silicon sample, Apache-2.0; aggregated rows of one tensor-parallel group per worker, not used to fit "
            "this profile), perf_model calibrated; errors are |predicted / measured - 1| of the mean TTFT and TPOT"))
        path.write_text(json.dumps(profile, indent=1) + "\n")
        print(f"wrote {path.relative_to(REPO)}")


def offsets(rows: List[Row], perf_model: str) -> None:
    """Per configuration: the measured TTFT at its least concurrency less the predicted engine part (the
    steady state with no API latency and no starting burst: the wait for the step in progress and the
    request's own prefill steps), in ms and in measured decode steps (TPOTs), and how TTFT grows from the
    least to the largest concurrency, measured and predicted (with the profile's burst share). A single
    API latency per engine stands for the first column; its spread across configurations of one engine
    (run families: versions, dates, launch settings the rows do not state) bounds the TTFT accuracy."""
    by_config: Dict[str, List[Row]] = defaultdict(list)
    for r in rows:
        by_config[r.config].append(r)
    excess_by_engine: Dict[str, List[float]] = defaultdict(list)
    print(f"{'engine':7s} {'version':15s} {'model':22s} {'gpu':9s} {'prec':4s} tp {'lengths':9s} half    c0  "
          f"TTFT(c0) engine  excess (TPOTs)   growth c0->cmax: measured  predicted")
    for config, group in sorted(by_config.items()):
        group = sorted(group, key=lambda r: r.concurrency)
        low, high = group[0], group[-1]
        try:
            engine_s = predict(low, perf_model, api_latency_s=0.0, benchmark_rounds=0)[0]
            grown = predict(high, perf_model)[0] - predict(low, perf_model)[0]
        except (Refused, LLMAnalysisError):
            continue
        excess = low.ttft_s - engine_s
        excess_by_engine[low.backend].append(excess)
        version = config.split("|")[1] or "-"
        print(f"{low.backend:7s} {version[:15]:15s} {low.model_path.split('/')[-1][:22]:22s} {low.system:9s} "
              f"{low.precision:4s} {low.tp:2d} {low.isl}x{low.osl:<4d} {low.half:6s} {low.concurrency:4d} "
              f"{low.ttft_s * 1e3:8.0f} {engine_s * 1e3:6.0f} {excess * 1e3:7.0f} ({excess / low.tpot_s:5.1f})   "
              f"c{high.concurrency:<4d} {(high.ttft_s - low.ttft_s) * 1e3:8.0f} {grown * 1e3:9.0f}")
    for engine, xs in sorted(excess_by_engine.items()):
        q = statistics.quantiles([1e3 * x for x in xs], n=10) if len(xs) > 1 else [1e3 * xs[0]] * 9
        print(f"{engine}: {len(xs)} configurations, TTFT beyond the engine's work at the least concurrency: "
              f"median {1e3 * statistics.median(xs):.0f} ms, p10 {q[0]:.0f} ms, p90 {q[-1]:.0f} ms")


def growth(rows: List[Row], perf_model: str) -> None:
    """How much of the measured TTFT growth with concurrency the starting burst explains, per engine, kind of
    run and model. Per configuration, from its least concurrency C0 to each larger C: the measured growth
    less the steady state's (serve() with benchmark_rounds=0), over (C - C0) x P, P the request's prefill
    alone (inference() at batch 1). A burst of C clients prefilled in order gives each a mean wait of about
    P (C + 1) / 2, 1 / R of it in the mean of R rounds: the ratio is then about 1 / (2 R) whatever the model,
    and the profile's benchmark_rounds R stands for it. A ratio that moves from model to model within one
    engine and kind of run says the growth is not the burst's, or P is off for those models."""
    by_config: Dict[str, List[Row]] = defaultdict(list)
    for r in rows:
        by_config[r.config].append(r)
    ratios: Dict[Tuple[str, str, str], List[float]] = defaultdict(list)
    for group in by_config.values():
        group = sorted(group, key=lambda r: r.concurrency)
        low = group[0]
        try:
            a = analysis_for(low, perf_model)
            prefill_s = a.inference(batch_size_per_gpu=1, seq_len=low.isl, num_tokens_to_generate=1)["prefill_latency"]
            steady_low = predict(low, perf_model, benchmark_rounds=0)[0]
            for r in group[1:]:
                if r.concurrency > low.concurrency:
                    steady = predict(r, perf_model, benchmark_rounds=0)[0] - steady_low
                    ratio = (r.ttft_s - low.ttft_s - steady) / ((r.concurrency - low.concurrency) * prefill_s)
                    ratios[(r.backend, r.harness, f"{r.model_path.split('/')[-1]} {r.system}")].append(ratio)
        except (Refused, LLMAnalysisError):
            continue
    print("measured TTFT growth beyond the steady state's, over (C - C0) x the prefill alone "
          "(about 1 / (2 benchmark_rounds) when the starting burst explains it)")
    print(f"{'engine':7s} {'run':9s} {'model gpu':40s} {'points':>6s}  median  [p10, p90]")
    by_engine: Dict[str, List[float]] = defaultdict(list)
    for (engine, harness, model), xs in sorted(ratios.items()):
        by_engine[engine].append(statistics.median(xs))
        q = statistics.quantiles(xs, n=10) if len(xs) > 1 else [xs[0]] * 9
        print(f"{engine:7s} {harness:9s} {model[:40]:40s} {len(xs):6d}  {statistics.median(xs):6.3f}  "
              f"[{q[0]:.3f}, {q[-1]:.3f}]")
    for engine, medians in sorted(by_engine.items()):
        rounds = json.loads((PROFILE_DIR / f"{engine}.json").read_text())["benchmark_rounds"]["value"]
        print(f"{engine}: the groups' medians span {min(medians):.3f} .. {max(medians):.3f} (median "
              f"{statistics.median(medians):.3f}); its profile's benchmark_rounds {rounds:g} stands for "
              f"{1 / (2 * rounds):.3f}")


def by_model(predicted_rows, max_concurrency: int, spread_limit: float = 0.10) -> None:
    """TPOT bias per model family and precision, by engine and GPU (and layout kind), over the rows at
    <= `max_concurrency` clients: there a decode step is mostly the kernels of a small batch (little
    queueing, few prefills mixed in), so a bias shared by every engine and GPU of a family points at the
    operator description or the cost model, not at an engine's scheduling. `predicted_rows` yields
    (row, kind, predicted TPOT s) for the rows answered. A family is listed as consistent when every
    (engine, GPU, kind) group of it is biased beyond +-`spread_limit` the same way."""
    groups: Dict[Tuple[str, str], Dict[Tuple[str, str, str], List[float]]] = defaultdict(lambda: defaultdict(list))
    for row, kind, tpot in predicted_rows:
        if row.concurrency > max_concurrency:
            continue
        family = (row.model_path.split("/")[-1], row.precision)
        groups[family][(row.backend, row.system, kind)].append(tpot / row.tpot_s - 1)
    print(f"TPOT bias (median signed error, + predicted too slow) at <= {max_concurrency} clients")
    print(f"{'model':22s} {'prec':5s} {'engine':7s} {'gpu':9s} {'kind':7s} {'rows':>4s}   bias   [min, max]")
    consistent = []
    for family in sorted(groups):
        biases = []
        for (engine, gpu, kind), errors in sorted(groups[family].items()):
            bias = statistics.median(errors)
            biases.append(bias)
            print(f"{family[0][:22]:22s} {family[1]:5s} {engine:7s} {gpu:9s} {kind:7s} {len(errors):4d} "
                  f"{100 * bias:+6.1f}%  [{100 * min(errors):+.0f}, {100 * max(errors):+.0f}]")
        if all(b > spread_limit for b in biases) or all(b < -spread_limit for b in biases):
            consistent.append(f"{family[0]} {family[1]} ({len(biases)} groups, {100 * min(biases):+.0f}% .. "
                              f"{100 * max(biases):+.0f}%)")
    print(f"families biased beyond +-{100 * spread_limit:.0f}% the same way in every engine/GPU group: "
          + ("; ".join(consistent) or "none"))


def _aggregated_predictions(rows: List[Row], perf_model: str):
    for row in rows:
        try:
            yield row, "agg", predict(row, perf_model)[1]
        except (Refused, LLMAnalysisError):
            continue


def _layout_predictions(half: str):
    """The layout rows (benchmarks/serving_layout_accuracy.py: attention-DP, EP, PP, disaggregated) of
    `half`, answered: imported here, since that script imports this one."""
    import serving_layout_accuracy as layouts
    for row in layouts.load_rows():
        if row.kind.endswith("-unstated") or (half != "all" and row.half != half):
            continue
        try:
            yield row, row.kind, layouts.predict(row)[1]
        except (Refused, LLMAnalysisError):
            continue


def speed() -> None:
    """Seconds of serve() calls on Llama-3.1-70B fp8 over 4 H100s (calibrated): closed-loop steady state
    (means only) at 100 concurrencies after a first call, and simulations of 10,000 requests."""
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-70B"), get_gpu_config_by_name("h100-sxm-80gb"),
                    get_dtype_config_by_name("fp8"), ParallelismConfig(tp_size=4), perf_model="calibrated")
    t = time.perf_counter()
    a.serve(concurrency=64, input_len=1024, output_len=1024, num_requests=0)
    print(f"first closed-loop call (step costs worked out): {1e3 * (time.perf_counter() - t):.1f} ms")
    for framework in ("vllm", "sglang", "trtllm"):
        a.serve(concurrency=64, input_len=1024, output_len=1024, num_requests=0, framework=framework)
        t = time.perf_counter()
        for c in range(1, 201, 2):
            a.serve(concurrency=c, input_len=1024, output_len=1024, num_requests=0, framework=framework)
        print(f"closed-loop steady state, {framework}, concurrency 1..199: "
              f"{1e3 * (time.perf_counter() - t) / 100:.2f} ms per call")
    for kw in (dict(concurrency=64, input_len=1024, output_len=1024),
               dict(request_rate=4.0, input_len=1024, output_len=1024),
               dict(request_rate=4.0, input_len={"mean": 1024, "spread": 512},
                    output_len={"mean": 512, "spread": 256})):
        t = time.perf_counter()
        a.serve(num_requests=10000, **kw)
        print(f"10,000 simulated requests {kw}: {time.perf_counter() - t:.2f} s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=("report", "fit", "all"), default="report")
    parser.add_argument("--perf_model", choices=("calibrated", "roofline"), default="calibrated")
    parser.add_argument("--rows", action="store_true", help="print every row's prediction")
    parser.add_argument("--speed", action="store_true", help="time serve() calls instead of scoring")
    parser.add_argument("--offsets", action="store_true",
                        help="per configuration, the TTFT beyond the engine's work at the least concurrency")
    parser.add_argument("--growth", action="store_true",
                        help="per engine, kind of run and model: the TTFT growth with concurrency the starting burst explains")
    parser.add_argument("--keep_inconsistent", action="store_true",
                        help="score the configurations inconsistent_configs() leaves out too")
    parser.add_argument("--by_model", action="store_true",
                        help="TPOT bias per model family and precision, by engine and GPU, at low concurrency")
    parser.add_argument("--with_layouts", action="store_true",
                        help="with --by_model: add serving_layout_accuracy.py's rows (layouts, disaggregated)")
    parser.add_argument("--max_concurrency", type=int, default=LOW_CONCURRENCY,
                        help="with --by_model: the most clients a row may have (default %(default)s)")
    parser.add_argument("--write_accuracy", action="store_true",
                        help="write each engine's report-half figures into its profile (measured_accuracy)")
    parser.add_argument("--simulated_means", type=float, metavar="BURST_SHARE",
                        help="score the seeded simulation's means (calibrated) plus this share of the closed "
                             "form's starting-burst TTFT, instead of the closed form's means (round 31: tried)")
    args = parser.parse_args(argv)
    if args.speed:
        speed()
        return 0
    path = validation_csv()
    if not path.exists():
        print(f"no {path}: set LLM_ANALYSIS_VALIDATION_DIR")
        return 0
    rows = load_rows()
    excluded = {} if args.keep_inconsistent else inconsistent_configs(rows)
    left_out = [r for r in rows if r.config in excluded and (args.half == "all" or r.half == args.half)]
    rows = [r for r in rows if r.config not in excluded]
    chosen = rows if args.half == "all" else [r for r in rows if r.half == args.half]
    print(f"{len(chosen)} of {len(rows)} eligible rows ({args.half} half), perf_model={args.perf_model}")
    if left_out:
        print(f"left out: {len(left_out)} rows of {len(excluded)} configurations whose TTFT at <= {LOW_CONCURRENCY} "
              f"clients exceeds {FIRST_TOKEN_SHARE_LIMIT:g} of E2E (see inconsistent_configs; --keep_inconsistent "
              f"scores them): " + "; ".join(excluded.values()))
    t = time.perf_counter()
    if args.offsets:
        offsets(chosen, args.perf_model)
        return 0
    if args.growth:
        growth(chosen, args.perf_model)
        return 0
    if args.by_model:
        predicted = list(_aggregated_predictions(chosen, args.perf_model))
        if args.with_layouts:
            sys.path.insert(0, str(REPO / "benchmarks"))
            predicted += list(_layout_predictions(args.half))
        by_model(predicted, args.max_concurrency)
        return 0
    if args.simulated_means is not None and (args.perf_model != "calibrated" or args.write_accuracy):
        parser.error("--simulated_means scores perf_model calibrated and writes nothing")
    groups = score(chosen, args.perf_model, args.rows, simulated_burst_share=args.simulated_means)
    print(f"({time.perf_counter() - t:.1f} s)")
    if args.write_accuracy:
        if args.half != "report" or args.perf_model != "calibrated" or args.keep_inconsistent:
            parser.error("--write_accuracy states the report half under perf_model calibrated, as scored by default")
        write_accuracy(groups)
    return 0


if __name__ == "__main__":
    sys.exit(main())
