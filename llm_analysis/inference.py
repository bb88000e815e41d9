"""Inference analysis: prefill, decode step by step, memory, largest batch,
throughput and cost.

Time model (README "Assumptions"):
- Every operator takes its roofline time (roofline.py); collectives their ring
  time over the link the group uses (communication.py); pipeline stages hand
  the hidden states on point to point. A request's latency runs through every
  stage in turn.
- The prompt's forward pass (prefill) produces the first token: time to first
  token = prefill. Each further token is a decode step: generating n tokens
  costs prefill + (n - 1) steps, step i processing one token per sequence at
  context length c = seq_len + i (it attends to c tokens, sliding-window layers
  to at most the window). Attention FLOPs and KV-cache bytes grow with c, so
  late tokens cost more; the sum over steps is taken in closed form (every
  operator's FLOPs and bytes are affine in c between window boundaries), so a
  request of 100 000 tokens costs no more to analyse than one of 10.
- Without a KV cache each step recomputes the whole context (a prefill of
  c tokens); that sum is estimated from 33 evenly spaced steps.
- ZeRO-3 (ds_zero=3, dp_size > 1) shards the weights over data parallelism:
  every forward pass all-gathers them, prefetched under the pass's own time;
  only the excess of the gather over the pass is added (decode steps are summed
  treating the step time as affine in the context, as it is between windows).
- Memory: the KV cache is sized for the full context seq_len +
  num_tokens_to_generate; activations are the largest live set of one
  operator plus the residual stream (buffers are reused between operators).
"""

from __future__ import annotations

import logging
import math
from typing import Dict, List, Optional, Tuple

from .constant import GB
from .errors import ConfigError, DoesNotFitError
from .operators import Operator, Phase, layer_groups
from .timing import GroupTimes, group_key

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------- helpers
def _sum_affine(c0: float, c1: float, k_lo: int, k_hi: int) -> float:
    """sum_{k=k_lo}^{k_hi-1} (c0 + c1 k)."""
    n = k_hi - k_lo
    if n <= 0:
        return 0.0
    return c0 * n + c1 * (k_lo + k_hi - 1) * n / 2.0


def sum_max_affine(a0: float, a1: float, b0: float, b1: float, n: int) -> Tuple[float, float]:
    """sum_{k=0}^{n-1} max(a0 + a1 k, b0 + b1 k), split into (the part where a
    is the max, the part where b is). Exact, O(1)."""
    if n <= 0:
        return 0.0, 0.0
    d0, d1 = a0 - b0, a1 - b1
    if d1 == 0:
        return (_sum_affine(a0, a1, 0, n), 0.0) if d0 >= 0 else (0.0, _sum_affine(b0, b1, 0, n))
    x = -d0 / d1  # where the two lines cross
    if d1 > 0:  # a wins from ceil(x) on
        kc = min(max(math.ceil(x), 0), n)
        return _sum_affine(a0, a1, kc, n), _sum_affine(b0, b1, 0, kc)
    kc = min(max(math.floor(x) + 1, 0), n)  # a wins up to floor(x)
    return _sum_affine(a0, a1, 0, kc), _sum_affine(b0, b1, kc, n)


def _live_activation_bytes(ops: List[Operator], residual_bytes: float) -> float:
    """Largest input+output set of one operator, plus the residual stream."""
    return max((o.activation_bytes_per_gpu for o in ops), default=0.0) + residual_bytes


def prefill_time(analysis, d, batch: int, seq_len: int) -> Tuple[float, Dict, List[Operator]]:
    ops = d.weighted_ops(Phase("prefill", batch, seq_len, seq_len))
    acc = GroupTimes()
    acc.add_ops(analysis, ops)
    pp_s = analysis.pipeline_handoff_time_s(batch, seq_len)
    if pp_s:
        acc.add("pp_communication", 0, 0, pp_s, 0, 0)
    return acc.total_s, acc.finish(), ops


def pipelined_prefill_time(analysis, d, batch: int, seq_len: int) -> float:
    """Prefill of `batch` requests through pp stages, one request per micro-batch:
    the pipeline fills, then a request leaves the last stage every slowest-stage
    time: sum(stage times) + (batch - 1) x max(stage time) (GPipe-style fill,
    Huang et al. 2019). Stage times include the hand-off to the next stage."""
    p = analysis.parallelism_config.pp_size
    one = Phase("prefill", 1, seq_len, seq_len)
    handoff = analysis.pipeline_handoff_time_s(1, seq_len) / (p - 1)
    stages = [analysis.weighted_time_s(d.weighted_ops(one, stage=i)) + (handoff if i < p - 1 else 0.0)
              for i in range(p)]
    return sum(stages) + (batch - 1) * max(stages)


def _window_breaks(model, lo: int, hi: int) -> List[int]:
    """Context lengths where some layer's attended length stops growing."""
    ws = set()
    if model.sliding_window:
        for kind in layer_groups(model):
            if kind.attention == "sliding_attention" and lo <= model.sliding_window < hi:
                ws.add(model.sliding_window)
    return sorted(ws)


def decode_time(analysis, d, batch: int, seq_len: int, num_steps: int) -> Tuple[float, Dict, float, float]:
    """Total time of `num_steps` decode steps at contexts seq_len+1 .. seq_len+num_steps,
    their breakdown, and the first and last step times."""
    first = d.weighted_ops(Phase("decode", batch, 1, seq_len + 1))
    first_s = analysis.weighted_time_s(first) + analysis.pipeline_handoff_time_s(batch, 1)
    if num_steps <= 0:
        return 0.0, {}, first_s, first_s
    lo, hi = seq_len + 1, seq_len + num_steps
    last = d.weighted_ops(Phase("decode", batch, 1, hi))
    last_s = analysis.weighted_time_s(last) + analysis.pipeline_handoff_time_s(batch, 1)
    roof = analysis._roofline
    acc = GroupTimes()
    # segments [c_a, c_b] on which every operator is affine in the context length
    bounds = [lo] + [w + 1 for w in _window_breaks(analysis.model_config, lo, hi)] + [hi + 1]
    for c_a, c_end in zip(bounds[:-1], bounds[1:]):
        c_b = c_end - 1
        n = c_b - c_a + 1
        ops_a = first if c_a == lo else d.weighted_ops(Phase("decode", batch, 1, c_a))
        ops_b = ops_a if c_b == c_a else (last if c_b == hi else d.weighted_ops(Phase("decode", batch, 1, c_b)))
        span = max(c_b - c_a, 1)
        for (r, oa), (_, ob) in zip(ops_a, ops_b):
            if oa.kind == "collective":
                acc.add(group_key(oa), 0, 0, r * n * analysis._op_time(oa), 0, 0)
                continue
            f0, f1 = oa.flops_per_gpu, (ob.flops_per_gpu - oa.flops_per_gpu) / span
            b0, b1 = oa.bytes_per_gpu, (ob.bytes_per_gpu - oa.bytes_per_gpu) / span
            comp, mem = sum_max_affine(f0 / roof.flops_per_s, f1 / roof.flops_per_s,
                                       b0 / roof.hbm_bytes_per_s, b1 / roof.hbm_bytes_per_s, n)
            acc.add(group_key(oa), r * comp, r * mem, 0.0, r * _sum_affine(f0, f1, 0, n),
                    r * _sum_affine(b0, b1, 0, n))
    pp_s = analysis.pipeline_handoff_time_s(batch, 1) * num_steps
    if pp_s:
        acc.add("pp_communication", 0, 0, pp_s, 0, 0)
    return acc.total_s, acc.finish(), first_s, last_s


def decode_time_without_cache(analysis, d, batch: int, seq_len: int, num_steps: int) -> Tuple[float, Dict]:
    """Each step is a full forward over its whole context (estimated from <= 33 samples)."""
    acc = GroupTimes()
    if num_steps <= 0:
        return 0.0, {}
    samples = min(num_steps, 33)
    for j in range(samples):
        i = 1 + round(j * (num_steps - 1) / max(samples - 1, 1))
        c = seq_len + i
        acc.add_ops(analysis, d.weighted_ops(Phase("prefill", batch, c, c)), times=num_steps / samples)
    return acc.total_s, acc.finish()


def zero3_weight_gather_time(analysis) -> float:
    """All-gather of one GPU's (TP/PP-sharded) weights over the data-parallel
    group: what every forward pass of ZeRO-3 inference waits for."""
    from .options import DSZeRO
    from .communication import collective_time_s, link_for_group
    p = analysis.parallelism_config
    link = link_for_group(analysis.gpu_config, p.dp_size, p.tp_size * p.pp_size,
                          analysis.intra_node_memory_efficiency, analysis.inter_node_memory_efficiency,
                          analysis.num_gpus_per_node)
    return collective_time_s("all_gather", analysis.get_weight_memory_per_gpu(DSZeRO.NONE), p.dp_size, link)


# ------------------------------------------------------------------ memory
def _memory_terms(analysis, d, batch: int, seq_len: int, context_len: int, use_kv_cache: bool,
                  kv_cache_dtype_bytes) -> Dict[str, float]:
    a_bytes = analysis.dtype_config.activation_bits / 8
    h = analysis.model_config.hidden_dim
    # one layer's operators, unscaled by the layer count: buffers are reused across layers
    prefill_ops = [o for _, _, ops in d.model_ops(Phase("prefill", batch, seq_len, seq_len)) for o in ops]
    decode_ops = [o for _, _, ops in d.model_ops(Phase("decode", batch, 1, context_len)) for o in ops]
    kv = analysis.get_memory_kv_cache_per_gpu(batch, context_len, kv_cache_dtype_bytes) if use_kv_cache else 0.0
    return {
        "prefill_activation": _live_activation_bytes(prefill_ops, batch * seq_len * h * a_bytes),
        "decode_activation": _live_activation_bytes(decode_ops, batch * h * a_bytes),
        "kv_cache": kv,
    }


def _max_batch(available_bytes: float, per_seq_bytes: float) -> int:
    if available_bytes <= 0:
        return 0
    if per_seq_bytes <= 0:
        return 10**9
    return int(available_bytes // per_seq_bytes)


def _fit_suggestions(analysis, weights: float, mem: float) -> str:
    p = analysis.parallelism_config
    tips = []
    if weights > mem:
        tips.append(f"shard the weights further (tp_size={p.tp_size * 2} or pp_size={p.pp_size * 2})")
        if analysis.dtype_config.weight_bits > 4:
            tips.append("use fewer weight bits (e.g. dtype w8a16e16 or w4a16e16)")
    else:
        tips.append("a smaller batch_size_per_gpu or a shorter context (seq_len + num_tokens_to_generate)")
        tips.append(f"more tensor/pipeline parallelism (tp_size={p.tp_size * 2})")
        tips.append("a smaller KV-cache dtype (kv_cache_dtype_bytes=1)")
    return "; ".join(tips)


# ------------------------------------------------------------ orchestrator
def run_inference(analysis, batch_size_per_gpu: int = 1, seq_len: int = 512, num_tokens_to_generate: int = 32,
                  use_kv_cache: bool = True, ds_zero=0, layernorm_dtype_bytes: float = 2,
                  kv_cache_dtype_bytes: Optional[float] = None, cost_per_gpu_hour: Optional[float] = None,
                  output_dir: Optional[str] = None, output_file_suffix: str = "") -> dict:
    from .options import DSZeRO, as_enum as _enum, positive_int as _positive_int

    b = _positive_int(batch_size_per_gpu, "batch_size_per_gpu")
    s = _positive_int(seq_len, "seq_len")
    if isinstance(num_tokens_to_generate, bool) or not isinstance(num_tokens_to_generate, int) \
            or num_tokens_to_generate < 1:
        raise ConfigError(f"num_tokens_to_generate = {num_tokens_to_generate!r} must be an integer >= 1")
    n = num_tokens_to_generate
    ds_zero = _enum(DSZeRO, ds_zero, "ds_zero")
    if kv_cache_dtype_bytes is not None and not (isinstance(kv_cache_dtype_bytes, (int, float)) and kv_cache_dtype_bytes > 0):
        raise ConfigError(f"kv_cache_dtype_bytes = {kv_cache_dtype_bytes!r} must be a positive number of bytes")
    if cost_per_gpu_hour is not None and not (isinstance(cost_per_gpu_hour, (int, float)) and cost_per_gpu_hour >= 0):
        raise ConfigError(f"cost_per_gpu_hour = {cost_per_gpu_hour!r} must be a non-negative number")
    m = analysis.model_config
    if m.encoder_only and n > 1:
        raise ConfigError(f"{m.name} is encoder-only: it generates no tokens; use num_tokens_to_generate=1")
    max_len = m.max_seq_len
    if max_len is not None and s + n - 1 > max_len:  # the last generated token is never fed back
        logger.warning("seq_len + num_tokens_to_generate - 1 = %d exceeds %s's max_seq_len = %d",
                       s + n - 1, m.name, max_len)
    p = analysis.parallelism_config
    d = analysis._describer_with_kv(kv_cache_dtype_bytes)
    context = s + n
    mem = analysis.gpu_config.mem_per_GPU_in_GB * GB

    # memory ---------------------------------------------------------------
    weights = analysis.get_weight_memory_per_gpu(ds_zero)
    weights_embedding = analysis.get_memory_embedding(ds_zero)
    # every term is linear in the batch (per-sequence KV, per-token activations)
    one = _memory_terms(analysis, d, 1, s, context, use_kv_cache, kv_cache_dtype_bytes)
    terms = {k: v * b for k, v in one.items()}
    prefill_max_b = _max_batch(mem - weights, one["prefill_activation"] + one["kv_cache"])
    decode_max_b = _max_batch(mem - weights, one["decode_activation"] + one["kv_cache"])
    kv_per_token = analysis.get_memory_kv_cache_per_gpu(1, 1, kv_cache_dtype_bytes)
    max_total_tokens = _max_batch(mem - weights - terms["decode_activation"], kv_per_token) if use_kv_cache else 0
    peak_activation = max(terms["prefill_activation"], terms["decode_activation"])
    needed = weights + terms["kv_cache"] + peak_activation
    if needed > mem:
        fit_b = min(prefill_max_b, decode_max_b)
        raise DoesNotFitError(
            f"{m.name} on {analysis.gpu_config.name} (tp={p.tp_size}, pp={p.pp_size}, "
            f"{analysis.dtype_config.name}) needs {needed / GB:.2f} GB per GPU for batch {b} at context {context} "
            f"(weights {weights / GB:.2f} GB, KV cache {terms['kv_cache'] / GB:.2f} GB, activations "
            f"{peak_activation / GB:.2f} GB) but the GPU has {mem / GB:.2f} GB. Largest batch that fits: {fit_b}. "
            f"To fit: {_fit_suggestions(analysis, weights, mem)}.",
            needed_bytes=needed, available_bytes=mem, max_batch_size=fit_b,
            breakdown={"weights": weights, **terms})

    # time -------------------------------------------------------------------
    prefill_s, prefill_groups, prefill_ops = prefill_time(analysis, d, b, s)
    prefill_flops = sum(n_ * o.flops for n_, o in prefill_ops)
    prefill_unpipelined_s = prefill_s
    if p.pp_size > 1 and b > 1:
        # a pipeline serves a batch of prompts request by request, stages overlapping
        prefill_s = min(prefill_s, pipelined_prefill_time(analysis, d, b, s))
    steps = n - 1
    if use_kv_cache:
        decode_total_s, decode_groups, first_step_s, last_step_s = decode_time(analysis, d, b, s, steps)
    else:
        decode_total_s, decode_groups = decode_time_without_cache(analysis, d, b, s, steps)
        first_step_s = analysis.weighted_time_s(d.weighted_ops(Phase("prefill", b, s + 1, s + 1)))
        last_step_s = analysis.weighted_time_s(d.weighted_ops(Phase("prefill", b, s + max(steps, 1), s + max(steps, 1))))
    if ds_zero.value == 3 and p.dp_size > 1:
        # ZeRO-3 inference: every forward pass gathers the dp-sharded weights; the
        # gather is prefetched under the pass's compute, only its excess shows
        gather_s = zero3_weight_gather_time(analysis)
        exposed = max(0.0, gather_s - prefill_s)
        prefill_s += exposed
        prefill_groups["dp_communication"] = {"latency_s": exposed, "communication_s": exposed,
                                              "bound": "communication"}
        if steps:
            slope = (last_step_s - first_step_s) / max(steps - 1, 1)
            over, _ = sum_max_affine(gather_s, 0.0, first_step_s, slope, steps)  # sum of max(gather, step)
            exposed = over - _sum_affine(first_step_s, slope, 0, steps)
            decode_total_s += exposed
            decode_groups["dp_communication"] = {"latency_s": exposed, "communication_s": exposed,
                                                 "bound": "communication"}
            first_step_s, last_step_s = max(first_step_s, gather_s), max(last_step_s, gather_s)
    decode_step_s = decode_total_s / steps if steps else first_step_s
    if m.encoder_only:  # one forward pass, nothing is decoded or cached
        decode_step_s = first_step_s = last_step_s = 0.0
        decode_max_b, max_total_tokens = prefill_max_b, 0
    total_s = prefill_s + decode_total_s
    gpus_per_replica = p.tp_size * p.pp_size

    decode_flops_first = analysis.get_num_flops_decode_step(b, s + 1)
    summary = {
        "model_name": m.name, "gpu_name": analysis.gpu_config.name, "dtype_name": analysis.dtype_config.name,
        "batch_size_per_gpu": b, "seq_len": s, "tp_size": p.tp_size, "ep_size": p.ep_size, "pp_size": p.pp_size,
        "dp_size": p.dp_size, "num_tokens_to_generate": n,
        "num_params_total": analysis.get_num_params_total(),
        "num_active_params_total": analysis.get_num_active_params_total(),
        "flops_efficiency": analysis.flops_efficiency, "hbm_memory_efficiency": analysis.hbm_memory_efficiency,
        "achieved_tflops": analysis.get_TFLOPS_per_gpu(),
        "achieved_memory_bandwidth_GBs": analysis.get_gpu_hbm_bandwidth(),
        "ridge_point_flops_per_byte": analysis.get_ridge_point(),
        "use_kv_cache": use_kv_cache,
        "kv_cache_latency": decode_groups.get("attention_kv_cache", {}).get("latency_s", 0.0) / steps if steps else 0.0,
        "kv_cache_memory_per_gpu": terms["kv_cache"],
        "weight_memory_per_gpu": weights,
        "weight_memory_embedding_per_gpu": weights_embedding,
        "prefill_activation_memory_per_gpu": terms["prefill_activation"],
        "prefill_max_batch_size_per_gpu": prefill_max_b,
        "prefill_num_flops_fwd_total": prefill_flops,
        "decode_activation_memory_per_gpu": terms["decode_activation"],
        "decode_max_batch_size_per_gpu": decode_max_b,
        "decode_num_flops_fwd_total": decode_flops_first,
        "max_batch_total_tokens": max_total_tokens,
        "memory_used_per_gpu": needed,
        "memory_left_per_gpu": mem - needed,
        "gpu_memory_per_gpu": mem,
        "prefill_latency": prefill_s,
        "prefill_latency_unpipelined": prefill_unpipelined_s,
        "time_to_first_token": prefill_s,
        "decode_latency": decode_step_s,
        "time_per_output_token": decode_step_s,
        "decode_first_step_latency": first_step_s,
        "decode_last_step_latency": last_step_s,
        "total_decode_latency": decode_total_s,
        "total_latency": total_s,
        "total_per_token_latency": total_s / n,
        "prefill_tokens_per_sec": b * s / prefill_s,
        "decode_tokens_per_sec": b / decode_step_s if decode_step_s else 0.0,
        "total_tokens_per_sec": b * n / total_s,
        "gpus_per_replica": gpus_per_replica,
        "prefill_tokens_per_sec_per_gpu": b * s / prefill_s / gpus_per_replica,
        "decode_tokens_per_sec_per_gpu": (b / decode_step_s / gpus_per_replica) if decode_step_s else 0.0,
        "total_tokens_per_sec_per_gpu": b * n / total_s / gpus_per_replica,
        "prefill_latency_breakdown": prefill_groups,
        "decode_latency_breakdown": decode_groups,
        "memory_breakdown_per_gpu": {"weights": weights, "kv_cache": terms["kv_cache"],
                                     "activations": peak_activation, "free": mem - needed},
    }
    if cost_per_gpu_hour is not None:
        dollars_per_s = cost_per_gpu_hour * gpus_per_replica / 3600
        summary["prefill_cost_per_1k_tokens"] = dollars_per_s * prefill_s / (b * s) * 1000
        summary["decode_cost_per_1k_tokens"] = dollars_per_s * decode_step_s / b * 1000
        summary["total_cost_per_1k_tokens"] = dollars_per_s * total_s / (b * n) * 1000
    summary["notes"] = _notes(analysis, summary)
    if output_dir is not None:
        analysis.output_summary_dict(summary, output_dir, print_human_readable=True,
                                     output_file_suffix=output_file_suffix)
    return summary


def _notes(analysis, summary: dict) -> List[str]:
    """Warnings where an assumption matters for the reader."""
    notes = []
    ridge = summary["ridge_point_flops_per_byte"]
    dec = summary["decode_latency_breakdown"]
    mlp = dec.get("mlp") or dec.get("experts")
    if mlp and mlp["arithmetic_intensity"] < ridge / 4:
        notes.append(
            f"decode is memory-bound: the MLP runs at {mlp['arithmetic_intensity']:.0f} FLOPs/byte against a ridge "
            f"point of {ridge:.0f}; a larger batch costs almost no extra time per step")
    if analysis.flops_efficiency == 1 and analysis.hbm_memory_efficiency == 1 and analysis.achieved_tflops is None \
            and analysis.achieved_memory_bandwidth_GBs is None:
        notes.append("efficiencies are 1: times are lower bounds (real kernels reach ~60-90% of HBM bandwidth "
                     "and ~40-70% of peak FLOPs)")
    return notes
