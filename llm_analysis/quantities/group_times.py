"""Time per operator group: the one accumulator behind every latency breakdown.

Each operator's time (from the cost model) is filed under its group (attention, mlp, experts,
norm, embedding, lm_head; `attention_kv_cache` for attention that reads a KV
cache, `mixer_state` for mixer operators that read their state; `<tp|ep|pp|dp>_communication`
for collectives) and under what bounds it
(compute, memory or communication).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from llm_analysis.cost.affine import sum_affine, sum_max_affine
from llm_analysis.cost.model import CostModel, RooflineCostModel
from llm_analysis.model import Operator
from llm_analysis.model.phase_table import PhaseTable, used_phase_table


def group_key(op: Operator) -> str:
    if op.kind == "collective":
        return f"{op.comm_group}_communication"
    if op.kind == "attention" and op.kv_cache_bytes_read_per_gpu:
        return "attention_kv_cache"
    if op.kind in ("conv", "scan") and op.kv_cache_bytes_read_per_gpu:  # a mixer reading its state (mixers.py)
        return "mixer_state"
    return op.group


class GroupTimes:
    """Accumulates seconds per group with the compute / memory / communication split."""

    def __init__(self):
        self.groups: Dict[str, Dict[str, float]] = {}

    def add(self, key: str, compute_s: float, memory_s: float, comm_s: float, flops: float = 0.0,
            bytes_: float = 0.0) -> None:
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = {"latency_s": 0.0, "compute_s": 0.0, "memory_s": 0.0, "communication_s": 0.0,
                                    "flops_per_gpu": 0.0, "bytes_per_gpu": 0.0}
        g["latency_s"] += compute_s + memory_s + comm_s
        g["compute_s"] += compute_s
        g["memory_s"] += memory_s
        g["communication_s"] += comm_s
        g["flops_per_gpu"] += flops
        g["bytes_per_gpu"] += bytes_

    def add_ops(self, cost_model: CostModel, weighted: List[Tuple[int, Operator]],
                times: float = 1.0) -> "GroupTimes":
        """File (repeat count, operator) pairs, each repeated `times` more."""
        split, add = cost_model.op_split_s, self.add
        for n, op in weighted:
            t = times * n
            c, m, k = split(op)
            add(group_key(op), t * c, t * m, t * k, t * op.flops_per_gpu, t * op.bytes_per_gpu)
        return self

    def add_splits(self, splits, times: float = 1.0) -> "GroupTimes":
        """`add_ops` of `table_splits`."""
        add = self.add
        for n, key, _, c, m, k, f, b in splits:
            t = times * n
            add(key, t * c, t * m, t * k, t * f, t * b)
        return self

    def add_steps_splits(self, roofline, first, last, n: int) -> "GroupTimes":
        """`add_steps` of `table_splits` at the first and last step, for the roofline
        (`RooflineCostModel.steps_split_s` on the figures)."""
        span = max(n - 1, 1)
        F, B = roofline.flops_per_s, roofline.hbm_bytes_per_s
        for (r, key, coll, _, _, k, fa, ba), last_split in zip(first, last):
            f0, f1 = fa, (last_split[6] - fa) / span
            b0, b1 = ba, (last_split[7] - ba) / span
            if coll:
                c, m, k = 0.0, 0.0, n * k
            else:
                c, m = sum_max_affine(f0 / F, f1 / F, b0 / B, b1 / B, n)
            self.add(key, r * c, r * m, r * k, r * sum_affine(f0, f1, 0, n), r * sum_affine(b0, b1, 0, n))
        return self

    def add_simpson_splits(self, first, mid, last, n: int) -> "GroupTimes":
        """n decode steps from `table_splits` at the first, middle and last context (a cost
        model whose kernel times are not affine in the context: the calibrated one's
        `steps_split_s`, Simpson's rule; collectives n x the first step's)."""
        for a, b_, c_ in zip(first, mid, last):
            r, key, coll = a[0], a[1], a[2]
            comp, mem, comm = ((0.0, 0.0, n * a[5]) if coll else
                               tuple(n * (x + 4 * y + z) / 6 for x, y, z in zip(a[3:5], b_[3:5], c_[3:5])) + (0.0,))
            self.add(key, r * comp, r * mem, r * comm, r * n * (a[6] + c_[6]) / 2, r * n * (a[7] + c_[7]) / 2)
        return self

    def add_steps(self, cost_model: CostModel, first: List[Tuple[int, Operator]],
                  last: List[Tuple[int, Operator]], n: int) -> "GroupTimes":
        """File n decode steps whose operators' work goes linearly from `first` to `last`."""
        span = max(n - 1, 1)
        for (r, oa), (_, ob) in zip(first, last):
            c, m, k = cost_model.op_steps_split_s(oa, ob, n)
            f0, f1 = oa.flops_per_gpu, (ob.flops_per_gpu - oa.flops_per_gpu) / span
            b0, b1 = oa.bytes_per_gpu, (ob.bytes_per_gpu - oa.bytes_per_gpu) / span
            self.add(group_key(oa), r * c, r * m, r * k, r * sum_affine(f0, f1, 0, n), r * sum_affine(b0, b1, 0, n))
        return self

    def finish(self) -> Dict[str, Dict[str, float]]:
        for g in self.groups.values():
            # the largest of the three, the first on ties (as max() picks it), written out: a hot path
            c, m, k = g["compute_s"], g["memory_s"], g["communication_s"]
            bound, top = ("memory", m) if m > c else ("compute", c)
            g["bound"] = "communication" if k > top else bound
            g["arithmetic_intensity"] = g["flops_per_gpu"] / g["bytes_per_gpu"] if g["bytes_per_gpu"] else 0.0
        return self.groups

    @property
    def total_s(self) -> float:
        return sum(g["latency_s"] for g in self.groups.values())


def roofline_table(cost_model: CostModel, d, name: str, stage: Optional[int] = None,
                   x: Optional[int] = None) -> Optional[PhaseTable]:
    """The describer's phase table (operators/phase_table.py) at length x, once the phase
    kind has been used enough to be worth fitting (`used_phase_table`), when `cost_model`
    times kernels on the roofline, or times them from a table it accepts (the calibrated
    model: `accepts_table` / `table_splits`); else None (build operators)."""
    if type(cost_model) is RooflineCostModel:
        return used_phase_table(d, name, stage, x)
    accepts = getattr(cost_model, "accepts_table", None)
    table = used_phase_table(d, name, stage, x) if accepts is not None else None
    return table if table is not None and accepts(table) else None


def table_keys(table: PhaseTable) -> List[str]:
    keys = table.memo.get("group_keys")
    if keys is None:
        keys = table.memo["group_keys"] = [group_key(op) for op in table.ops]
    return keys


def table_splits(cost_model: RooflineCostModel, table: PhaseTable, batch: int, x: int):
    """(repeat, group key, is a collective, compute_s, memory_s, communication_s, flops,
    bytes) of every operator of a table at (batch, x), as the roofline's `op_split_s`
    gives them (its `kernel_split_s` inlined: this is the hot path of a sweep); a cost
    model with its own `table_splits` (the calibrated one) gives them itself."""
    if type(cost_model) is not RooflineCostModel:
        return cost_model.table_splits(table, batch, x)
    flops, bytes_ = table.evaluate(batch, x, 0), table.evaluate(batch, x, 1)
    F, B = cost_model.roofline.flops_per_s, cost_model.roofline.hbm_bytes_per_s
    collective, comm = cost_model.collective_s, None
    out = []
    for i, (n, key, op, f, b) in enumerate(zip(table.repeats, table_keys(table), table.ops, flops, bytes_)):
        if op.kind == "collective":
            comm = comm or table.evaluate(batch, x, 3)
            out.append((n, key, True, 0.0, 0.0, collective(op.collective, comm[i], op.comm_group_size,
                                                           op.comm_group), f, b))
        else:
            c, m = f / F, b / B
            out.append((n, key, False, c, 0.0, 0.0, f, b) if c >= m else (n, key, False, 0.0, m, 0.0, f, b))
    return out


def table_time_s(splits) -> float:
    """`weighted_time_s` of `table_splits`."""
    return sum(n * (c + m + k) for n, _, _, c, m, k, _, _ in splits)
