"""The calibrated cost model on a phase table (operators/phase_table.py): a new
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

from typing import List, Optional

from llm_analysis.model.phase_table import FIELDS, PhaseTable

KV = FIELDS.index("kv_cache_bytes_read_per_gpu")
_DIMS_TOL = 1e-9


def _copies(op) -> Optional[float]:
    """FLOPs of the probe matmul over 2 M N K (its copies), or None if its dims do not explain them."""
    m, n, k = op.kernel_dims
    c = op.flops_per_gpu / (2.0 * m * n * k) if m * n * k else 0.0
    return c if c > 0 and abs(c - round(c)) <= _DIMS_TOL * c else None


def kernel_plan(table: PhaseTable) -> Optional[list]:
    """Per operator: None (no shape), ("m", N, K, 2 N K copies) or ("q",); memoised on the
    table. None for the whole table when a matmul's dims do not explain its FLOPs."""
    plan = table.memo.get("calibrated_plan", False)
    if plan is not False:
        return plan
    plan = []
    for op in table.ops:
        if op.kind == "matmul" and len(op.kernel_dims) == 3:
            c = _copies(op)
            if c is None:
                plan = None
                break
            plan.append(("m", op.kernel_dims[1], op.kernel_dims[2], 2.0 * op.kernel_dims[1] * op.kernel_dims[2] * c))
        elif op.kind == "attention" and op.kernel_dims:
            plan.append(("q", op.kernel_dims[0] == 1))  # a decode step's single query
        else:
            plan.append(None)
    table.memo["calibrated_plan"] = plan
    return plan


def calibrated_table_splits(cm, table: PhaseTable, batch: int, x: float) -> List[tuple]:
    """`timing.table_splits` under the calibrated model `cm` (for a table `kernel_plan` accepts)."""
    plan = kernel_plan(table)
    keys = table.memo.get("group_keys")
    if keys is None:
        from llm_analysis.quantities.group_times import group_key
        keys = table.memo["group_keys"] = [group_key(op) for op in table.ops]
    flops, bytes_, kv = table.evaluate(batch, x, 0), table.evaluate(batch, x, 1), table.evaluate(batch, x, KV)
    collective, split, comm = cm.collective_s, cm.op_kernel_split_s, None
    out = []
    for i, (n, key, op, f, b, how) in enumerate(zip(table.repeats, keys, table.ops, flops, bytes_, plan)):
        if op.kind == "collective":
            comm = comm or table.evaluate(batch, x, 3)
            # (a table holds no overlapped collective: phase_table checks it)
            t = collective(op.collective, comm[i], op.comm_group_size, op.comm_group)
            out.append((n, key, True, 0.0, 0.0, t, f, b))
            continue
        if how is None:
            dims = op.kernel_dims
        elif how[0] == "m":
            dims = (max(1, round(f / how[3])), how[1], how[2])
        else:
            dims = (1 if how[1] else x,)
        c, m = split(op, f, b, kv[i], dims)
        out.append((n, key, False, c, m, 0.0, f, b))
    return out
