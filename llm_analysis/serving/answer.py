"""The answer of `serve()`: one dict in base units (seconds, tokens, requests, bytes), the
figures' sources, and notes that state the assumptions behind them."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from llm_analysis.serving.engine import FITTED_OVERHEADS

PERCENTILES = (50, 90, 99)
# an open loop offered at least this share of the saturation rate is said to be near it: there the
# queue (and TTFT) depends on how long the load lasts. Llama-3.1-8B on one H100 under vLLM, 1000 x 200
# tokens, saturating at 26.5 requests/s: at 90% and 94% of it a 16,000-request run's mean TTFT is
# within 6% and 11% of a 4,000-request run's; at 98% the longer run fills the KV pool, preempts, and
# waits 6.2 s against 0.15 s
NEAR_SATURATION = 0.9
LATENCIES = ("ttft", "tpot", "e2e")


def percentiles(samples: Dict[str, List[Tuple[np.ndarray, int]]]) -> Dict[str, Optional[float]]:
    """`<latency>_p<q>_s` of each latency's samples (None where there are none: one-token outputs
    have no time per output token). A latency's samples come in groups (values, count): a simulated
    replica's requests and how many replicas run like it. Each group's values count `count` times, as
    if repeated, without repeating them (a million attention replicas would make billions of samples):
    numpy's linear interpolation between the sorted samples at (N - 1) q / 100, N the total count."""
    out: Dict[str, Optional[float]] = {}
    for name in LATENCIES:
        groups = [(np.asarray(v, dtype=float), int(n)) for v, n in samples.get(name, ()) if len(v) and n > 0]
        if not groups:
            out.update({f"{name}_p{q}_s": None for q in PERCENTILES})
            continue
        values = np.concatenate([v for v, _ in groups])
        counts = np.concatenate([np.full(len(v), n, dtype=np.int64) for v, n in groups])
        order = np.argsort(values, kind="stable")
        values, ends = values[order], np.cumsum(counts[order])  # ends[i]: samples up to and including value i

        def at(index: int) -> float:  # the index-th (from 0) of the sorted samples, repeats counted
            return float(values[np.searchsorted(ends, index, side="right")])
        for q in PERCENTILES:
            position = (int(ends[-1]) - 1) * q / 100.0
            below = int(np.floor(position))
            low, high = at(below), at(min(below + 1, int(ends[-1]) - 1))
            out[f"{name}_p{q}_s"] = low + (position - below) * (high - low)
    return out


def unbounded_latencies() -> Dict[str, None]:
    """Every latency entry of a saturated open loop: no number (the queue grows without bound)."""
    keys = [f"{name}_s" for name in LATENCIES] + [f"{name}_p{q}_s" for name in LATENCIES for q in PERCENTILES]
    return dict.fromkeys(keys)


_ACCURACY_SCOPE = {
    "one_group": "aggregated, one tensor-parallel group per worker",
    "aggregated_layout": "aggregated workers with attention data, expert or pipeline parallelism",
    "disaggregated": "disaggregated prefill and decode pools",
}


def accuracy_summary(framework: str, stated: Dict[str, tuple]) -> Optional[str]:
    """The errors an engine profile states, every kind of deployment in one line (the planner's tables);
    None where it states none."""
    parts = [f"{_ACCURACY_SCOPE[kind]}, {rows} runs: TTFT median {ttft_med:.0%} (p90 {ttft_p90:.0%}), TPOT "
             f"median {tpot_med:.0%} (p90 {tpot_p90:.0%})"
             for kind, (rows, ttft_med, ttft_p90, tpot_med, tpot_p90) in stated.items()]
    if not parts:
        return None
    return (f"measured error of the calibrated model against published closed-loop runs of {framework} not used to "
            "fit its profile: " + "; ".join(parts) + " (docs/serving.md)")


def accuracy_note(engine, kind: str) -> Optional[str]:
    """How far this engine profile's calibrated answers have been from published runs of deployments of `kind`
    (serving/engine.py ACCURACY_KINDS) it was not fitted on; None where its profile states no such figures."""
    stated = engine.accuracy(kind)
    if stated is None:
        return None
    rows, ttft_med, ttft_p90, tpot_med, tpot_p90 = stated
    return (f"measured against {rows} published closed-loop runs of {engine.framework} ({_ACCURACY_SCOPE[kind]}; "
            f"not used to fit its profile), the calibrated model's TTFT was off by a median {ttft_med:.0%} (p90 "
            f"{ttft_p90:.0%}) and its TPOT by {tpot_med:.0%} (p90 {tpot_p90:.0%}): read the times with that margin "
            "(docs/serving.md)")


def notes(engine, pool, workload, steady_state_means: bool, saturated: bool, saturation_rps: float,
          preemptions: int, kv_occupancy: Optional[float], near_saturation: bool = False,
          attention_replicas: int = 1) -> List[str]:
    """What the reader should know about how the figures were obtained (`attention_replicas`: per worker,
    each with its own KV pool)."""
    n = []
    if saturated:
        n.append(f"request_rate = {workload.request_rate:g}/s is above the saturation rate {saturation_rps:.4g}/s: "
                 "the queue grows without bound, so no latency is a number; below it, the engine keeps up")
    if near_saturation:
        n.append(f"request_rate = {workload.request_rate:g}/s is {workload.request_rate / saturation_rps:.0%} of the "
                 f"saturation rate {saturation_rps:.4g}/s: this close to it the queue, and with it the time to first "
                 f"token, depends on how long the load lasts; the figures are those of num_requests = "
                 f"{engine.num_requests} simulated requests, and a longer run can fill the KV pool, preempt and wait "
                 f"far longer")
    mode = ("closed loop: means from the steady state in closed form (Little's law holds: concurrency = requests/s "
            "x mean end-to-end latency); percentiles from the seeded simulation of the same step model"
            if steady_state_means else
            "open loop: Poisson arrivals; means and percentiles from the seeded simulation of the step model")
    n.append(mode)
    if workload.lengths.max_output == 1:
        n.append("every request yields one token (a prefill-only workload): the engine runs prefill-only steps of as "
                 "many waiting prompts as its token budget holds (whole prompts where it does not chunk them), at most "
                 "max_num_seqs")
    scheduling = ("prefill chunks share steps with the decodes (continuous batching)" if engine.mixed_batches else
                  "prompts run in prefill-only steps whenever any wait (the decodes pause), as SGLang does by default")
    chunking = ("prompts longer than the budget left are chunked" if engine.chunked_prefill else
                "prompts are prefilled whole (no chunking)")
    n.append(f"{engine.framework}: {scheduling}; {chunking}; token budget {engine.token_budget}, at most "
             f"{engine.max_num_seqs} requests running")
    # the answer's kv_pool_tokens_per_replica is the worker's: with attention replicas, say both
    where = ("per replica" if attention_replicas == 1 else
             f"per attention replica ({pool.capacity_tokens * attention_replicas} per worker of {attention_replicas})")
    n.append(f"KV pool: {pool.capacity_tokens} tokens {where} in blocks of {engine.block_size} "
             f"({engine.kv_cache_dtype} cache, {pool.pool_bytes / 1e9:.2f} GB per GPU after weights "
             f"{pool.weight_bytes / 1e9:.2f} GB and workspace {pool.workspace_bytes / 1e9:.2f} GB); "
             + ("requests reserve their whole length on admission" if engine.admission == "full_request" else
                "requests take blocks as they grow and the most recent is preempted and recomputed when it is full"))
    if pool.sliding_window_cache == "window_groups":
        n.append(f"sliding-window layers (vLLM's hybrid KV cache manager): the pool's tokens are those of the "
                 f"full-attention layers' groups; each request's sliding-window groups hold only the blocks of its last "
                 f"sliding_window tokens beside them, {pool.state_tokens_per_request:.0f} tokens of the pool")
    elif pool.sliding_window_cache == "window_pool":
        n.append(f"sliding-window layers (SGLang's hybrid SWA pool): the pool's tokens are those of the full-attention "
                 f"layers; the sliding-window layers hold {engine.window_pool_ratio:g} x as many in a pool of their "
                 f"own (the tighter of the two sets the requests that fit, read at the longest request)")
    elif pool.sliding_window_cache == "full":
        n.append(f"sliding-window layers hold every token, as full-attention layers do ({engine.framework}'s default "
                 f"here, or sliding_window_cache='full'): a deployment that caches them by window holds more requests")
    if preemptions:
        n.append(f"{preemptions} preemptions in the simulation (the KV pool was full)")
    if kv_occupancy is not None and kv_occupancy > 0.95:
        n.append(f"the KV pool is {kv_occupancy:.0%} full on average: memory, not compute, limits the batch")
    host = (f"the host prepares each step while the GPU runs the one before (overlap scheduler): a step takes the "
            f"longer of its GPU time + {engine.step_overhead_s * 1e3:.2f} ms left exposed and the host's own "
            f"{engine.step_overhead_per_seq_s * 1e6:.1f} us per sequence in it" if engine.host_overlap else
            f"host overhead {engine.step_overhead_s * 1e3:.2f} ms per step and "
            f"{engine.step_overhead_per_seq_s * 1e6:.1f} us per sequence in it, after the GPU's work")
    layer = (f"; {engine.step_overhead_per_layer_s * 1e6:.1f} us per layer per step on the GPU beyond the cost "
             "model's operators (the engine's own kernels and launch gaps, fitted)"
             if engine.step_overhead_per_layer_s > 0 else "")
    given = [k for k in engine.given_fitted if k in FITTED_OVERHEADS]
    n.append(f"fixed API / tokenisation latency {engine.api_latency_s * 1e3:.1f} ms in every time to first token "
             f"(varying +-50% per request in the simulation); {host}{layer} (engine profile"
             + (f"; {', '.join(given)} as given)" if given else ")"))
    if engine.scheduling_lookahead:
        n.append("the scheduler plans each step as the one before begins (scheduling_lookahead=1, the engine's "
                 "default): a request arriving while others run waits for the step in progress and the one "
                 "already planned")
    if engine.prefix_cache_share:
        n.append(f"{engine.prefix_cache_share:.0%} of each prompt is found in the prefix cache (whole blocks): not "
                 "prefilled, still counted in each request's KV blocks")
    if not workload.lengths.fixed:
        n.append(("the closed-form means and " if steady_state_means else "")
                 + "the saturation rate use the mean input and output lengths, with the KV tokens a running request "
                 "holds (and its decode steps read) weighted by how long it runs, E[(I + O/2) O] / E[O]; the "
                 "simulation draws each request's own")
    if steady_state_means and not saturated and engine.benchmark_rounds > 0:
        n.append(f"closed-loop means are those of a benchmark run of {engine.benchmark_rounds:.3g} requests per "
                 "client whose clients start together: its first round queues behind each other's prefills, which "
                 "adds 1/benchmark_rounds of that wait to the mean TTFT and puts it in the tail of the percentiles "
                 "(that round is 1/benchmark_rounds of the requests) (benchmark_rounds "
                 + ("as given" if "benchmark_rounds" in engine.given_fitted else
                    "fitted per engine on measured closed-loop runs")
                 + "; benchmark_rounds=0 gives the steady state alone)")
    n.append("times are the cost model's for each step's batch (token operators on all the step's tokens, each "
             "sequence's attention over its own context); per-request sampling and detokenisation are in the host "
             "overheads")
    return n


__all__ = ["LATENCIES", "PERCENTILES", "notes", "percentiles", "unbounded_latencies"]
