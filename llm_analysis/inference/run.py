"""Inference analysis: prefill, decode step by step, memory, largest batch,
throughput and cost.

Time model (README "Assumptions"):
- Every operator takes its cost-model time (cost/: roofline kernels); collectives
  their ring time over the link the group uses (cost/links.py); pipeline stages hand
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
- Context parallelism (cp_size > 1; operators/context_parallel.py) splits the
  prompt over cp ranks: prefill only (num_tokens_to_generate=1), each rank keeping
  seq_len / cp tokens of activations and KV cache.
- Memory: the KV cache is sized for the full context seq_len +
  num_tokens_to_generate; activations are the largest live set of one
  operator plus the residual stream (buffers are reused between operators).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from llm_analysis.quantities.mirror_parts import mirror_summary_parts
from llm_analysis.errors import ConfigError
from llm_analysis.model.context_parallel import check_cp_seq_len
from llm_analysis.schema.context_limit import check_context
from llm_analysis.schema.options import (MAX_COST_PER_GPU_HOUR, MAX_SEQ_LEN, DSZeRO, as_enum, boolean, dtype_bytes, integer,
                       non_negative_number, positive_int)
from llm_analysis.model.phase_table import FLOPS, phase_table
from llm_analysis.cost.precision import kv_cache_bytes_per_element
from llm_analysis.quantities.setup_entries import calibrated_notes, static_entries
from llm_analysis.inference.memory import inference_memory, widened_checkpoint_note
from llm_analysis.quantities.group_times import PhaseGroups
from llm_analysis.inference.pipeline import pipelined_decode_ratio, pipelined_prefill_s
from llm_analysis.inference.timing import (decode_phase, decode_time_without_cache, expose_zero3_gather, prefill_phase,
                     uncached_step_times)



def _check_request(analysis, b: int, s: int, n) -> int:
    n = integer(n, "num_tokens_to_generate", 1, MAX_SEQ_LEN)
    m, cp = analysis.model_config, analysis.parallelism_config.cp_size
    if cp > 1:
        if n > 1:
            raise ConfigError(f"cp_size = {cp} models prefill only (context parallelism splits the prompt); decode "
                              f"steps are not modelled under CP: use num_tokens_to_generate=1 (time to first token) "
                              f"or cp_size=1")
        check_cp_seq_len(cp, s)
    if m.encoder_only and n > 1:
        raise ConfigError(f"{m.name} is encoder-only: it generates no tokens; use num_tokens_to_generate=1")
    # the last generated token is never fed back
    check_context(m, s + n - 1, "seq_len + num_tokens_to_generate - 1")
    return n


def inference_times(analysis, d, b: int, s: int, n: int, use_kv_cache: bool, ds_zero) -> Dict[str, Any]:
    """Prefill (time to first token) and the n - 1 decode steps, in seconds (the caller's copy)."""
    t = cached_inference_times(analysis, d, b, s, n, use_kv_cache, ds_zero)
    return dict(t, prefill_groups=t["prefill_groups"].finished(), decode_groups=t["decode_groups"].finished())


def cached_inference_times(analysis, d, b: int, s: int, n: int, use_kv_cache: bool, ds_zero) -> Dict[str, Any]:
    """`inference_times` shared with the cache (read only). One entry per (cost model, call): its
    phases are computed without entries of their own, so a new shape costs one cache miss, a
    repeated call one hit."""
    return d.cost_memo(analysis.cost_model, ("inference_times", b, s, n, use_kv_cache, ds_zero),
                       lambda: _inference_times(analysis, d, b, s, n, use_kv_cache, ds_zero))


def _inference_times(analysis, d, b: int, s: int, n: int, use_kv_cache: bool, ds_zero) -> Dict[str, Any]:
    p = analysis.parallelism_config
    t: Dict[str, Any] = {}
    t["prefill_s"], t["prefill_groups"], t["prefill_flops"], masked = prefill_phase(analysis, d, b, s)
    t["prefill_executed_flops"] = t["prefill_flops"] - masked
    t["prefill_unpipelined_s"] = t["prefill_s"]
    if p.pp_size > 1 and b > 1:
        # a pipeline serves a batch of prompts in micro-batches, stages overlapping
        t["prefill_s"] = pipelined_prefill_s(analysis, d, b, s)  # m = 1 is the stage-after-stage pass
    steps = n - 1
    if analysis.model_config.encoder_only:
        # one forward pass (n = 1), nothing is decoded or cached: no decode step is built
        # (pooled or latent encoders describe none: exact/tree_pooling.py, tree_latents.py)
        t["decode_total_s"], t["first_step_s"], t["last_step_s"] = 0.0, 0.0, 0.0
        t["decode_groups"] = PhaseGroups(groups={})
    elif use_kv_cache:
        t["decode_total_s"], t["decode_groups"], t["first_step_s"], t["last_step_s"] = decode_phase(
            analysis, d, b, s, steps)
    else:
        t["decode_total_s"], t["decode_groups"] = decode_time_without_cache(analysis, d, b, s, steps)
        t["first_step_s"], t["last_step_s"] = uncached_step_times(analysis, d, b, s, steps)
    if p.pp_size > 1 and b > 1 and steps and use_kv_cache:
        _pipeline_decode_steps(analysis, d, t, b, s, steps)
    if ds_zero.value == 3 and p.dp_size > 1:
        expose_zero3_gather(analysis, t, steps)
    t["decode_step_s"] = t["decode_total_s"] / steps if steps else t["first_step_s"]
    t["total_s"] = t["prefill_s"] + t["decode_total_s"]
    return t


def _pipeline_decode_steps(analysis, d, t: Dict[str, Any], b: int, s: int, steps: int) -> None:
    """Micro-batched decode under PP (inference/pipeline.py): the steps shrink by the
    ratio of a micro-batched step to a stage-after-stage one, taken at the first and
    the last context of the request; the smaller ratio keeps the figure a lower bound
    for the roofline (the per-part breakdown stays the stage-after-stage one)."""
    ratio = min(pipelined_decode_ratio(analysis, d, b, s + 1), pipelined_decode_ratio(analysis, d, b, s + steps))
    t["decode_unpipelined_total_s"] = t["decode_total_s"]
    t["decode_total_s"] *= ratio
    t["first_step_s"] *= ratio
    t["last_step_s"] *= ratio


def run_inference(analysis, batch_size_per_gpu: int = 1, seq_len: int = 512, num_tokens_to_generate: int = 32,
                  use_kv_cache: bool = True, ds_zero=0, layernorm_dtype_bytes: float = 2,
                  kv_cache_dtype_bytes: Optional[float] = None, cost_per_gpu_hour: Optional[float] = None,
                  output_dir: Optional[str] = None, output_file_suffix: str = "",
                  kv_cache_dtype: Optional[str] = None, summary_hook=None) -> dict:
    """Inference analysis (see the module docstring). `layernorm_dtype_bytes` is
    accepted for API compatibility and unused: norm inputs and outputs are
    activations, sized and timed in the activation dtype like every operator.
    `summary_hook(analysis, describer, times, summary, ds_zero)` adds entries to the summary
    before it is written; None: the analysis' own `inference_summary_hook`, if it has one
    (cost/choice.py: the calibrated model's lower bound)."""
    b = positive_int(batch_size_per_gpu, "batch_size_per_gpu")
    s = positive_int(seq_len, "seq_len")
    n = _check_request(analysis, b, s, num_tokens_to_generate)
    ds_zero = as_enum(DSZeRO, ds_zero, "ds_zero")
    use_kv_cache = boolean(use_kv_cache, "use_kv_cache")
    layernorm_dtype_bytes = dtype_bytes(layernorm_dtype_bytes, "layernorm_dtype_bytes")  # (echoed: the number)
    if kv_cache_dtype_bytes is not None:
        kv_cache_dtype_bytes = dtype_bytes(kv_cache_dtype_bytes, "kv_cache_dtype_bytes")
    kv_cache_dtype_bytes = _kv_bytes(analysis, kv_cache_dtype, kv_cache_dtype_bytes)
    if cost_per_gpu_hour is not None:
        cost_per_gpu_hour = non_negative_number(cost_per_gpu_hour, "cost_per_gpu_hour", MAX_COST_PER_GPU_HOUR)
    if summary_hook is None:
        summary_hook = getattr(analysis, "inference_summary_hook", None)
    d = analysis.describer_for(kv_cache_dtype_bytes)
    t = cached_inference_times(analysis, d, b, s, n, use_kv_cache, ds_zero)  # read only: shared with the cache
    mem = inference_memory(analysis, d, b, s, n, use_kv_cache, kv_cache_dtype_bytes, ds_zero)
    if analysis.model_config.encoder_only:
        mem["decode_max_b"], mem["max_total_tokens"] = mem["prefill_max_b"], 0
    summary = _summary(analysis, b, s, n, use_kv_cache, mem, t, layernorm_dtype_bytes)
    if cost_per_gpu_hour is not None:
        dollars_per_s = cost_per_gpu_hour * summary["gpus_per_replica"] / 3600
        summary["prefill_cost_per_1k_tokens"] = dollars_per_s * t["prefill_s"] / (b * s) * 1000
        summary["decode_cost_per_1k_tokens"] = dollars_per_s * t["decode_step_s"] / b * 1000
        summary["total_cost_per_1k_tokens"] = dollars_per_s * t["total_s"] / (b * n) * 1000
    summary["notes"] = _notes(analysis, summary)
    if summary_hook is not None:
        summary_hook(analysis, d, t, summary, ds_zero)
    if output_dir is not None:
        analysis.output_summary_dict(summary, output_dir, print_human_readable=True,
                                     output_file_suffix=output_file_suffix)
    return summary


def _kv_bytes(analysis, name: Optional[str], given_bytes: Optional[float]) -> Optional[float]:
    """The KV-cache element size: from `kv_cache_dtype` (checked against the GPU) or bytes."""
    named = kv_cache_bytes_per_element(name, analysis.gpu_config)
    if named is not None and given_bytes is not None and named != given_bytes:
        raise ConfigError(f"kv_cache_dtype = {name!r} ({named} bytes) contradicts kv_cache_dtype_bytes = "
                          f"{given_bytes}; give one of them")
    return named if named is not None else given_bytes


def _static_entries(analysis) -> tuple:
    """The summary's entries no request changes (summary_static.py)."""
    def compute() -> tuple:
        m, p = analysis.model_config, analysis.parallelism_config
        return (m.name, analysis.gpu_config.name, analysis.dtype_config.name, p.tp_size, p.ep_size, p.pp_size,
                p.dp_size, analysis.get_num_params_total(), analysis.get_num_active_params_total(),
                analysis.get_TFLOPS_per_gpu(), analysis.get_gpu_hbm_bandwidth(), analysis.get_ridge_point(),
                p.tp_size * p.pp_size * p.cp_size)  # (a context-parallel replica spans cp of them)
    return static_entries(analysis, "inference_static_entries", compute)


def _decode_step_flops(analysis, b: int, context_len: int) -> float:
    """`get_num_flops_decode_step(b, context_len)`: the decode table's FLOPs total where there is
    a table (as quantities/flops.py takes it, without the view's phase record)."""
    if analysis.model_config.encoder_only:  # one forward pass: no decode step
        return 0.0
    table = phase_table(analysis.describer, "decode", x=context_len)
    if table is None:
        return analysis.get_num_flops_decode_step(b, context_len)
    return table.total(b, context_len, FLOPS)


_NO_GROUP = {"latency_s": 0.0}  # a group the phase does not have (read only)


def _summary(analysis, b: int, s: int, n: int, use_kv_cache: bool, mem: Dict, t: Dict,
             layernorm_dtype_bytes: float) -> Dict[str, Any]:
    """The summary dict, keys in DESIGN.md's order (one literal: the hot path of a sweep)."""
    model, gpu, dtype, tp, ep, pp, dp, params, active, tflops, bandwidth, ridge, gpus = _static_entries(analysis)
    steps = n - 1
    # the decode breakdown of the mean step, as decode_latency beside it (the phase's sums over its steps / steps)
    groups = t["decode_groups"].finished(steps or 1)
    # reading the KV cache, and the mixer layers' state (operators/mixers.py), per step
    kv_s = groups.get("attention_kv_cache", _NO_GROUP)["latency_s"] + groups.get("mixer_state", _NO_GROUP)["latency_s"]
    prefill_s, step_s, total_s = t["prefill_s"], t["decode_step_s"], t["total_s"]
    prefill_groups = t["prefill_groups"].finished()  # (dicts of the caller's own)
    free = mem["mem"] - mem["needed"]
    return {
        "model_name": model, "gpu_name": gpu, "dtype_name": dtype,
        "batch_size_per_gpu": b, "seq_len": s, "tp_size": tp, "ep_size": ep, "pp_size": pp,
        "dp_size": dp, "num_tokens_to_generate": n,
        "num_params_total": params, "num_active_params_total": active,
        "flops_efficiency": analysis.flops_efficiency, "hbm_memory_efficiency": analysis.hbm_memory_efficiency,
        "layernorm_dtype_bytes": layernorm_dtype_bytes,  # echoed as 0.2.2 does (norms run in the activation dtype)
        "achieved_tflops": tflops, "achieved_memory_bandwidth_GBs": bandwidth, "ridge_point_flops_per_byte": ridge,
        "use_kv_cache": use_kv_cache,
        "kv_cache_latency": kv_s,
        "kv_cache_memory_per_gpu": mem["kv_cache"],
        "weight_memory_per_gpu": mem["weights"],
        "weight_memory_embedding_per_gpu": mem["weights_embedding"],
        "prefill_activation_memory_per_gpu": mem["prefill_activation"],
        "prefill_max_batch_size_per_gpu": mem["prefill_max_b"],
        "prefill_num_flops_fwd_total": t["prefill_flops"],
        # what the kernels execute (flash attention: the causal part), which the time follows
        "prefill_num_flops_executed_total": t["prefill_executed_flops"],
        "decode_activation_memory_per_gpu": mem["decode_activation"],
        "decode_max_batch_size_per_gpu": mem["decode_max_b"],
        "decode_num_flops_fwd_total": _decode_step_flops(analysis, b, s + 1),
        "max_batch_total_tokens": mem["max_total_tokens"],
        "memory_used_per_gpu": mem["needed"],
        "memory_left_per_gpu": free,
        "gpu_memory_per_gpu": mem["mem"],
        "prefill_latency": prefill_s,
        # 0.2.2's parts of the prefill and of a mean decode step (quantities/mirror_parts.py)
        **mirror_summary_parts(prefill_groups, "prefill_"),
        "prefill_latency_unpipelined": t["prefill_unpipelined_s"],
        "time_to_first_token": prefill_s,
        "decode_latency": step_s,
        **mirror_summary_parts(groups, "decode_"),
        "time_per_output_token": step_s,
        "decode_first_step_latency": t["first_step_s"],
        "decode_last_step_latency": t["last_step_s"],
        "total_decode_latency": t["decode_total_s"],
        "total_latency": total_s,
        "total_per_token_latency": total_s / n,
        "prefill_tokens_per_sec": b * s / prefill_s,
        "decode_tokens_per_sec": b / step_s if step_s else 0.0,
        "total_tokens_per_sec": b * n / total_s,
        "gpus_per_replica": gpus,
        "prefill_tokens_per_sec_per_gpu": b * s / prefill_s / gpus,
        "decode_tokens_per_sec_per_gpu": (b / step_s / gpus) if step_s else 0.0,
        "total_tokens_per_sec_per_gpu": b * n / total_s / gpus,
        "prefill_latency_breakdown": prefill_groups,
        "decode_latency_breakdown": groups,
        "memory_breakdown_per_gpu": {"weights": mem["weights"], "kv_cache": mem["kv_cache"],
                                     "activations": mem["peak_activation"], "free": free},
    }


# The share of GPU memory vLLM lets its weights, KV cache and activations use by default
# (EngineArgs gpu_memory_utilization = 0.9): above it a setup is flagged, not refused, since
# what a framework reserves varies (FasterTransformer ran out of memory on a GPT-NeoX-20B batch
# we count at 94% of an A100-80GB; TensorRT-LLM ran a Llama-7B batch we count at 96%).
SERVING_MEMORY_SHARE = 0.9


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
    used_share = summary["memory_used_per_gpu"] / summary["gpu_memory_per_gpu"]
    if used_share > SERVING_MEMORY_SHARE:
        notes.append(
            f"uses {used_share:.0%} of the GPU's memory, nothing reserved: serving frameworks keep the rest for the "
            f"CUDA context, GEMM workspaces and allocator slack (vLLM takes {SERVING_MEMORY_SHARE:.0%} by default), "
            "so this batch may not fit in practice")
    pre, dec = summary["prefill_max_batch_size_per_gpu"], summary["decode_max_batch_size_per_gpu"]
    if isinstance(pre, int) and isinstance(dec, int) and dec > pre:
        # (a user read the decode figure as the batch this call can run and was refused at it)
        notes.append(f"decode_max_batch_size_per_gpu = {dec} counts a decode step alone (the KV cache at the full "
                     f"length, one token's activations); a static batch of that many requests does not fit its "
                     f"prefill: the largest batch this call runs is {pre}. Engines prefill such batches in chunks "
                     f"(serve())")
    counted, executed = summary["prefill_num_flops_fwd_total"], summary["prefill_num_flops_executed_total"]
    if executed < counted:
        notes.append(f"prefill_num_flops_fwd_total counts attention as the conventions do (the whole score matrix); "
                     f"the flash-attention kernels execute only the causal part, prefill_num_flops_executed_total = "
                     f"{executed / counted:.1%} of it, and the prefill time follows what they execute")
    if analysis.profile is None and analysis.flops_efficiency == 1 and analysis.hbm_memory_efficiency == 1 \
            and analysis.achieved_tflops is None and analysis.achieved_memory_bandwidth_GBs is None:
        # (the roofline at efficiency 1; a calibrated model's times are expected ones, its bounds are the
        # `_lower_bound` entries)
        notes.append("efficiencies are 1: times are lower bounds (real kernels reach ~60-90% of HBM bandwidth "
                     "and ~40-70% of peak FLOPs)")
    if analysis.profile is not None:  # a calibrated time resting on another GPU's or dtype's data says so
        notes.extend(calibrated_notes(analysis))
    widened = widened_checkpoint_note(analysis)
    if widened:
        notes.append(widened)
    return notes
