"""Prefill/decode disaggregation (DistServe, Zhong et al. 2024, arXiv
2401.09670): separate prefill and decode pools, each with its own layout and
batch, sized from its own times.

Assumptions (stated in the result): a prefill replica runs `batch` prompts in
one prefill (`inference(num_tokens_to_generate=1)`: memory for the prompt's KV
only) and serves batch / TTFT requests/s; a decode replica holds the full
context's KV and serves batch x ep / ((n - 1) x TPOT) requests/s; the KV
hand-over between pools is not timed; pools are sized for the request rate
(without one: for one decode replica's rate); each pool's layout is chosen on
its own: the fewest GPUs ($ under the cost objective) of its replicas at that
rate, ties to the most requests/s per GPU ($)."""

from __future__ import annotations

import math
from typing import Any, Dict, Optional

from llm_analysis.planner.batch_search import ServeTargets
from llm_analysis.planner.errors import ClosestMiss
from llm_analysis.planner.inputs import SLO
from llm_analysis.planner.result import SearchStats
from llm_analysis.planner.serving import Search, each_layout_outcome


def _best_pool(search: Search, targets_for, stats: SearchStats, miss: ClosestMiss, rate_of, objective: str,
               rate: Optional[float]):
    """The layout whose replicas serving `rate` requests/s cost the fewest GPUs (or $), ties to the lowest GPUs
    (or $) per request/s; with no rate, the lowest per request/s. (Per request/s alone is not the pool's size:
    at a modest rate one replica of the widest layout holds far more than the load, and the replica count
    rounds up to it: Llama-3.1-70B on H100s at 5 requests/s took an 8-GPU decode replica where one of 4
    GPUs serves the rate.)"""
    best = None
    for lay, kv, out in each_layout_outcome(search, targets_for, stats, miss):
        capacity = rate_of(lay, out.summary)
        weight = lay.gpus * search.prices.get(lay.gpu.name) if objective == "cost" else lay.gpus
        per_rate = weight / capacity
        key = (per_rate,) if rate is None else (math.ceil(rate / capacity - 1e-9) * weight, per_rate)
        if best is None or key < best[0]:
            best = (key, lay, kv, out, capacity)
    return best


def plan_disaggregated(search: Search, slo: SLO, s: int, n: int, objective: str, stats: SearchStats,
                       miss: ClosestMiss) -> Optional[Dict[str, Any]]:
    """Pools for prefill and decode, or None when either pool has no layout
    meeting its target."""
    def prefill_targets(lay, kv):
        return ServeTargets(s, 1, slo.max_ttft_s, None, search.max_batch, kv)

    def decode_targets(lay, kv):
        return ServeTargets(s, n, None, slo.max_tpot_s, search.max_batch, kv)

    dec = _best_pool(search, decode_targets, stats, miss,
                     lambda lay, x: x["batch_size_per_gpu"] * lay.ep / ((n - 1) * x["time_per_output_token"]),
                     objective, slo.request_rate_per_s)
    if dec is None:
        return None
    rate = slo.request_rate_per_s or dec[4]
    pre = _best_pool(search, prefill_targets, stats, miss,
                     lambda lay, x: x["batch_size_per_gpu"] * lay.ep / x["time_to_first_token"], objective, rate)
    if pre is None:
        return None
    pools = {}
    for name, (_, lay, kv, out, r) in (("prefill", pre), ("decode", dec)):
        replicas = math.ceil(rate / r - 1e-9)
        pools[name] = {"layout": lay.describe(kv), "batch_size_per_gpu": out.summary["batch_size_per_gpu"],
                       "binding": out.binding, "requests_per_s_per_replica": r, "replicas": replicas,
                       "num_gpus": replicas * lay.gpus,
                       "time_to_first_token": out.summary["time_to_first_token"],
                       "time_per_output_token": out.summary["time_per_output_token"],
                       "cost_per_hour": (replicas * lay.gpus * search.prices[lay.gpu.name]
                                         if lay.gpu.name in search.prices else None)}
    costs = [p["cost_per_hour"] for p in pools.values()]
    total_cost = None if None in costs else sum(costs)
    return {"request_rate_per_s": rate, "pools": pools,
            "num_gpus": sum(p["num_gpus"] for p in pools.values()),
            "cost_per_hour": total_cost,
            "cost_per_million_tokens": None if total_cost is None else total_cost / 3600 / (rate * n) * 1e6,
            "assumptions": __doc__.split("Assumptions (stated in the result): ")[1].replace("\n", " ")}
