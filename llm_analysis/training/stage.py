"""One pipeline stage's micro-batch: forward, backward and recomputation
times and FLOPs, and the per-GPU parameter and weight bytes the memory and
data-parallel rules need. Times come from the cost model; what a recomputation
mode repeats is each operator's `recompute_class`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, NamedTuple, Optional

import numpy as np

from llm_analysis.model import Operator, Phase
from llm_analysis.schema.options import ActivationRecomputation
from llm_analysis.model.phase_table import FLOPS, MASKED_FLOPS
from llm_analysis.quantities.group_times import timed_table
from llm_analysis.training.lora import LoRAConfig, lora_adapter_ops
from llm_analysis.training.overheads_tp import TP_OVERLAP_BACKWARD, backward_hidden_tp_s

# the linear weights of a layer that LoRA freezes (and QLoRA stores as NF4)
LAYER_WEIGHT_GROUPS = ("attention", "mlp", "experts")

# A flash-attention backward executes 2.5x its forward's FLOPs: five matmuls (S = QK^T recomputed,
# dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q) against the forward's two (QK^T, PV) (Dao 2023,
# "FlashAttention-2", arXiv 2307.08691, Sec. 4.1: "the backward pass ... 2.5x the FLOPs of the forward").
# Its time follows the executed work (the forward's time times 2.5) in both cost models, and in the
# calibrated one also the backward's lower FLOP rate (`cost_model.attention_backward_slowdown`,
# cost/gemm.py `flash_backward_rate`: 0.79 of the forward's at 2k tokens, 0.87 at 16k); the counted
# backward FLOPs keep the conventions' 2x (Megatron / NeMo / torchtitan MFU, FlopCounterMode).
FLASH_BACKWARD_OVER_FORWARD = 2.5


@dataclass
class Stage:
    """Per micro-batch times (s), FLOPs and per-GPU bytes of one pipeline stage."""

    index: int
    num_layers: int = 0
    fwd_compute: float = 0.0
    bwd_compute: float = 0.0
    rc_compute: float = 0.0
    rc_comm: float = 0.0
    tp_fwd: float = 0.0
    ep_fwd: float = 0.0
    cp_fwd: float = 0.0  # exposed context-parallel K/V exchange (operators/context_parallel.py)
    tp_bwd_hidden: float = 0.0  # backward TP collectives under weight-gradient GEMMs (overheads_tp.py)
    # the attention backward's time per executed FLOP over its forward's (calibrated models: above 1),
    # for a kernel whose forward runs above the kernel floor (one at the floor is launch-bound, not slower)
    attention_backward_slowdown: float = 1.0
    kernel_floor_s: float = 0.0
    fp8_cast: float = 0.0  # FP8 training's cast kernels (fp8_casts.py; calibrated models only)
    fp8_weight_cast: float = 0.0  # of them, the weight casts made once per iteration (not per micro-batch)
    loss: float = 0.0  # the cross-entropy passes over the logits (loss.py; last stage, calibrated models only)
    flops_fwd: float = 0.0  # whole-model (unsharded) FLOPs of this stage's ops
    flops_bwd: float = 0.0
    flops_rc: float = 0.0
    # of flops_fwd / flops_rc, what the counting convention includes but no kernel executes
    # (the masked half of causal attention's score matrix: records.Operator.masked_flops)
    masked_flops_fwd: float = 0.0
    masked_flops_rc: float = 0.0
    # of flops_fwd, the attention kernels' executed FLOPs (their backward executes 2.5x, not 2x)
    attention_executed_flops_fwd: float = 0.0
    # of masked_flops_fwd / masked_flops_rc, the routed experts' (experts the eager code runs on every token, Llama 4:
    # counted E / k times the routed work, model/mlp.py): neither executed nor the model's own FLOPs (mfu, hfu)
    expert_masked_flops_fwd: float = 0.0
    expert_masked_flops_rc: float = 0.0
    dense_params_gpu: float = 0.0  # trainable (full training: all; LoRA: adapters)
    expert_params_gpu: float = 0.0
    weight_bytes_gpu: float = 0.0  # unsharded by ZeRO
    max_op_weight_bytes_gpu: float = 0.0  # largest single weight matrix (layers, embedding, head)
    max_layer_op_weight_bytes_gpu: float = 0.0  # largest single weight matrix of a layer
    max_op_trainable_params_gpu: float = 0.0
    dp_weight_bytes_gpu: float = 0.0  # bytes ZeRO all-gathers (dense)
    dp_expert_weight_bytes_gpu: float = 0.0
    layer_dp_weight_bytes_gpu: float = 0.0  # of dp_weight_bytes_gpu, the transformer layers' (what a
    layer_dp_expert_weight_bytes_gpu: float = 0.0  # full recomputation runs again; zero3.py)

    @property
    def micro_batch_time(self) -> float:
        return (self.fwd_compute + self.bwd_compute + self.rc_compute + self.rc_comm
                + 2 * (self.tp_fwd + self.ep_fwd + self.cp_fwd) - self.tp_bwd_hidden + self.fp8_cast + self.loss)

    def add_compute(self, t: float, flops: float, bwd: float, recomputed: bool, masked_flops: float = 0.0,
                    is_attention: bool = False, is_routed_expert: bool = False, kernels: float = 1.0) -> None:
        """`kernels` kernels of forward time t together and `flops` FLOPs (`masked_flops` of them not
        executed), its backward `bwd` times the forward (FLOPs as counted: 2x; an attention kernel's
        backward time 2.5x, FLASH_BACKWARD_OVER_FORWARD, slower per FLOP above the kernel floor)."""
        self.fwd_compute += t
        attention = is_attention and bwd == 2.0
        self.bwd_compute += (FLASH_BACKWARD_OVER_FORWARD * _above_floor_slowdown(
            t / kernels if kernels else t, self.attention_backward_slowdown, self.kernel_floor_s)
            if attention else bwd) * t
        self.flops_fwd += flops
        self.flops_bwd += bwd * flops
        self.masked_flops_fwd += masked_flops
        if is_attention:
            self.attention_executed_flops_fwd += flops - masked_flops
        if is_routed_expert:
            self.expert_masked_flops_fwd += masked_flops
        if recomputed:
            self.rc_compute += t
            self.flops_rc += flops
            self.masked_flops_rc += masked_flops
            if is_routed_expert:
                self.expert_masked_flops_rc += masked_flops

    @property
    def executed_flops(self) -> float:
        """Forward, backward and recomputation FLOPs the kernels execute (backward 2x forward;
        attention's 2.5x, FLASH_BACKWARD_OVER_FORWARD)."""
        return (self.flops_fwd + self.flops_bwd + self.flops_rc
                - 3.0 * self.masked_flops_fwd - self.masked_flops_rc
                + (FLASH_BACKWARD_OVER_FORWARD - 2.0) * self.attention_executed_flops_fwd)


def _above_floor_slowdown(t: float, slowdown: float, floor_s: float) -> float:
    """The backward's slowdown of an attention kernel of forward time `t`: the rate's only where the
    forward runs above the kernel floor; a kernel at the floor is launch-bound, and its backward, 2.5x
    the work, is no slower per FLOP (so the backward never shrinks as the sequence grows while the
    forward sits at the floor)."""
    return slowdown if t > floor_s * (1 + 1e-9) else 1.0


def _attention_backward_slowdown(analysis, ph: Phase) -> float:
    """The cost model's attention-backward slowdown at the query length each GPU's kernel sees (the
    sequence over the context-parallel ranks)."""
    return analysis.cost_model.attention_backward_slowdown(ph.q_len / analysis.parallelism_config.cp_size)


def _backward_factor(op: Operator, lora: Optional[LoRAConfig]) -> float:
    """Backward time over forward: 2 (input and weight gradients); frozen (LoRA)
    matmuls only the input gradient (1), frozen lookups nothing (0)."""
    frozen = lora is not None and (op.params > 0 or op.kind == "embedding")
    if not frozen or op.kind not in ("embedding", "matmul"):
        return 2.0
    return 0.0 if op.kind == "embedding" else 1.0


def _add_collective(st: Stage, op: Operator, t: float, recomputed: bool) -> None:
    if op.comm_group == "tp":
        st.tp_fwd += t
    elif op.comm_group == "ep":
        st.ep_fwd += t
    elif op.comm_group == "cp":
        # backward: ring attention sends K/V again and dK/dV back (2x the bytes, under 2x the
        # attention compute); Ulysses transposes the same four all-to-alls: 2 x forward either way
        st.cp_fwd += t
    if recomputed:
        st.rc_comm += t


def _add_full_training_weights(st: Stage, op: Operator, n: int, is_layer: bool) -> float:
    w = op.weight_bytes_per_gpu
    if op.is_routed_expert:  # experts shard over their own data-parallel group
        st.expert_params_gpu += n * op.params_per_gpu
        st.dp_expert_weight_bytes_gpu += n * w
        if is_layer:
            st.layer_dp_expert_weight_bytes_gpu += n * w
    else:
        st.dense_params_gpu += n * op.params_per_gpu
        st.dp_weight_bytes_gpu += n * w
        if is_layer:
            st.layer_dp_weight_bytes_gpu += n * w
    # every module's weights are gathered whole under ZeRO-3, the embedding and the LM head too (often the
    # largest matrices: Llama-3's 128,256 x 4,096 head), and their gradients exist whole before the reduce
    st.max_op_trainable_params_gpu = max(st.max_op_trainable_params_gpu, op.params_per_gpu)
    return w


def _add_lora_weights(analysis, st: Stage, op: Operator, n: int, is_layer: bool, lora: LoRAConfig,
                      recomputed: bool) -> float:
    """Frozen base weight (NF4 for QLoRA layers' linear weights) plus its adapters,
    which are timed and trained like any operator."""
    w = (op.params_per_gpu * lora.base_bytes_per_param
         if is_layer and op.kind == "matmul" and op.group in LAYER_WEIGHT_GROUPS else op.weight_bytes_per_gpu)
    st.dp_weight_bytes_gpu += n * w
    if is_layer:
        st.layer_dp_weight_bytes_gpu += n * w
    if not (is_layer and lora.targets(op)):
        return w
    act_bytes = analysis.dtype_config.activation_bits / 8
    for a in lora_adapter_ops(op, lora.rank, lora.adapter_dtype_bytes, act_bytes):
        st.add_compute(n * analysis.cost_model.op_time_s(a), n * a.flops, 2.0, recomputed)
        st.dense_params_gpu += n * a.params_per_gpu
        st.max_op_trainable_params_gpu = max(st.max_op_trainable_params_gpu, a.params_per_gpu)
        w += a.weight_bytes_per_gpu
        st.dp_weight_bytes_gpu += n * a.weight_bytes_per_gpu
        st.layer_dp_weight_bytes_gpu += n * a.weight_bytes_per_gpu
    return w


def _hide_tp_comm(st: Stage) -> None:
    """TP collectives hidden behind the micro-batch's compute; only the excess is exposed."""
    compute = st.fwd_compute + st.bwd_compute + st.rc_compute
    tp_total = 2 * st.tp_fwd + st.rc_comm
    exposed = max(0.0, tp_total - compute)
    scale = exposed / tp_total if tp_total else 0.0
    st.tp_fwd *= scale
    st.rc_comm *= scale


def _rows(analysis, ph: Phase, s: int, lora: Optional[LoRAConfig]):
    """(is a layer's, repeat count, operator, n x its time, n x its FLOPs) of the stage's
    operators (n separate operators: each collective pays its latency)."""
    cost, d = analysis.cost_model, analysis.describer
    return [(is_layer, n, op, n * cost.op_time_s(op), n * op.flops)
            for is_layer, n, ops in d.stage_parts(ph, s) for op in ops]


def _add_weights(st: Stage, analysis, op: Operator, n: int, is_layer: bool, lora: Optional[LoRAConfig],
                 recomputed: bool) -> None:
    if lora is None:
        w = _add_full_training_weights(st, op, n, is_layer)
    else:
        w = _add_lora_weights(analysis, st, op, n, is_layer, lora, recomputed)
    st.weight_bytes_gpu += n * w
    st.max_op_weight_bytes_gpu = max(st.max_op_weight_bytes_gpu, w)  # any module's: ZeRO-3 gathers each whole
    if is_layer:
        st.max_layer_op_weight_bytes_gpu = max(st.max_layer_op_weight_bytes_gpu, w)


def _table_stage(analysis, table, ph: Phase, s: int, rc: ActivationRecomputation) -> Stage:
    """`build_stage` from the phase table without LoRA: the weight and parameter fields
    (shape-free) once per table and stage, the time and FLOPs sums from the table's figures
    (each sum over the operators `_add_time` adds to it: `_stage_roles`)."""
    weights = table.memo.get(("stage_weights", s))
    if weights is None:
        st = Stage(index=s, num_layers=sum(analysis.describer.stage_groups[s].values()))
        for is_layer, n, op in zip(table.is_layer, table.repeats, table.ops):
            if op.kind != "collective":
                _add_weights(st, analysis, op, n, is_layer, None, False)
        weights = table.memo[("stage_weights", s)] = st
    figures = table.figure_array(ph.batch, ph.q_len)
    kernels = _stage_roles(table, rc)[0]
    # sums over [all kernels, recomputed kernels, attention kernels, routed experts, recomputed routed
    # experts] of every figure (FLOPs; FLOPs no kernel executes): the same whichever model times them
    (flops_fwd, masked_fwd), (flops_rc, masked_rc), (attn_flops, attn_masked), (_, expert_masked_fwd), \
        (_, expert_masked_rc) = ((row[FLOPS], row[MASKED_FLOPS]) for row in (kernels @ figures.T).tolist())
    # (the weight fields' Stage with the times: every field is an init field; faster than dataclasses.replace)
    return Stage(**{**vars(weights), **_table_stage_times(analysis, table, figures, ph, rc),
                    "flops_fwd": flops_fwd, "flops_bwd": 2.0 * flops_fwd, "flops_rc": flops_rc,
                    "masked_flops_fwd": masked_fwd, "masked_flops_rc": masked_rc,
                    "expert_masked_flops_fwd": expert_masked_fwd, "expert_masked_flops_rc": expert_masked_rc,
                    "attention_executed_flops_fwd": attn_flops - attn_masked})


def _table_stage_times(analysis, table, figures, ph: Phase, rc: ActivationRecomputation) -> dict:
    """The time fields of `_table_stage` (the stage's operators at `figures` timed by the analysis'
    cost model): every kernel's seconds (`CostModel.table_times_s`: a stage's sums need each kernel's
    time, not what bounds it) summed by the roles `_add_time` gives them."""
    kernel_s, collectives_s = analysis.cost_model.table_times_s(table, figures, ph.q_len)
    kernels, collectives, attention = _stage_roles(table, rc)
    fwd, rc_compute, attn_fwd = (kernels[:3] @ kernel_s).tolist()
    tp = ep = cp = recomputed_s = 0.0
    for (every, recomputed, group), t in zip(collectives, collectives_s):
        if group == "tp":
            tp += every * t
        elif group == "ep":
            ep += every * t
        elif group == "cp":
            cp += every * t
        recomputed_s += recomputed * t
    # (backward: 2x the forward, input and weight gradients; attention 2.5x at its slower rate: as
    # `add_compute` without LoRA; the attention kernels are a few per table: summed one by one, in
    # floats, which costs less than the array operations on so few)
    slowdown = _attention_backward_slowdown(analysis, ph)
    floor_s = analysis.cost_model.kernel_floor_s
    attn_bwd = 0.0
    for n, t in zip(attention.repeats, kernel_s[attention.rows].tolist()):  # (t: one kernel's forward time)
        attn_bwd += n * (t * _above_floor_slowdown(t, slowdown, floor_s))
    bwd = 2.0 * fwd + FLASH_BACKWARD_OVER_FORWARD * attn_bwd - 2.0 * attn_fwd
    return {"fwd_compute": fwd, "bwd_compute": bwd, "rc_compute": rc_compute, "rc_comm": recomputed_s,
            "tp_fwd": tp, "ep_fwd": ep, "cp_fwd": cp, "attention_backward_slowdown": slowdown,
            "kernel_floor_s": floor_s}


def retimed_stage(analysis, built: Stage, ph: Phase, rc: ActivationRecomputation, overlap_tp_comm) -> Optional[Stage]:
    """`build_stage(analysis, ph, built.index, rc, None, overlap_tp_comm)` from `built`, the stage another cost
    model built for the same phase, options and no LoRA (the roofline's beside a calibrated run:
    cost/choice.py): its weight and FLOPs fields, which no cost model changes, with times from the
    analysis' cost model on the phase table (the figures the other model just evaluated). None where the
    analysis' cost model times no table, or times what a stage adds beside its operators (fp8 casts, loss)."""
    cm = analysis.cost_model
    table = timed_table(cm, analysis.describer, "train", built.index, x=ph.q_len)
    if table is None or cm.times_fp8_training_casts or cm.times_training_loss:
        return None
    st = Stage(**{**vars(built), **_table_stage_times(analysis, table, table.figure_array(ph.batch, ph.q_len), ph, rc),
                  "tp_bwd_hidden": 0.0, "fp8_cast": 0.0, "fp8_weight_cast": 0.0, "loss": 0.0})
    _overlap_tp_comm(st, analysis, ph, None, overlap_tp_comm)
    return st


class _AttentionRows(NamedTuple):
    """The attention kernels of a phase table: their indices and repeat counts."""

    rows: List[int]
    repeats: List[float]


def _stage_roles(table, rc: ActivationRecomputation):
    """What `_add_time` adds each operator to, per table and recomputation (worked out once):
    [all kernels, recomputed kernels, attention kernels, routed experts, recomputed routed experts][operator] (the
    operator's repeat count, or 0), and per
    distinct collective (`PhaseTable.collectives`) its repeat counts in all and recomputed and its
    group (embedding and head are never recomputed), and the attention kernels (`_AttentionRows`)."""
    roles = table.memo.get(("stage_roles", rc))
    if roles is None:
        recomputed = [layer and op.recomputed_under(rc) for layer, op in zip(table.is_layer, table.ops)]
        kernels = np.array([[0.0 if coll else n for n, coll in zip(table.repeats, table.is_collective)],
                            [0.0 if coll or not again else n
                             for n, coll, again in zip(table.repeats, table.is_collective, recomputed)],
                            [n if op.kind == "attention" else 0.0 for n, op in zip(table.repeats, table.ops)],
                            [n if op.is_routed_expert else 0.0 for n, op in zip(table.repeats, table.ops)],
                            [n if op.is_routed_expert and again else 0.0
                             for n, op, again in zip(table.repeats, table.ops, recomputed)]])
        collectives = [(sum(n for _, n in repeats), sum(n for i, n in repeats if recomputed[i]), op.comm_group)
                       for (_, op), repeats in zip(table.collectives, table.collective_repeats)]
        attention = np.flatnonzero(kernels[2]).tolist()
        roles = table.memo[("stage_roles", rc)] = (kernels, collectives,
                                                   _AttentionRows(attention, kernels[2, attention].tolist()))
    return roles


def _add_time(st: Stage, op: Operator, n: int, t: float, flops: float, recomputed: bool,
              lora: Optional[LoRAConfig]) -> None:
    """One operator's n x time and n x FLOPs into the stage's sums."""
    if op.kind == "collective":
        _add_collective(st, op, t, recomputed)
    else:
        st.add_compute(t, flops, _backward_factor(op, lora), recomputed, n * op.masked_flops,
                       is_attention=op.kind == "attention", is_routed_expert=op.is_routed_expert, kernels=n)


def build_stage(analysis, ph: Phase, s: int, rc: ActivationRecomputation, lora: Optional[LoRAConfig],
                overlap_tp_comm) -> Stage:
    table = timed_table(analysis.cost_model, analysis.describer, "train", s, x=ph.q_len) if lora is None else None
    if table is not None:
        st = _table_stage(analysis, table, ph, s, rc)
    else:
        st = Stage(index=s, num_layers=sum(analysis.describer.stage_groups[s].values()),
                   attention_backward_slowdown=_attention_backward_slowdown(analysis, ph),
                   kernel_floor_s=analysis.cost_model.kernel_floor_s)
        for is_layer, n, op, t, flops in _rows(analysis, ph, s, lora):
            recomputed = is_layer and op.recomputed_under(rc)  # embedding and head are never recomputed
            _add_time(st, op, n, t, flops, recomputed, lora)
            if op.kind != "collective":
                _add_weights(st, analysis, op, n, is_layer, lora, recomputed)
    _overlap_tp_comm(st, analysis, ph, lora, overlap_tp_comm)
    return st


def _overlap_tp_comm(st: Stage, analysis, ph: Phase, lora: Optional[LoRAConfig], overlap_tp_comm) -> None:
    """The TP collectives the stage hides under its compute (`overlap_tp_comm`)."""
    if overlap_tp_comm == TP_OVERLAP_BACKWARD:
        st.tp_bwd_hidden = backward_hidden_tp_s(analysis, ph, st.index, lora)
    elif overlap_tp_comm:
        _hide_tp_comm(st)
