"""The roofline lower bound beside a calibrated inference() prediction, from the
phase tables the calibrated pass has just evaluated (issue 10: a calibrated call
no slower than a roofline one).

The bound is the roofline's `inference/run.py: inference_times`, totals only
(no per-group breakdown), for the plain case: one pipeline stage or a batch of
one (no micro-batched pipeline), a KV cache, no ZeRO-3 gather, a decoder with a
phase table. Every other case returns None and the caller runs the full
roofline pass. The figures come from the same helpers the roofline's table path
uses (`timing.table_splits`, `GroupTimes.add_steps_splits`, or their generated form:
cost/calibrated_bound.py), so the bound is that
path's result, without its per-group breakdown and memory.
"""

from __future__ import annotations

from typing import Dict, Optional

from llm_analysis.cost.calibrated_bound import roofline_decode_s, roofline_phase_s
from llm_analysis.cost.model import RooflineCostModel
from llm_analysis.model.phase_table import phase_table


def inference_lower_bounds(bound_analysis, d, batch: int, seq_len: int, n: int, use_kv_cache: bool,
                           ds_zero) -> Optional[Dict[str, float]]:
    """{prefill_s, decode_step_s, decode_total_s, total_s} on the roofline, or None (not the plain case)."""
    roof, p, model = bound_analysis.cost_model, bound_analysis.parallelism_config, bound_analysis.model_config
    if (type(roof) is not RooflineCostModel or not use_kv_cache or model.encoder_only
            or (p.pp_size > 1 and batch > 1) or (ds_zero.value == 3 and p.dp_size > 1)):
        return None
    prefill, decode = phase_table(d, "prefill"), phase_table(d, "decode")
    if prefill is None or decode is None:
        return None
    handoff = bound_analysis.pipeline_handoff_time_s
    # (generated code once the tables are hot: cost/calibrated_bound.py)
    prefill_s = roofline_phase_s(roof, prefill, batch, seq_len) + handoff(batch, seq_len)
    steps = n - 1
    first_s, steps_s = roofline_decode_s(roof, decode, batch, seq_len + 1, max(steps, 1))
    if steps:
        total = steps_s + handoff(batch, 1) * steps
        step_s = total / steps
    else:
        total, step_s = 0.0, first_s + handoff(batch, 1)
    return {"prefill_s": prefill_s, "decode_step_s": step_s, "decode_total_s": total, "total_s": prefill_s + total}
