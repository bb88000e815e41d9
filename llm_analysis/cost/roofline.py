"""Roofline time of one operator on one GPU (Williams et al. 2009, "Roofline: an
insightful visual performance model", CACM 52(4)).

time = max(FLOPs / achieved FLOP/s, bytes / achieved bandwidth): compute and
memory traffic are assumed to overlap perfectly inside a kernel. An operator is
compute-bound when its arithmetic intensity (FLOPs per byte) exceeds the GPU's
ridge point (achieved FLOP/s over achieved bandwidth), memory-bound otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_analysis.config import DtypeConfig, GPUConfig
from llm_analysis.errors import ConfigError
from llm_analysis.units import GB, TFLOPS
from llm_analysis.cost.precision import matmul_peak_tflops


def peak_tflops_for_dtype(gpu: GPUConfig, dtype: DtypeConfig) -> float:
    """The dense tensor-core peak a matmul of this dtype runs at (rules, FP4 and the
    refusals of unsupported types: `llm_analysis.cost.precision`)."""
    return matmul_peak_tflops(gpu, dtype)


@dataclass(frozen=True)
class Roofline:
    """Achieved compute and HBM bandwidth of one GPU."""

    flops_per_s: float
    hbm_bytes_per_s: float

    @property
    def ridge_point(self) -> float:
        """FLOPs per byte at which compute time equals memory time."""
        return self.flops_per_s / self.hbm_bytes_per_s

    def time_s(self, flops: float, bytes_moved: float) -> float:
        return max(flops / self.flops_per_s, bytes_moved / self.hbm_bytes_per_s)

    def bound(self, flops: float, bytes_moved: float) -> str:
        return "compute" if flops / self.flops_per_s >= bytes_moved / self.hbm_bytes_per_s else "memory"

    @classmethod
    def for_gpu(cls, tflops: float, hbm_GB_per_s: float) -> "Roofline":
        return cls(tflops * TFLOPS, hbm_GB_per_s * GB)


def check_achieved_rates(gpu_config, dtype_config, achieved_tflops, achieved_memory_bandwidth_GBs) -> None:
    """An achieved rate is finite, positive and at most the GPU's peak (an MFU
    above 1 is impossible)."""
    from llm_analysis.schema.options import MIN_EFFICIENCY, number
    for value, field, peak, unit, of in (
            (achieved_tflops, "achieved_tflops", peak_tflops_for_dtype(gpu_config, dtype_config), "TFLOP/s",
             f"the {dtype_config.name} peak"),
            (achieved_memory_bandwidth_GBs, "achieved_memory_bandwidth_GBs", gpu_config.hbm_bandwidth_in_GB_per_sec,
             "GB/s", "the HBM peak")):
        if value is None:
            continue
        v = number(value, field, 0.0, peak, what=f"in (0, {peak:g}] {unit}: {of} of {gpu_config.name}")
        if v < MIN_EFFICIENCY * peak:  # (schema/options.py MIN_EFFICIENCY: a slip, not a measurement)
            raise ConfigError(f"{field} = {value!r} must be in [{MIN_EFFICIENCY * peak:g}, {peak:g}] {unit} "
                              f"(below a millionth of the peak of {gpu_config.name} is taken for a slip)")
