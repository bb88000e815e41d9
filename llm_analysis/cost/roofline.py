"""Roofline time of one operator on one GPU (Williams et al. 2009, "Roofline: an
insightful visual performance model", CACM 52(4)).

time = max(FLOPs / achieved FLOP/s, bytes / achieved bandwidth): compute and
memory traffic are assumed to overlap perfectly inside a kernel. An operator is
compute-bound when its arithmetic intensity (FLOPs per byte) exceeds the GPU's
ridge point (achieved FLOP/s over achieved bandwidth), memory-bound otherwise.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..config import DtypeConfig, GPUConfig
from ..constant import GB, TFLOPS

logger = logging.getLogger(__name__)


def peak_tflops_for_dtype(gpu: GPUConfig, dtype: DtypeConfig) -> float:
    """The dense tensor-core peak a matmul of this dtype runs at.

    Matmuls run in the wider of weight and activation types: weight-only
    quantization (w4a16, w8a16) dequantizes to 16 bits and uses the 16-bit peak.
    16-bit uses the bf16 peak when the card has one equal to fp16 (all current
    cards), otherwise fp16. 8-bit floats need fp8 tensor cores; without them the
    16-bit peak is used (the kernel upcasts), with a warning.
    """
    bits = max(dtype.weight_bits, dtype.activation_bits)
    if bits >= 32:
        peak = gpu.peak_tf32_TFLOPS or gpu.peak_fp32_TFLOPS
        if peak is None:
            logger.warning("%s lists no fp32/tf32 peak; assuming half the fp16 peak", gpu.name)
            peak = gpu.peak_fp16_TFLOPS / 2
        return peak
    if bits == 16:
        return gpu.peak_fp16_TFLOPS
    if bits == 8:
        if dtype.activation_format == "float" and dtype.weight_format == "float":
            if gpu.peak_fp8_TFLOPS is None:
                logger.warning("%s has no fp8 tensor cores; fp8 matmuls timed at the fp16 peak", gpu.name)
                return gpu.peak_fp16_TFLOPS
            return gpu.peak_fp8_TFLOPS
        return gpu.peak_i8_TFLOPS
    return gpu.peak_i4_TFLOPS  # 4-bit weights and activations


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
