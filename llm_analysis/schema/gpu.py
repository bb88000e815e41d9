"""The GPU config: one GPU model and the links around it (memory, bandwidths, peak
throughputs per data type, node and NVLink-domain sizes, NICs, collective latencies).

It rejects unknown fields and validates sizes; errors are `llm_analysis.errors.ConfigError`
naming field, value and what is valid (schema/loading.py adds the file)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import model_validator

from llm_analysis.schema.base import StrictModel
from llm_analysis.units import GiB

__all__ = ["GPUConfig"]


class GPUConfig(StrictModel):
    """One GPU model and the links around it.

    Units: `mem_per_GPU_in_GB` is read in GiB (x 1024**3 bytes, as the mirrored
    system reads it; `memory_bytes`): the spec sheet's "80 GB" of HBM is 80 GiB of
    DRAM; a GDDR6 board whose ECC is on by default loses 1/16 of it (A10 24 -> 22.5);
    bandwidths are decimal GB/s *per direction per GPU*; peaks are dense TFLOP/s
    (never the 2:4-sparsity figures); `intra_node_min_message_latency` is seconds.
    """

    name: str
    mem_per_GPU_in_GB: float
    hbm_bandwidth_in_GB_per_sec: float
    intra_node_bandwidth_in_GB_per_sec: float
    intra_node_min_message_latency: float
    peak_fp16_TFLOPS: float
    # default 2x / 4x fp16 (as the mirrored system); 0 = no integer tensor units (the
    # mirrored system's V100 files): int8 / int4 GEMMs are refused on that GPU
    peak_i8_TFLOPS: Optional[float] = None
    peak_i4_TFLOPS: Optional[float] = None
    # per GPU per direction: one 200 Gb/s HDR InfiniBand NIC per GPU = 25 GB/s. (The mirrored
    # system used 200 as a per-node figure; ours is per GPU, so its files are 8x optimistic.)
    inter_node_bandwidth_in_GB_per_sec: float = 25
    peak_bf16_TFLOPS: Optional[float] = None  # None: the hardware has no bf16 tensor path
    peak_fp8_TFLOPS: Optional[float] = None  # None: no fp8 tensor cores
    peak_tf32_TFLOPS: Optional[float] = None
    peak_fp32_TFLOPS: Optional[float] = None  # non-tensor fp32
    peak_fp4_TFLOPS: Optional[float] = None  # NVFP4/MXFP4 dense; None: no FP4 tensor cores
    intra_node_link: Literal["nvlink", "pcie", "xgmi", "ici"] = "nvlink"  # ici: TPU torus
    num_gpus_per_node: int = 8  # GPUs per host / compute tray (a GB200 tray holds 4)
    # GPUs joined by the fast link, across nodes too: 72 for a GB200/GB300 NVL72 rack,
    # the ICI slice of a TPU. Default: fast_link_group_size (the node).
    nvlink_domain_size: Optional[int] = None
    # Network interface cards per node and the speed of one (per direction), for the
    # collective model; None: one per GPU at inter_node_bandwidth_in_GB_per_sec.
    nics_per_node: Optional[int] = None
    nic_bandwidth_in_GB_per_sec: Optional[float] = None
    # GPUs joined all-to-all by the fast link; larger groups fall back to PCIe
    # (A40: NVLink bridges join pairs only). Default: the whole node.
    fast_link_group_size: Optional[int] = None
    pcie_bandwidth_in_GB_per_sec: float = 32.0
    # Latency model of a collective: max(min message latency, bandwidth term +
    # hops x hop latency). The mirrored system's `intra_node_min_message_latency`
    # is the floor; a hop (one ring step) costs ~1 us over NVLink/PCIe P2P and
    # ~5 us over InfiniBand (NCCL LL protocol figures).
    inter_node_min_message_latency: float = 1e-05
    intra_node_hop_latency: float = 1e-06
    inter_node_hop_latency: float = 5e-06
    source: str = ""

    @property
    def memory_bytes(self) -> float:
        """The GPU's memory in bytes: mem_per_GPU_in_GB GiB."""
        return self.mem_per_GPU_in_GB * GiB

    @property
    def vendor(self) -> str:
        """Who makes it, read off its link (which serving engines run on it): "amd" (Instinct GPUs, xGMI),
        "google" (TPUs, ICI), "nvidia" (every other catalogue GPU: NVLink or PCIe)."""
        return {"xgmi": "amd", "ici": "google"}.get(self.intra_node_link, "nvidia")

    @model_validator(mode="after")
    def _fill_and_check(self) -> "GPUConfig":
        self._positive("mem_per_GPU_in_GB", "hbm_bandwidth_in_GB_per_sec",
                       "intra_node_bandwidth_in_GB_per_sec", "peak_fp16_TFLOPS",
                       "inter_node_bandwidth_in_GB_per_sec", "peak_bf16_TFLOPS",
                       "peak_fp8_TFLOPS", "peak_tf32_TFLOPS", "peak_fp32_TFLOPS", "peak_fp4_TFLOPS",
                       "num_gpus_per_node", "fast_link_group_size", "pcie_bandwidth_in_GB_per_sec",
                       "nvlink_domain_size", "nics_per_node", "nic_bandwidth_in_GB_per_sec")
        self._positive("peak_i8_TFLOPS", "peak_i4_TFLOPS", lo_open=False)  # 0 = no integer tensor units
        self._positive("intra_node_min_message_latency", "inter_node_min_message_latency", "intra_node_hop_latency",
                       "inter_node_hop_latency", lo_open=False)  # seconds
        if self.peak_i8_TFLOPS is None:
            self.peak_i8_TFLOPS = 2 * self.peak_fp16_TFLOPS
        if self.peak_i4_TFLOPS is None:
            self.peak_i4_TFLOPS = 4 * self.peak_fp16_TFLOPS
        if self.fast_link_group_size is None:
            self.fast_link_group_size = self.num_gpus_per_node
        if self.nvlink_domain_size is None:
            self.nvlink_domain_size = self.fast_link_group_size
        if self.nvlink_domain_size < self.fast_link_group_size:
            raise ValueError(f"field 'nvlink_domain_size' = {self.nvlink_domain_size} is smaller than "
                             f"fast_link_group_size = {self.fast_link_group_size}")
        return self
