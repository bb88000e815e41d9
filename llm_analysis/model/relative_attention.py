"""DeBERTa-v2's disentangled attention (`ModelConfig.relative_attention`, arXiv
2006.03654 §3.1), as transformers' DisentangledSelfAttention computes it:

* the encoder holds a table of R = 2 x span relative-position embeddings, hidden wide
  (its rows are read whole every forward, not looked up per token), and optionally a
  LayerNorm over it;
* every layer projects all R rows (no batch dimension) through the key projection for
  content-to-position scores (c2p) and through the query projection for
  position-to-content scores (p2c): its own `pos_key_proj` / `pos_query_proj` (with
  biases) for the kinds it uses, or the content projections when shared (then both run);
* c2p multiplies every query with the R projected rows, p2c every key: for each, per
  sequence and head, a [seq x head_dim] @ [head_dim x R] product (2 * seq * R *
  head_dim FLOPs), gathered afterwards (no FLOPs);
* DeBERTa v1 (`span_follows_length`) projects only the 2 x min(longest length, span)
  central rows of its table, through its own projections (c2p's without a bias).
"""

from __future__ import annotations

from typing import List

from llm_analysis.schema.options import ActivationRecomputation
from llm_analysis.model.records import Operator, Phase

__all__ = ["relative_table_ops", "relative_attention_ops"]


def _rows(d) -> int:
    return 2 * d.model.relative_attention.span


def _used_rows(d, phase: Phase) -> int:
    """Rows projected and multiplied in one layer for this phase."""
    rel = d.model.relative_attention
    if rel.span_follows_length:
        return 2 * min(max(phase.q_len, phase.kv_len), rel.span)
    return _rows(d)


def relative_table_ops(d, phase: Phase) -> List[Operator]:
    """The encoder's relative-position table (and its norm): read whole once per forward."""
    rel = d.model.relative_attention
    if rel is None:
        return []
    rows, h = _rows(d), d.model.hidden_dim
    n = rows * h
    ops = [Operator(name="relative_position_table", group="embedding", kind="embedding", params=n,
                    params_per_gpu=n, weight_bytes_per_gpu=n * d.e_bytes, bytes_read_per_gpu=n * d.e_bytes,
                    bytes_written_per_gpu=n * d.a_bytes, shapes=f"[{rows}x{h}] read whole")]
    if rel.table_norm:
        ops.append(d.norm_op("relative_position_norm", "embedding", rows, h, bias=True))
    return ops


def relative_attention_ops(d, phase: Phase) -> List[Operator]:
    """One layer's position projections and c2p / p2c score products (sharded by heads)."""
    m, rel = d.model, d.model.relative_attention
    if rel is None:
        return []
    rows, heads_gpu, width = _used_rows(d, phase), m.n_head // d.tp, m.n_head * m.head_dim
    ops: List[Operator] = []
    kinds = [k for k, used in (("c2p", rel.c2p), ("p2c", rel.p2c)) if used]
    for kind in (("c2p", "p2c") if rel.shared_projections else kinds):
        name = "pos_key_proj" if kind == "c2p" else "pos_query_proj"
        bias = rel.c2p_bias if kind == "c2p" else True
        proj = d.matmul_op(name, "attention", phase, rows, m.hidden_dim, width, bias, shard=d.tp)
        if rel.shared_projections:  # the content q/k weights, counted there
            proj.shared_weight_bytes_read_per_gpu = proj.weight_bytes_per_gpu
            proj.params, proj.params_per_gpu, proj.weight_bytes_per_gpu = 0, 0.0, 0.0
        ops.append(proj)
    for kind in kinds:
        length = phase.q_len if kind == "c2p" else phase.kv_len  # queries, or keys
        flops = 2.0 * phase.batch * m.n_head * length * rows * m.head_dim
        ops.append(Operator(
            name=f"{kind}_scores", group="attention", kind="matmul", flops=flops,
            flops_per_gpu=flops * heads_gpu / m.n_head,
            bytes_read_per_gpu=(phase.tokens + rows) * heads_gpu * m.head_dim * d.a_bytes,
            bytes_written_per_gpu=phase.tokens * heads_gpu * rows * d.a_bytes,
            shapes=f"{heads_gpu} heads x {length} x [{m.head_dim}x{rows}]"))
    for op in ops:
        op.recompute_class = ActivationRecomputation.ATTN
    return ops
