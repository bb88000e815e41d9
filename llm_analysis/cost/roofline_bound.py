"""The roofline lower bound beside a calibrated inference() prediction, from the
phase tables the calibrated pass has just evaluated (issue 10: a calibrated call
no slower than a roofline one).

The bound is the roofline's `inference/run.py: inference_times`, totals only
(no per-group breakdown), for the plain case: one pipeline stage or a batch of
one (no micro-batched pipeline), a KV cache, no ZeRO-3 gather, a decoder with a
phase table. Every other case returns None and the caller runs the full
roofline pass. Per operator, as `RooflineCostModel`: a kernel takes
max(FLOPs / FLOP/s, bytes / bandwidth), decode steps summed in closed form
(`affine.sum_max_affine`), collectives their link time each step.
"""

from __future__ import annotations

from typing import Dict, Optional

from .affine import sum_max_affine
from .model import RooflineCostModel


def _kernel_s(roof, table, batch: int, x: float) -> float:
    """One pass of every operator of `table` at (batch, x) on the roofline."""
    F, B = roof.roofline.flops_per_s, roof.roofline.hbm_bytes_per_s
    flops, bytes_ = table.evaluate(batch, x, 0), table.evaluate(batch, x, 1)
    comm, total = None, 0.0
    for i, (n, op, f, b) in enumerate(zip(table.repeats, table.ops, flops, bytes_)):
        if op.kind == "collective":
            comm = comm or table.evaluate(batch, x, 3)
            total += n * roof.collective_s(op.collective, comm[i], op.comm_group_size, op.comm_group)
        else:
            total += n * max(f / F, b / B)
    return total


def _steps_s(roof, table, batch: int, x0: int, steps: int) -> float:
    """`steps` decode steps at contexts x0 .. x0 + steps - 1 (work affine in the context)."""
    F, B = roof.roofline.flops_per_s, roof.roofline.hbm_bytes_per_s
    span = max(steps - 1, 1)
    fa, ba = table.evaluate(batch, x0, 0), table.evaluate(batch, x0, 1)
    fz, bz = table.evaluate(batch, x0 + steps - 1, 0), table.evaluate(batch, x0 + steps - 1, 1)
    comm, total = None, 0.0
    for i, (n, op) in enumerate(zip(table.repeats, table.ops)):
        if op.kind == "collective":
            comm = comm or table.evaluate(batch, x0, 3)
            total += n * steps * roof.collective_s(op.collective, comm[i], op.comm_group_size, op.comm_group)
        else:
            c, m = sum_max_affine(fa[i] / F, (fz[i] - fa[i]) / span / F, ba[i] / B, (bz[i] - ba[i]) / span / B,
                                  steps)
            total += n * (c + m)
    return total


def inference_lower_bounds(bound_analysis, d, batch: int, seq_len: int, n: int, use_kv_cache: bool,
                           ds_zero) -> Optional[Dict[str, float]]:
    """{prefill_s, decode_step_s, decode_total_s, total_s} on the roofline, or None (not the plain case)."""
    from ..operators.phase_table import phase_table
    roof, p, model = bound_analysis.cost_model, bound_analysis.parallelism_config, bound_analysis.model_config
    if (type(roof) is not RooflineCostModel or not use_kv_cache or model.encoder_only
            or (p.pp_size > 1 and batch > 1) or (ds_zero.value == 3 and p.dp_size > 1)):
        return None
    prefill, decode = phase_table(d, "prefill"), phase_table(d, "decode")
    if prefill is None or decode is None:
        return None
    handoff = bound_analysis.pipeline_handoff_time_s
    prefill_s = _kernel_s(roof, prefill, batch, seq_len) + handoff(batch, seq_len)
    steps = n - 1
    if steps:
        total = _steps_s(roof, decode, batch, seq_len + 1, steps) + handoff(batch, 1) * steps
        step_s = total / steps
    else:
        total, step_s = 0.0, _kernel_s(roof, decode, batch, seq_len + 1) + handoff(batch, 1)
    return {"prefill_s": prefill_s, "decode_step_s": step_s, "decode_total_s": total, "total_s": prefill_s + total}
