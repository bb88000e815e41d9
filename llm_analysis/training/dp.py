"""Data-parallel traffic of one iteration (gradient reduction, ZeRO gathers)."""

from __future__ import annotations

from typing import Optional, Tuple

from llm_analysis.schema.options import ActivationRecomputation
from llm_analysis.quantities.state import gradient_bytes_per_param
from llm_analysis.training.lora import LoRAConfig
from llm_analysis.training.stage import Stage
from llm_analysis.training.zero3 import Zero3Traffic


def dp_times(analysis, st: Stage, ds_zero, lora: Optional[LoRAConfig], grads_fp32: bool = False,
             zero3: Zero3Traffic = Zero3Traffic(), rc=None) -> Tuple[float, float, float, float]:
    """(per-iteration gradient reduction, per-iteration weight all-gather,
    per-micro-batch forward traffic, per-micro-batch backward traffic), seconds.
    Dense parameters talk over the shard group (dp_shard x cp ranks: context-
    parallel ranks hold the same weights, so their gradients are reduced too),
    routed experts over their own (every ep-th rank of it). With HSDP
    (dp_replicate > 1) each rank's reduced shard is then all-reduced across the
    dp_replicate copies (torchtitan / FSDP2 HSDP). `grads_fp32`: gradients are
    reduced from an fp32 buffer (Megatron's grad_reduce_in_fp32), 4 bytes each.
    `zero3`: the framework's ZeRO-3 rate cap and the recomputation's second gather
    of the layers' weights under `rc` = FULL (training/zero3.py)."""
    p = analysis.parallelism_config
    cost = analysis.cost_model
    grad_b = lora.adapter_dtype_bytes if lora is not None else gradient_bytes_per_param(analysis.dtype_config)
    if grads_fp32 and lora is None:
        grad_b = 4.0
    n_dense, n_expert = p.shard_group_size, p.expert_shard_group_size

    def coll(kind, dense_bytes, expert_bytes):
        return (cost.collective_s(kind, dense_bytes, n_dense, "dp")
                + cost.collective_s(kind, expert_bytes, n_expert, "edp"))

    gd, ge = st.dense_params_gpu * grad_b, st.expert_params_gpu * grad_b
    replicas = 0.0
    if p.dp_replicate > 1:
        replicas = cost.collective_s("all_reduce", gd / n_dense + ge / n_expert, p.dp_replicate, "dp_replicate")
    if lora is not None:  # only adapters are gathered/updated; frozen weights are replicated (or ZeRO-3 gathered)
        wd, we = st.dp_weight_bytes_gpu, 0.0
        upd_d = st.dense_params_gpu * lora.adapter_dtype_bytes
    else:
        wd, we = st.dp_weight_bytes_gpu, st.dp_expert_weight_bytes_gpu
        upd_d = wd
    z = ds_zero.value
    if z == 0:
        return coll("all_reduce", gd, ge) + replicas, 0.0, 0.0, 0.0
    if z == 1:
        return coll("reduce_scatter", gd, ge) + replicas, coll("all_gather", upd_d, we), 0.0, 0.0
    if z == 2:
        return replicas, coll("all_gather", upd_d, we), 0.0, coll("reduce_scatter", gd, ge)
    def coll3(kind, dense_bytes, expert_bytes):  # a ZeRO-3 transfer, under the framework's rate cap
        return (zero3.capped_s(cost.collective_s(kind, dense_bytes, n_dense, "dp"), dense_bytes, n_dense)
                + zero3.capped_s(cost.collective_s(kind, expert_bytes, n_expert, "edp"), expert_bytes, n_expert))

    ag = coll3("all_gather", wd, we)
    again = 0.0
    if zero3.recompute_gather and rc == ActivationRecomputation.FULL:
        again = coll3("all_gather", st.layer_dp_weight_bytes_gpu, st.layer_dp_expert_weight_bytes_gpu)
    return replicas, 0.0, ag, again + ag + coll3("reduce_scatter", gd, ge)
