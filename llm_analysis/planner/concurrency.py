"""Capacity planning: how many GPUs and nodes serve N concurrent requests.

Method (seed 002 §2.3, generalised), on the planner's search (planner/space.py
layouts, planner/batch_search.py batches): for every tensor x pipeline layout
that fits in a node, the largest decode batch a replica holds at the full
context (prompt + output) is its KV-cache capacity; with a per-token latency
target it is the largest batch whose mean decode step meets it (memory and step
time never decrease with the batch). Replicas needed = ceil(requests / batch);
the layout needing the fewest GPUs wins (ties: the lower time per output token).
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional

from llm_analysis.config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig
from llm_analysis.errors import ConfigError, DoesNotFitError
from llm_analysis.facade import LLMAnalysis
from llm_analysis.planner.batch_search import ServeTargets, largest_batch
from llm_analysis.planner.errors import ClosestMiss
from llm_analysis.planner.result import SearchStats
from llm_analysis.planner.space import pp_options, tp_options

PP_SIZES = (1, 2, 4, 8, 16)  # pipeline depths tried (up to max_pp_size and the layer count)


def _check(prompt_len, output_len, concurrent_requests, per_token_latency_target_s) -> None:
    for v, f in ((prompt_len, "prompt_len"), (output_len, "output_len"), (concurrent_requests, "concurrent_requests")):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{f} = {v!r} must be a positive integer")
    if per_token_latency_target_s is not None and per_token_latency_target_s <= 0:
        raise ConfigError(f"per_token_latency_target_s = {per_token_latency_target_s!r} must be positive (seconds)")


def _candidate(s: Dict[str, Any], tp: int, pp: int, requests: int, per_node: int) -> Dict[str, Any]:
    batch = s["batch_size_per_gpu"]
    replicas = math.ceil(requests / batch)
    gpus = replicas * tp * pp
    return {"tp_size": tp, "pp_size": pp, "batch_per_replica": batch, "replicas": replicas, "num_gpus": gpus,
            "num_nodes": math.ceil(gpus / per_node), "time_per_output_token": s["time_per_output_token"],
            "time_to_first_token": s["time_to_first_token"],
            "decode_tokens_per_sec_per_gpu": s["decode_tokens_per_sec_per_gpu"],
            "weight_memory_per_gpu": s["weight_memory_per_gpu"], "kv_cache_memory_per_gpu": s["kv_cache_memory_per_gpu"]}


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
    _check(prompt_len, output_len, concurrent_requests, per_token_latency_target_s)
    per_node = num_gpus_per_node or gpu.num_gpus_per_node
    targets = ServeTargets(seq_len=prompt_len, num_tokens_to_generate=output_len, max_ttft_s=None,
                           max_tpot_s=per_token_latency_target_s, max_batch=concurrent_requests,
                           kv_cache_dtype_bytes=kv_cache_dtype_bytes)
    stats, miss, candidates = SearchStats(), ClosestMiss(), []
    for tp in tp_options(model, per_node):
        for pp in (p for p in pp_options(model, max_pp_size, even_only=False) if p in PP_SIZES):
            if tp * pp > per_node:
                continue  # keep a replica inside one node
            analysis = LLMAnalysis(model, gpu, dtype, ParallelismConfig(tp_size=tp, pp_size=pp),
                                   flops_efficiency=flops_efficiency, hbm_memory_efficiency=hbm_memory_efficiency,
                                   num_gpus_per_node=per_node)
            out = largest_batch(analysis, targets, stats, miss, {"tp": tp, "pp": pp})
            if out is not None:
                candidates.append(_candidate(out.summary, tp, pp, concurrent_requests, per_node))
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
    from llm_analysis.planner import plan_serving_capacity as plan
    return plan(*args, **kwargs)
