"""Capacity planning: how many GPUs and nodes serve N concurrent requests.

Method (seed 002 §2.3, generalised): for every tensor x pipeline layout that
fits in a node, the largest decode batch a replica holds at the full context
(prompt + output) is its KV-cache capacity; with a per-token latency target
the batch is lowered until the mean decode step meets it. Replicas needed =
ceil(requests / batch); the layout needing the fewest GPUs wins (ties: the
lower time per output token).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

from .config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig
from .errors import ConfigError, DoesNotFitError


def _tp_candidates(model: ModelConfig, max_tp: int) -> List[int]:
    kv = model.num_key_value_heads
    return [t for t in range(1, max_tp + 1)
            if model.n_head % t == 0 and (kv % t == 0 or t % kv == 0) and (t & (t - 1)) == 0]


def _largest_batch_meeting(analysis, prompt_len: int, output_len: int, max_batch: int,
                           target_s: Optional[float], kv_bytes) -> Optional[Dict[str, Any]]:
    """Largest batch <= max_batch whose time per output token meets target_s
    (binary search: the step time never decreases with the batch)."""
    def run(b):
        return analysis.inference(batch_size_per_gpu=b, seq_len=prompt_len, num_tokens_to_generate=output_len,
                                  kv_cache_dtype_bytes=kv_bytes)
    best = run(max_batch)
    if target_s is None or best["time_per_output_token"] <= target_s:
        return best
    lo, hi, found = 1, max_batch - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        s = run(mid)
        if s["time_per_output_token"] <= target_s:
            found, lo = s, mid + 1
        else:
            hi = mid - 1
    return found


def plan_capacity(model: ModelConfig, gpu: GPUConfig, dtype: DtypeConfig, prompt_len: int, output_len: int,
                  concurrent_requests: int, per_token_latency_target_s: Optional[float] = None,
                  kv_cache_dtype_bytes: Optional[float] = None, max_pp_size: int = 8,
                  flops_efficiency: Optional[float] = None, hbm_memory_efficiency: Optional[float] = None,
                  num_gpus_per_node: Optional[int] = None) -> Dict[str, Any]:
    """Best layout per node and the GPUs / nodes needed for `concurrent_requests`.

    Returns {"best": {...}, "candidates": [...]} where each entry has tp_size,
    pp_size, batch_per_replica, replicas, num_gpus, num_nodes,
    time_per_output_token, time_to_first_token and the memory split.
    """
    from .facade import LLMAnalysis

    for v, f in ((prompt_len, "prompt_len"), (output_len, "output_len"), (concurrent_requests, "concurrent_requests")):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{f} = {v!r} must be a positive integer")
    if per_token_latency_target_s is not None and per_token_latency_target_s <= 0:
        raise ConfigError(f"per_token_latency_target_s = {per_token_latency_target_s!r} must be positive (seconds)")
    per_node = num_gpus_per_node or gpu.num_gpus_per_node
    candidates = []
    for tp in _tp_candidates(model, per_node):
        for pp in (p for p in (1, 2, 4, 8, 16) if p <= max_pp_size and p <= model.num_layers):
            if tp * pp > per_node:
                continue  # keep a replica inside one node
            analysis = LLMAnalysis(model, gpu, dtype, ParallelismConfig(tp_size=tp, pp_size=pp),
                                   flops_efficiency=flops_efficiency, hbm_memory_efficiency=hbm_memory_efficiency,
                                   num_gpus_per_node=per_node)
            try:
                probe = analysis.inference(batch_size_per_gpu=1, seq_len=prompt_len,
                                           num_tokens_to_generate=output_len, kv_cache_dtype_bytes=kv_cache_dtype_bytes)
            except DoesNotFitError:
                continue
            max_batch = min(probe["decode_max_batch_size_per_gpu"], probe["prefill_max_batch_size_per_gpu"],
                            concurrent_requests)
            if max_batch < 1:
                continue
            s = _largest_batch_meeting(analysis, prompt_len, output_len, max_batch, per_token_latency_target_s,
                                       kv_cache_dtype_bytes)
            if s is None:
                continue
            batch = s["batch_size_per_gpu"]
            replicas = math.ceil(concurrent_requests / batch)
            gpus = replicas * tp * pp
            candidates.append({
                "tp_size": tp, "pp_size": pp, "batch_per_replica": batch, "replicas": replicas,
                "num_gpus": gpus, "num_nodes": math.ceil(gpus / per_node),
                "time_per_output_token": s["time_per_output_token"], "time_to_first_token": s["time_to_first_token"],
                "decode_tokens_per_sec_per_gpu": s["decode_tokens_per_sec_per_gpu"],
                "weight_memory_per_gpu": s["weight_memory_per_gpu"],
                "kv_cache_memory_per_gpu": s["kv_cache_memory_per_gpu"],
            })
    if not candidates:
        target = "" if per_token_latency_target_s is None else \
            f" with time per output token <= {per_token_latency_target_s * 1e3:.1f} ms"
        raise DoesNotFitError(
            f"No layout of up to {per_node} {gpu.name} GPUs per replica serves {model.name} ({dtype.name}) at "
            f"context {prompt_len + output_len}{target}. Try fewer weight bits, a GPU with more memory, "
            f"a shorter context or a looser latency target.", needed_bytes=float("nan"),
            available_bytes=gpu.mem_per_GPU_in_GB * 1e9)
    candidates.sort(key=lambda c: (c["num_gpus"], c["time_per_output_token"]))
    return {"best": candidates[0], "candidates": candidates, "concurrent_requests": concurrent_requests,
            "prompt_len": prompt_len, "output_len": output_len, "model_name": model.name, "gpu_name": gpu.name,
            "dtype_name": dtype.name}


def plan_serving_capacity(*args, **kwargs):
    """GPUs and nodes for a user population and request rate, searched by the planner
    (GPU type, tp/pp/ep, dtype, batch under TTFT/TPOT targets): see
    `llm_analysis.planner.plan_serving_capacity` for the arguments."""
    from .planner import plan_serving_capacity as plan
    return plan(*args, **kwargs)
