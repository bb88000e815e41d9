"""Data-parallel traffic of one iteration (gradient reduction, ZeRO gathers)."""

from __future__ import annotations

from typing import Optional, Tuple

from ..views.state import gradient_bytes_per_param
from .lora import LoRAConfig
from .stage import Stage


def dp_times(analysis, st: Stage, ds_zero, lora: Optional[LoRAConfig]) -> Tuple[float, float, float, float]:
    """(per-iteration gradient reduction, per-iteration weight all-gather,
    per-micro-batch forward traffic, per-micro-batch backward traffic), seconds.
    Dense parameters talk over the data-parallel group, routed experts over
    their own (dp / ep ranks, every ep-th DP rank)."""
    p = analysis.parallelism_config
    cost = analysis.cost_model
    grad_b = lora.adapter_dtype_bytes if lora is not None else gradient_bytes_per_param(analysis.dtype_config)

    def coll(kind, dense_bytes, expert_bytes):
        return (cost.collective_s(kind, dense_bytes, p.dp_size, "dp")
                + cost.collective_s(kind, expert_bytes, p.rdp_size, "edp"))

    gd, ge = st.dense_params_gpu * grad_b, st.expert_params_gpu * grad_b
    if lora is not None:  # only adapters are gathered/updated; frozen weights are replicated (or ZeRO-3 gathered)
        wd, we = st.dp_weight_bytes_gpu, 0.0
        upd_d = st.dense_params_gpu * lora.adapter_dtype_bytes
    else:
        wd, we = st.dp_weight_bytes_gpu, st.dp_expert_weight_bytes_gpu
        upd_d = wd
    z = ds_zero.value
    if z == 0:
        return coll("all_reduce", gd, ge), 0.0, 0.0, 0.0
    if z == 1:
        return coll("reduce_scatter", gd, ge), coll("all_gather", upd_d, we), 0.0, 0.0
    if z == 2:
        return 0.0, coll("all_gather", upd_d, we), 0.0, coll("reduce_scatter", gd, ge)
    ag = coll("all_gather", wd, we)
    return 0.0, 0.0, ag, ag + coll("reduce_scatter", gd, ge)
