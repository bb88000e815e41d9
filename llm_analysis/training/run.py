"""Training analysis: will a layout fit, how long is an iteration, how long is
the whole run, and what limits it.

Everything comes from the operator description (`operators/`) through the
`LLMAnalysis` views; this module only composes them into one iteration of
pipeline-parallel, data-parallel training. The assumptions, in one place:

Memory per GPU (base units, bytes), on each pipeline stage; the peak is the
largest stage:
- weights, gradients and optimizer states of the stage's parameters, TP/EP
  sharded, and ZeRO-sharded over data parallelism (Rajbhandari et al. 2020,
  arXiv 1910.02054): stage 1 shards optimizer states, 2 also gradients, 3 also
  weights. Gradients are 16-bit, Adam states 4 + 8 bytes per parameter unless
  `master_weights_dtype_bytes` / `other_op_bytes` say otherwise; the 4 bytes of
  master copy only where the weights are narrower than it (fp32 weights are their
  own master; 0: no master copy): quantities/state.py `master_copy_bytes_per_param`.
- activations after Korthikanti et al. 2022 (arXiv 2205.05198) per layer,
  times the layers of the stage, times the micro-batches in flight: with 1F1B
  stage i (0-based) holds min(m, p - i) micro-batches; with v interleaved
  virtual stages stage i holds p + (p - 2i - 1)/v (Megatron's warm-up of
  2(p - i - 1) + (v - 1)p chunks of 1/v of the stage, plus one; the first
  stage's p + (p - 1)/v is their §4.2.3), at least p micro-batches per
  iteration (the interleaved schedule's rule). Plus the embedding output on the first stage and
  the logits of one micro-batch on the last.
- recomputation working set: while one layer's backward runs, what that layer
  did not keep is rematerialised, so one layer's (stored-without-recompute minus
  stored-with-recompute) activations are added.
- ZeRO buffers: DeepSpeed gathers ZeRO-3 weights module by module, so two
  weight matrices are live unsharded, the running one and the prefetched next:
  the stage's largest (the embedding or LM head where they are the largest,
  gathered whole like any module) and a layer's largest, its neighbour in the
  order modules run; ZeRO-2/3 keep the largest matrix's unsharded gradient before
  its reduce-scatter. (DeepSpeed's bucket sizes are tunables; this is the floor.)

Time of one iteration (seconds), on the bottleneck pipeline stage:
- forward of a micro-batch: the roofline time of each operator of the stage
  (compute- or memory-bound) plus its TP collectives and EP all-to-alls.
- backward = 2x the forward time of every non-collective operator (gradients
  with respect to inputs and to weights), and the same TP / EP collectives again
  (Megatron's conjugate f/g operators: as many in backward as in forward).
- recomputation adds the forward of what the strategy recomputes: FULL the whole
  layer (with its collectives); ATTN_COMPUTE the attention core (QK^T, softmax,
  attention over V: `get_num_flops_total_attn_compute`); ATTN the first norm and
  the attention block with its TP collective; NORM_ATTN_NORM also the second
  norm. Embedding and head are never recomputed.
- pipeline: each micro-batch sends its activations forward and its gradients
  backward once per stage boundary (2 point-to-point transfers per micro-batch per
  stage, v times with interleaving), not overlapped (Megatron-LM's blocking
  send/recv pairs in 1F1B). Bubble of 1F1B = fill and drain through every stage
  but the bottleneck: (sum of stage times - the largest)/v, which is (p - 1)/m of
  the ideal time, (p - 1)/(v m) with v interleaved stages, when stages are equal
  (Narayanan et al. 2021, arXiv 2104.04473 §2.2); the head's heavier last stage
  slows the steady state, not every other stage's pass.
- data parallel, over the link `cost.links.link_for_group` picks for the DP
  group (ranks tp*pp apart; inside a node or across nodes by num_gpus_per_node):
  no ZeRO: one gradient all-reduce per iteration; ZeRO-1: reduce-scatter of
  gradients + all-gather of updated weights per iteration; ZeRO-2: the
  reduce-scatter per micro-batch (gradients are never kept whole) + the weight
  all-gather per iteration; ZeRO-3: per micro-batch an all-gather of the weights
  in forward, another in backward, and a reduce-scatter of gradients. Experts
  use their own data-parallel group (dp / ep). Overlap (default
  `overlap_dp_comm=True`): the gradient reduction overlaps the backward (with
  recomputation) of the last micro-batch, per-micro-batch ZeRO traffic overlaps
  that micro-batch's forward / backward, the per-iteration weight all-gather
  overlaps the next forward; only what exceeds the overlapped compute is exposed.
- optimizer step: memory-bound pass over the (ZeRO-sharded) optimizer states,
  master weights, gradients and weights (`quantities/state.optimizer_step_s`).
- TP collectives are exposed (`overlap_tp_comm=False`, as in Megatron-LM 2021);
  with "backward" the backward's input-gradient reductions run under the
  weight-gradient GEMMs (Megatron-LM's async TP all-reduce, from 2021-09:
  training/overheads_tp.py); with True only what exceeds the micro-batch's
  compute is.
- `latency_per_iter_using_flops` = FLOPs of the iteration on one GPU (forward +
  backward + recomputation) over the achieved FLOP/s (`achieved_tflops`, else
  peak x flops_efficiency), as the mirrored system computes it: it folds every
  inefficiency into one number, which is how published TFLOP/s figures are made.

LoRA / QLoRA (Hu et al. 2021, arXiv 2106.09685; Dettmers et al. 2023, arXiv
2305.14314): the base weights are frozen, stored at 16 bits or as 4-bit NF4
(with double quantization 4 + 8/64 + 32/(64*256) = 4.127 bits per parameter,
QLoRA §3; without it 4 + 32/64) for the transformer layers' linear weights;
embeddings, norms, router and LM head stay in the dtype config. Adapters
A [in x r] and B [r x out] on each targeted projection, in `adapter_dtype_bytes`
(default 2), are the only trainable parameters: gradients and optimizer states
exist for them only; ZeRO shards them. Activations as for full training.
Backward: frozen linear layers compute only the input gradient (1x their
forward), embeddings nothing, attention core / norms / activations 2x, adapters
2x. Adapters are timed on the roofline like any operator (they re-read the
projection's input and accumulate into its output); per GPU they are sharded
like their base weight.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Tuple, Union

from llm_analysis.errors import ConfigError, DoesNotFitError
from llm_analysis.model import Phase
from llm_analysis.model.describer import identity_token
from llm_analysis.quantities.setup_entries import calibrated_notes
from llm_analysis.quantities.state import optimizer_step_s
from llm_analysis.schema.options import ActivationRecomputation, DSZeRO
from llm_analysis.training.batch import config_batch_size_and_gradient_accumulation_steps
from llm_analysis.training.dp import dp_times
from llm_analysis.training.fp8_casts import fp8_cast_s
from llm_analysis.training.loss import loss_s
from llm_analysis.training.lora import LoRAConfig, lora_adapter_ops
from llm_analysis.training.memory import (activation_bytes, fit_message, max_batch_from_parts, stage_memory, static_bytes,
                                          trained_gradient_bytes_per_param, trained_weight_bytes, zero_shards_nothing, zero_without_sharding_text)
from llm_analysis.training.request import TrainingRequest, check_request
from llm_analysis.training.stage import Stage, build_stage, retimed_stage
from llm_analysis.training.zero3 import exposed_s
from llm_analysis.training.summary import training_summary

logger = logging.getLogger(__name__)


def stages_for(analysis, req: TrainingRequest, b: int, seq_len: Optional[int] = None) -> List[Stage]:
    """Every pipeline stage of a micro-batch of b sequences of `seq_len` tokens (default:
    the request's); built once per (cost model, shape, options) and shared (read only)."""
    x = req.seq_len if seq_len is None else seq_len
    key = ("train_stages", b, x, req.rc, req.lora, req.overlap_tp_comm, req.fp8_weight_cast_per_iteration)

    def build() -> List[Stage]:  # the phase record made only on a miss (a cache hit is the common case)
        ph = Phase("train", b, x, x)
        stages = [build_stage(analysis, ph, s, req.rc, req.lora, req.overlap_tp_comm)
                  for s in range(analysis.parallelism_config.pp_size)]
        if analysis.cost_model.times_fp8_training_casts and req.lora is None:
            for st in stages:
                st.fp8_cast, st.fp8_weight_cast = fp8_cast_s(analysis, st.index, b, x, req.rc,
                                                             req.fp8_weight_cast_per_iteration)
        if analysis.cost_model.times_training_loss:
            stages[-1].loss = loss_s(analysis, stages[-1].index, b, x)
        return stages
    return analysis.describer.cost_memo(analysis.cost_model, key, build)


def bound_stages(analysis, req: TrainingRequest, b: int, built: List[Stage]) -> List[Stage]:
    """`stages_for(analysis, req, b)` from `built`, the stages another cost model built for the same
    micro-batch and request (a calibrated run's, whose roofline bound this times: cost/choice.py): each
    re-timed on its phase table (`retimed_stage`: the weights and FLOPs the other model summed are the
    same for every model), or, where a stage cannot be (LoRA, no table), all of them built anew."""
    if req.lora is not None:
        return stages_for(analysis, req, b)
    ph = Phase("train", b, req.seq_len, req.seq_len)
    stages = [retimed_stage(analysis, st, ph, req.rc, req.overlap_tp_comm) for st in built]
    return stages_for(analysis, req, b) if None in stages else stages


def _memory_key(analysis, req: TrainingRequest) -> tuple:
    """What the memory entries of a request are kept under besides its shape: the cost model whose
    1-token stages they read (`choose_batch`; built from the options) and the validated options
    (one key part, hashed once per option set: training/request.py)."""
    return (identity_token(analysis.cost_model), req.options_key)


def _static(analysis, req: TrainingRequest, stages: List[Stage], zero, mk: tuple):
    """The stages' memory that no micro-batch, length or recomputation changes, cached
    across calls (a sweep over shapes shares it); `mk`: the request's `_memory_key`."""
    key = ("train_static", zero) + mk
    return analysis.describer.phase_memo(key, lambda: static_bytes(
        analysis, stages, zero, req.master_bytes, req.other_op_bytes, req.lora, req.framework))


def _memory(analysis, req: TrainingRequest, stages: List[Stage], mk: tuple, b: int, m: Optional[int], zero=None,
            rc=None):
    zero, rc = zero or req.ds_zero, rc or req.rc
    key = ("train_memory", req.seq_len, b, m, None if (zero is req.ds_zero and rc is req.rc) else (zero, rc)) + mk
    return analysis.describer.phase_memo(key, lambda: stage_memory(
        analysis, stages, b, req.seq_len, m, req.interleave, zero, rc, req.act_kwargs, req.master_bytes,
        req.other_op_bytes, req.lora, req.framework, static=_static(analysis, req, stages, zero, mk)))


def _fit_batch(analysis, req: TrainingRequest, stages: List[Stage], mk: tuple, m: Optional[int], mem: float) -> int:
    """The largest micro-batch that fits (max_batch of the micro-batch-1 memory), from
    the cached static part and the batch-1 activations only."""
    key = ("train_fit_batch", req.seq_len, m, mem) + mk
    return analysis.describer.phase_memo(key, lambda: max_batch_from_parts(
        mem, _static(analysis, req, stages, req.ds_zero, mk),
        activation_bytes(analysis, stages, 1, req.seq_len, m, req.interleave, req.rc, req.act_kwargs),
        req.framework))


def check_interleaved_micro_batches(v: int, p: int, m: int, b: int) -> None:
    """An interleaved schedule (v > 1) needs at least p micro-batches per iteration: Megatron-Core's
    interleaved 1F1B runs micro-batches in groups of microbatch_group_size_per_vp_stage (default pp) through
    each virtual stage and refuses fewer (RuntimeError in forward_backward_pipelining_with_interleaving;
    Megatron-LM before it required a multiple of pp). With fewer, one micro-batch still crosses every stage
    in turn, so the (p - 1) / (v m) bubble would describe a schedule that cannot run."""
    if v > 1 and m < p:
        raise ConfigError(f"pipeline_interleave = {v} needs at least pp_size = {p} micro-batches per iteration "
                          f"(Megatron-Core's interleaved schedule); this run has gradient_accumulation_steps = {m} "
                          f"(micro-batch {b}): give a global_batch_size or gradient_accumulation_steps of at least "
                          f"{p} micro-batches, a smaller batch_size_per_gpu, or pipeline_interleave = 1")


def choose_batch(analysis, req: TrainingRequest, mem: float) -> Dict[str, Any]:
    """Micro-batch, accumulation steps and global batch; the memory of the peak
    stage. Raises DoesNotFitError with the numbers and what would help."""
    p = analysis.parallelism_config
    # the stages' memory-side fields (layers, parameters and weight bytes per GPU) are sums of
    # operator parameters, which no phase shape changes: one 1-token stage serves every batch
    # and length (stage_memory reads no time field)
    stages1 = stages_for(analysis, req, 1, seq_len=1)
    mk = _memory_key(analysis, req)
    bs, gas, gbs_in = req.batch_size, req.accumulation_steps, req.global_batch_size
    auto_interleaved = bs is None and gas is None and req.interleave > 1
    if auto_interleaved and gbs_in is None:
        # an interleaved schedule runs only with >= p micro-batches (check_interleaved_micro_batches): with
        # neither the steps nor the global batch given, the least it accepts instead of the mirrored 1
        gas = p.pp_size
    m_known = gas
    if m_known is None and bs is not None and gbs_in is not None and gbs_in % (bs * p.dp_size) == 0:
        m_known = gbs_in // (bs * p.dp_size)
    max_b = _fit_batch(analysis, req, stages1, mk, m_known, mem)
    if bs is None and max_b < 1:  # not even one sequence fits: report it with the numbers at batch 1
        b, m, gbs = 1, gas or p.pp_size, None
    else:
        cap_b = max_b
        if auto_interleaved and gbs_in is not None and gbs_in % p.dp_size == 0 and gbs_in // p.dp_size >= p.pp_size:
            # the largest micro-batch that fits and still leaves >= p micro-batches per data-parallel rank
            cap_b = min(max_b, gbs_in // p.dp_size // p.pp_size)
        b, m, gbs = config_batch_size_and_gradient_accumulation_steps(p.dp_size, cap_b, bs, gas, gbs_in)
    check_interleaved_micro_batches(req.interleave, p.pp_size, m, b)
    mem_stages = _memory(analysis, req, stages1, mk, b, m)
    peak_stage = max(range(p.pp_size), key=lambda i: mem_stages[i]["peak"])
    need = mem_stages[peak_stage]
    fit_b = max_b if m == m_known else _fit_batch(analysis, req, stages1, mk, m, mem)  # the same key: the same value
    if need["peak"] > mem:
        alt = {}
        if req.ds_zero.value < 3:
            alt["zero3"] = max(d["peak"] for d in _memory(analysis, req, stages1, mk, b, m, zero=DSZeRO.STAGE_3))
        if req.rc != ActivationRecomputation.FULL:
            alt["full_recompute"] = max(d["peak"] for d in _memory(analysis, req, stages1, mk, b, m,
                                                                   rc=ActivationRecomputation.FULL))
        raise DoesNotFitError(fit_message(analysis, need, mem, b, req.seq_len, fit_b, req.ds_zero, req.rc, alt),
                              needed_bytes=need["peak"], available_bytes=mem, max_batch_size=fit_b,
                              breakdown=dict(need))
    return {"b": b, "m": m, "gbs": gbs, "max_b": fit_b, "need": need, "peak_stage": peak_stage}


def _bubble_s(stages: List[Stage], pp_per_mb: float, v: int) -> float:
    """Fill and drain of the 1F1B schedule: the bottleneck stage runs its m micro-batches back to
    back, and waits for the first forward to reach it and the last backward to leave the other
    stages, once through each of them: sum of the other stages' micro-batch times (Narayanan et al.
    2021, arXiv 2104.04473 §2.2: (p - 1)(t_f + t_b) with equal stages), /v with v interleaved chunks.
    A last stage heavier by the output head does not make every other stage's pass as slow."""
    times = [s_.micro_batch_time + pp_per_mb for s_ in stages]
    return (sum(times) - max(times)) / v


def _shape_free(analysis, key: tuple, compute):
    """`compute()` kept per describer and cost model (the cost model by identity): for
    figures no micro-batch or length changes, which the bounded phase cache would drop
    during a sweep over shapes."""
    return analysis.describer.memoized((identity_token(analysis.cost_model),) + key, compute)


def _dp_times(analysis, heavy: Stage, ds_zero, req: TrainingRequest):
    """`dp_times` of the heaviest stage: its parameter and weight sums do not depend on the shape."""
    key = ("train_dp_times", ds_zero, req.lora, req.framework.grad_reduce_in_fp32, heavy.dense_params_gpu,
           heavy.expert_params_gpu, heavy.dp_weight_bytes_gpu, heavy.dp_expert_weight_bytes_gpu, req.zero3,
           req.rc if req.zero3.recompute_gather else None)
    return _shape_free(analysis, key, lambda: dp_times(analysis, heavy, ds_zero, req.lora,
                                                       req.framework.grad_reduce_in_fp32, req.zero3, req.rc))


def _weight_update_s(analysis, ds_zero, req: TrainingRequest, trainable_gpu) -> float:
    # the gradients are read at the width memory holds them (training/memory.py: LoRA adapters', fp32 main grads)
    grad_bytes = trained_gradient_bytes_per_param(analysis, req.lora, req.framework)
    weight_bytes = trained_weight_bytes(analysis, req.lora)
    # (every input in the key: the adapters' width was missing once, and an fp32 LoRA run got a bf16 one's step)
    key = ("train_weight_update_s", ds_zero, req.master_bytes, req.other_op_bytes, trainable_gpu, weight_bytes,
           grad_bytes)
    return _shape_free(analysis, key, lambda: optimizer_step_s(analysis, ds_zero, req.master_bytes,
                                                               req.other_op_bytes, trainable_gpu, weight_bytes,
                                                               grad_bytes))


def iteration_time(analysis, req: TrainingRequest, stages: List[Stage], b: int, m: int) -> Dict[str, Any]:
    """Time of one iteration on the bottleneck stage, with its breakdown (seconds)."""
    p = analysis.parallelism_config
    v, ds_zero = req.interleave, req.framework.state_zero(req.ds_zero)  # distributed optimizer = ZeRO-1
    hop = analysis.pipeline_handoff_time_s(b, req.seq_len, scatter_gather=True) / (p.pp_size - 1) if p.pp_size > 1 else 0.0
    pp_per_mb = 2 * hop * v if p.pp_size > 1 else 0.0
    bott = max(stages, key=lambda s_: s_.micro_batch_time)
    t_mb = bott.micro_batch_time + pp_per_mb
    heavy = max(stages, key=lambda s_: (s_.dense_params_gpu + s_.expert_params_gpu, s_.weight_bytes_gpu))
    grad_iter, gather_iter, fwd_mb, bwd_mb = _dp_times(analysis, heavy, ds_zero, req)
    bwd_window = bott.bwd_compute + bott.rc_compute
    dp_total = grad_iter + gather_iter + m * (fwd_mb + bwd_mb)
    dp_exposed = dp_total
    share = req.overlap_dp_comm
    if share:
        dp_exposed = (exposed_s(grad_iter, bwd_window, share) + exposed_s(gather_iter, bott.fwd_compute, share)
                      + m * (exposed_s(fwd_mb, bott.fwd_compute, share) + exposed_s(bwd_mb, bwd_window, share)))
    trainable_gpu = None
    if req.lora is not None:
        trainable_gpu = heavy.dense_params_gpu / (p.shard_group_size if ds_zero.value >= 1 else 1)
    breakdown = {
        "latency_per_iter_fwd_compute": m * bott.fwd_compute,
        "latency_per_iter_bwd_compute": m * bott.bwd_compute,
        "latency_per_iter_recompute": m * (bott.rc_compute + bott.rc_comm),
        "latency_per_iter_tp_comm": m * (2 * bott.tp_fwd - bott.tp_bwd_hidden),
        "latency_per_iter_ep_comm": m * 2 * bott.ep_fwd,
        "latency_per_iter_pp_comm": m * pp_per_mb,
        "latency_per_iter_pipeline_bubble": _bubble_s(stages, pp_per_mb, v) if p.pp_size > 1 else 0.0,
        "latency_per_iter_dp_comm": dp_exposed,
        "latency_per_iter_optimizer_step": _weight_update_s(analysis, ds_zero, req, trainable_gpu),
    }
    if p.cp_size > 1:  # the exposed K/V exchange (a key only when CP is used)
        breakdown["latency_per_iter_cp_comm"] = m * 2 * bott.cp_fwd
    if analysis.cost_model.times_fp8_training_casts and req.lora is None:  # (a key only then)
        breakdown["latency_per_iter_fp8_casts"] = m * bott.fp8_cast + bott.fp8_weight_cast
    if analysis.cost_model.times_training_loss:  # (a key only then)
        breakdown["latency_per_iter_loss"] = m * bott.loss
    return {"breakdown": breakdown, "latency_per_iter": sum(breakdown.values()), "t_mb": t_mb, "bottleneck": bott,
            "dp_total": dp_total, "dp_exposed": dp_exposed}


def trainable_params_total(analysis, lora: Optional[LoRAConfig]) -> int:
    """All parameters, or with LoRA the adapters' only."""
    if lora is None:
        return analysis.get_num_params_total()
    ops = analysis.describer.flat_ops(Phase("train", 1, 1, 1, shapes_only=True))
    return sum(a.params for o in ops if lora.targets(o)
               for a in lora_adapter_ops(o, lora.rank, lora.adapter_dtype_bytes, 2))


def run_training(analysis, batch_size_per_gpu: Optional[int] = None, gradient_accumulation_steps: Optional[int] = None,
                 global_batch_size: Optional[int] = None, seq_len: Optional[int] = None,
                 total_num_tokens: Optional[float] = None,
                 activation_recomputation=ActivationRecomputation.NONE, ds_zero=0,
                 layernorm_dtype_bytes: float = 4, master_weights_dtype_bytes: float = 4,
                 other_op_bytes: Optional[float] = None, flash_attn: bool = True, softmax_dropout: bool = False,
                 mlp_activation_quant_bits: Optional[int] = None, mlp_1linear_quant_bits: Optional[int] = None,
                 mlp_gelu_input_quant_bits: Optional[int] = None, mlp_2linear_quant_bits: Optional[int] = None,
                 mlp_recompute_gelu: bool = False, output_dir: Optional[str] = None, output_file_suffix: str = "",
                 pipeline_interleave: int = 1, lora: Union[None, dict, LoRAConfig] = None,
                 overlap_dp_comm: Union[bool, float] = True, overlap_tp_comm: Union[bool, str] = False,
                 cost_per_gpu_hour: Optional[float] = None, distributed_optimizer: bool = False,
                 grad_reduce_in_fp32: bool = False, grad_bucket_params: float = 0,
                 cuda_context_bytes: float = 0, memory_fragmentation: float = 0,
                 zero3_gather_bytes_per_s: Optional[float] = None,
                 zero3_recompute_gather: bool = False, fp8_weight_cast_per_iteration: bool = False) -> Dict[str, Any]:
    """Training analysis of one iteration and of the whole run (see the module
    docstring for every assumption). Returns a flat dict in base units (bytes,
    seconds, FLOPs, FLOP/s). Raises DoesNotFitError when the layout does not fit
    and ConfigError on invalid input.

    Extras beyond the mirrored API: `pipeline_interleave` (virtual stages per
    GPU, v), `lora` (LoRAConfig or dict: rank, target_modules, base_weight_bits
    16 or 4, adapter_dtype_bytes, double_quant), `overlap_dp_comm` (True, False or
    a share in [0, 1]), `overlap_tp_comm`, `cost_per_gpu_hour` (dollars); the
    framework memory terms `distributed_optimizer`, `grad_reduce_in_fp32`,
    `grad_bucket_params`, `cuda_context_bytes`, `memory_fragmentation`
    (training/overheads.py; all off by default); the ZeRO-3 traffic terms
    `zero3_gather_bytes_per_s`, `zero3_recompute_gather` (training/zero3.py; off by
    default); `fp8_weight_cast_per_iteration` (FP8 weight casts kept across the iteration's
    micro-batches, as Megatron-Core's TransformerEngine layers keep them: training/fp8_casts.py; off
    by default: every micro-batch casts them).
    """
    kw = dict(locals())
    kw.pop("analysis")
    return training_run(analysis, kw)[0]


def training_run(analysis, kw: Dict[str, Any]) -> Tuple[Dict[str, Any], TrainingRequest]:
    """`run_training` of its arguments `kw` (every parameter, by name, in its order), and the
    request it validated (facade_perf reuses it for the lower bound of a calibrated call)."""
    req = check_request(analysis, kw)
    output_dir = kw["output_dir"]
    mem = analysis.gpu_config.memory_bytes
    batch = choose_batch(analysis, req, mem)
    stages = stages_for(analysis, req, batch["b"])
    times = iteration_time(analysis, req, stages, batch["b"], batch["m"])
    trainable = None if req.lora is None else trainable_params_total(analysis, req.lora)  # None: all parameters
    summary = training_summary(analysis, req, batch, stages, times, mem, trainable)
    summary["notes"] = _training_notes(analysis, summary, _batch_choice_note(req, summary))
    if req.cost_per_gpu_hour is not None:
        c = req.cost_per_gpu_hour
        n_gpus, gpu_hours, gpu_hours_flops = summary["total_num_gpus"], summary["gpu_hours"], \
            summary["gpu_hours_using_flops"]
        summary["cost_per_gpu_hour"] = c
        summary["cost_per_iter"] = summary["latency_per_iter"] * n_gpus / 3600 * c
        summary["total_training_cost"] = None if gpu_hours is None else gpu_hours * c
        summary["total_training_cost_using_flops"] = None if gpu_hours_flops is None else gpu_hours_flops * c
    if output_dir is not None:
        analysis.output_summary_dict(summary, output_dir, print_human_readable=True,
                                     output_file_suffix=kw["output_file_suffix"])
    return summary, req


# how training()'s note on a micro-batch it chose itself begins (micro_batch_choice.py replaces it with its own)
_BATCH_CHOICE_NOTE_HEAD = "batch_size_per_gpu not given: "


def is_batch_choice_note(note: str) -> bool:
    """Whether `note` is training()'s note on the micro-batch it chose (`_batch_choice_note`)."""
    return note.startswith(_BATCH_CHOICE_NOTE_HEAD)


def _batch_choice_note(req: TrainingRequest, summary: Dict[str, Any]) -> Optional[str]:
    """The micro-batch training() chose itself and why (None where the caller gave it, or gave the
    accumulation steps and the global batch that determine it): the largest that fits, the mirrored
    system's rule (config_batch_size_and_gradient_accumulation_steps)."""
    if req.batch_size is not None or (req.accumulation_steps is not None and req.global_batch_size is not None):
        return None
    b, per_rank = summary["batch_size_per_gpu"], summary["batch_size_per_gpu"] * summary["gradient_accumulation_steps"]
    divides = (f" and divides the {per_rank} sequences per data-parallel rank"
               if req.global_batch_size is not None else "")
    if req.interleave > 1 and req.accumulation_steps is None:
        divides += (f" leaving at least pp_size = {summary['pp_size']} micro-batches (pipeline_interleave = "
                    f"{req.interleave} needs them)")
    return (f"{_BATCH_CHOICE_NOTE_HEAD}micro-batch {b} (batch_size_per_gpu) chosen as the largest that fits"
            f"{divides} (max_batch_size_per_gpu = {summary['max_batch_size_per_gpu']}), the mirrored system's rule; "
            f"a smaller one holds less activation memory and, with pipeline stages, a smaller bubble: "
            f"llm_analysis.training.micro_batch_choice.fastest_fitting_micro_batch (the command line's rule) takes "
            f"the smallest whose time per sample is within 1% of the fastest")


def _training_notes(analysis, summary: Dict[str, Any], batch_choice: Optional[str]) -> List[str]:
    """Warnings where an assumption or a choice matters for the reader; `batch_choice`: the note on
    the micro-batch training() chose itself (first), or None."""
    notes = [] if batch_choice is None else [batch_choice]
    it = summary["latency_per_iter"]
    bubble = summary["latency_per_iter_pipeline_bubble"]
    if it and bubble / it > 0.1:
        m = summary["gradient_accumulation_steps"]
        notes.append(f"the pipeline bubble is {bubble / it:.0%} of the iteration with {m} micro-batches over "
                     f"{summary['pp_size']} stages; a smaller batch_size_per_gpu (more micro-batches) or "
                     f"pipeline_interleave > 1 shrinks it")
    dt = analysis.dtype_config
    if dt.weight_bits == 8 and dt.weight_format == "float" and summary.get("num_trainable_params_total") == \
            summary.get("num_params_total"):  # (full training in fp8: how the weights are held matters)
        notes.append("fp8 training holds the weights in 8 bits beside the fp32 master copy and 16-bit gradients, as "
                     "Megatron-Core's --fp8-param-gather (NeMo's fp8_param) does; TransformerEngine without it keeps "
                     "16-bit parameters and casts a copy: weight memory then 2 bytes per parameter, not 1")
    if summary["ds_zero"] > 0 and zero_shards_nothing(analysis.parallelism_config):
        # kept as asked (DeepSpeed allocates the buffers whatever the group), but said: the planner skips it
        notes.append(zero_without_sharding_text(summary["ds_zero"], summary["zero_buffer_memory_per_gpu"]))
    used = summary["estimated_peak_memory_per_gpu"] / summary["gpu_memory_per_gpu"]
    if used > 0.9:
        notes.append(f"the peak uses {used:.0%} of GPU memory; frameworks reserve some (allocator fragmentation, "
                     f"CUDA context): leave headroom")
    if summary["latency_per_iter_dp_comm"] > 0.1 * it:
        notes.append("data-parallel communication is not hidden by the backward pass: "
                     f"{summary['latency_per_iter_dp_comm'] / it:.0%} of the iteration is exposed")
    executed, counted = summary["num_executed_flops_per_iter"], summary["num_hardware_flops_per_iter"]
    routed_share = summary["num_model_flops_per_iter_routed"] / summary["num_model_flops_per_iter"]
    if routed_share < 1:  # (experts the eager code runs on every token: Llama 4)
        notes.append(f"num_flops_*, num_model_flops_per_iter and num_hardware_flops_per_iter count every routed expert "
                     f"on every token, as the model's eager forward runs them (FlopCounterMode); the kernels execute "
                     f"the top-k experts, and mfu and hfu count those, as the active parameters do: "
                     f"num_model_flops_per_iter_routed = {routed_share:.1%} of num_model_flops_per_iter")
    if executed < counted:
        experts = ", and the top-k of the routed experts (above)" if routed_share < 1 else ""
        notes.append(f"FLOP counts (num_flops_*, num_model_flops_per_iter, mfu, hfu) count attention as the "
                     f"conventions do (FlopCounterMode's whole score matrix); the flash-attention kernels execute "
                     f"only the causal part{experts}, num_executed_flops_per_iter = {executed / counted:.1%} of the "
                     f"hardware FLOPs, and the times follow what they execute")
        above = [f"{k} = {summary[k]:.2f}" for k in ("mfu", "hfu") if summary[k] > 1]
        if above:  # (long sequences at a high rate: more than the GPUs can do, as the convention counts)
            # Megatron-LM's and PaLM's count (Narayanan et al. 2021 eq. 3; Chowdhery et al. 2022 appendix B) is
            # 6N + 12·L·s·h per token, the whole s x s score matrix, not halved for the causal mask: published
            # MFU figures use it, so it is kept, and the executed FLOPs' share of the peak is stated beside it
            notes.append(f"{' and '.join(above)} above 1: mfu and hfu follow the Megatron-LM / PaLM convention "
                         f"(Narayanan et al. 2021; Chowdhery et al. 2022, appendix B: 6N + 12*L*s*h FLOPs per token, "
                         f"the whole attention score matrix, not halved for the causal mask), divided by a time in which "
                         f"the kernels execute {executed / counted:.1%} of the hardware FLOPs; the executed FLOPs use "
                         f"{executed / counted * summary['hfu']:.0%} of the peak")
    if analysis.profile is None and analysis.achieved_tflops is None and analysis.flops_efficiency == 1:
        notes.append("flops_efficiency is 1: latency_per_iter is a lower bound (large-scale training reaches "
                     "~40-55% MFU); pass achieved_tflops or flops_efficiency for realistic days and cost")
    # (a calibrated run times with its profile's rates, not achieved_tflops: a warning says it is not used)
    if analysis.profile is None and analysis.achieved_tflops is not None \
            and it > 1.05 * summary["latency_per_iter_using_flops"]:
        notes.append(f"achieved_tflops = {analysis.achieved_tflops:g} is taken as the rate of the matmuls: the "
                     f"iteration ({it:.3g} s) adds the pipeline bubble, communication and the optimizer step to "
                     f"them; 'from FLOPs' ({summary['latency_per_iter_using_flops']:.3g} s) divides the FLOPs "
                     "alone by it. A rate measured end to end (as papers report it, e.g. Narayanan et al. 2021) "
                     "already includes those: compare such a rate with the figure from FLOPs")
    iterations = summary.get("num_iterations")
    if iterations is not None and 0 < iterations < 1:  # the whole run is a share of an iteration, as mirrored
        notes.append(f"total_num_tokens is {iterations:.3g} of one iteration's {summary['global_batch_size']} x "
                     f"{summary['seq_len']} tokens: the whole run's figures are that share of an iteration (as the "
                     f"mirrored system computes them); a run takes at least one whole iteration")
    if analysis.profile is not None:  # a calibrated time resting on another GPU's or dtype's data says so
        # (integer GEMMs in training run at the fp8 plateau, as a warning says: not at the 16-bit one a note names)
        as_fp8 = getattr(analysis.cost_model, "trains_integer_as_fp8", False)
        notes.extend(n for n in calibrated_notes(analysis) if not (as_fp8 and "GEMM efficiency in profile" in n))
    return notes

