"""Inference memory per GPU: weights, the KV cache sized for the full context,
and activations as the largest live set of one operator plus the residual
stream (buffers are reused between operators and layers). Every term but the
weights is linear in the batch, which gives the largest batch that fits."""

from __future__ import annotations

import copy
from typing import Dict, Optional

from llm_analysis.units import GB
from llm_analysis.errors import ConfigError, DoesNotFitError
from llm_analysis.schema.parallelism import ParallelismConfig
from llm_analysis.model import Phase
from llm_analysis.model.describer import LayerDescriber
from llm_analysis.model.phase_table import ACTIVATION_BYTES, phase_table


def _max_activation_bytes(d, name: str, batch: int, x: int, q_len: int) -> float:
    """Largest activation set of one operator (one layer's, unscaled by the layer
    count: buffers are reused across layers), from the phase table when there is one."""
    table = phase_table(d, name, x=x)
    if table is not None:
        return table.largest(batch, x, ACTIVATION_BYTES)
    ops = [o for _, _, ops in d.model_ops(Phase(name, batch, q_len, x)) for o in ops]
    return max((o.activation_bytes_per_gpu for o in ops), default=0.0)


def memory_terms(analysis, d, batch: int, seq_len: int, context_len: int, use_kv_cache: bool,
                 kv_cache_dtype_bytes) -> Dict[str, float]:
    """Prefill and decode activations and the KV cache of `batch` sequences."""
    a_bytes = analysis.dtype_config.activation_bytes_per_element
    h = analysis.model_config.hidden_dim
    kv = _kv_cache_bytes(analysis, d, batch, context_len, kv_cache_dtype_bytes) if use_kv_cache else 0.0

    def forward(length: int) -> float:  # the residual stream of the rank's length / cp tokens, and its widest op
        return (_max_activation_bytes(d, "prefill", batch, length, length)
                + batch * length * h * a_bytes / analysis.parallelism_config.cp_size)
    if analysis.model_config.encoder_only:  # an encoder-only model decodes nothing (one forward pass: run.py)
        decode = 0.0
    elif use_kv_cache:
        decode = _max_activation_bytes(d, "decode", batch, context_len, 1) + batch * h * a_bytes
    else:  # without a cache each step is a forward over the whole context, the last one's context_len - 1 tokens
        decode = forward(context_len - 1)
    return {"prefill_activation": forward(seq_len), "decode_activation": decode, "kv_cache": kv}


def _kv_plan(d):
    """Per pipeline stage, what `views.memory.kv_cache_total` reads from the describer that no
    length or batch changes: (per layer kind: repeat count, the sliding window's cached-token
    cap or None, cached elements per token), the CP size, and the cross-attention cache and
    mixer state of one request. None when a describer subclass decides the cached length."""
    if type(d).cached_len is not LayerDescriber.cached_len:
        return None
    m = d.model
    stages = []
    for groups in d.stage_groups:
        kinds = [(n, m.sliding_window - 1 if (k.attention == "sliding_attention" and m.sliding_window) else None,
                  d.kv_cache_elems_per_token_per_gpu(k)) for k, n in groups.items()]
        stages.append((kinds, d.par.cp_size, d.cross_kv_cache_bytes_per_gpu(1, sum(groups.values())),
                       d.mixer_state_bytes_per_seq_per_gpu(groups)))
    return stages


def _kv_cache_bytes(analysis, d, batch: int, context_len: int, kv_cache_dtype_bytes) -> float:
    """`get_memory_kv_cache_per_gpu(batch, context_len)` of one request (batch 1) from the
    describer's KV plan: the same products in the same order (cached_len is min(length,
    window - 1) on sliding layers), so the same float; other batches ask the view."""
    plan = d.memoized(("inference_kv_plan",), lambda: _kv_plan(d)) if batch == 1 else None
    if plan is None:
        return analysis.get_memory_kv_cache_per_gpu(batch, context_len, kv_cache_dtype_bytes)
    kv_bytes, L = d.kv_bytes, context_len
    return max(sum(n * 1 * (L if cap is None else min(L, cap)) * elems * kv_bytes for n, cap, elems in kinds) / cp
               + cross + 1 * mixer for kinds, cp, cross, mixer in plan)


def max_batch(available_bytes: float, per_seq_bytes: float) -> int:
    if available_bytes <= 0:
        return 0
    if per_seq_bytes <= 0:
        return 10**9
    return int(available_bytes // per_seq_bytes)


def _next_valid_tp(analysis, weights_fit_bytes: Optional[float] = None):
    """The smallest tp_size above the analysis' that the model can be split by (heads, KV heads, MLP widths,
    mixers: whatever the describer checks), or None: so a suggestion is never one the next call refuses
    (Llama-4-Maverick's 40 heads take 10 after 8, not 16). With `weights_fit_bytes`, the smallest whose
    weights per GPU fit in that many bytes (gpt-oss-120b's 234 GB of 16-bit weights on 86 GB GPUs: 4, not
    the next split, 2, whose 117 GB do not). Only on the refusal path: each try builds a describer."""
    p = analysis.parallelism_config
    for t in range(p.tp_size + 1, 8 * p.tp_size + 1):
        other = copy.copy(analysis)
        try:
            other.update_parallelism_config(ParallelismConfig(tp_size=t, pp_size=p.pp_size, dp_size=p.dp_size,
                                                              ep_size=p.ep_size, cp_size=p.cp_size))
        except ConfigError:
            continue
        if weights_fit_bytes is None or other.get_weight_memory_per_gpu() < weights_fit_bytes:
            return t
    return None


def _least_fitting_pp(analysis, weights_fit_bytes: float):
    """The least doubling of pp_size (up to a stage per layer) whose heaviest stage's weights fit in
    `weights_fit_bytes` per GPU, or None."""
    p = analysis.parallelism_config
    pp = p.pp_size * 2
    while pp <= analysis.model_config.num_layers:
        other = copy.copy(analysis)
        try:
            other.update_parallelism_config(ParallelismConfig(tp_size=p.tp_size, pp_size=pp, dp_size=p.dp_size,
                                                              ep_size=p.ep_size, cp_size=p.cp_size))
        except ConfigError:
            return None
        if other.get_weight_memory_per_gpu() < weights_fit_bytes:
            return pp
        pp *= 2
    return None


def released_format_tip(analysis) -> str:
    """Where the model's released checkpoint stores its weights in a low-bit format the run's dtype is not
    (gpt-oss at the 16-bit default: its release is MXFP4), the dtypes that hold it as released and that the
    GPU runs; else ''. Both infer's and serve()'s does-not-fit refusals name them."""
    from llm_analysis.catalogue.lookup import get_dtype_config_by_name, list_dtype_configs
    from llm_analysis.cost.precision import check_dtype_supported
    from llm_analysis.model.checkpoint_weights import stored_weights
    released = analysis.model_config.checkpoint_weight_format
    if released is None or stored_weights(analysis.dtype_config) == released:
        return ""

    def runs_here(dtype) -> bool:  # a dtype the GPU has no tensor units for would be the next call's refusal
        try:
            check_dtype_supported(analysis.gpu_config, dtype)
        except ConfigError:
            return False
        return True
    names = [n for n in list_dtype_configs()
             if stored_weights(d := get_dtype_config_by_name(n)) == released and runs_here(d)]
    if not names:
        return ""
    return f"the released checkpoint stores its weights as {released}: hold them so (dtype {' or '.join(names)})"


def widened_checkpoint_note(analysis) -> Optional[str]:
    """Where the run holds a low-bit release's weights in another format (an fp8 checkpoint at the mirrored
    16-bit default), what an engine would load instead: the release as stored (dtype 'checkpoint'); else None.
    infer's and serve()'s notes carry it, so that a 16-bit answer for an fp8 release is read as that."""
    released, dtype = analysis.model_config.checkpoint_weight_format, analysis.dtype_config
    if released is None:  # (a 16-bit release, the common case on every call: nothing imported or built)
        return None
    from llm_analysis.catalogue.lookup import checkpoint_dtype_name
    from llm_analysis.model.checkpoint_weights import stored_weights
    if stored_weights(dtype) == released:
        return None
    return (f"{analysis.model_config.name}'s checkpoint stores its weights as {released}; this run holds them as "
            f"{dtype.name} ({dtype.weight_bits}-bit), which an engine does only when told to: it loads the release "
            f"as stored, dtype 'checkpoint' ({checkpoint_dtype_name(analysis.model_config, analysis.gpu_config)} "
            f"on {analysis.gpu_config.name})")


def _fit_suggestions(analysis, weights: float, mem: float) -> str:
    p = analysis.parallelism_config
    tips = []
    if weights > mem:  # the split whose weights fit, not merely the next one
        tp, pp = _next_valid_tp(analysis, mem), _least_fitting_pp(analysis, mem)
    else:
        tp = _next_valid_tp(analysis)
        pp = p.pp_size * 2 if p.pp_size * 2 <= analysis.model_config.num_layers else None
    more = " or ".join(f"{k}={v}" for k, v in (("tp_size", tp), ("pp_size", pp)) if v is not None)
    if weights > mem:
        if more:
            tips.append(f"shard the weights further ({more})")
        bits = analysis.dtype_config.weight_bits
        if bits > 4:  # name only dtypes with fewer weight bits than the one given
            fewer = " or ".join(name for b, name in ((8, "w8a16e16"), (4, "w4a16e16")) if b < bits)
            tips.append(f"use fewer weight bits (e.g. dtype {fewer})")
        released = released_format_tip(analysis)
        if released:
            tips.append(released)
    else:
        tips.append("a smaller batch_size_per_gpu or a shorter context (seq_len + num_tokens_to_generate)")
        if more:
            tips.append(f"more tensor/pipeline parallelism ({more})")
        tips.append("a smaller KV-cache dtype (kv_cache_dtype_bytes=1)")
    return "; ".join(tips)


def _static_bytes(analysis, d, kv_cache_dtype_bytes, ds_zero):
    """(GPU memory, weight bytes, embedding bytes, KV-cache bytes per decoder token) per GPU:
    the same for every request, kept per describer with the GPU config they were read from."""
    def compute():
        # the cache's growth per decoder token: a cross-attention model's cross cache is per
        # request, a mixer layer's state per sequence (neither grows with the tokens)
        decoder = analysis.with_encoder_seq_len(0)
        per_token = (decoder.get_memory_kv_cache_per_gpu(1, 2, kv_cache_dtype_bytes)
                     - decoder.get_memory_kv_cache_per_gpu(1, 1, kv_cache_dtype_bytes))
        return (analysis.gpu_config, analysis.gpu_config.memory_bytes,
                analysis.get_weight_memory_per_gpu(ds_zero), analysis.get_memory_embedding(ds_zero), per_token)
    key = ("inference_static_bytes", kv_cache_dtype_bytes, ds_zero)
    static = d.memoized(key, compute)
    if static[0] is not analysis.gpu_config:  # a view of the analysis on another GPU: not shared
        return compute()[1:]
    return static[1:]


def inference_memory(analysis, d, b: int, s: int, n: int, use_kv_cache: bool, kv_cache_dtype_bytes,
                     ds_zero) -> Dict[str, float]:
    """Memory per GPU and the largest batches; raises DoesNotFitError with the numbers."""
    context = s + n
    mem, weights, weights_embedding, kv_per_token = _static_bytes(analysis, d, kv_cache_dtype_bytes, ds_zero)
    one = memory_terms(analysis, d, 1, s, context, use_kv_cache, kv_cache_dtype_bytes)
    terms = {"prefill_activation": one["prefill_activation"] * b, "decode_activation": one["decode_activation"] * b,
             "kv_cache": one["kv_cache"] * b}
    prefill_max_b = max_batch(mem - weights, one["prefill_activation"] + one["kv_cache"])
    decode_max_b = max_batch(mem - weights, one["decode_activation"] + one["kv_cache"])
    max_total_tokens = max_batch(mem - weights - terms["decode_activation"], kv_per_token) if use_kv_cache else 0
    peak_activation = max(terms["prefill_activation"], terms["decode_activation"])
    needed = weights + terms["kv_cache"] + peak_activation
    if needed > mem:
        m, p = analysis.model_config, analysis.parallelism_config
        fit_b = min(prefill_max_b, decode_max_b)
        raise DoesNotFitError(
            f"{m.name} on {analysis.gpu_config.name} (tp={p.tp_size}, pp={p.pp_size}, "
            f"{analysis.dtype_config.name}) needs {needed / GB:.2f} GB per GPU for batch {b} at context {context} "
            f"(weights {weights / GB:.2f} GB, KV cache {terms['kv_cache'] / GB:.2f} GB, activations "
            f"{peak_activation / GB:.2f} GB) but the GPU has {mem / GB:.2f} GB. Largest batch that fits: {fit_b}. "
            f"To fit: {_fit_suggestions(analysis, weights, mem)}.",
            needed_bytes=needed, available_bytes=mem, max_batch_size=fit_b,
            breakdown={"weights": weights, **terms})
    return {"mem": mem, "weights": weights, "weights_embedding": weights_embedding,
            **terms, "prefill_max_b": prefill_max_b, "decode_max_b": decode_max_b,
            "max_total_tokens": max_total_tokens, "peak_activation": peak_activation, "needed": needed}
