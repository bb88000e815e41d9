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
The times are `CalibratedCostModel.op_kernel_split_s`'s rule on those figures, for
every operator of the table at once (numpy arrays; the attention cores, a few per table,
by `op_kernel_split_s` itself), so an operator costs the same by either path (up to
float rounding); what one model reads off one table's plan (GEMM shapes, streaming
rates, which kernels work) is worked out once (`_table_rates`).
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Tuple

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

    # per operator: ("m", N, K, FLOPs per row of M) for a matmul with a shape (M from its FLOPs),
    # ("q", one query: a decode step's) for an attention core (else the phase's x), None otherwise
    rules: list
    shaped_matmuls: np.ndarray  # indices of the matmuls with a shape
    plateau_matmuls: np.ndarray  # indices of matmuls without a shape: the GEMM plateau
    is_matmul: np.ndarray  # per operator (matmuls stream bytes at their own rate)
    attention: List[Tuple[int, object, bool]]  # (index, operator, one query) of each attention core


def kernel_plan(table: PhaseTable) -> Optional[KernelPlan]:
    """The table's `KernelPlan`, worked out once per table; None when a matmul's dims do not
    explain its FLOPs."""
    plan = table.memo.get("calibrated_plan", False)
    if plan is not False:
        return plan
    rules = []
    for op in table.ops:
        if op.kind == "matmul" and len(op.kernel_dims) == 3:
            c = _copies(op)
            if c is None:
                table.memo["calibrated_plan"] = None
                return None
            n, k = op.kernel_dims[1], op.kernel_dims[2]
            rules.append(("m", n, k, 2.0 * n * k * c))
        elif op.kind == "attention":  # (no shape: one query, as op_kernel_split_s takes it)
            rules.append(("q", not op.kernel_dims or op.kernel_dims[0] == 1))
        else:
            rules.append(None)
    shaped = [i for i, rule in enumerate(rules) if rule and rule[0] == "m"]
    plan = table.memo["calibrated_plan"] = KernelPlan(
        rules, np.array(shaped, dtype=int),
        np.array([i for i, op in enumerate(table.ops) if op.kind == "matmul" and i not in shaped], dtype=int),
        np.array([op.kind == "matmul" for op in table.ops], dtype=bool),
        [(i, op, rule[1]) for i, (op, rule) in enumerate(zip(table.ops, rules)) if rule and rule[0] == "q"])
    return plan


class TableRates(NamedTuple):
    """What one calibrated model reads off one table's kernel plan, once (`_table_rates`)."""

    cm: object  # the model (kept, and compared by identity: an entry is its own model's)
    plan: KernelPlan  # the table's (one look-up per call for both)
    gemms: List[Tuple[object, float]]  # (efficiency of M: the GemmShape of (N, K), FLOPs per row of M) of each
    # shaped matmul
    base_rate: np.ndarray  # FLOP/s of each kernel but the matmuls with a shape (theirs: `gemms`): the
    # GEMM plateau or, for kernels that stream bytes only, infinite (no compute time)
    per_stream_byte: np.ndarray  # seconds per HBM byte of each kernel (matmuls at their own streaming
    # efficiency; 0 for a kernel that moves no bytes)
    floor_s: np.ndarray  # the kernel floor of each kernel that does any work, 0 for none (a skipped
    # block's, a collective's: its compute and memory times are 0, so is its time)
    quantized: np.ndarray  # indices of the matmuls whose streaming takes the precision's quantized-linear
    # terms (`CalibratedCostModel.quantized_stream_s`; none at 16 bits)
    k_serial_s: np.ndarray  # K x k_serial of each of them (K of a matmul without a shape: 0)


def _table_rates(cm, table: PhaseTable) -> TableRates:
    """`kernel_plan(table)` and what `cm` reads off it. Which kernels move bytes or do any work is read
    off the coefficients: a figure of the builders (a count of FLOPs or bytes) is either zero at every
    shape or positive at every one."""
    key = ("calibrated_rates", id(cm))
    rates = table.memo.get(key)
    if rates is None or rates.cm is not cm:
        plan = kernel_plan(table)
        base = np.full(len(table.ops), np.inf)
        base[plan.plateau_matmuls] = cm._peak * cm._plateau
        moves = np.array([any(c) for c in table.coefs[BYTES_PER_GPU]])
        computes = np.array([any(c) for c in table.coefs[FLOPS_PER_GPU]])
        stream_rate = np.where(plan.is_matmul, cm._hbm * cm._matmul_hbm_eff, cm._hbm * cm._hbm_eff)
        # (a matmul that does no work, a skipped block's, runs no kernel: nothing added)
        quantized = np.flatnonzero(plan.is_matmul & (moves | computes)) if (cm._quant_fixed_s or cm._quant_k_serial_s) \
            else np.array([], dtype=int)
        k = np.array([plan.rules[i][2] if plan.rules[i] else 0 for i in quantized], dtype=float)
        rates = table.memo[key] = TableRates(
            cm, plan, [(cm.gemm_shape(plan.rules[i][1], plan.rules[i][2], table.ops[i].fused_widths),
                  plan.rules[i][3]) for i in plan.shaped_matmuls],
            base, moves / stream_rate, (moves | computes) * cm._floor, quantized, k * cm._quant_k_serial_s)
    return rates


def calibrated_table_kernels_s(cm, table: PhaseTable, figures: np.ndarray, x: float) -> np.ndarray:
    """`CostModel.table_kernels_s` under the calibrated model `cm`, for a table `kernel_plan`
    accepts: `CalibratedCostModel.op_kernel_split_s` for arrays [operator] (attention cores, a
    few per table, by `op_kernel_split_s` itself)."""
    compute_s, memory_s, floor_s = _compute_memory_s(cm, table, figures)
    # the kernel's time, never below the floor, filed whole under what bounds it ([compute, memory]
    # rows: the comparison and its negation, `_BOUND_ROWS`); no work: no kernel
    kernels = np.maximum(np.maximum(compute_s, memory_s), floor_s) * ((compute_s >= memory_s) != _BOUND_ROWS)
    for i, split in _attention_splits(cm, table, figures, x):
        kernels[:, i] = split
    return kernels


def calibrated_table_times_s(cm, table: PhaseTable, figures: np.ndarray, x: float) -> np.ndarray:
    """`calibrated_table_kernels_s` summed over its rows, without filing each kernel by what bounds
    it (`CostModel.table_times_s`: a training stage's sums need each kernel's time alone); the same
    floats, since one of a kernel's two rows is 0.0."""
    compute_s, memory_s, floor_s = _compute_memory_s(cm, table, figures)
    kernels_s = np.maximum(np.maximum(compute_s, memory_s), floor_s)
    for i, (c, m) in _attention_splits(cm, table, figures, x):
        kernels_s[i] = c + m
    return kernels_s


def _attention_splits(cm, table: PhaseTable, figures: np.ndarray, x: float):
    """(index, (compute_s, memory_s)) of each attention core of the table (`op_kernel_split_s`)."""
    plan = _table_rates(cm, table).plan
    if not plan.attention:
        return []
    flops, nbytes, kv = figures[FLOPS_PER_GPU], figures[BYTES_PER_GPU], figures[KV_CACHE_BYTES]
    return [(i, cm.op_kernel_split_s(op, float(flops[i]), float(nbytes[i]), float(kv[i]), (1,) if one_query else (x,)))
            for i, op, one_query in plan.attention]


def _compute_memory_s(cm, table: PhaseTable, figures: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every kernel's compute and memory seconds [operator] and its floor (0.0: no work, no kernel)."""
    rates = _table_rates(cm, table)
    plan = rates.plan
    flops, nbytes = figures[FLOPS_PER_GPU], figures[BYTES_PER_GPU]
    # compute time of each kernel: matmuls with a shape at its GEMM efficiency (M = FLOPs / FLOPs per
    # row, rounded, at least 1), the others at their `base_rate`
    compute_s = flops / rates.base_rate
    peak = cm._peak
    compute_s[plan.shaped_matmuls] = [f / (peak * gemm(max(1, round(f / per_row))))
                                      for (gemm, per_row), f in zip(rates.gemms, flops[plan.shaped_matmuls].tolist())]
    # bytes through HBM, saturating with the size moved (`_stream_s`)
    memory_s = (nbytes + cm._hbm_half) * rates.per_stream_byte
    if len(rates.quantized):  # fp8 / FP4 linears: max(streaming, K x k_serial) + fixed (`quantized_stream_s`)
        q = rates.quantized
        memory_s[q] = np.maximum(memory_s[q], rates.k_serial_s) + cm._quant_fixed_s
    return compute_s, memory_s, rates.floor_s


# (compute_s >= memory_s) != this: [the kernels compute-bound, those memory-bound] in one operation
_BOUND_ROWS = np.array([[False], [True]])


def _kernel_dims(rule, op, flops: float, x: float) -> Tuple:
    """Kernel shape of a table operator (`KernelPlan.rules`) with these FLOPs at length x, as
    `calibrated_table_kernels_s` reads it (`op_kernel_split_s`'s `dims`)."""
    if rule is None:
        return op.kernel_dims
    if rule[0] == "m":
        return max(1, round(flops / rule[3])), rule[1], rule[2]
    return (1,) if rule[1] else (x,)


def calibrated_growing_steps_split_s(cm, table: PhaseTable, i: int, first, at_first, at_last, x0: int, n: int):
    """`CostModel._growing_steps_split_s` under the calibrated model: Simpson's rule over the steps
    from the first, middle and last step (`CalibratedCostModel.steps_split_s`)."""
    rule, op = _table_rates(cm, table).plan.rules[i], table.ops[i]
    x1 = x0 + n - 1

    def split(figures, x):
        f = figures[FLOPS_PER_GPU]
        return cm.op_kernel_split_s(op, f, figures[BYTES_PER_GPU], figures[KV_CACHE_BYTES],
                                    _kernel_dims(rule, op, f, x))
    last = split(at_last, x1)
    mid = split([(a + z) / 2 for a, z in zip(at_first, at_last)], (x0 + x1) / 2)
    return tuple(n * (a + 4 * m + z) / 6 for a, m, z in zip(first, mid, last)), last
