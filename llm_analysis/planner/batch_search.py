"""The largest batch a layout serves under memory, TTFT and TPOT targets.

Memory, time to first token and time per output token never decrease with the
batch (every memory term is linear in it; every operator's FLOPs and bytes
grow with it), so the feasible batches are 1..b* and a binary search finds b*
in O(log B) full evaluations; the other batches are placed by monotonicity."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from llm_analysis.errors import DoesNotFitError
from llm_analysis.planner.errors import ClosestMiss
from llm_analysis.planner.result import SearchStats


@dataclass
class ServeTargets:
    seq_len: int
    num_tokens_to_generate: int
    max_ttft_s: Optional[float]
    max_tpot_s: Optional[float]
    max_batch: int
    kv_cache_dtype_bytes: Optional[float] = None
    cost_per_gpu_hour: Optional[float] = None
    # (the batch a load forms depends on how it is split over the replicas: static_fleet.py, after this search)
    max_batch_binding: str = "max_batch_size"  # what `max_batch` stands for in a row's binding


@dataclass
class BatchOutcome:
    summary: Dict[str, Any]
    binding: List[str]
    feasible_points: List[Dict[str, Any]] = field(default_factory=list)


def _violations(s: Dict[str, Any], t: ServeTargets) -> List[tuple]:
    """(constraint, value, limit) of every target the summary misses, in the order `_violation` checks them."""
    out = []
    if t.max_ttft_s is not None and s["time_to_first_token"] > t.max_ttft_s:
        out.append(("ttft", s["time_to_first_token"], t.max_ttft_s))
    if t.max_tpot_s is not None and s["time_per_output_token"] > t.max_tpot_s:
        out.append(("tpot", s["time_per_output_token"], t.max_tpot_s))
    return out


def _violation(s: Dict[str, Any], t: ServeTargets) -> Optional[tuple]:
    """(constraint, value, limit) of the first target the summary misses, or None."""
    missed = _violations(s, t)
    return missed[0] if missed else None


def largest_batch(analysis, t: ServeTargets, stats: SearchStats, miss: ClosestMiss,
                  layout: Dict[str, Any]) -> Optional[BatchOutcome]:
    """Binary search of b* for one analysis (one gpu/dtype/layout); None when
    not even batch 1 meets the targets (the miss is recorded)."""
    calls = 0

    def run(b: int) -> Dict[str, Any]:
        nonlocal calls
        calls += 1
        return analysis.inference(batch_size_per_gpu=b, seq_len=t.seq_len,
                                  num_tokens_to_generate=t.num_tokens_to_generate,
                                  kv_cache_dtype_bytes=t.kv_cache_dtype_bytes, cost_per_gpu_hour=t.cost_per_gpu_hour)

    def done(result):
        stats.evaluated_full += calls
        stats.decided_by_monotonicity += t.max_batch - calls
        return result

    try:
        first = run(1)
    except DoesNotFitError as e:
        miss.record("memory", e.needed_bytes, e.available_bytes, {**layout, "batch": 1})
        return done(None)
    bad = _violation(first, t)
    if bad:  # every target batch 1 misses, so that the refusal names each one a user would loosen
        miss.record_all(_violations(first, t), {**layout, "batch": 1})
        return done(None)
    fit = min(first["prefill_max_batch_size_per_gpu"], first["decode_max_batch_size_per_gpu"], t.max_batch)
    points, best, binding = [first], first, [t.max_batch_binding] if fit == t.max_batch else ["memory"]
    if fit > 1:
        top = run(fit)
        bad = _violation(top, t)
        if bad is None:
            best = top
            points.append(top)
        else:
            best, binding = _bracket_search(run, t, first, top, bad[0], points)
    return done(BatchOutcome(best, binding, points))


def _margin(s: Dict[str, Any], t: ServeTargets) -> float:
    """Largest (figure / target) - 1 over the latency targets: <= 0 meets them."""
    m = -1.0
    if t.max_ttft_s is not None:
        m = max(m, s["time_to_first_token"] / t.max_ttft_s - 1)
    if t.max_tpot_s is not None:
        m = max(m, s["time_per_output_token"] / t.max_tpot_s - 1)
    return m


def _bracket_search(run, t: ServeTargets, lo_s: Dict[str, Any], hi_s: Dict[str, Any], hi_bad: str,
                    points: List[Dict[str, Any]]):
    """Largest batch in [lo, hi) meeting the targets, lo meeting them and hi not.

    Safeguarded interpolation (regula falsi on the margin, clamped inside the
    bracket): TTFT and TPOT are nearly affine in the batch under the roofline,
    so the root is usually found in 2-3 evaluations instead of log2(hi - lo);
    after two steps that only crept up by one it bisects, so it never stalls."""
    lo, hi = lo_s["batch_size_per_gpu"], hi_s["batch_size_per_gpu"]
    g_lo, g_hi, binding = _margin(lo_s, t), _margin(hi_s, t), [hi_bad]
    creeping = 0  # consecutive steps that only moved lo by one
    while hi - lo > 1:
        bisect = creeping >= 2 or g_hi <= g_lo
        guess = (lo + hi) / 2 if bisect else lo + (hi - lo) * (-g_lo) / (g_hi - g_lo)
        mid = min(max(int(guess), lo + 1), hi - 1)
        s = run(mid)
        v = _violation(s, t)
        creeping = creeping + 1 if (v is None and mid == lo + 1) else 0
        if v is None:
            lo, lo_s, g_lo = mid, s, _margin(s, t)
            points.append(s)
        else:
            hi, g_hi, binding = mid, _margin(s, t), [v[0]]
    return lo_s, binding
