"""Disaggregated prefill / decode pools sized on the serving model (`plan infer --disaggregate` with a
load): each pool's worker layout and the prefill:decode worker ratio, every deployment timed by
`serve(..., disaggregated={...})` (serving/disaggregated.py), under the same targets as the
aggregated plan.

The search:
1. every worker layout the engine runs (planner/layouts.py), of each GPU type, data type and KV-cache
   type, is timed alone (one request on one worker, aggregated): a layout whose prefill alone misses
   the TTFT target cannot be a prefill pool, one whose decode step alone misses the TPOT target
   cannot be a decode pool;
2. one disaggregated call with one worker in each pool gives each layout's capacity per worker
   (prefill: prompts/s at its batches; decode: requests/s its ranks hold at once over their decode
   time), hence the fewest workers of it that keep up with the request rate (one without a rate);
   every layout that meets its pool's own target alone is that pool's candidate;
3. every (prefill candidate, decode candidate) pair has a lower bound, the GPUs (dollars under the
   cost objective) of those fewest workers in each pool; pairs are searched in order of their bounds,
   least first, over every GPU type, data type and KV-cache type, and a pair whose bound is above the
   best deployment found is ruled out without its search, so the deployment with the fewest GPUs
   (dollars) among the pairs is found, and every pair that ties with it (the ranking puts the least
   TPOT first). A worker width is timed (steps 1-2) only when its own bound, one worker of it and one
   of the narrowest layout, comes up, so the widest are not timed once a smaller deployment is found.
   A pair's worker counts start at its bound's and grow one worker at a time in the pool whose target
   is missed (TTFT or prefill saturation: the prefill pool; TPOT or decode saturation: the decode
   pool) until the deployment meets every target, or it passes the best found. Each count is one
   serve() call, so a row's figures are what its `reproduce["serve_call"]` returns. (The layouts with
   the most capacity per GPU need not make the fewest GPUs: at a modest rate one wide worker holds far
   more than the load, while a narrower one holds just enough.)
`binding` names what one worker fewer in each pool misses ("prefill:ttft", "decode:tpot", ...).
Assumption: each pool's batch is the engine's default (prefill: the prompts its token budget holds;
decode: its max_num_seqs), as serve() takes it when `batch_size` is not given; the KV transfer runs
over the link the pools share (serving/disaggregated.py).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.config import ParallelismConfig
from llm_analysis.errors import ConfigError, DoesNotFitError
from llm_analysis.facade import LLMAnalysis
from llm_analysis.planner.continuous import (ENGINE_SETTING_KEYS, ContinuousLoad, fleet_figures, kv_cache_name,
                                             objective_weight, serve_call_text)
from llm_analysis.planner.errors import ClosestMiss
from llm_analysis.planner.inputs import class_named
from llm_analysis.planner.layouts import Worker, workers_of
from llm_analysis.planner.result import SearchStats
from llm_analysis.planner.space import weight_bytes_lower_bound

MAX_WORKERS_PER_POOL = 512
_PREFILL_MISSES = ("ttft", "prefill_saturation")


class _Analyses:
    """The analysis a disaggregated call runs on, one per GPU type and data type (the pools carry their
    own layouts, so its parallelism is the default): each pool layout's step costs are kept with its
    describer (serving/layout.with_parallelism), so the calls of every pair and worker count reuse them."""

    def __init__(self, search):
        self.search = search
        self.built: Dict[Tuple[str, str], LLMAnalysis] = {}

    def __call__(self, lay: Worker) -> LLMAnalysis:
        key = (lay.gpu.name, lay.dtype.name)
        if key not in self.built:
            self.built[key] = self.search.analysis_class(self.search.model, lay.gpu, lay.dtype, ParallelismConfig(),
                                                         **self.search.analysis_kwargs)
        return self.built[key]


def _pools_arg(prefill: Worker, prefill_workers: int, decode: Worker, decode_workers: int,
               parallelism: str = "parallelism") -> Dict[str, Any]:
    """serve()'s `disaggregated` argument: each pool's workers and one worker's ParallelismConfig (or its
    fields, with parallelism="parallelism_fields", as a row's reproduce writes them)."""
    return {"prefill": {"workers": prefill_workers, "parallelism": getattr(prefill, parallelism)(1)},
            "decode": {"workers": decode_workers, "parallelism": getattr(decode, parallelism)(1)}}


class _PairSearch:
    """The worker counts of one (prefill layout, decode layout, KV type)."""

    def __init__(self, analyses: _Analyses, load: ContinuousLoad, kv_name: Optional[str], prefill: Worker,
                 decode: Worker, stats: SearchStats):
        self.analyses, self.load, self.kv_name = analyses, load, kv_name
        self.prefill, self.decode, self.stats = prefill, decode, stats
        self.answers: Dict[Tuple[int, int], Dict[str, Any]] = {}

    def kwargs(self, wp: int, wd: int) -> Dict[str, Any]:
        kw = self.load.serve_kwargs(self.kv_name, means_only=False)
        kw["disaggregated"] = _pools_arg(self.prefill, wp, self.decode, wd)
        return kw

    def at(self, wp: int, wd: int) -> Dict[str, Any]:
        if (wp, wd) not in self.answers:
            self.stats.evaluated_full += 1
            self.answers[(wp, wd)] = self.analyses(self.prefill).serve(**self.kwargs(wp, wd))
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


def _capacities(analyses: _Analyses, lay: Worker, load: ContinuousLoad, kv_name: Optional[str],
                stats: SearchStats):
    """(prefill, decode) requests/s of one worker of `lay` in each pool."""
    stats.evaluated_full += 1
    s = analyses(lay).serve(**load.alone_kwargs(kv_name), disaggregated=_pools_arg(lay, 1, lay, 1))
    decode = s["decode_capacity_request_rate_per_s"]  # None: nothing to decode (one-token outputs), no bound
    return s["prefill_capacity_request_rate_per_s"], math.inf if decode is None else decode


@dataclass
class _Candidate:
    """A layout that meets one pool's target alone, with the fewest of its workers that keep up with the
    load (a pool of fewer workers is saturated, so no deployment holds fewer)."""

    layout: Worker
    capacity_per_s: float  # requests/s one worker of it holds in this pool
    fewest_workers: int

    @property
    def fewest_gpus(self) -> int:
        return self.fewest_workers * self.layout.gpus


def _fewest_workers(rate: Optional[float], capacity_per_s: float) -> Optional[int]:
    """The fewest workers that keep up with `rate` (serve() calls a pool saturated at capacity <= rate);
    one without a rate; None when a worker holds nothing."""
    if rate is None:
        return 1
    if capacity_per_s <= 0:
        return None
    return math.floor(rate / capacity_per_s) + 1


def _pool_candidates(search, analyses: _Analyses, layouts: List[Worker], load: ContinuousLoad,
                     kv_name: Optional[str], stats: SearchStats,
                     miss: ClosestMiss) -> Tuple[List[_Candidate], List[_Candidate]]:
    """(prefill candidates, decode candidates): every layout that meets the pool's target alone."""
    prefill: List[_Candidate] = []
    decode: List[_Candidate] = []
    slo = load.slo
    for lay in layouts:
        if weight_bytes_lower_bound(search.num_params, lay.dtype, lay.gpus, 1, 1) > lay.gpu.memory_bytes:
            stats.ruled_out_by_bound += 1
            continue
        describe = {**lay.describe(), "kv_cache_dtype": kv_name or "engine default"}
        try:
            stats.evaluated_full += 1
            alone = search.analysis_class(search.model, lay.gpu, lay.dtype, lay.parallelism(1),
                                          **search.analysis_kwargs).serve(**load.alone_kwargs(kv_name))
            cap_prefill, cap_decode = _capacities(analyses, lay, load, kv_name, stats)
        except DoesNotFitError as e:
            miss.record("memory", e.needed_bytes, e.available_bytes, describe)
            continue
        except ConfigError as e:
            stats.invalid += 1
            miss.refused(f"{describe}: {e}")
            continue
        if slo.max_ttft_s is None or alone["ttft_s"] <= slo.max_ttft_s:
            if (workers := _fewest_workers(load.request_rate, cap_prefill)) is not None:
                prefill.append(_Candidate(lay, cap_prefill, workers))
        else:
            miss.record("ttft", alone["ttft_s"], slo.max_ttft_s, {**describe, "pool": "prefill (a request alone)"})
        if slo.max_tpot_s is None or (alone["tpot_s"] or 0.0) <= slo.max_tpot_s:
            if (workers := _fewest_workers(load.request_rate, cap_decode)) is not None:
                decode.append(_Candidate(lay, cap_decode, workers))
        else:
            miss.record("tpot", alone["tpot_s"], slo.max_tpot_s, {**describe, "pool": "decode (a request alone)"})
    return prefill, decode


def _pool_entry(lay: Worker, workers: int, s: Dict[str, Any], kv_cache_dtype: str) -> Dict[str, Any]:
    return {"layout": {**lay.describe(), "attention_dp": lay.attention_dp,
                       "moe_tp": lay.moe_tp if lay.is_moe else None, "moe_ep": lay.moe_ep if lay.is_moe else None,
                       "gpus_per_worker": lay.gpus, "kv_cache_dtype": kv_cache_dtype},
            "workers": workers, "num_gpus": workers * lay.gpus,
            "engine_settings": {k: s[k] for k in ENGINE_SETTING_KEYS}}


def _row(search, pair: _PairSearch, wp: int, wd: int) -> Dict[str, Any]:
    s = pair.at(wp, wd)
    fig = fleet_figures(search, pair.prefill, s, pair.load, {}, {"prefill_workers": wp, "decode_workers": wd},
                        ("ttft_s", "tpot_s", "e2e_s", "ttft_p90_s", "tpot_p90_s", "requests_per_s",
                         "output_tokens_per_s", "kv_transfer_s", "prefill_queue_wait_s",
                         "prefill_capacity_request_rate_per_s", "decode_capacity_request_rate_per_s"))
    serve_kwargs = {k: v for k, v in pair.load.as_given(pair.kwargs(wp, wd)).items() if k != "disaggregated"}
    pools_text = (f"{{'prefill': {{'workers': {wp}, 'parallelism': {pair.prefill.parallelism_text(1)}}}, "
                  f"'decode': {{'workers': {wd}, 'parallelism': {pair.decode.parallelism_text(1)}}}}}")
    call = serve_call_text(search, pair.prefill, "ParallelismConfig()", ", ".join(
        [f"{k}={v!r}" for k, v in serve_kwargs.items()] + [f"disaggregated={pools_text}"]))
    serve_kwargs["disaggregated"] = _pools_arg(pair.prefill, wp, pair.decode, wd, "parallelism_fields")
    return {"pools": {"prefill": _pool_entry(pair.prefill, wp, s, s["kv_cache_dtype"]),
                      "decode": _pool_entry(pair.decode, wd, s, s["kv_cache_dtype"])},
            "layout": {"gpu": pair.prefill.gpu.name, "dtype": pair.prefill.dtype.name,
                       "kv_cache_dtype": s["kv_cache_dtype"], "framework": s["framework"]},
            "figures": fig, "binding": pair.binding(wp, wd), "why": "",
            "reproduce": {"model_name": search.model.name, "gpu_name": pair.prefill.gpu.name,
                          "dtype_name": pair.prefill.dtype.name, "parallelism": {},
                          "analysis_kwargs": dict(search.analysis_kwargs), "serve_kwargs": serve_kwargs,
                          **class_named(search.analysis_class), "serve_call": call}}


@dataclass
class _Group:
    """The layouts of one GPU type and data type under one KV-cache type, and the pool candidates among
    those timed so far."""

    layouts: List[Worker]
    kv_name: Optional[str]
    weight: float  # what the objective counts per GPU
    prefill: List[_Candidate] = field(default_factory=list)
    decode: List[_Candidate] = field(default_factory=list)


def collect_pools(search, load: ContinuousLoad, objective: str, stats: SearchStats, miss: ClosestMiss,
                  max_worker_gpus: Optional[int] = None) -> List[Dict[str, Any]]:
    """Rows of disaggregated deployments that meet the targets: the one with the fewest GPUs (dollars under
    the cost objective) among every pair of pool candidates, every pair tied with it, and the pairs
    searched before it was found (module docstring, step 3). A worker width of a group bounds its pairs
    not yet built: one worker of that width in one pool, at least the group's narrowest in the other."""
    weight = objective_weight(search, objective)  # (a pair's pools share one GPU type)
    by_gpu_dtype: Dict[Tuple[str, str], List[Worker]] = {}
    for lay in workers_of(search, load.framework, max_worker_gpus):
        by_gpu_dtype.setdefault((lay.gpu.name, lay.dtype.name), []).append(lay)
    groups = [_Group(layouts, kv_cache_name(kv), weight(layouts[0]))
              for layouts in by_gpu_dtype.values() for kv in search.kv_options]
    cap = search.max_gpus or MAX_WORKERS_PER_POOL * 2
    analyses = _Analyses(search)
    # (bound, kind, order, item): kind 0 a group's width still to time (group, width), 1 a pair (group,
    # prefill candidate, decode candidate); at equal bounds a width is timed first, so that its pairs join
    # those of the same bound
    queue: List[Tuple[float, int, int, Any]] = []
    for g in groups:
        narrowest = min(lay.gpus for lay in g.layouts)
        for width in sorted({lay.gpus for lay in g.layouts}):
            queue.append(((width + narrowest) * g.weight, 0, len(queue), (g, width)))
    heapq.heapify(queue)
    order = len(queue)
    rows: List[Dict[str, Any]] = []
    best = math.inf  # the least GPUs (dollars) of a deployment found
    while queue:
        bound, kind, _, item = heapq.heappop(queue)
        if kind == 0:
            g, width = item
            if bound > best:  # any pair with a worker this wide costs more than the best deployment
                stats.ruled_out_by_bound += sum(lay.gpus == width for lay in g.layouts)
                continue
            prefill, decode = _pool_candidates(search, analyses, [lay for lay in g.layouts if lay.gpus == width],
                                               load, g.kv_name, stats, miss)
            # the new candidates with every candidate timed so far (themselves included), each pair once
            new_pairs = [(p, d) for p in prefill for d in g.decode + decode] + [(p, d) for p in g.prefill
                                                                                 for d in decode]
            g.prefill += prefill
            g.decode += decode
            for p, d in new_pairs:
                stats.considered += 1
                heapq.heappush(queue, ((p.fewest_gpus + d.fewest_gpus) * g.weight, 1, order, (g, p, d)))
                order += 1
            continue
        g, p, d = item
        gpus = p.fewest_gpus + d.fewest_gpus
        if bound > best or gpus > cap:
            if gpus > cap:
                miss.record("max_gpus", gpus, cap, {"prefill": p.layout.describe(), "decode": d.layout.describe()})
            stats.ruled_out_by_bound += 1
            continue
        # a pair that grows past the best found cannot beat it (ties are searched: the better latency wins)
        limit = cap if best == math.inf else min(cap, math.floor(best / g.weight * (1 + 1e-12)))
        pair = _PairSearch(analyses, load, g.kv_name, p.layout, d.layout, stats)
        found = pair.fewest((p.fewest_workers, d.fewest_workers), limit)
        if found is None:
            if limit == cap:
                miss.record("max_gpus", cap + 1, cap, {"prefill": p.layout.describe(), "decode": d.layout.describe()})
            else:
                stats.ruled_out_by_bound += 1
            continue
        row = _row(search, pair, *found)
        rows.append(row)
        best = min(best, row["figures"]["num_gpus"] * g.weight)
    return rows


def pools_assumptions(load: ContinuousLoad) -> str:
    return (f"disaggregated pools on {load.framework}, timed by serve(disaggregated=...): "
            + " ".join(__doc__.split("The search:")[1].split()))


__all__ = ["collect_pools", "pools_assumptions"]
