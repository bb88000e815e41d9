"""The cost model: the one place an operator's time and bound are computed.

An operator record (`model/records.py`) says what is done (FLOPs, bytes moved,
collective and message size); a cost model says how long it takes on the
hardware. `CostModel` is the interface every time in the package goes
through; `RooflineCostModel` is the default (Williams et al. 2009 roofline for
kernels, the ring alpha-beta model of `links` for collectives). A calibrated
model (measured kernel rates per shape) subclasses `CostModel`, implements
`kernel_split_s` and `steps_split_s`, and is handed to `LLMAnalysis` in place of
the roofline: nothing else changes. A model may also time every operator of a
phase table at once from the table's figures (`table_kernels_s`,
`_growing_steps_split_s`: the same rules on arrays), which the phases use where
the describer has a table (model/phase_table.py).

Times are split three ways, (compute_s, memory_s, communication_s), with the
whole time of an operator filed under what bounds it, so that breakdowns can say
what limits each group of operators.

A cost model is treated as immutable once built: phase times are cached per
cost-model instance (`LayerDescriber.cost_memo`), so to change a parameter
(a new profile, other efficiencies) build a new instance (or use the facade's
`update_*` methods), never edit one in place.
"""

from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional, Tuple

import numpy as np

from llm_analysis.config import DtypeConfig, GPUConfig, ParallelismConfig
from llm_analysis.model.phase_table import BYTES_PER_GPU, COMM_BYTES, FLOPS_PER_GPU, PhaseTable
from llm_analysis.units import GB, TFLOPS
from llm_analysis.cost.affine import sum_max_affine
from llm_analysis.cost.links import Link, collective_timer, group_stride, link_for_group
from llm_analysis.cost.roofline import Roofline, peak_tflops_for_dtype

Split = Tuple[float, float, float]  # (compute_s, memory_s, communication_s)


class TableSplit(NamedTuple):
    """One copy of every operator of a phase table at one shape (`CostModel.table_split_s`)."""

    kernels: np.ndarray  # [compute_s, memory_s][operator]: each kernel's time filed under what bounds it
    collectives: List[float]  # seconds of each distinct collective (`PhaseTable.collectives`)


class TableSteps(NamedTuple):
    """n decode steps of a phase table's operators (`CostModel.table_steps_split_s`)."""

    first: TableSplit  # at the first step (a collective takes the same time at every step)
    figures: np.ndarray  # the figures at the first step [field, operator]
    # per kernel whose work grows with the context (`PhaseTable.growing`): (compute_s, memory_s)
    # summed over the steps, (compute_s, memory_s) at the last step, FLOPs and bytes per GPU summed
    # over the steps; every other operator: n times its first step
    growing: List[Tuple[int, Tuple[float, float], Tuple[float, float], Tuple[float, float]]]


class CostModel:
    """Operator -> seconds and bound, on one GPU of a parallel layout.

    Collectives are timed over the link their group uses (`links`), shared by
    every cost model; subclasses time kernels (`kernel_split_s`) and sums of a
    kernel over decode steps whose work grows linearly (`steps_split_s`).
    """

    def __init__(self, gpu: GPUConfig, dtype: DtypeConfig, parallelism: ParallelismConfig,
                 intra_node_memory_efficiency: float = 1.0, inter_node_memory_efficiency: float = 1.0,
                 num_gpus_per_node: Optional[int] = None):
        self.gpu = gpu
        self.dtype = dtype
        self.parallelism = parallelism
        self.intra_node_memory_efficiency = intra_node_memory_efficiency
        self.inter_node_memory_efficiency = inter_node_memory_efficiency
        self.num_gpus_per_node = num_gpus_per_node or gpu.num_gpus_per_node

    # ------------------------------------------------------------ kernels
    @property
    def kernel_floor_s(self) -> float:
        """The least time of any kernel that does work (its launch): none on a roofline."""
        return 0.0

    def without_kernel_floor(self) -> "CostModel":
        """The same model with kernels timed by their work alone (no launch floor): a caller that
        runs several operators' work as one kernel adds the floor once (serving/step_time.py)."""
        return self

    @property
    def flops_per_s(self) -> float:
        """Achieved FLOP/s of a large matmul (for FLOPs-based estimates and reports)."""
        raise NotImplementedError

    @property
    def hbm_bytes_per_s(self) -> float:
        """Achieved HBM bytes/s of a streaming pass."""
        raise NotImplementedError

    @property
    def peak_flops_per_s(self) -> float:
        """The dense tensor-core peak of the dtype (the denominator of MFU / HFU)."""
        return peak_tflops_for_dtype(self.gpu, self.dtype) * 1e12

    @property
    def achieved_tflops(self) -> float:
        return self.flops_per_s / TFLOPS

    @property
    def achieved_hbm_GB_per_s(self) -> float:
        return self.hbm_bytes_per_s / GB

    @property
    def ridge_point(self) -> float:
        """FLOPs per byte above which a kernel is compute-bound."""
        return self.flops_per_s / self.hbm_bytes_per_s

    def kernel_split_s(self, flops: float, bytes_moved: float) -> Tuple[float, float]:
        """(compute_s, memory_s) of one kernel; one of them is 0 (the time is filed
        under what bounds it)."""
        raise NotImplementedError

    def steps_split_s(self, first, last, n: int) -> Tuple[float, float]:
        """(compute_s, memory_s) summed over n steps of a kernel whose FLOPs and
        bytes go linearly from operator `first` to operator `last`."""
        raise NotImplementedError

    def memory_pass_s(self, bytes_moved: float) -> float:
        """A pass that only streams bytes through HBM (optimizer step)."""
        return self.kernel_split_s(0.0, bytes_moved)[1]

    def attention_backward_slowdown(self, seq_len: float) -> float:
        """The flash-attention backward's time per executed FLOP over its forward's, at a query length
        of `seq_len` per GPU: 1 here (a bound runs every kernel at its peak rate)."""
        return 1.0

    # Whether training runs separate FP8 cast kernels beside its GEMMs (training/fp8_casts.py):
    # a framework's cost, not the work's, so no roofline (a lower bound) charges them
    times_fp8_training_casts = False
    # Whether training times the cross-entropy passes over the logits (training/loss.py): likewise
    times_training_loss = False

    # -------------------------------------------------------- collectives
    _STRIDE_GROUPS = ("tp", "cp", "pp", "dp", "dp_replicate", "ep", "edp")

    def link(self, comm_group: str, group_size: int) -> Link:
        """The link a `comm_group` of `group_size` GPUs talks over. Ranks are laid
        out TP fastest, then CP, PP and DP (`links.group_stride`); experts'
        data-parallel group `edp` takes every ep-th DP rank."""
        stride = group_stride(self.parallelism, comm_group)
        return link_for_group(self.gpu, group_size, stride, self.intra_node_memory_efficiency,
                              self.inter_node_memory_efficiency, self.num_gpus_per_node)

    def collective_timer(self, kind: str, group_size: int, comm_group: str) -> Callable[[float], float]:
        """`collective_s` of this collective and group as a function of the bytes per GPU (the
        group's link worked out once per cost model: it is immutable, see the module docstring)."""
        key = (kind, group_size, comm_group)
        timers = self.__dict__.setdefault("_collective_timers", {})
        timer = timers.get(key)
        if timer is None:
            timer = timers[key] = collective_timer(kind, group_size, self.link(comm_group, group_size))
        return timer

    def collective_s(self, kind: str, bytes_per_gpu: float, group_size: int, comm_group: str) -> float:
        return self.collective_timer(kind, group_size, comm_group)(bytes_per_gpu)

    def collective_op_s(self, op) -> float:
        """A collective operator's exposed time: its collective minus the kernel work
        it runs under (`overlap_flops_per_gpu` / `overlap_bytes_per_gpu`: ring
        attention sends the next K/V block while the current block's attention
        runs, as Megatron-CP / TransformerEngine do on a separate stream)."""
        t = self.collective_s(op.collective, op.comm_bytes_per_gpu, op.comm_group_size, op.comm_group)
        if op.overlap_flops_per_gpu or op.overlap_bytes_per_gpu:
            t = max(0.0, t - sum(self.kernel_split_s(op.overlap_flops_per_gpu, op.overlap_bytes_per_gpu)))
        return t

    # ---------------------------------------------------------- operators
    def op_split_s(self, op) -> Split:
        if op.kind == "collective":
            return 0.0, 0.0, self.collective_op_s(op)
        c, m = self.kernel_split_s(op.flops_per_gpu, op.bytes_per_gpu)
        return c, m, 0.0

    def op_time_s(self, op) -> float:
        c, m, k = self.op_split_s(op)
        return c + m + k

    def op_bound(self, op) -> str:
        """'compute' | 'memory' | 'communication'."""
        split = self.op_split_s(op)
        if op.kind == "collective":
            return "communication"
        return "compute" if split[0] >= split[1] else "memory"

    def op_steps_split_s(self, first, last, n: int) -> Split:
        """An operator summed over n decode steps (collectives do not grow)."""
        if first.kind == "collective":
            return 0.0, 0.0, n * self.op_time_s(first)
        c, m = self.steps_split_s(first, last, n)
        return c, m, 0.0

    # -------------------------------------------------------- phase tables
    # A model that times the operators of a phase table (model/phase_table.py) from the table's
    # figures, every operator at once, implements `table_kernels_s` and `_growing_steps_split_s`:
    # the roofline below, the calibrated model (cost/calibrated_table.py). What it gives for one
    # operator is what `op_split_s` / `steps_split_s` give for that operator built at that shape.

    def table_split_s(self, table: PhaseTable, figures: np.ndarray, x: float) -> TableSplit:
        """Every operator of `table` at the shape whose figures are `figures` (`PhaseTable.figure_array`,
        length x): the kernels' times (a collective does no kernel's work) and each distinct
        collective's (a table holds no overlapped collective: phase_table checks it)."""
        kernels = self.table_kernels_s(table, figures, x)
        if table.collectives_work:
            kernels[:, table.is_collective] = 0.0
        return TableSplit(kernels, self.table_collectives_s(table, figures))

    def table_collectives_s(self, table: PhaseTable, figures: np.ndarray) -> List[float]:
        """The seconds of each distinct collective of `table` (`PhaseTable.collectives`) at `figures`."""
        if not table.collectives:
            return []
        comm = figures[COMM_BYTES].tolist()
        return [timer(comm[i]) for i, timer in self._table_collective_timers(table)]

    def table_times_s(self, table: PhaseTable, figures: np.ndarray, x: float) -> Tuple[np.ndarray, List[float]]:
        """`table_split_s` without the split: every operator's kernel seconds [operator] (a collective's
        are not 0 where it carries work: a caller sums kernels only) and each distinct collective's, for
        sums that need no breakdown by bound (a training stage's)."""
        return self.table_kernels_s(table, figures, x).sum(axis=0), self.table_collectives_s(table, figures)

    def _table_collective_timers(self, table: PhaseTable) -> List[Tuple[int, Callable[[float], float]]]:
        """(index, `collective_timer`) of each distinct collective of `table`, looked up once per
        (table, cost model)."""
        key = ("collective_timers", id(self))
        entry = table.memo.get(key)
        if entry is None or entry[0] is not self:  # (the entry keeps its model: an id is its own)
            timers = [(i, self.collective_timer(op.collective, op.comm_group_size, op.comm_group))
                      for i, op in table.collectives]
            entry = table.memo[key] = (self, timers)
        return entry[1]

    def table_kernels_s(self, table: PhaseTable, figures: np.ndarray, x: float) -> np.ndarray:
        """[compute_s, memory_s][operator] of every operator's figures as a kernel."""
        raise NotImplementedError

    def table_steps_split_s(self, table: PhaseTable, batch: int, x0: int, n: int) -> TableSteps:
        """n decode steps of `batch` sequences at contexts x0 .. x0 + n - 1 (`op_steps_split_s` for
        every operator): an operator whose FLOPs and bytes do not grow with the context (all but the
        table's `growing` kernels; every collective) costs n times its first step; a growing kernel
        is summed by the model's `_growing_steps_split_s`."""
        figures = table.figure_array(batch, x0)
        first = self.table_split_s(table, figures, x0)
        growing = []
        for i in table.growing if n > 1 else ():
            a, z = figures[:, i].tolist(), table.operator_figures(i, batch, x0 + n - 1)
            summed, last = self._growing_steps_split_s(table, i, tuple(first.kernels[:, i].tolist()), a, z, x0, n)
            # FLOPs and bytes grow linearly over the steps: n times their mean
            growing.append((i, summed, last, (n * (a[FLOPS_PER_GPU] + z[FLOPS_PER_GPU]) / 2,
                                              n * (a[BYTES_PER_GPU] + z[BYTES_PER_GPU]) / 2)))
        return TableSteps(first, figures, growing)

    def _growing_steps_split_s(self, table: PhaseTable, i: int, first: Tuple[float, float], at_first: List[float],
                               at_last: List[float], x0: int, n: int) -> Tuple[Tuple[float, float], ...]:
        """((compute_s, memory_s) summed over n steps, (compute_s, memory_s) at the last step) of
        table kernel i, whose figures [field] go linearly from `at_first` to `at_last` (its time at
        the first step: `first`)."""
        raise NotImplementedError


class RooflineCostModel(CostModel):
    """Roofline kernels: time = max(FLOPs / achieved FLOP/s, bytes / achieved
    bandwidth) (cost/roofline.py). Achieved rates: `achieved_tflops` /
    `achieved_memory_bandwidth_GBs` when given, else the dtype's dense peak
    (`peak_tflops_for_dtype`) and the HBM bandwidth times their efficiencies."""

    def __init__(self, gpu: GPUConfig, dtype: DtypeConfig, parallelism: ParallelismConfig,
                 flops_efficiency: float = 1.0, hbm_memory_efficiency: float = 1.0,
                 intra_node_memory_efficiency: float = 1.0, inter_node_memory_efficiency: float = 1.0,
                 achieved_tflops: Optional[float] = None, achieved_memory_bandwidth_GBs: Optional[float] = None,
                 num_gpus_per_node: Optional[int] = None):
        super().__init__(gpu, dtype, parallelism, intra_node_memory_efficiency, inter_node_memory_efficiency,
                         num_gpus_per_node)
        self._tflops = (achieved_tflops if achieved_tflops is not None
                        else peak_tflops_for_dtype(gpu, dtype) * flops_efficiency)
        self._hbm_GB_per_s = (achieved_memory_bandwidth_GBs if achieved_memory_bandwidth_GBs is not None
                              else gpu.hbm_bandwidth_in_GB_per_sec * hbm_memory_efficiency)
        self.roofline = Roofline.for_gpu(self._tflops, self._hbm_GB_per_s)
        self._table_rates = np.array((self.roofline.flops_per_s, self.roofline.hbm_bytes_per_s))[:, None]

    @property
    def achieved_tflops(self) -> float:
        return self._tflops

    @property
    def achieved_hbm_GB_per_s(self) -> float:
        return self._hbm_GB_per_s

    @property
    def flops_per_s(self) -> float:
        return self.roofline.flops_per_s

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.roofline.hbm_bytes_per_s

    @property
    def ridge_point(self) -> float:
        return self.roofline.ridge_point

    def kernel_split_s(self, flops: float, bytes_moved: float) -> Tuple[float, float]:
        c = flops / self.roofline.flops_per_s
        m = bytes_moved / self.roofline.hbm_bytes_per_s
        return (c, 0.0) if c >= m else (0.0, m)

    def steps_split_s(self, first, last, n: int) -> Tuple[float, float]:
        span = max(n - 1, 1)
        f0, f1 = first.flops_per_gpu, (last.flops_per_gpu - first.flops_per_gpu) / span
        b0, b1 = first.bytes_per_gpu, (last.bytes_per_gpu - first.bytes_per_gpu) / span
        F, B = self.roofline.flops_per_s, self.roofline.hbm_bytes_per_s
        return sum_max_affine(f0 / F, f1 / F, b0 / B, b1 / B, n)

    def memory_pass_s(self, bytes_moved: float) -> float:
        return bytes_moved / self.roofline.hbm_bytes_per_s

    def table_kernels_s(self, table: PhaseTable, figures: np.ndarray, x: float) -> np.ndarray:
        """`kernel_split_s` of every operator's figures: (FLOPs, bytes) / (FLOP/s, bytes/s), the
        larger filed whole under what bounds it."""
        c_m = figures[FLOPS_PER_GPU:BYTES_PER_GPU + 1] / self._table_rates
        compute_bound = c_m[0] >= c_m[1]
        c_m[0] *= compute_bound
        c_m[1] *= ~compute_bound
        return c_m

    def table_times_s(self, table: PhaseTable, figures: np.ndarray, x: float) -> Tuple[np.ndarray, List[float]]:
        """`CostModel.table_times_s`: each kernel's max(FLOPs / FLOP/s, bytes / bytes/s), not filed by bound."""
        return (figures[FLOPS_PER_GPU:BYTES_PER_GPU + 1] / self._table_rates).max(axis=0), \
            self.table_collectives_s(table, figures)

    def table_total_s(self, table: PhaseTable, figures: np.ndarray) -> float:
        """The seconds of every operator of `table` at `figures` (`PhaseTable.figure_array`), each its
        repeat count times: `table_split_s`'s kernels and collectives summed, without the split into
        compute and memory (a lower bound reports the total alone)."""
        F, B = self.roofline.flops_per_s, self.roofline.hbm_bytes_per_s
        kernels_s = float(np.maximum(figures[FLOPS_PER_GPU] / F, figures[BYTES_PER_GPU] / B) @ table.kernel_repeats)
        if not table.collectives:
            return kernels_s
        comm = figures[COMM_BYTES]
        return kernels_s + sum(n * timer(float(comm[i])) for n, (i, timer)
                               in zip(table.collective_counts, self._table_collective_timers(table)))

    def table_steps_total_s(self, table: PhaseTable, batch: int, x0: int, n: int) -> float:
        """n decode steps of `batch` sequences at contexts x0 .. x0 + n - 1: `table_steps_split_s`
        summed, without the split (every operator n times its first step's seconds, but for the
        kernels whose work grows with the context: their closed-form sums over the steps)."""
        figures = table.figure_array(batch, x0)
        total_s = n * self.table_total_s(table, figures)
        for i in table.growing if n > 1 else ():
            a, z = figures[:, i].tolist(), table.operator_figures(i, batch, x0 + n - 1)
            summed, _ = self._growing_steps_split_s(table, i, (0.0, 0.0), a, z, x0, n)
            once_s = sum(self.kernel_split_s(a[FLOPS_PER_GPU], a[BYTES_PER_GPU]))
            total_s += table.repeats[i] * (sum(summed) - n * once_s)
        return total_s

    def _growing_steps_split_s(self, table: PhaseTable, i: int, first: Tuple[float, float], at_first: List[float],
                               at_last: List[float], x0: int, n: int) -> Tuple[Tuple[float, float], ...]:
        """The closed form of `steps_split_s`."""
        span, F, B = max(n - 1, 1), self.roofline.flops_per_s, self.roofline.hbm_bytes_per_s
        f0, f1 = at_first[FLOPS_PER_GPU], at_last[FLOPS_PER_GPU]
        b0, b1 = at_first[BYTES_PER_GPU], at_last[BYTES_PER_GPU]
        return (sum_max_affine(f0 / F, (f1 - f0) / span / F, b0 / B, (b1 - b0) / span / B, n),
                self.kernel_split_s(f1, b1))


__all__ = ["CostModel", "RooflineCostModel", "Split", "TableSplit", "TableSteps", "with_cost_model"]


def with_cost_model(a, model):
    """A shallow view of the analysis whose operators are timed by `model` (configs
    and the describer are shared, so nothing is rebuilt): a new instance with the analysis'
    attributes (as copy.copy makes it, without its generic protocol: a call's bound needs one)."""
    view = object.__new__(type(a))
    view.__dict__.update(a.__dict__)
    view.__dict__["cost_model"] = model
    return view
