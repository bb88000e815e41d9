"""Context parallelism (CP): each of `cp_size` ranks holds seq_len / cp tokens of
every sequence, in training and in prefill.

What changes per GPU (the whole-model `params` / `flops` stay as they are):
- every token-wise operator (projections, MLP, norms, embedding, head, TP
  collectives) works on the local tokens: its FLOPs, activation bytes and message
  sizes are 1/cp; its weights are whole on every CP rank (CP replicates weights);
- the attention core: with causal load balancing (Megatron-CP / TransformerEngine
  split the sequence into 2 x cp chunks and give rank i chunks i and 2cp-1-i, so
  every rank has the same share of the causal triangle) each rank computes 1/cp of
  the attention FLOPs. Hence cp must divide seq_len, and 2 x cp with causal load
  balancing (checked where the sequence is known: `check_cp_seq_len`);
- the exchange that lets a rank's queries see the whole sequence:
  * "ring" (Liu et al. 2023, Ring Attention, arXiv 2310.01889; Megatron-CP): the
    local K/V block is passed around the CP ring cp - 1 times per layer; every
    step sends one block (K + V of seq/cp tokens) to the next rank while the
    attention of the block at hand runs, so only what exceeds the block attention
    is exposed (`Operator.overlap_flops_per_gpu`). cp - 1 sequential sends of B
    bytes move what an all-gather of the cp x B K/V buffer moves, over the same
    cp - 1 ring steps, so the exchange is timed as that all-gather on the CP group
    (ranks tp apart). The attention core also reads the cp - 1 received blocks.
    Backward sends K/V again and their gradients dK/dV the other way: twice the
    forward bytes (training/stage.py times the backward as 2x the forward op);
  * "all_to_all" (DeepSpeed-Ulysses, Jacobs et al. 2023, arXiv 2309.14509): q, k
    and v are re-sharded from sequence to heads by one all-to-all each before the
    attention core and its output back by a fourth; not overlapped. The heads of
    a TP rank must divide by cp.
"""

from __future__ import annotations

from dataclasses import replace
from typing import List

from llm_analysis.errors import ConfigError
from llm_analysis.schema.options import ActivationRecomputation
from llm_analysis.model.records import LayerKind, Operator, Phase, layer_groups

CP_PHASES = ("train", "prefill")


def local_op(op: Operator, cp: int) -> Operator:
    """`op` on the seq/cp tokens one CP rank holds (weights stay whole)."""
    if op.kind == "collective":
        return replace(op, comm_bytes_per_gpu=op.comm_bytes_per_gpu / cp)
    fixed_read = op.weight_bytes_per_gpu + op.shared_weight_bytes_read_per_gpu + op.kv_cache_bytes_read_per_gpu
    act_read = max(op.bytes_read_per_gpu - fixed_read, 0.0)
    dims = op.kernel_dims
    if dims:
        dims = (max(1, dims[0] // cp),) + tuple(dims[1:])
    return replace(op, flops_per_gpu=op.flops_per_gpu / cp, bytes_read_per_gpu=fixed_read + act_read / cp,
                   bytes_written_per_gpu=op.bytes_written_per_gpu / cp, kernel_dims=dims)


def kv_block_bytes(describer, phase: Phase, kind: LayerKind) -> float:
    """K + V of one CP rank's tokens on one GPU, in the activation dtype: the block
    ring attention passes. MLA passes the expanded per-head keys and values."""
    m, cp = describer.model, describer.par.cp_size
    if m.is_mla:
        heads = m.n_head // describer.tp
        width = heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
    else:
        width = describer.kv_heads_per_gpu_of(kind) * (describer.head_dim_of(kind) + describer.v_head_dim_of(kind))
    return phase.tokens / cp * width * describer.a_bytes


def _ring_ops(describer, phase: Phase, kind: LayerKind, core: Operator) -> List[Operator]:
    cp = describer.par.cp_size
    block = kv_block_bytes(describer, phase, kind)
    # the cp - 1 blocks received are computed on while the next one travels
    hidden = (cp - 1) / cp
    # point-to-point sends, one block a step to the next rank (TransformerEngine's and Megatron's ring attention:
    # batched isend / irecv), cp - 1 steps one after another: paced by the ring's slowest hop, one rank's NIC where
    # the group spans nodes. Timed as an all-gather, whose rings use every NIC of a node at once, a cp group of
    # 16 over two nodes had moved its blocks 8x faster than the one NIC each step crosses on
    return [Operator(name="cp_ring_kv_exchange", group="communication", kind="collective",
                     collective="p2p", comm_bytes_per_gpu=(cp - 1) * block, comm_group_size=cp, comm_group="cp",
                     overlap_flops_per_gpu=core.flops_per_gpu * hidden,
                     overlap_bytes_per_gpu=core.bytes_per_gpu * hidden,
                     recompute_class=ActivationRecomputation.ATTN_COMPUTE,
                     shapes=f"{cp - 1} ring steps x K+V block {block:.0f} B over cp={cp}")]


def _all_to_all_ops(describer, phase: Phase, core_widths) -> List[Operator]:
    cp = describer.par.cp_size
    out = []
    for name, width in core_widths:
        nbytes = phase.tokens / cp * width * describer.a_bytes
        out.append(Operator(name=f"cp_all_to_all_{name}", group="communication", kind="collective",
                            collective="all_to_all", comm_bytes_per_gpu=nbytes, comm_group_size=cp,
                            comm_group="cp", recompute_class=ActivationRecomputation.ATTN,
                            shapes=f"{nbytes:.0f} B over cp={cp}"))
    return out


def _core_widths(describer, kind: LayerKind):
    """(name, per-GPU width per token) of the tensors Ulysses re-shards."""
    m = describer.model
    heads = m.n_head // describer.tp
    if m.is_mla:
        d_qk, d_v = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
        return (("q", heads * d_qk), ("k", heads * d_qk), ("v", heads * d_v), ("out", heads * d_v))
    hd, d_v, kv = describer.head_dim_of(kind), describer.v_head_dim_of(kind), describer.kv_heads_per_gpu_of(kind)
    return (("q", heads * hd), ("k", kv * hd), ("v", kv * d_v), ("out", heads * d_v))


def context_parallel_layer(describer, phase: Phase, kind: LayerKind, ops: List[Operator]) -> List[Operator]:
    """A layer's operators on one CP rank, with the K/V exchange before the core."""
    cp = describer.par.cp_size
    out: List[Operator] = []
    for op in ops:
        local = local_op(op, cp)
        if op.kind == "attention":
            if describer.par.cp_comm == "ring":
                block = kv_block_bytes(describer, phase, kind)
                local = replace(local, bytes_read_per_gpu=local.bytes_read_per_gpu + (cp - 1) * block,
                                shapes=f"{local.shapes} (ring: {cp} K/V blocks)")
                out.extend(_ring_ops(describer, phase, kind, local))
            else:
                a2a = _all_to_all_ops(describer, phase, _core_widths(describer, kind))
                out.extend(a2a[:3] + [local] + a2a[3:])  # q, k, v in; the output back
                continue
        out.append(local)
    return out


def check_context_parallel(describer) -> None:
    """Layout checks that need only the model (the sequence is checked by `check_cp_seq_len`)."""
    m, p = describer.model, describer.par
    if p.cp_size == 1:
        return
    if m.encoder_only:
        raise ConfigError(f"cp_size = {p.cp_size}: context parallelism is for causal decoders; {m.name} is an "
                          "encoder; use cp_size=1")
    heads = m.n_head // p.tp_size
    if p.cp_comm == "all_to_all" and heads % p.cp_size:
        valid = [d for d in range(1, heads + 1) if heads % d == 0]
        raise ConfigError(f"cp_size = {p.cp_size} with cp_comm='all_to_all' must divide the {heads} attention heads "
                          f"of a TP rank (n_head / tp_size); valid cp_size: {valid}, or cp_comm='ring'")
    if p.cp_comm == "all_to_all" and not m.is_mla:
        # DeepSpeed-Ulysses gives each CP rank whole K/V heads too: with fewer KV heads on a TP rank than cp_size the
        # heads would have to be replicated over the ranks (more bytes moved and held), which the all-to-all here
        # does not model (it moves the rank's KV heads split cp ways), so the layout is refused
        kv = min((describer.kv_heads_per_gpu_of(kind) for kind in layer_groups(m) if kind.attends), default=0)
        if kv and kv % p.cp_size:
            valid = [d for d in range(1, kv + 1) if kv % d == 0]
            raise ConfigError(f"cp_size = {p.cp_size} with cp_comm='all_to_all' must divide the {kv} KV heads of a TP "
                              f"rank (num_key_value_heads / tp_size; Ulysses splits whole K/V heads over the CP ranks, "
                              f"replication is not modelled); valid cp_size: {valid}, or cp_comm='ring'")


def check_cp_seq_len(cp: int, seq_len: int, flag: str = "cp_size") -> None:
    """Causal load balancing splits the sequence into 2 x cp equal chunks."""
    if cp > 1 and seq_len % (2 * cp):
        valid = [1] + [d for d in range(2, min(seq_len, 64) + 1) if seq_len % (2 * d) == 0]  # (1: no context parallelism)
        raise ConfigError(f"{flag} = {cp} needs 2 x cp_size to divide seq_len = {seq_len} (causal load balancing "
                          f"cuts the sequence into 2 x cp chunks); valid cp_size: {valid}")
