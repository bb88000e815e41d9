"""Accuracy of `LLMAnalysis.serve()` on the serving layouts of issue 26: attention data parallelism,
expert parallelism, pipeline stages and disaggregated prefill/decode pools.

Reads benchmarks/data/validation/serving_dev.csv (a quarter of the configurations of
ai-dynamo/aiconfigurator's silicon_sample.csv, Apache-2.0, NVIDIA; see that folder's README and
SOURCES.md), or $LLM_ANALYSIS_VALIDATION_DIR/serving_dev.csv. Scores the rows that
benchmarks/serving_accuracy.py leaves out: mode disagg, or aggregated with attention_dp_size > 1,
moe_ep_size > 1 or pp_size > 1; split into a fit half and a report half by the same hash of the
configuration as benchmarks/serving_accuracy.py (every concurrency point of a configuration on
the same side). Disaggregated rows that name no worker counts, and aggregated rows whose tp_size
cannot split the model's attention heads (the worker's GPU count, layout not given), are listed
apart (not expected to be answered: the deployment is not stated).

Prints, per half, the median and p90 |error| of TTFT and TPOT and the share of rows answered,
by engine and by kind (agg layout / disagg), and the refusals with their reasons.

    python benchmarks/serving_layout_accuracy.py [--half report|fit|all] [--rows]
    python benchmarks/serving_layout_accuracy.py --fit     (fit prefill_contention and expert_spread_scale
                                                            per engine on the fit half)
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from serving_accuracy import (CONFIG_COLUMNS, GPUS, Refused, _concurrency, model_of,  # noqa: E402
                              accuracy_of, dtype_name, half_of, median_p90, score_row, tp_splits_the_heads, validation_csv)

from llm_analysis.analysis import LLMAnalysis  # noqa: E402
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name  # noqa: E402
from llm_analysis.errors import LLMAnalysisError  # noqa: E402
from llm_analysis.serving.engine import FRAMEWORKS, PROFILE_DIR  # noqa: E402


def _int(value: str) -> Optional[int]:
    """A layout column: None when blank or 0 (the csv leaves derived sizes out)."""
    return int(value) if value not in ("", "0") else None


@dataclass
class LayoutRow:
    id: str
    kind: str  # "agg" | "agg-unstated" | "disagg" | "disagg-unstated"
    backend: str
    model_path: str
    system: str
    precision: str
    isl: int
    osl: int
    concurrency: int
    layout: Dict[str, Optional[int]]  # agg: tp, adp, moe_tp, moe_ep, pp
    pools: Dict[str, Dict[str, Optional[int]]]  # disagg: prefill/decode: workers, batch, tp, adp, moe_tp, moe_ep, pp
    ttft_s: float
    tpot_s: float
    half: str


def eligible(raw: Dict[str, str]) -> bool:
    """The layouts serving_accuracy.py leaves out (aggregated rows whose tp_size cannot split the heads
    among them: kind agg-unstated)."""
    return (raw["mode"] == "disagg" or raw["attention_dp_size"] not in ("1", "", "0")
            or raw["moe_ep_size"] not in ("1", "", "0") or raw["pp_size"] not in ("1", "", "0")
            or not tp_splits_the_heads(raw))


def _layout(raw: Dict[str, str], prefix: str = "") -> Dict[str, Optional[int]]:
    return {k: _int(raw[f"{prefix}{c}"]) for k, c in (("tp", "tp_size"), ("adp", "attention_dp_size"),
                                                      ("moe_tp", "moe_tp_size"), ("moe_ep", "moe_ep_size"),
                                                      ("pp", "pp_size"))}


def concurrency(raw: Dict[str, str]) -> int:
    """The run's clients: silicon_concurrency, or `_c<C>_` in the id, else (a few rows name neither) the
    batch per attention-DP rank times the ranks (the README's definition of batch_size)."""
    try:
        return _concurrency(raw)
    except ValueError:
        if raw["mode"] == "disagg":
            return (int(raw["decode_batch_size"]) * (_int(raw["decode_num_workers"]) or 1)
                    * (_int(raw["decode_attention_dp_size"]) or 1))
        return int(raw["batch_size"]) * (_int(raw["attention_dp_size"]) or 1)


_ID_LAYOUT = re.compile(r"_tp(\d+)(?:_0)?_ep(\d+)")


NODE_GPUS = 8  # GPUs of one node of the csv's SXM systems (H100, H200, B200, B300 HGX boards)


def _agg_layout(raw: Dict[str, str]) -> Dict[str, Optional[int]]:
    """An aggregated row's layout. Some rows state the worker's sizes squared: tp_size x attention_dp_size
    = moe_tp_size x moe_ep_size = N x N for a worker of N GPUs. The rows with a layout in their id show it
    (source 2026-04-06: "..._tp8_ep8_..." with tp_size 64, moe 8 x 8, on an 8-GPU H200 node; "_tp4_ep4_"
    with attention_dp 16 or tp 4 x attention_dp 4 and moe_ep 16; "_tp2_ep2_" with attention_dp 4,
    moe 2 x 2); rows without one (db-dump cfg rows: DeepSeek on B200/H200/B300 with tp_size 64 and
    moe 8 x 8, Qwen3.5 with tp_size 16 and moe 4 x 4, MiniMax with tp 4 x attention_dp 4 and moe_ep 16,
    the same measurements as an id-bearing "_tp4_ep4_" row) carry the same pattern with a worker that
    would span 2-8 nodes for a 4-512 client sweep. Read as N GPUs (N the id's tp, or the square root): experts over
    moe_ep = N (moe_tp 1), attention tensor-parallel over tp = min(tp_size, N) GPUs in N / tp
    attention-DP replicas (the column that holds the attention split: tp_size for SGLang's and vLLM's
    rows, attention_dp_size for TensorRT-LLM's attention-DP ones; the MiniMax vLLM rows state both 4,
    and the fit half's TPOT favours tp 4 over attention_dp 4: -8..-23% against -17..-39%)."""
    layout = _layout(raw)
    tp, adp, moe_tp, moe_ep = layout["tp"] or 1, layout["adp"] or 1, layout["moe_tp"] or 1, layout["moe_ep"] or 1
    stated = tp * adp
    if stated != moe_tp * moe_ep or stated < 4:
        return layout
    m = _ID_LAYOUT.search(raw["id"])
    root = math.isqrt(stated)
    if m and int(m.group(1)) * int(m.group(2)) == stated and int(m.group(1)) == int(m.group(2)):
        gpus = int(m.group(1))
    elif m is None and root * root == stated and (stated > NODE_GPUS or _vllm_squared(raw, tp, adp, moe_tp, moe_ep, root)):
        gpus = root
    else:
        return layout
    attention_tp = min(tp, gpus)
    layout.update(tp=attention_tp, adp=gpus // attention_tp, moe_tp=1, moe_ep=gpus)
    return layout


def _vllm_squared(raw: Dict[str, str], tp: int, adp: int, moe_tp: int, moe_ep: int, root: int) -> bool:
    """A vLLM row stating tp_size = attention_dp_size = N with the experts over N x N (moe_tp_size 1): the
    squared pattern of an N-GPU worker within a node too. The evidence: MiniMax-M2.5 on B200, fp8, 1024 x 1024:
    the rows "..._cfg690" (tp 2, attention_dp 2, moe 1 x 4) measure exactly what the id-bearing
    "..._tp2_ep2_..." rows do at every concurrency (e.g. 4 clients: TTFT 74.273 ms, TPOT 9.5753 ms in both),
    and "..._cfg691" (4, 4, 1 x 16) what "..._tp4_ep4_..." do. Other engines' rows are read as stated."""
    return raw.get("backend") == "vllm" and tp == adp == root and moe_tp == 1 and moe_ep == root * root


def load_rows() -> List[LayoutRow]:
    rows = []
    with open(validation_csv(), newline="") as f:
        for raw in csv.DictReader(f):
            if not eligible(raw):
                continue
            config = "|".join(raw[c] for c in CONFIG_COLUMNS)
            pools = {}
            kind = "agg"
            if raw["mode"] == "disagg":
                for name in ("prefill", "decode"):
                    pools[name] = dict(_layout(raw, f"{name}_"), workers=_int(raw[f"{name}_num_workers"]),
                                       batch=_int(raw[f"{name}_batch_size"]))
                stated = all(pools[n]["workers"] and pools[n]["tp"] for n in pools)
                kind = "disagg" if stated else "disagg-unstated"
            elif not tp_splits_the_heads(raw):  # tp_size is the worker's GPU count; its layout is not stated
                kind = "agg-unstated"
            rows.append(LayoutRow(raw["id"], kind, raw["backend"], raw["model_path"], raw["system"], raw["precision"],
                                  int(raw["isl"]), int(raw["osl"]), concurrency(raw), _agg_layout(raw), pools,
                                  float(raw["silicon_ttft_ms"]) / 1e3, float(raw["silicon_tpot_ms"]) / 1e3,
                                  half_of(config)))
    return rows


def parallelism(layout: Dict[str, Optional[int]], moe: bool) -> ParallelismConfig:
    """The ParallelismConfig of a csv layout: the moe sizes only for MoE models (dense rows carry 1s)."""
    fields = {"tp_size": layout["tp"] or 1, "attention_dp_size": layout["adp"] or 1, "pp_size": layout["pp"] or 1}
    if moe:
        if layout["moe_tp"] and layout["moe_ep"]:
            fields.update(moe_tp_size=layout["moe_tp"], moe_ep_size=layout["moe_ep"])
        elif layout["moe_ep"]:
            fields.update(moe_ep_size=layout["moe_ep"])
    return ParallelismConfig(**fields)


_ANALYSES: Dict[tuple, LLMAnalysis] = {}


def analysis_for(row: LayoutRow, par: ParallelismConfig) -> LLMAnalysis:
    if row.system not in GPUS:
        raise Refused(f"{row.system}: no catalogue GPU")
    key = (row.model_path, row.system, row.precision, par.model_dump_json())
    a = _ANALYSES.get(key)
    if a is None:
        a = _ANALYSES[key] = LLMAnalysis(model_of(row.model_path),
                                         get_gpu_config_by_name(GPUS[row.system]),
                                         get_dtype_config_by_name(dtype_name(row)), par, perf_model="calibrated")
    return a


def predict(row: LayoutRow, **options) -> Tuple[float, float]:
    """(TTFT, TPOT) seconds: the closed loop's means."""
    s = serve_row(row, **options)
    return s["ttft_s"], s["tpot_s"]


# TensorRT-LLM's attention-DP balance as the published deployment recipes set it, per model: the DeepSeek-R1
# recipes (TensorRT-LLM's benchmark configs for DeepSeek R1 with enable_attention_dp, and the InferenceMAX-style
# launch scripts that generate them) add attention_dp_config {enable_balance: true, batching_wait_iters: 0,
# timeout_iters: 60}; the gpt-oss recipes set enable_attention_dp alone (the balance is off by default,
# AttentionDpConfig.enable_balance = False). The csv does not state it, so the row's model tells the recipe.
TRTLLM_BALANCE_ITERS = {"deepseek-ai/DeepSeek-R1": 60, "deepseek-ai/DeepSeek-V3": 60}


def serve_row(row: LayoutRow, disaggregated_extra=None, **options) -> dict:
    """The serve() answer of a row's setup (closed loop, means only)."""
    if row.kind == "disagg-unstated":
        raise Refused("disaggregated row names no worker counts")
    if row.kind == "agg-unstated":
        raise Refused("aggregated row's tp_size does not split the attention heads (the worker's GPU count; "
                      "layout not stated)")
    moe = model_of(row.model_path).is_moe
    if row.kind == "agg":
        a = analysis_for(row, parallelism(row.layout, moe))
        if row.backend == "trtllm" and (row.layout["adp"] or 1) > 1 and row.model_path in TRTLLM_BALANCE_ITERS:
            options.setdefault("attention_dp_balance_iters", TRTLLM_BALANCE_ITERS[row.model_path])
        return a.serve(concurrency=row.concurrency, input_len=row.isl, output_len=row.osl, framework=row.backend,
                       num_requests=0, **options)
    else:
        pools = {name: {"workers": p["workers"], "parallelism": parallelism(p, moe),
                        **({"batch_size": p["batch"]} if p["batch"] else {})} for name, p in row.pools.items()}
        a = analysis_for(row, pools["prefill"]["parallelism"])
        return a.serve(concurrency=row.concurrency, input_len=row.isl, output_len=row.osl, framework=row.backend,
                       disaggregated=dict(pools, **(disaggregated_extra or {})), **options)


def _stats(errors: List[float]) -> str:
    if not errors:
        return "   -      -  "
    med, p90 = median_p90(errors)
    return f"{100 * med:5.1f}% {100 * p90:5.1f}%"


def score(rows: List[LayoutRow], show_rows: bool = False, **options) -> Dict[str, dict]:
    groups: Dict[Tuple[str, str], Dict[str, list]] = defaultdict(lambda: {"ttft": [], "tpot": [], "n": 0, "ok": 0})
    refusals: Dict[str, int] = defaultdict(int)
    for row in rows:
        keys = [("kind", row.kind), ("engine", f"{row.kind} {row.backend}")]
        if not row.kind.endswith("-unstated"):
            keys.append(("all", "all stated"))
        score_row(row, keys, groups, refusals, show_rows, lambda: predict(row, **options))
    print(f"{'group':28s} {'rows':>5s} {'answered':>9s}   TTFT med   p90    TPOT med   p90")
    for kind in ("all", "kind", "engine"):
        for (k, name), g in sorted(groups.items()):
            if k == kind:
                print(f"{name:28s} {g['n']:5d} {g['ok'] / g['n']:8.0%}    {_stats(g['ttft'])}    {_stats(g['tpot'])}")
    if refusals:
        print("refused:")
        for why, n in sorted(refusals.items(), key=lambda kv: -kv[1]):
            print(f"  {n:4d}  {why}")
    return {name: g for (k, name), g in groups.items()}


MIN_STATED_ROWS = 10  # fewer report rows than this and a group's figures are not stated in the profile


def write_accuracy(groups: Dict[str, dict]) -> None:
    """State each engine's report-half figures on layouts in its profile (`measured_accuracy_layouts`:
    aggregated workers with attention DP, expert or pipeline parallelism; disaggregated pools), which
    serve() prints beside its calibrated answers on such layouts. A group of fewer than MIN_STATED_ROWS
    answered rows is left out (vLLM's disaggregated rows: too few to state an error)."""
    for engine in FRAMEWORKS:
        path = PROFILE_DIR / f"{engine}.json"
        profile = json.loads(path.read_text())
        stated = {}
        for kind, name in (("agg", "aggregated"), ("disagg", "disaggregated")):
            g = groups.get(f"{kind} {engine}")
            if g and g["ok"] >= MIN_STATED_ROWS:
                stated[name] = accuracy_of(g)
        profile["measured_accuracy_layouts"] = dict(stated, source=(
            "benchmarks/serving_layout_accuracy.py --write_accuracy: the report half of serving_dev.csv's rows with "
            "attention data parallelism, expert or pipeline parallelism (aggregated) or prefill and decode pools "
            "(disaggregated) whose layout is stated (aiconfigurator's silicon sample, Apache-2.0), perf_model "
            f"calibrated; a group of fewer than {MIN_STATED_ROWS} answered rows is not stated"))
        path.write_text(json.dumps(profile, indent=1) + "\n")
        print(f"wrote {path.relative_to(REPO)}")


CONTENTION_GRID = [i / 50 for i in range(51)]  # prefill_contention values scanned, 0 .. 1
HUBER_KNEE = 0.5  # of log(predicted / measured) TTFT: as benchmarks/fit_engine_profiles.py weighs its rows


def _huber(x: float) -> float:
    a = abs(x)
    return 0.5 * a * a if a <= HUBER_KNEE else HUBER_KNEE * (a - 0.5 * HUBER_KNEE)


def _contention_loss(rows: List[LayoutRow], value: float) -> Tuple[float, int]:
    """Mean Huber loss of log(predicted / measured TTFT) over the rows answered, and their count."""
    losses = []
    for row in rows:
        try:
            ttft = serve_row(row, disaggregated_extra={"prefill_contention": value})["ttft_s"]
        except (Refused, LLMAnalysisError):
            continue
        losses.append(_huber(math.log(ttft / row.ttft_s)))
    return (statistics.mean(losses), len(losses)) if losses else (math.inf, 0)


def fit_contention(rows: List[LayoutRow]) -> None:
    """The prefill_contention (0 .. 1 in steps of 0.02) with the least mean Huber loss of log(predicted /
    measured TTFT) over the disaggregated rows given (the fit half): the loss that fits the engine
    profiles, so that a few rows whose measured TTFT no queue explains (seconds at 3-7 clients) do not
    decide it. One value for every engine: how the clients of a closed-loop benchmark bunch is the
    benchmark's, and 10-37 rows per engine are too few to tell the engines apart (each engine's own best
    is printed beside it)."""
    best = min((_contention_loss(rows, v) + (v,) for v in CONTENTION_GRID), key=lambda t: t[0])
    print(f"all engines: prefill_contention {best[2]:.2f} (mean Huber loss {best[0]:.4f} over {best[1]} rows)")
    by_engine: Dict[str, List[LayoutRow]] = defaultdict(list)
    for row in rows:
        by_engine[row.backend].append(row)
    for engine, engine_rows in sorted(by_engine.items()):
        own = min((_contention_loss(engine_rows, v) + (v,) for v in CONTENTION_GRID), key=lambda t: t[0])
        print(f"  {engine} alone: {own[2]:.2f} (mean Huber loss {own[0]:.4f} over {own[1]} rows)")


SPREAD_GRID = [0.5 + i / 20 for i in range(21)]  # expert_spread_scale values scanned, 0.5 .. 1.5


def _decode_moe_ep(row: LayoutRow) -> int:
    """moe_ep of the GPUs that decode the row: the worker's (aggregated), the decode pool's (disaggregated)."""
    layout = row.layout if row.kind == "agg" else row.pools.get("decode", {})
    return layout.get("moe_ep") or 1


def fit_spread(rows: List[LayoutRow]) -> None:
    """Per engine, the expert_spread_scale (0.5 .. 1.5 in steps of 0.05; serving/layout.py
    busiest_group_factor) with the least mean Huber loss of log(predicted / measured TPOT), the loss of
    the other fitted engine values, over the layout rows given (the fit half) whose decoding experts are
    spread (moe_ep > 1: an aggregated worker's, or a disaggregated deployment's decode pool): the factor
    acts on the routed experts' time of a decode step, which TPOT measures."""
    by_engine: Dict[str, List[LayoutRow]] = defaultdict(list)
    for row in rows:
        if row.kind in ("agg", "disagg") and _decode_moe_ep(row) > 1:
            by_engine[row.backend].append(row)
    for engine, engine_rows in sorted(by_engine.items()):
        scores = []
        for value in SPREAD_GRID:
            ratios = []
            for row in engine_rows:
                try:
                    ratios.append(serve_row(row, expert_spread_scale=value)["tpot_s"] / row.tpot_s)
                except (Refused, LLMAnalysisError):
                    continue
            errors = sorted(abs(r - 1) for r in ratios)
            huber = statistics.mean(_huber(math.log(r)) for r in ratios)
            scores.append((huber, value, len(ratios), statistics.median(errors), errors[int(0.9 * len(errors))]))
            print(f"  {engine} {value:.2f}: TPOT mean Huber loss {huber:.4f}, median |error| {100 * scores[-1][3]:.1f}%, "
                  f"p90 {100 * scores[-1][4]:.1f}% over {len(ratios)} rows")
        best = min(scores)
        print(f"{engine}: expert_spread_scale {best[1]:.2f} (TPOT mean Huber loss {best[0]:.4f}, median |error| "
              f"{100 * best[3]:.1f}%, p90 {100 * best[4]:.1f}% over {best[2]} rows)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=("report", "fit", "all"), default="report")
    parser.add_argument("--rows", action="store_true", help="print every row's prediction")
    parser.add_argument("--fit", action="store_true",
                        help="fit prefill_contention and expert_spread_scale per engine on the fit half")
    parser.add_argument("--write_accuracy", action="store_true",
                        help="write each engine's report-half figures on layouts into its profile")
    args = parser.parse_args(argv)
    path = validation_csv()
    if not path.exists():
        print(f"no {path}: set LLM_ANALYSIS_VALIDATION_DIR")
        return 0
    rows = load_rows()
    if args.fit:
        fit_contention([r for r in rows if r.half == "fit" and r.kind == "disagg"])
        fit_spread([r for r in rows if r.half == "fit"])
        return 0
    chosen = rows if args.half == "all" else [r for r in rows if r.half == args.half]
    print(f"{len(chosen)} of {len(rows)} layout rows ({args.half} half), perf_model=calibrated")
    t = time.perf_counter()
    groups = score(chosen, args.rows)
    print(f"({time.perf_counter() - t:.1f} s)")
    if args.write_accuracy:
        if args.half != "report":
            parser.error("--write_accuracy states the report half, as scored by default")
        write_accuracy(groups)
    return 0


if __name__ == "__main__":
    sys.exit(main())
