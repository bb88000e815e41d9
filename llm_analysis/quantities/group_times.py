"""Time per operator group: the one accumulator behind every latency breakdown.

Each operator's time (from the cost model) is filed under its group (attention, mlp, experts,
norm, embedding, lm_head; `attention_kv_cache` for attention that reads a KV
cache, `mixer_state` for mixer operators that read their state; `<tp|ep|pp|dp>_communication`
for collectives) and under what bounds it
(compute, memory or communication).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from llm_analysis.cost.affine import sum_affine
from llm_analysis.cost.model import CostModel, RooflineCostModel
from llm_analysis.model import Operator
from llm_analysis.model.phase_table import PhaseTable, phase_table


def group_key(op: Operator) -> str:
    if op.kind == "collective":
        return f"{op.comm_group}_communication"
    if op.kind == "attention" and op.kv_cache_bytes_read_per_gpu:
        return "attention_kv_cache"
    if op.kind in ("conv", "scan") and op.kv_cache_bytes_read_per_gpu:  # a mixer reading its state (mixers.py)
        return "mixer_state"
    return op.group


def _bound(compute_s: float, memory_s: float, comm_s: float) -> str:
    """What bounds a group: the largest of the three, the first on ties (as max() picks it)."""
    bound, top = ("memory", memory_s) if memory_s > compute_s else ("compute", compute_s)
    return "communication" if comm_s > top else bound


def finished_group(compute_s: float, memory_s: float, comm_s: float, flops: float, bytes_: float) -> Dict:
    """A group's entry as `GroupTimes.finish` leaves it."""
    return {"latency_s": compute_s + memory_s + comm_s, "compute_s": compute_s, "memory_s": memory_s,
            "communication_s": comm_s, "flops_per_gpu": flops, "bytes_per_gpu": bytes_,
            "bound": _bound(compute_s, memory_s, comm_s), "arithmetic_intensity": flops / bytes_ if bytes_ else 0.0}


def mean_step_group(entry: Dict, steps: int) -> Dict:
    """A decode phase's group entry (summed over its `steps` steps) as that of its mean step."""
    return finished_group(entry["compute_s"] / steps, entry["memory_s"] / steps, entry["communication_s"] / steps,
                          entry["flops_per_gpu"] / steps, entry["bytes_per_gpu"] / steps)


class PhaseGroups:
    """A phase's time per group, as `GroupTimes.finish` leaves it, made each time it is read
    (`finished`: every reader gets dicts of its own), from the phase's sums or a finished breakdown
    (copied): a caller that needs only the phase's total (the roofline bound beside a calibrated
    call: cost/choice.py) never makes it."""

    __slots__ = ("_build", "_groups", "_added")

    def __init__(self, build: Optional[Callable[[], Dict[str, Dict]]] = None, groups: Optional[Dict] = None):
        self._build, self._groups, self._added = build, groups, {}

    def add(self, key: str, entry: Dict[str, float]) -> None:
        """A group entry added to the phase after it was timed (ZeRO-3's exposed weight gather)."""
        self._added[key] = entry

    def finished(self, steps: int = 1) -> Dict[str, Dict[str, float]]:
        """The groups; with `steps` > 1, of a decode phase summed over that many steps, those of its
        mean step (`mean_step_group` of each: a table's are divided as they are made, one pass)."""
        if self._build is not None:
            groups = self._build(steps)
        else:
            groups = {k: v.copy() if steps == 1 else mean_step_group(v, steps) for k, v in self._groups.items()}
        for key, entry in self._added.items():
            groups[key] = entry.copy() if steps == 1 else mean_step_group(entry, steps)
        return groups


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
            g["bound"] = _bound(g["compute_s"], g["memory_s"], g["communication_s"])
            g["arithmetic_intensity"] = g["flops_per_gpu"] / g["bytes_per_gpu"] if g["bytes_per_gpu"] else 0.0
        return self.groups

    @property
    def total_s(self) -> float:
        return sum(g["latency_s"] for g in self.groups.values())


def timed_table(cost_model: CostModel, d, name: str, stage: Optional[int] = None,
                x: Optional[int] = None) -> Optional[PhaseTable]:
    """The describer's phase table (model/phase_table.py) at length x when `cost_model` times
    operators from a table (`CostModel.table_split_s`): the roofline itself (a subclass may time
    kernels otherwise: it gets operators), or a model that accepts the table (the calibrated one:
    `accepts_table`); else None (build operators)."""
    if type(cost_model) is RooflineCostModel:
        return phase_table(d, name, stage, x)
    accepts = getattr(cost_model, "accepts_table", None)
    table = phase_table(d, name, stage, x) if accepts is not None else None
    return table if table is not None and accepts(table) else None


def _group_layout(table: PhaseTable) -> Tuple[List[str], List[int], np.ndarray]:
    """The table's group keys in order of first appearance, each operator's position among them,
    and [operator, group] the repeat count of each operator in its group's column (0 elsewhere):
    sums per group are one product; worked out once per table."""
    layout = table.memo.get("group_layout")
    if layout is None:
        keys = [group_key(op) for op in table.ops]
        order = list(dict.fromkeys(keys))
        slots = [order.index(k) for k in keys]
        member = np.zeros((len(keys), len(order)))
        member[np.arange(len(keys)), slots] = table.repeats
        layout = table.memo["group_layout"] = (order, slots, member)
    return layout


def table_groups(table: PhaseTable, rows: Callable[[], np.ndarray], collectives: List[float],
                 handoff_s: float = 0.0) -> PhaseGroups:
    """The time per group of a table's operators, each counted its repeat count times, from
    [compute_s, memory_s, flops_per_gpu, bytes_per_gpu][operator] of one copy of each kernel
    (`rows()`) and the seconds of each distinct collective (`PhaseTable.collectives`), and pipeline
    stages' hand-offs of `handoff_s` (a group of their own: `pp_communication`); worked out when
    first read (`PhaseGroups`)."""
    def finished(steps: int) -> Dict[str, Dict[str, float]]:
        order, slots, member = _group_layout(table)
        comm = [0.0] * len(order)
        for repeats, t in zip(table.collective_repeats, collectives):
            for i, r in repeats:
                comm[slots[i]] += r * t
        sums = (rows() @ member).T
        if steps != 1:  # the mean step: each sum / steps (the same floats as `mean_step_group`)
            sums, comm = sums / steps, [k / steps for k in comm]
        groups = {}
        for key, (c, m, f, b), k in zip(order, sums.tolist(), comm):
            bound, top = ("memory", m) if m > c else ("compute", c)  # (`_bound`, written out: one call less a group)
            groups[key] = {"latency_s": c + m + k, "compute_s": c, "memory_s": m, "communication_s": k,
                           "flops_per_gpu": f, "bytes_per_gpu": b, "bound": "communication" if k > top else bound,
                           "arithmetic_intensity": f / b if b else 0.0}
        if handoff_s:
            groups["pp_communication"] = finished_group(0.0, 0.0, handoff_s / steps if steps != 1 else handoff_s,
                                                        0.0, 0.0)
        return groups
    return PhaseGroups(finished)


def table_time_s(table: PhaseTable, kernels: np.ndarray, collectives: List[float]) -> float:
    """`weighted_time_s` of a table's operators ([compute_s, memory_s][operator] of one copy of each
    kernel, seconds of each distinct collective)."""
    compute_s, memory_s = (kernels @ table.repeat_array).tolist()
    return compute_s + memory_s + sum(n * t for n, t in zip(table.collective_counts, collectives))
