"""Time per operator group: the one accumulator behind every latency breakdown.

Each operator's time (from the cost model) is filed under its group (attention, mlp, experts,
norm, embedding, lm_head; `attention_kv_cache` for attention that reads a KV
cache; `<tp|ep|pp|dp>_communication` for collectives) and under what bounds it
(compute, memory or communication).
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from .cost.affine import sum_affine
from .cost.model import CostModel
from .operators import Operator


def group_key(op: Operator) -> str:
    if op.kind == "collective":
        return f"{op.comm_group}_communication"
    if op.kind == "attention" and op.kv_cache_bytes_read_per_gpu:
        return "attention_kv_cache"
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
            g["bound"] = max(("compute", "memory", "communication"), key=lambda b: g[f"{b}_s"])
            g["arithmetic_intensity"] = g["flops_per_gpu"] / g["bytes_per_gpu"] if g["bytes_per_gpu"] else 0.0
        return self.groups

    @property
    def total_s(self) -> float:
        return sum(g["latency_s"] for g in self.groups.values())
