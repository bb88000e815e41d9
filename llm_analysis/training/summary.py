"""The training summary: FLOPs, times, whole-run figures and efficiency of one
configuration, as a flat dict in base units (keys in DESIGN.md §2)."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional

from llm_analysis.quantities.mirror_parts import part_of_group
from llm_analysis.quantities.phases import ONE_TOKEN
from llm_analysis.quantities.setup_entries import static_entries
from llm_analysis.training.overheads import OVERHEAD_TERMS
from llm_analysis.training.memory import stage_activation_parts
from llm_analysis.training.stage import Stage


def _flops(stages: List[Stage], m: int, latency_per_iter: float, st: "_Static") -> Dict[str, Any]:
    tflops, peak_flops, gpus_per_replica, n_gpus, dp = st.tflops, st.peak_flops, st.gpus_per_replica, st.n_gpus, st.dp
    flops_fwd = sum(s_.flops_fwd for s_ in stages)
    flops_bwd = sum(s_.flops_bwd for s_ in stages)
    flops_rc = sum(s_.flops_rc for s_ in stages)
    flops_mb = flops_fwd + flops_bwd + flops_rc
    model_flops_iter = (flops_fwd + flops_bwd) * m * dp
    hw_flops_iter = flops_mb * m * dp
    # mfu and hfu count the model's FLOPs: routed experts top-k, as the active parameters do, also where the
    # conventions' count runs every expert on every token (Llama 4's eager experts: that count is E / k times
    # the routed work, and an mfu of 12 followed; Stage.expert_masked_flops_fwd)
    expert_extra_fwd = sum(s_.expert_masked_flops_fwd for s_ in stages)
    expert_extra_rc = sum(s_.expert_masked_flops_rc for s_ in stages)
    routed_model_flops_iter = model_flops_iter - 3.0 * expert_extra_fwd * m * dp
    routed_hw_flops_iter = hw_flops_iter - (3.0 * expert_extra_fwd + expert_extra_rc) * m * dp
    # what the kernels execute (flash attention skips the masked half that an eager count includes);
    # the time follows it, so the compute-bound time does too
    executed_mb = sum(s_.executed_flops for s_ in stages)
    executed_iter = executed_mb * m * dp
    return {
        "num_flops_fwd_per_micro_batch": flops_fwd,
        "num_flops_bwd_per_micro_batch": flops_bwd,
        "num_flops_recompute_per_micro_batch": flops_rc,
        "num_flops_total_per_micro_batch": flops_mb,
        "num_model_flops_per_iter": model_flops_iter,
        "num_model_flops_per_iter_routed": routed_model_flops_iter,
        "num_hardware_flops_per_iter": hw_flops_iter,
        "num_executed_flops_per_micro_batch": executed_mb,
        "num_executed_flops_per_iter": executed_iter,
        "latency_per_iter_using_flops": flops_mb * m / (gpus_per_replica * tflops * 1e12),
        "achieved_tflops": tflops,
        # the rate the GPUs run at: executed FLOPs (a count that includes masked work would exceed the peak)
        "achieved_flops_per_s": executed_iter / n_gpus / latency_per_iter,
        "mfu": routed_model_flops_iter / (latency_per_iter * n_gpus * peak_flops),
        "hfu": routed_hw_flops_iter / (latency_per_iter * n_gpus * peak_flops),
        "compute_bound_latency_per_iter": executed_iter / (n_gpus * peak_flops),
    }


class _Static(NamedTuple):
    model: str
    gpu: str
    dtype: str
    n_gpus: int
    tp: int
    pp: int
    dp: int
    ep: int
    sp: int
    layout_extras: Dict[str, Any]
    params: int
    active_params: int
    tflops: float
    peak_flops: float
    gpus_per_replica: int


def _static(analysis) -> _Static:
    """The summary's entries no request changes (summary_static.py), with the rates `_flops` reads."""
    def compute() -> _Static:
        p = analysis.parallelism_config
        return _Static(analysis.model_config.name, analysis.gpu_config.name, analysis.dtype_config.name, p.num_gpus,
                p.tp_size, p.pp_size, p.dp_size, p.ep_size, p.sp_size, _layout_extras(p),
                analysis.get_num_params_total(), analysis.get_num_active_params_total(),
                analysis.get_TFLOPS_per_gpu(), analysis.cost_model.peak_flops_per_s,
                p.tp_size * p.cp_size * p.pp_size)
    return static_entries(analysis, "training_static_entries", compute)


def _whole_run(total_num_tokens, tokens_per_iter: int, latency_per_iter: float, latency_flops: float,
               n_gpus: int) -> Dict[str, Any]:
    if total_num_tokens is None:
        return dict.fromkeys(("num_iterations", "total_training_latency", "total_training_latency_using_flops",
                              "gpu_hours", "gpu_hours_using_flops"))
    num_iters = total_num_tokens / tokens_per_iter
    total_latency = latency_per_iter * num_iters
    total_latency_flops = latency_flops * num_iters
    return {"num_iterations": num_iters, "total_training_latency": total_latency,
            "total_training_latency_using_flops": total_latency_flops,
            "gpu_hours": total_latency * n_gpus / 3600, "gpu_hours_using_flops": total_latency_flops * n_gpus / 3600}


_OVERHEAD_KEYS = tuple((k, f"{k}_memory_per_gpu") for k in OVERHEAD_TERMS)


def _memory_entries(need: Dict[str, float], mem: float) -> Dict[str, Any]:
    """Memory in bytes per GPU, on the stage with the highest peak."""
    return {
        "weight_memory_per_gpu": need["weights"],
        "gradient_memory_per_gpu": need["gradients"],
        "optimizer_state_memory_per_gpu": need["optimizer_states"],
        "activation_memory_per_gpu": need["activations"],
        "activation_memory_recompute_buffer_per_gpu": need["recompute_buffer"],
        "zero_buffer_memory_per_gpu": need["zero_buffers"],
        # framework terms (training/overheads.py), present when switched on
        **{key: need[k] for k, key in _OVERHEAD_KEYS if need.get(k)},
        "estimated_peak_memory_per_gpu": need["peak"],
        "gpu_memory_per_gpu": mem,
        "memory_left_per_gpu": mem - need["peak"],
    }


def _layout_extras(p) -> Dict[str, Any]:
    """Context-parallel and HSDP sizes, present only when used (the summaries of
    other layouts keep their keys)."""
    out: Dict[str, Any] = {}
    if p.cp_size > 1:
        out.update(cp_size=p.cp_size, cp_comm=p.cp_comm)
    if p.dp_replicate > 1:
        out.update(dp_shard=p.dp_shard, dp_replicate=p.dp_replicate)
    return out


# 0.2.2's weight parts: the parts of its latency breakdown (quantities/mirror_parts.py `part_of_group`), its
# `embedding` holding both ends of the model; groups no part names (a vision tower) are spread in proportion
_WEIGHT_PARTS = ("embedding", "attn", "mlp", "layernorm")
_WEIGHT_PART_OF = {"input_embedding": "embedding", "output_embedding_loss": "embedding"}


def _weight_parts(analysis, stage: int, weights: float) -> Dict[str, float]:
    """`weight_memory_<part>_per_gpu` on the peak stage: its weight bytes (the summary's weight_memory_per_gpu,
    ZeRO-3 and a LoRA base's width applied) split as its operators' weights are (exact for full training and
    dense ZeRO-3; under LoRA the base's width and the adapters are spread over the parts by weight)."""
    def raw_parts():  # (shape-free: worked out once per stage, as the describer keeps its other sums)
        raw = dict.fromkeys(_WEIGHT_PARTS, 0.0)
        for op in analysis.describer.flat_ops(ONE_TOKEN, stage=stage):
            part = _WEIGHT_PART_OF.get(part_of_group(op.group), part_of_group(op.group))
            if part in raw:
                raw[part] += op.weight_bytes_per_gpu
        return raw
    raw = analysis.describer.memoized(("mirror_weight_parts", stage), raw_parts)
    total = sum(raw.values())
    scale = weights / total if total else 0.0
    return {f"weight_memory_{part}_per_gpu": v * scale for part, v in raw.items()}


def _mirror_entries(analysis, req, batch: Dict[str, Any], stages: List[Stage]) -> Dict[str, Any]:
    """The keys of llm-analysis 0.2.2's training summary that ours has under other names or as parts: the
    echoed activation options, weight and activation memory by part on the peak stage, the (weight + optimizer
    state + gradient [+ activation]) sums. (0.2.2's latency_fwd_<part> are left to `get_latency_fwd(b, seq_len)`,
    which gives them: building a call's operator records again for them tripled a training() call's time.)"""
    need, peak, b, seq_len = batch["need"], batch["peak_stage"], batch["b"], req.seq_len
    acts = stage_activation_parts(analysis, stages, peak, b, seq_len, batch["m"], req.interleave, req.rc,
                                  req.act_kwargs)
    static = need["weights"] + need["optimizer_states"] + need["gradients"]
    kw = req.act_kwargs
    return {
        "layernorm_dtype_bytes": kw["layernorm_dtype_bytes"],
        "mlp_activation_quant_bits": kw["mlp_activation_quant_bits"],
        "mlp_recompute_gelu": kw["mlp_recompute_gelu"],
        **_weight_parts(analysis, peak, need["weights"]),
        "(weight+op_state+grad)_memory_per_gpu": static,
        # stored activations are linear in the micro-batch (training/memory.py `_parts`)
        "activation_memory_batch_size_1": need["activations"] / b,
        **{f"activation_memory_{k}_per_gpu": acts[k] for k in ("attn", "mlp", "layernorm", "embedding_output")},
        "(weight+op_state+grad+act)_memory_per_gpu": static + need["activations"],
    }


def training_summary(analysis, req, batch: Dict[str, Any], stages: List[Stage], times: Dict[str, Any], mem: float,
                     trainable_total: Optional[int]) -> Dict[str, Any]:
    """The summary; `trainable_total` None: every parameter is trained."""
    lora = req.lora
    st = _static(analysis)
    b, m, gbs, seq_len = batch["b"], batch["m"], batch["gbs"], req.seq_len
    n_gpus = st.n_gpus
    it = times["latency_per_iter"]
    flops = _flops(stages, m, it, st)
    tokens_per_iter = gbs * seq_len
    # the hand-off is 0.0 without pipeline stages (views/latency.py): no call for it
    handoff_s = 0.0 if st.pp == 1 else analysis.pipeline_handoff_time_s(b, seq_len, scatter_gather=True)
    latency_fwd = sum(s_.fwd_compute + s_.tp_fwd + s_.ep_fwd + s_.cp_fwd for s_ in stages) + handoff_s
    return {
        "model_name": st.model, "gpu_name": st.gpu, "dtype_name": st.dtype,
        "batch_size_per_gpu": b, "gradient_accumulation_steps": m, "global_batch_size": gbs, "seq_len": seq_len,
        "total_num_tokens": req.total_num_tokens, "total_num_gpus": n_gpus,
        "tp_size": st.tp, "pp_size": st.pp, "dp_size": st.dp, "ep_size": st.ep, "sp_size": st.sp,
        **st.layout_extras,
        "pipeline_interleave": req.interleave, "ds_zero": req.ds_zero.value,
        **({"distributed_optimizer": True} if req.framework.distributed_optimizer else {}),
        "activation_recomputation": req.rc.value,
        "lora": None if lora is None else {"rank": lora.rank, "target_modules": list(lora.target_modules),
                                           "base_weight_bits": lora.base_weight_bits},
        "num_params_total": st.params,
        "num_active_params_total": st.active_params,
        "num_trainable_params_total": st.params if trainable_total is None else trainable_total,
        **_memory_entries(batch["need"], mem),
        "peak_memory_pipeline_stage": batch["peak_stage"],
        "max_batch_size_per_gpu": batch["max_b"],
        "num_flops_fwd_per_micro_batch": flops["num_flops_fwd_per_micro_batch"],
        "num_flops_bwd_per_micro_batch": flops["num_flops_bwd_per_micro_batch"],
        "num_flops_recompute_per_micro_batch": flops["num_flops_recompute_per_micro_batch"],
        "num_flops_total_per_micro_batch": flops["num_flops_total_per_micro_batch"],
        "num_model_flops_per_iter": flops["num_model_flops_per_iter"],
        "num_model_flops_per_iter_routed": flops["num_model_flops_per_iter_routed"],
        "num_hardware_flops_per_iter": flops["num_hardware_flops_per_iter"],
        "num_executed_flops_per_micro_batch": flops["num_executed_flops_per_micro_batch"],
        "num_executed_flops_per_iter": flops["num_executed_flops_per_iter"],
        "latency_fwd": latency_fwd,
        **_mirror_entries(analysis, req, batch, stages),
        "latency_per_micro_batch": times["t_mb"],
        **times["breakdown"],
        "latency_per_iter_dp_comm_total": times["dp_total"],
        "latency_per_iter_dp_comm_hidden": times["dp_total"] - times["dp_exposed"],
        "latency_per_iter": it,
        "latency_per_iter_using_flops": flops["latency_per_iter_using_flops"],
        **_whole_run(req.total_num_tokens, tokens_per_iter, it, flops["latency_per_iter_using_flops"], n_gpus),
        "tokens_per_sec": tokens_per_iter / it,
        "tokens_per_sec_per_gpu": tokens_per_iter / it / n_gpus,
        "achieved_tflops": flops["achieved_tflops"],
        # 0.2.2's achieved_flops: the TFLOP/s rate the times assume (the same figure as achieved_tflops)
        "achieved_flops": flops["achieved_tflops"],
        "achieved_flops_per_s": flops["achieved_flops_per_s"],
        "flops_efficiency": analysis.flops_efficiency,
        "hbm_memory_efficiency": analysis.hbm_memory_efficiency,
        "mfu": flops["mfu"], "hfu": flops["hfu"], "compute_bound_latency_per_iter": flops["compute_bound_latency_per_iter"],
        "bottleneck_pipeline_stage": times["bottleneck"].index,
    }
