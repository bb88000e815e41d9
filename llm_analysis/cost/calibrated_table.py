"""The calibrated cost model on a phase table (model/phase_table.py): a new
shape's operator times without building Operator objects, as the roofline does.

A calibrated kernel time needs, besides FLOPs and bytes, the kernel's shape
(`Operator.kernel_dims`) and the KV-cache bytes it reads. In a table phase both
follow from figures the table already evaluates:
- a matmul's N and K are its weight's (fixed); its FLOPs are 2 M N K per copy, so
  M = flops_per_gpu / (2 N K x copies), copies read off the probe operator
  (checked there: otherwise no table is used);
- the attention core's query length is the phase's x (prefill, training) or 1
  (decode steps: the probe operator's query length is 1);
- KV-cache reads are a table field.
The times are `CalibratedCostModel.op_kernel_split_s` of those figures, so an
operator costs the same by either path (up to float rounding).
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from llm_analysis.model.phase_table import BYTES_PER_GPU, FLOPS_PER_GPU, KV_CACHE_BYTES, PhaseTable

_DIMS_TOL = 1e-9


def _copies(op) -> Optional[float]:
    """FLOPs of the probe matmul over 2 M N K (its copies), or None if its dims do not explain them."""
    m, n, k = op.kernel_dims
    c = op.flops_per_gpu / (2.0 * m * n * k) if m * n * k else 0.0
    return c if c > 0 and abs(c - round(c)) <= _DIMS_TOL * c else None


class KernelPlan(NamedTuple):
    """How the calibrated model reads each kernel's shape off a table's figures."""

    shaped_matmuls: List[Tuple[int, int, int, float]]  # (index, N, K, FLOPs per row of M)
    plateau_matmuls: np.ndarray  # indices of matmuls without a shape: the GEMM plateau
    is_matmul: np.ndarray  # per operator (matmuls stream bytes at their own rate)
    attention: np.ndarray  # indices of attention cores
    single_query: np.ndarray  # per attention core: a decode step's one query (else the phase's x)


def kernel_plan(table: PhaseTable) -> Optional[KernelPlan]:
    """The table's `KernelPlan`, worked out once per table; None when a matmul's dims do not
    explain its FLOPs."""
    plan = table.memo.get("calibrated_plan", False)
    if plan is not False:
        return plan
    shaped, plateau, attention, single = [], [], [], []
    for i, op in enumerate(table.ops):
        if op.kind == "matmul":
            if len(op.kernel_dims) == 3:
                c = _copies(op)
                if c is None:
                    table.memo["calibrated_plan"] = None
                    return None
                n, k = op.kernel_dims[1], op.kernel_dims[2]
                shaped.append((i, n, k, 2.0 * n * k * c))
            else:
                plateau.append(i)
        elif op.kind == "attention":
            attention.append(i)
            single.append(not op.kernel_dims or op.kernel_dims[0] == 1)  # (no shape: one query, as op_kernel_split_s)
    plan = table.memo["calibrated_plan"] = KernelPlan(
        shaped, np.array(plateau, dtype=int), np.array([op.kind == "matmul" for op in table.ops], dtype=bool),
        np.array(attention, dtype=int), np.array(single, dtype=bool))
    return plan


def calibrated_table_split_s(cm, table: PhaseTable, figures: np.ndarray, xs: Sequence[float]):
    """`CostModel.table_split_s` under the calibrated model `cm`, for a table `kernel_plan`
    accepts: `CalibratedCostModel.op_kernel_split_s` written for arrays [shape, operator]."""
    plan = kernel_plan(table)
    flops, nbytes, kv = figures[:, FLOPS_PER_GPU], figures[:, BYTES_PER_GPU], figures[:, KV_CACHE_BYTES]
    # FLOP/s of each kernel: matmuls at their shape's GEMM efficiency, attention cores at the flash
    # or paged-attention rate; other kernels stream bytes only (an infinite rate: no compute time)
    rate = np.full(flops.shape, np.inf)
    rate[:, plan.plateau_matmuls] = cm._peak * cm._plateau
    for i, n, k, flops_per_row in plan.shaped_matmuls:
        rate[:, i] = [cm._peak * cm._matmul_eff((max(1, round(f / flops_per_row)), n, k))
                      for f in flops[:, i].tolist()]
    # bytes through HBM, saturating with the size moved (`_stream_s`)
    half, hbm = cm._hbm_half, cm._hbm
    stream_rate = np.where(plan.is_matmul, hbm * cm._matmul_hbm_eff, hbm * cm._hbm_eff)
    memory_s = np.where(nbytes > 0, (nbytes + half) / stream_rate, 0.0)
    a = plan.attention
    if len(a):
        q = np.where(plan.single_query, 1.0, np.asarray(xs, dtype=float)[:, None])
        prefill_rate = cm._attn_peak * (cm._attn_eff * q / (q + cm._attn_half))
        kv_a, rest = kv[:, a], nbytes[:, a] - kv[:, a]
        paged = kv_a > 0  # decode over a KV cache: paged attention streams the cache
        rate[:, a] = np.where(paged, cm._attn_peak * cm._attn_eff, prefill_rate)
        memory_s[:, a] = np.where(paged, np.where(kv_a > 0, (kv_a + half) / (hbm * cm._decode_eff), 0.0)
                                  + np.where(rest > 0, (rest + half) / (hbm * cm._hbm_eff), 0.0), memory_s[:, a])
    compute_s = flops / rate
    # the kernel's time, never below the floor, filed under what bounds it; no work: no kernel
    t = np.maximum(np.maximum(compute_s, memory_s), cm._floor)
    works = (flops > 0) | (nbytes > 0)
    compute_bound = compute_s >= memory_s
    compute_s, memory_s = np.where(works & compute_bound, t, 0.0), np.where(works & ~compute_bound, t, 0.0)
    comm_s = np.zeros_like(t)
    cm._time_table_collectives(table, figures, compute_s, memory_s, comm_s)
    return compute_s, memory_s, comm_s


def calibrated_table_steps_split_s(cm, table: PhaseTable, batch: int, x0: int, n: int):
    """`CostModel.table_steps_split_s` under the calibrated model: Simpson's rule over the steps
    (as `CalibratedCostModel.steps_split_s`), from the first, last and middle step; collectives
    n x the first step."""
    xs = (x0, x0 + n - 1, x0 + (n - 1) / 2)
    figures = table.figure_arrays(batch, xs)
    c, m, k = cm.table_split_s(table, figures, xs)
    summed = (n * (c[0] + 4 * c[2] + c[1]) / 6, n * (m[0] + 4 * m[2] + m[1]) / 6, n * k[0])
    return figures[:2], (c[:2], m[:2], k[:2]), summed
