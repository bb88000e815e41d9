"""A static-batch fleet under a load: how many replicas of a layout, and the batch each replica's share of
the load forms (docs/planner.md, "--batching static").

The batch search (batch_search.py) finds b*, the largest batch per GPU meeting memory and the latency
targets; the load is then split over the replicas, and each replica runs the batch its own share forms,
never more (a replica of tp x pp x ep GPUs runs batch x ep requests, batch per expert-parallel rank):

- closed loop (C clients, each sending its next request when the last one ends): the fewest replicas R
  whose shares fit a batch of b*, R = ceil(C / (b* x ep)); round robin gives a replica ceil(C / R) or
  floor(C / R) clients, each of which holds one slot of its batch, so a replica of k clients runs batches
  of ceil(k / ep) per GPU back to back and generates k x n / T tokens/s (Little's law per replica, T its
  request time). The fleet generates the sum over its replicas; the row's batch and times are those of the
  largest share;
- open loop (Poisson arrivals at `rate`): a replica receives rate / R requests/s, and its batch is the one
  those arrivals fill while the last batch runs: the smallest b with b x ep >= (rate / R) x T(b), where
  it keeps up with its share (the batches settle between b - 1 and b; one fewer would fall behind, so b is
  gathered within one request time and one arrival: b x ep < (rate / R) x T(b) + ep). The fewest replicas
  whose share b* keeps up with, R = ceil(rate x T(b*) / (b* x ep)), each then runs a batch <= b* (its
  capacity b x ep / T(b) grows with b). The fleet generates what it is sent: rate x n tokens/s;
- a token-rate target alone (no clients, no rate) is a floor on capacity: full batches of b*, the fewest
  replicas whose tokens/s reach it.

With clients, min_tokens_per_s is a target the fleet must reach: replicas are added while it falls short
(smaller shares run smaller, faster batches), up to one per client; with a rate it is checked before the
search (inputs.check_token_target: the fleet generates rate x n tokens/s)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from llm_analysis.planner.inputs import SLO

# a replica count from Little's law that is a whole number up to rounding is that number
_ROUNDING = 1e-9


@dataclass
class StaticFleet:
    replicas: int
    summary: Dict[str, Any]  # inference() at the batch per GPU the largest share forms: the row's batch and times
    tokens_per_s: float  # generated tokens/s of the whole fleet at the load
    binding: List[str]


def _closed_loop_tokens_per_s(clients: int, replicas: int, ep: int, n: int,
                              run: Callable[[int], Dict[str, Any]]) -> float:
    """Generated tokens/s of `replicas` replicas sharing `clients` closed-loop clients round robin: a replica
    of k clients runs batches of ceil(k / ep) per GPU back to back, k x n tokens per request time T."""
    low, extra = divmod(clients, replicas)  # `extra` replicas hold low + 1 clients, the others low
    total = 0.0
    for k, count in ((low + 1, extra), (low, replicas - extra)):
        if count and k:
            total += count * k * n / run(math.ceil(k / ep))["total_latency"]
    return total


def _fewest(meets: Callable[[int], bool], start: int, cap: int) -> Optional[int]:
    """The fewest count in [start, cap] for which `meets` holds (it holds from some count on): doubling the
    step from `start`, then bisecting; None when even `cap` falls short."""
    lo, hi, step = start - 1, start, 1
    while not meets(hi):
        lo = hi
        if hi >= cap:
            return None
        hi, step = min(cap, hi + step), step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return hi


def size_fleet(best: Dict[str, Any], binding: List[str], ep: int, n: int, slo: SLO,
               run: Callable[[int], Dict[str, Any]], max_replicas: int,
               record_miss: Callable[[str, float, float, int], None]) -> Optional[StaticFleet]:
    """The fleet of one layout whose largest batch meeting the targets is `best` (inference() at b*, the
    search's `binding`): `run(b)` is inference() at batch b per GPU (b <= b*, so every target b* meets, b
    meets too), `max_replicas` the most the GPU cap leaves room for. None when the token-rate target is
    out of reach (`record_miss(constraint, value, limit, replicas)` is told)."""
    b_star = best["batch_size_per_gpu"]
    T = best["total_latency"]
    cache = {b_star: best}

    def at(b: int) -> Dict[str, Any]:
        if b not in cache:
            cache[b] = run(b)
        return cache[b]

    if slo.concurrency is not None:
        clients = int(slo.concurrency)
        first = max(1, math.ceil(clients / (b_star * ep) - _ROUNDING))
        replicas, why = first, binding
        if slo.min_tokens_per_s is not None:
            # more replicas, smaller shares, faster batches: up to one client per replica
            def reaches(r: int) -> bool:
                return _closed_loop_tokens_per_s(clients, r, ep, n, at) >= slo.min_tokens_per_s * (1 - 1e-12)
            found = _fewest(reaches, first, max(first, min(clients, max_replicas)))
            if found is None:
                last = max(first, min(clients, max_replicas))
                record_miss("min_tokens_per_s", _closed_loop_tokens_per_s(clients, last, ep, n, at),
                            slo.min_tokens_per_s, last)
                return None
            if found > first:
                replicas, why = found, ["min_tokens_per_s"]
        batch = math.ceil(math.ceil(clients / replicas) / ep)
        return StaticFleet(replicas, at(batch), _closed_loop_tokens_per_s(clients, replicas, ep, n, at), why)
    if slo.request_rate_per_s is not None:
        rate = slo.request_rate_per_s
        replicas = max(1, math.ceil(rate * T / (b_star * ep) - _ROUNDING))
        share = rate / replicas

        def keeps_up(b: int) -> bool:  # a replica running batches of b completes b x ep per request time
            return b * ep >= share * at(b)["total_latency"] * (1 - 1e-12)
        batch = _fewest(keeps_up, 1, b_star) or b_star  # b* keeps up by the choice of replicas
        why = binding if batch == b_star or replicas > 1 else ["request_rate"]
        return StaticFleet(replicas, at(batch), rate * n, why)
    # a token-rate target alone: a floor on the capacity of full batches
    replicas = 1
    if slo.min_tokens_per_s is not None:
        replicas = max(1, math.ceil(slo.min_tokens_per_s / (b_star * ep * n / T) - _ROUNDING))
    return StaticFleet(replicas, best, replicas * b_star * ep * n / T, binding)
