"""Capacity planning: how many GPUs and nodes (with the layout) serve a load.

`plan_capacity`: N concurrent requests of one prompt and output length. Method
(seed 002 section 2.3, generalised), on the planner's search (planner/space.py
layouts, planner/batch_search.py batches): for every tensor x pipeline layout
that fits in a node, the largest decode batch a replica holds at the full
context (prompt + output) is its KV-cache capacity; with a per-token latency
target it is the largest batch whose mean decode step meets it (memory and step
time never decrease with the batch). Replicas needed = ceil(requests / batch), the
fewest whose shares fit that batch; round robin then gives each replica ceil(requests /
replicas) or one fewer, so a layout's batch, times and KV cache are those of its largest
share, ceil(requests / replicas) <= batch (300 requests over replicas of batch 141: 3
replicas of 100, timed at 100, not 141). The layout needing the fewest GPUs wins (ties:
the lower time per output token at that share).

`plan_serving_capacity`: a user population or request rate under latency
targets, for a prompt / output length distribution, searched by plan_inference
(GPU type, tp/pp/ep, dtype, batch). The distribution is given as (length,
weight) pairs or {"mean": m, "p90": q}; a mean/p90 pair becomes two equally
weighted points, m and q (the p90 point sizes the KV cache for long requests,
the mean the load). The plan sizes for the *largest* prompt and output of the
distribution (every request must fit a batch slot) and for the request-weighted
mean request time (the load), which is conservative: memory is sized at the
longest context, load at the mean.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from llm_analysis.config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig
from llm_analysis.errors import ConfigError, DoesNotFitError
from llm_analysis.facade import LLMAnalysis
from llm_analysis.planner.batch_search import ServeTargets, largest_batch
from llm_analysis.planner.errors import ClosestMiss
from llm_analysis.planner.inference import plan_inference
from llm_analysis.planner.inputs import SLO, class_named, positive_number, refuse_analysis_as_model
from llm_analysis.planner.inputs import analysis_class as analysis_class_checked
from llm_analysis.planner.result import SearchStats
from llm_analysis.planner.space import pp_options, tp_options

__all__ = ["plan_capacity", "plan_serving_capacity"]

PP_SIZES = (1, 2, 4, 8, 16)  # pipeline depths tried (up to max_pp_size and the layer count)


def _check_concurrency_inputs(prompt_len, output_len, concurrent_requests,
                              per_token_latency_target_s) -> None:
    for v, f in ((prompt_len, "prompt_len"), (output_len, "output_len"), (concurrent_requests, "concurrent_requests")):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{f} = {v!r} must be a positive integer")
    if per_token_latency_target_s is not None and per_token_latency_target_s <= 0:
        raise ConfigError(f"per_token_latency_target_s = {per_token_latency_target_s!r} must be positive (seconds)")


def _layout_candidate(analysis, targets: ServeTargets, largest: Dict[str, Any], tp: int, pp: int, requests: int,
                      per_node: int) -> Dict[str, Any]:
    """One layout's row: the fewest replicas whose shares fit `largest` (inference() at b*, the largest batch
    meeting memory and the latency target), timed at the largest share round robin gives a replica."""
    max_batch = largest["batch_size_per_gpu"]
    replicas = math.ceil(requests / max_batch)
    share = math.ceil(requests / replicas)  # <= b*: memory and step time grow with the batch, so it meets them too
    s = largest if share == max_batch else analysis.inference(
        batch_size_per_gpu=share, seq_len=targets.seq_len, num_tokens_to_generate=targets.num_tokens_to_generate,
        kv_cache_dtype_bytes=targets.kv_cache_dtype_bytes)
    gpus = replicas * tp * pp
    return {"tp_size": tp, "pp_size": pp, "batch_per_replica": share, "max_batch_per_replica": max_batch,
            "replicas": replicas, "num_gpus": gpus,
            "num_nodes": math.ceil(gpus / per_node), "time_per_output_token": s["time_per_output_token"],
            "time_to_first_token": s["time_to_first_token"],
            "decode_tokens_per_sec_per_gpu": s["decode_tokens_per_sec_per_gpu"],
            "weight_memory_per_gpu": s["weight_memory_per_gpu"], "kv_cache_memory_per_gpu": s["kv_cache_memory_per_gpu"]}


def plan_capacity(model: ModelConfig, gpu: GPUConfig, dtype: DtypeConfig, prompt_len: int, output_len: int,
                  concurrent_requests: int, per_token_latency_target_s: Optional[float] = None,
                  kv_cache_dtype_bytes: Optional[float] = None, max_pp_size: int = 8,
                  flops_efficiency: Optional[float] = None, hbm_memory_efficiency: Optional[float] = None,
                  num_gpus_per_node: Optional[int] = None, *, analysis_class: type = LLMAnalysis) -> Dict[str, Any]:
    """Best layout per node and the GPUs / nodes needed for `concurrent_requests`.

    Returns {"best": {...}, "candidates": [...]} where each entry has tp_size,
    pp_size, batch_per_replica (the largest share of the requests a replica holds, round robin),
    max_batch_per_replica (the largest batch a replica could hold under memory and the target),
    replicas, num_gpus, num_nodes, and time_per_output_token, time_to_first_token and the memory
    split at batch_per_replica. `analysis_class`: the class every
    layout is analysed as, LLMAnalysis (default) or a subclass describing a custom architecture
    (docs/custom-architectures.md); the result names it ("analysis_class") when it is not LLMAnalysis.
    """
    refuse_analysis_as_model(model)
    cls = analysis_class_checked(analysis_class)
    _check_concurrency_inputs(prompt_len, output_len, concurrent_requests, per_token_latency_target_s)
    per_node = num_gpus_per_node or gpu.num_gpus_per_node
    targets = ServeTargets(seq_len=prompt_len, num_tokens_to_generate=output_len, max_ttft_s=None,
                           max_tpot_s=per_token_latency_target_s, max_batch=concurrent_requests,
                           kv_cache_dtype_bytes=kv_cache_dtype_bytes)
    stats, miss, candidates = SearchStats(), ClosestMiss(), []
    for tp in tp_options(model, per_node):
        for pp in (p for p in pp_options(model, max_pp_size, even_only=False) if p in PP_SIZES):
            if tp * pp > per_node:
                continue  # keep a replica inside one node
            analysis = cls(model, gpu, dtype, ParallelismConfig(tp_size=tp, pp_size=pp),
                           flops_efficiency=flops_efficiency, hbm_memory_efficiency=hbm_memory_efficiency,
                           num_gpus_per_node=per_node)
            out = largest_batch(analysis, targets, stats, miss, {"tp": tp, "pp": pp})
            if out is not None:
                candidates.append(_layout_candidate(analysis, targets, out.summary, tp, pp, concurrent_requests,
                                                    per_node))
    if not candidates:
        target = "" if per_token_latency_target_s is None else \
            f" with time per output token <= {per_token_latency_target_s * 1e3:.1f} ms"
        raise DoesNotFitError(
            f"No layout of up to {per_node} {gpu.name} GPUs per replica serves {model.name} ({dtype.name}) at "
            f"context {prompt_len + output_len}{target}. Try fewer weight bits, a GPU with more memory, "
            f"a shorter context or a looser latency target.", needed_bytes=float("nan"),
            available_bytes=gpu.memory_bytes)
    candidates.sort(key=lambda c: (c["num_gpus"], c["time_per_output_token"]))
    return {"best": candidates[0], "candidates": candidates, "concurrent_requests": concurrent_requests,
            "prompt_len": prompt_len, "output_len": output_len, "model_name": model.name, "gpu_name": gpu.name,
            "dtype_name": dtype.name, **class_named(cls)}


# ---------------------------------------------------------------------------
# a request rate over a length distribution
# ---------------------------------------------------------------------------

Distribution = Union[Sequence[Tuple[int, float]], Mapping[str, float], int]


def _length_points(dist: Distribution, name: str) -> List[Tuple[int, float]]:
    if isinstance(dist, int) and not isinstance(dist, bool) and dist > 0:
        return [(dist, 1.0)]
    if isinstance(dist, Mapping):
        if set(dist) != {"mean", "p90"}:
            raise ConfigError(f"{name} = {dict(dist)!r}: a mapping must have exactly the keys 'mean' and 'p90'")
        mean, p90 = positive_number(dist["mean"], f"{name}['mean']"), positive_number(dist["p90"], f"{name}['p90']")
        if p90 < mean:
            raise ConfigError(f"{name}: p90 = {p90:g} is below mean = {mean:g}")
        return [(math.ceil(mean), 0.5), (math.ceil(p90), 0.5)]
    try:
        pts = [(int(n), float(w)) for n, w in dist]
    except (TypeError, ValueError):
        raise ConfigError(f"{name} = {dist!r} must be a positive length, [(length, weight), ...] or "
                          "{'mean': m, 'p90': q}") from None
    if not pts or any(n < 1 or w < 0 for n, w in pts) or sum(w for _, w in pts) <= 0:
        raise ConfigError(f"{name} = {dist!r}: lengths must be >= 1, weights >= 0 and not all zero")
    return pts


def plan_serving_capacity(model, gpus: Sequence, *, prompt_len: Distribution, output_len: Distribution,
                          slo: Union[None, SLO, Mapping] = None, users: Optional[int] = None,
                          requests_per_user_per_s: Optional[float] = None, **plan_kwargs) -> Dict[str, Any]:
    """GPUs, nodes and layout to serve `slo.request_rate_per_s` (or `users` x
    `requests_per_user_per_s`). Other keyword arguments go to plan_inference
    (dtypes, objective, gpu_prices, max_gpus, ...). Returns {"num_gpus",
    "num_nodes", "layout", "batch_size_per_gpu", "replicas", "request_rate_per_s",
    "sized_for", "plan"}."""
    slo = SLO.from_any(slo)
    if users is not None or requests_per_user_per_s is not None:
        if users is None or requests_per_user_per_s is None:
            raise ConfigError("users and requests_per_user_per_s go together: give both or use slo.request_rate_per_s")
        if slo.request_rate_per_s is not None:
            raise ConfigError("give either users x requests_per_user_per_s or slo.request_rate_per_s, not both")
        rate = positive_number(users, "users") * positive_number(requests_per_user_per_s, "requests_per_user_per_s")
        slo = SLO(slo.max_ttft_s, slo.max_tpot_s, rate, slo.min_tokens_per_s)
    if slo.request_rate_per_s is None:
        raise ConfigError("slo.request_rate_per_s (or users and requests_per_user_per_s) is needed to size capacity")
    prompts, outputs = _length_points(prompt_len, "prompt_len"), _length_points(output_len, "output_len")
    s_max, n_max = max(n for n, _ in prompts), max(n for n, _ in outputs)
    w_out = sum(w for _, w in outputs)
    n_mean = sum(n * w for n, w in outputs) / w_out
    # size for the longest request (memory, latency); scale the offered load by the
    # mean over the longest request time (request time ~ linear in the output length)
    load_scale = (n_mean + 1) / (n_max + 1)
    sized = SLO(slo.max_ttft_s, slo.max_tpot_s, slo.request_rate_per_s * load_scale, slo.min_tokens_per_s)
    plan_kwargs.setdefault("objective", "fewest_gpus")
    # this method sizes static batches at the longest request (module docstring); for continuous
    # batching of a length distribution, serve() takes the distribution itself
    plan_kwargs.setdefault("batching", "static")
    plan = plan_inference(model, gpus, sized, seq_len=s_max, num_tokens_to_generate=n_max, **plan_kwargs)
    best = plan.best
    return {"num_gpus": best["figures"]["num_gpus"], "num_nodes": best["figures"]["num_nodes"],
            "layout": best["layout"], "batch_size_per_gpu": best["figures"]["batch_size_per_gpu"],
            "replicas": best["figures"]["replicas"], "request_rate_per_s": slo.request_rate_per_s,
            "sized_for": {"seq_len": s_max, "num_tokens_to_generate": n_max, "mean_output_len": n_mean,
                          "load_scale": load_scale,
                          "method": "memory and latency at the longest prompt and output; load = rate x "
                                    "(mean output + 1) / (longest output + 1) of the longest request's replicas"},
            "plan": plan}
