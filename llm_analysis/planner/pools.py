"""Disaggregated prefill / decode pools sized on the serving model (`plan infer --disaggregate` with a
load): each pool's worker layout and the prefill:decode worker ratio, every deployment timed by
`serve(..., disaggregated={...})` (serving/disaggregated.py), under the same targets as the
aggregated plan.

The search, per GPU type, data type and KV-cache type:
1. every worker layout the engine runs (planner/layouts.py) is timed alone (one request on one worker,
   aggregated): a layout whose prefill alone misses the TTFT target cannot be a prefill pool, one
   whose decode step alone misses the TPOT target cannot be a decode pool;
2. one disaggregated call with one worker in each pool gives each layout's capacity per worker
   (prefill: prompts/s at its batches; decode: requests/s its ranks hold at once over their decode
   time); the SHORTLIST layouts with the most capacity per GPU (per dollar under the cost objective)
   are each pool's candidates;
3. for every (prefill layout, decode layout) pair the worker counts start at the fewest that keep up
   with the request rate (one each in a closed loop) and grow one worker at a time in the pool whose
   target is missed (TTFT or prefill saturation: the prefill pool; TPOT or decode saturation: the
   decode pool) until the deployment meets every target. Each count is one serve() call, so a row's
   figures are what its `reproduce["serve_call"]` returns.
`binding` names what one worker fewer in each pool misses ("prefill:ttft", "decode:tpot", ...).
Assumption: each pool's batch is the engine's default (prefill: the prompts its token budget holds;
decode: its max_num_seqs), as serve() takes it when `batch_size` is not given; the KV transfer runs
over the link the pools share (serving/disaggregated.py).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import ConfigError, DoesNotFitError
from llm_analysis.facade import LLMAnalysis
from llm_analysis.planner.continuous import ENGINE_SETTING_KEYS, ContinuousLoad, kv_cache_name
from llm_analysis.planner.errors import ClosestMiss
from llm_analysis.planner.layouts import Worker, workers_of
from llm_analysis.planner.result import SearchStats
from llm_analysis.planner.space import weight_bytes_lower_bound

SHORTLIST = 2  # layouts per pool whose pairs are searched
MAX_WORKERS_PER_POOL = 512
_PREFILL_MISSES = ("ttft", "prefill_saturation")


def _analysis(search, lay: Worker) -> LLMAnalysis:
    """The analysis a disaggregated call runs on (its GPU, data type and cost model; the pools carry
    their own layouts, so its parallelism is the default)."""
    return LLMAnalysis(search.model, lay.gpu, lay.dtype, ParallelismConfig(), **search.analysis_kwargs)


def _pools_arg(prefill: Worker, prefill_workers: int, decode: Worker, decode_workers: int) -> Dict[str, Any]:
    return {"prefill": {"workers": prefill_workers, "parallelism": prefill.parallelism(1)},
            "decode": {"workers": decode_workers, "parallelism": decode.parallelism(1)}}


def _pools_text(prefill: Worker, prefill_workers: int, decode: Worker, decode_workers: int) -> str:
    return (f"{{'prefill': {{'workers': {prefill_workers}, 'parallelism': {prefill.parallelism_text(1)}}}, "
            f"'decode': {{'workers': {decode_workers}, 'parallelism': {decode.parallelism_text(1)}}}}}")


class _PairSearch:
    """The worker counts of one (prefill layout, decode layout, KV type)."""

    def __init__(self, search, load: ContinuousLoad, kv_name: Optional[str], prefill: Worker, decode: Worker,
                 stats: SearchStats):
        self.search, self.load, self.kv_name = search, load, kv_name
        self.prefill, self.decode, self.stats = prefill, decode, stats
        self.answers: Dict[Tuple[int, int], Dict[str, Any]] = {}

    def kwargs(self, wp: int, wd: int) -> Dict[str, Any]:
        kw = self.load.serve_kwargs(self.kv_name, means_only=False)
        kw["disaggregated"] = _pools_arg(self.prefill, wp, self.decode, wd)
        return kw

    def at(self, wp: int, wd: int) -> Dict[str, Any]:
        if (wp, wd) not in self.answers:
            self.stats.evaluated_full += 1
            self.answers[(wp, wd)] = _analysis(self.search, self.prefill).serve(**self.kwargs(wp, wd))
        return self.answers[(wp, wd)]

    def misses(self, wp: int, wd: int) -> List[str]:
        """The targets (wp, wd) misses, saturation named by the pool that cannot keep up."""
        s = self.at(wp, wd)
        if s["saturated"]:
            rate = s["request_rate"]
            # (a decode pool with nothing to decode, one-token outputs, states no capacity: None)
            return [name for name, cap in (("prefill_saturation", s["prefill_capacity_request_rate_per_s"]),
                                           ("decode_saturation", s["decode_capacity_request_rate_per_s"]))
                    if cap is not None and cap <= rate] or ["prefill_saturation"]
        return [m[0] for m in self.load.misses(s)]

    def fewest(self, start: Tuple[int, int], cap: int) -> Optional[Tuple[int, int]]:
        """Grow the pool whose target is missed, one worker at a time, from `start`; None past `cap` GPUs."""
        wp, wd = start
        while True:
            if wp * self.prefill.gpus + wd * self.decode.gpus > cap:
                return None
            missed = self.misses(wp, wd)
            if not missed:
                return wp, wd
            grow_prefill = any(m.startswith(_PREFILL_MISSES) for m in missed)
            grow_decode = any(not m.startswith(_PREFILL_MISSES) for m in missed)
            wp, wd = wp + grow_prefill, wd + grow_decode

    def binding(self, wp: int, wd: int) -> List[str]:
        out = []
        for pool, fewer in (("prefill", (wp - 1, wd)), ("decode", (wp, wd - 1))):
            if min(fewer) >= 1:
                out += [f"{pool}:{m}" for m in self.misses(*fewer)]
        return out or ["none"]


def _capacities(search, lay: Worker, load: ContinuousLoad, kv_name: Optional[str], stats: SearchStats):
    """(prefill, decode) requests/s of one worker of `lay` in each pool."""
    stats.evaluated_full += 1
    kw = {k: v for k, v in load.serve_kwargs(kv_name, means_only=True).items()
          if k not in ("request_rate", "concurrency", "num_requests")}
    s = _analysis(search, lay).serve(concurrency=1, num_requests=0, disaggregated=_pools_arg(lay, 1, lay, 1), **kw)
    decode = s["decode_capacity_request_rate_per_s"]  # None: nothing to decode (one-token outputs), no bound
    return s["prefill_capacity_request_rate_per_s"], math.inf if decode is None else decode


def _alone(search, lay: Worker, load: ContinuousLoad, kv_name: Optional[str], stats: SearchStats):
    stats.evaluated_full += 1
    kw = {k: v for k, v in load.serve_kwargs(kv_name, means_only=True).items()
          if k not in ("request_rate", "concurrency", "num_requests")}
    return LLMAnalysis(search.model, lay.gpu, lay.dtype, lay.parallelism(1),
                       **search.analysis_kwargs).serve(concurrency=1, num_requests=0, **kw)


def _pool_candidates(search, layouts: List[Worker], load: ContinuousLoad, kv_name: Optional[str],
                     stats: SearchStats, miss: ClosestMiss, weight):
    """(prefill shortlist, decode shortlist): (layout, requests/s per worker) best first."""
    prefill, decode = [], []
    slo = load.slo
    for lay in layouts:
        if weight_bytes_lower_bound(search.num_params, lay.dtype, lay.gpus, 1, 1) > lay.gpu.memory_bytes:
            stats.ruled_out_by_bound += 1
            continue
        describe = {**lay.describe(), "kv_cache_dtype": kv_name or "engine default"}
        try:
            alone = _alone(search, lay, load, kv_name, stats)
            cap_prefill, cap_decode = _capacities(search, lay, load, kv_name, stats)
        except DoesNotFitError as e:
            miss.record("memory", e.needed_bytes, e.available_bytes, describe)
            continue
        except ConfigError as e:
            stats.invalid += 1
            miss.refused(f"{describe}: {e}")
            continue
        per_cost = lay.gpus * weight(lay)
        if slo.max_ttft_s is None or alone["ttft_s"] <= slo.max_ttft_s:
            prefill.append((cap_prefill / per_cost, lay, cap_prefill))
        else:
            miss.record("ttft", alone["ttft_s"], slo.max_ttft_s, {**describe, "pool": "prefill (a request alone)"})
        if slo.max_tpot_s is None or (alone["tpot_s"] or 0.0) <= slo.max_tpot_s:
            decode.append((cap_decode / per_cost, lay, cap_decode))
        else:
            miss.record("tpot", alone["tpot_s"], slo.max_tpot_s, {**describe, "pool": "decode (a request alone)"})
    order = lambda c: -c[0]  # noqa: E731
    return ([c[1:] for c in sorted(prefill, key=order)[:SHORTLIST]],
            [c[1:] for c in sorted(decode, key=order)[:SHORTLIST]])


def _pool_entry(lay: Worker, workers: int, s: Dict[str, Any], kv_cache_dtype: str) -> Dict[str, Any]:
    return {"layout": {**lay.describe(), "attention_dp": lay.attention_dp,
                       "moe_tp": lay.moe_tp if lay.is_moe else None, "moe_ep": lay.moe_ep if lay.is_moe else None,
                       "gpus_per_worker": lay.gpus, "kv_cache_dtype": kv_cache_dtype},
            "workers": workers, "num_gpus": workers * lay.gpus,
            "engine_settings": {k: s[k] for k in ENGINE_SETTING_KEYS}}


def _row(search, pair: _PairSearch, wp: int, wd: int) -> Dict[str, Any]:
    s = pair.at(wp, wd)
    percentile = pair.load.slo.percentile
    ttft_key, tpot_key = pair.load.latency_keys()
    gpus = s["num_gpus"]
    price = search.prices.get(pair.prefill.gpu.name)
    fleet_cost = None if price is None else price * gpus
    fig = {"num_gpus": gpus, "num_nodes": math.ceil(gpus / pair.prefill.gpu.num_gpus_per_node),
           "prefill_workers": wp, "decode_workers": wd,
           "time_to_first_token": s[ttft_key], "time_per_output_token": s[tpot_key] or 0.0,
           "latency_statistic": "mean" if percentile is None else f"p{percentile}",
           "tokens_per_sec_per_gpu": s["output_tokens_per_s_per_gpu"], "fleet_cost_per_hour": fleet_cost,
           "cost_per_million_tokens": None if fleet_cost is None or not s["output_tokens_per_s"]
           else fleet_cost / 3600 / s["output_tokens_per_s"] * 1e6}
    for key in ("ttft_s", "tpot_s", "e2e_s", "ttft_p90_s", "tpot_p90_s", "requests_per_s", "output_tokens_per_s",
                "kv_transfer_s", "prefill_queue_wait_s", "prefill_capacity_request_rate_per_s",
                "decode_capacity_request_rate_per_s"):
        fig[key] = s.get(key)
    kwargs = pair.load.as_given(pair.kwargs(wp, wd))
    serve_kw = ", ".join(f"{k}={v!r}" for k, v in kwargs.items() if k != "disaggregated")
    analysis_kw = "".join(f", {k}={v!r}" for k, v in search.analysis_kwargs.items())
    call = (f"LLMAnalysis(get_model_config_by_name({search.model.name!r}), "
            f"get_gpu_config_by_name({pair.prefill.gpu.name!r}), get_dtype_config_by_name({pair.prefill.dtype.name!r}), "
            f"ParallelismConfig(){analysis_kw}).serve({serve_kw}, disaggregated="
            f"{_pools_text(pair.prefill, wp, pair.decode, wd)})")
    serve_kwargs = {k: v for k, v in kwargs.items() if k != "disaggregated"}
    serve_kwargs["disaggregated"] = {
        "prefill": {"workers": wp, "parallelism": pair.prefill.parallelism_fields(1)},
        "decode": {"workers": wd, "parallelism": pair.decode.parallelism_fields(1)}}
    return {"pools": {"prefill": _pool_entry(pair.prefill, wp, s, s["kv_cache_dtype"]),
                      "decode": _pool_entry(pair.decode, wd, s, s["kv_cache_dtype"])},
            "layout": {"gpu": pair.prefill.gpu.name, "dtype": pair.prefill.dtype.name,
                       "kv_cache_dtype": s["kv_cache_dtype"], "framework": s["framework"]},
            "figures": fig, "binding": pair.binding(wp, wd), "why": "",
            "reproduce": {"model_name": search.model.name, "gpu_name": pair.prefill.gpu.name,
                          "dtype_name": pair.prefill.dtype.name, "parallelism": {},
                          "analysis_kwargs": dict(search.analysis_kwargs), "serve_kwargs": serve_kwargs,
                          "serve_call": call}}


def collect_pools(search, load: ContinuousLoad, objective: str, stats: SearchStats, miss: ClosestMiss,
                  max_worker_gpus: Optional[int] = None) -> List[Dict[str, Any]]:
    """Rows of disaggregated deployments (one per searched pair of pool layouts) that meet the targets."""
    def weight(lay: Worker) -> float:
        return search.prices.get(lay.gpu.name, 1.0) if objective == "cost" else 1.0

    by_gpu_dtype: Dict[Tuple[str, str], List[Worker]] = {}
    for lay in workers_of(search, load.framework, max_worker_gpus):
        by_gpu_dtype.setdefault((lay.gpu.name, lay.dtype.name), []).append(lay)
    cap = search.max_gpus or MAX_WORKERS_PER_POOL * 2
    rate = load.request_rate
    rows = []
    for layouts in by_gpu_dtype.values():
        for kv in search.kv_options:
            kv_name = kv_cache_name(kv)
            prefill, decode = _pool_candidates(search, layouts, load, kv_name, stats, miss, weight)
            for p_lay, p_cap in prefill:
                for d_lay, d_cap in decode:
                    stats.considered += 1
                    pair = _PairSearch(search, load, kv_name, p_lay, d_lay, stats)
                    start = (1, 1) if rate is None else (math.floor(rate / p_cap) + 1, math.floor(rate / d_cap) + 1)
                    found = pair.fewest(start, cap)
                    if found is None:
                        miss.record("max_gpus", cap + 1, cap, {"prefill": p_lay.describe(), "decode": d_lay.describe()})
                        continue
                    rows.append(_row(search, pair, *found))
    return rows


def pools_assumptions(load: ContinuousLoad) -> str:
    return (f"disaggregated pools on {load.framework}, timed by serve(disaggregated=...): "
            + __doc__.split("The search, per GPU type, data type and KV-cache type:")[1].strip().replace("\n", " "))


__all__ = ["collect_pools", "pools_assumptions"]
