"""The roofline lower bound beside a calibrated inference() prediction: the roofline's
`inference/run.py: inference_times` totals of the call, without the per-group breakdowns
(cost/choice.py reports them as `<key>_lower_bound`).

In the plain case (one pipeline stage or a batch of one: no micro-batched pipeline; a KV cache;
no ZeRO-3 weight gather; a decoder) `inference_times` is its two phases' totals, so the bound
takes them from the phases' tables directly (`RooflineCostModel.table_total_s`: each operator's
max(FLOPs / peak, bytes / bandwidth), each collective at its link; `table_steps_total_s`: the
decode steps summed in closed form as `timing.decode_phase` sums them); a model without phase tables, or a sliding
window's edge among the decode steps, takes the phases themselves (`timing.prefill_phase`,
`timing.decode_phase`: the same code, whose group breakdowns are made only when read). Every
other case returns None and the caller takes the whole `inference_times`.
"""

from __future__ import annotations

from typing import Optional, Tuple

from llm_analysis.inference.timing import decode_phase, prefill_phase, stage_handoff_s
from llm_analysis.quantities.group_times import timed_table


def inference_lower_bounds(bound_analysis, d, batch: int, seq_len: int, n: int, use_kv_cache: bool,
                           ds_zero) -> Optional[Tuple[float, float, float, float]]:
    """(prefill, decode step, decode total, total) seconds on `bound_analysis`' roofline, or None
    (not the plain case)."""
    p = bound_analysis.parallelism_config
    if (not use_kv_cache or bound_analysis.model_config.encoder_only or (p.pp_size > 1 and batch > 1)
            or (ds_zero.value == 3 and p.dp_size > 1)):
        return None
    steps = n - 1
    cm = bound_analysis.cost_model
    prefill = timed_table(cm, d, "prefill", x=seq_len)
    decode = timed_table(cm, d, "decode", x=seq_len + 1)
    if prefill is None or decode is None or decode is not timed_table(cm, d, "decode", x=seq_len + max(steps, 1)):
        prefill_s = prefill_phase(bound_analysis, d, batch, seq_len)[0]
        decode_s, _, first_s, _ = decode_phase(bound_analysis, d, batch, seq_len, steps)
        return prefill_s, decode_s / steps if steps else first_s, decode_s, prefill_s + decode_s
    prefill_s = cm.table_total_s(prefill, prefill.figure_array(batch, seq_len)) + stage_handoff_s(
        bound_analysis, batch, seq_len)
    handoff_s = stage_handoff_s(bound_analysis, batch, 1)
    if steps <= 0:  # one token: no decode step runs, and the step reported is the first one
        first_s = cm.table_total_s(decode, decode.figure_array(batch, seq_len + 1)) + handoff_s
        return prefill_s, first_s, 0.0, prefill_s
    decode_s = cm.table_steps_total_s(decode, batch, seq_len + 1, steps) + handoff_s * steps
    return prefill_s, decode_s / steps, decode_s, prefill_s + decode_s
