"""The roofline lower bound beside a calibrated inference() prediction: the roofline's
`inference/run.py: inference_times` totals of the call, without the per-group breakdowns
(cost/choice.py reports them as `<key>_lower_bound`).

In the plain case (one pipeline stage or a batch of one: no micro-batched pipeline; a KV cache;
no ZeRO-3 weight gather; a decoder) `inference_times` is its two phases' totals, so the bound
takes them from the phases themselves (`timing.prefill_phase`, `timing.decode_phase`: the same
code, whose group breakdowns are made only when read) without assembling and keeping the call's
times; every other case returns None and the caller takes the whole `inference_times`.
"""

from __future__ import annotations

from typing import Optional, Tuple

from llm_analysis.inference.timing import decode_phase, prefill_phase


def inference_lower_bounds(bound_analysis, d, batch: int, seq_len: int, n: int, use_kv_cache: bool,
                           ds_zero) -> Optional[Tuple[float, float, float, float]]:
    """(prefill, decode step, decode total, total) seconds on `bound_analysis`' roofline, or None
    (not the plain case)."""
    p = bound_analysis.parallelism_config
    if (not use_kv_cache or bound_analysis.model_config.encoder_only or (p.pp_size > 1 and batch > 1)
            or (ds_zero.value == 3 and p.dp_size > 1)):
        return None
    prefill_s = prefill_phase(bound_analysis, d, batch, seq_len)[0]
    steps = n - 1
    decode_s, _, first_s, _ = decode_phase(bound_analysis, d, batch, seq_len, steps)
    return prefill_s, decode_s / steps if steps else first_s, decode_s, prefill_s + decode_s
