"""The configuration schema: pydantic v2 models of a GPU, data types and a parallelism
layout (the model's shapes are `model_schema.ModelConfig`, re-exported here), and
building them from dicts and JSON files with readable errors.

Every config rejects unknown fields and validates sizes; errors are `llm_analysis.errors.ConfigError`
naming field, value, what is valid and (when loading a file) the file. Architecture families are
*data* here (fields of ModelConfig), never branches on a model's name in the analysis. A leaf of the
data layer: it imports only leaves, `schema_base` and `model_schema` (and pydantic).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Literal, Optional

from pydantic import ValidationError, model_validator

from llm_analysis.errors import ConfigError
from llm_analysis.schema.formats import FP4_FORMATS
from llm_analysis.schema.hsdp import hsdp_sizes
from llm_analysis.schema.model import AttentionLayerType, ModelConfig
from llm_analysis.schema.base import StrictModel, format_validation_error

__all__ = ["ModelConfig", "GPUConfig", "DtypeConfig", "ParallelismConfig", "AttentionLayerType",
           "build_config", "load_config_file"]


class GPUConfig(StrictModel):
    """One GPU model and the links around it.

    Units: `mem_per_GPU_in_GB` is decimal GB (10**9 bytes): an HBM spec sheet's
    "80 GB" is 80 GiB (85.9 here), a GDDR board's printed figure is kept (ECC);
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


class DtypeConfig(StrictModel):
    """Bits of weights, activations and embeddings; `*_format` tells fp8 from int8."""

    name: str = "w16a16e16"
    weight_bits: int = 16
    activation_bits: int = 16
    embedding_bits: int = 16
    # 8 bits + float = fp8, + int = int8; nvfp4 / mxfp4: block-scaled 4-bit floats
    # (formats.FP4_FORMATS), their block scales counted in the bytes per value
    weight_format: Literal["float", "int", "nvfp4", "mxfp4"] = "float"
    activation_format: Literal["float", "int", "nvfp4", "mxfp4"] = "float"
    # Weight-only quantization stores scales: one `quant_scale_bits` scale per
    # `quant_group_size` weights (e.g. 4-bit, group 128, fp16 scales). None = no overhead.
    # An FP4 weight format fills them from the format (NVFP4 16 x 8 bits, MXFP4 32 x 8).
    quant_group_size: Optional[int] = None
    quant_scale_bits: int = 16
    source: str = ""

    @model_validator(mode="after")
    def _check(self) -> "DtypeConfig":
        valid = (4, 8, 16, 32)
        for f in ("weight_bits", "activation_bits", "embedding_bits"):
            if getattr(self, f) not in valid:
                raise ValueError(f"field {f!r} = {getattr(self, f)!r} must be one of {valid}")
        self._positive("quant_group_size", "quant_scale_bits")
        if self.weight_format == "int" and self.weight_bits > 16:
            raise ValueError(f"field 'weight_format' = 'int' with weight_bits = {self.weight_bits}")
        self._check_block_formats()
        return self

    def _check_block_formats(self) -> None:
        for f, bits in (("weight_format", self.weight_bits), ("activation_format", self.activation_bits)):
            fmt = FP4_FORMATS.get(getattr(self, f))
            if fmt is not None and bits != fmt.element_bits:
                raise ValueError(f"field {f!r} = {getattr(self, f)!r} needs {f.split('_')[0]}_bits = "
                                 f"{fmt.element_bits}, got {bits}")
        if self.activation_format in FP4_FORMATS and self.weight_format != self.activation_format:
            raise ValueError(f"field 'activation_format' = {self.activation_format!r} needs the same "
                             f"weight_format (FP4 GEMMs take both operands in it), got {self.weight_format!r}")
        fmt = FP4_FORMATS.get(self.weight_format)
        if fmt is None:
            return
        if self.quant_group_size is None:
            self.quant_group_size, self.quant_scale_bits = fmt.block_size, fmt.scale_bits
        elif (self.quant_group_size, self.quant_scale_bits) != (fmt.block_size, fmt.scale_bits):
            raise ValueError(
                f"weight_format {self.weight_format!r} has one {fmt.scale_bits}-bit scale per "
                f"{fmt.block_size} values; got quant_group_size = {self.quant_group_size}, "
                f"quant_scale_bits = {self.quant_scale_bits}")

    @property
    def weight_bytes_per_param(self) -> float:
        """Bytes per stored weight including quantization-scale overhead."""
        overhead = self.quant_scale_bits / self.quant_group_size if self.quant_group_size else 0.0
        return (self.weight_bits + overhead) / 8

    @property
    def activation_bytes_per_element(self) -> float:
        """Bytes per activation value, with the block scales of an FP4 format."""
        fmt = FP4_FORMATS.get(self.activation_format)
        return (fmt.bits_per_value if fmt else self.activation_bits) / 8


class ParallelismConfig(StrictModel):
    """GPUs = tp * cp * pp * dp (ranks TP, CP, PP, DP); experts over `ep_size` DP ranks (rdp = dp // ep);
    sp_size defaults to tp_size; cp_size / cp_comm: operators/context_parallel.py; HSDP dp_shard x
    dp_replicate = dp_size (hsdp.py); ZeRO shards over dp_shard x cp ranks (shard_group_size)."""

    tp_size: int = 1
    pp_size: int = 1
    dp_size: int = 1
    ep_size: int = 1
    sp_size: Optional[int] = None
    rdp_size: Optional[int] = None
    cp_size: int = 1
    cp_comm: Literal["ring", "all_to_all"] = "ring"
    dp_shard: Optional[int] = None
    dp_replicate: Optional[int] = None
    num_layers_in_first_pipeline_stage: Optional[int] = None  # uneven stages: operators/pipeline_layout.py
    num_layers_in_last_pipeline_stage: Optional[int] = None

    _hsdp = model_validator(mode="before")(classmethod(lambda cls, d: hsdp_sizes(d) if isinstance(d, dict) else d))

    @model_validator(mode="after")
    def _fill_and_check(self) -> "ParallelismConfig":
        self._positive("tp_size", "pp_size", "dp_size", "ep_size", "sp_size", "rdp_size", "cp_size",
                       "dp_shard", "dp_replicate")
        if self.sp_size is None:
            self.sp_size = self.tp_size
        if self.rdp_size is None:
            self.rdp_size = max(1, self.dp_size // self.ep_size)
        self.dp_shard, self.dp_replicate = self.dp_shard or self.dp_size, self.dp_replicate or 1  # HSDP: hsdp.py
        return self

    num_gpus = property(lambda self: self.tp_size * self.cp_size * self.pp_size * self.dp_size)
    shard_group_size = property(lambda self: self.dp_shard * self.cp_size)  # gradient reduction, ZeRO shards
    expert_shard_group_size = property(lambda s: max(1, s.rdp_size * s.dp_shard // s.dp_size) * s.cp_size)


# ---------------------------------------------------------------------------
# construction helpers with readable errors
# ---------------------------------------------------------------------------

def build_config(cls, data: Dict[str, Any], source: str | None = None):
    """Build a config from a dict, turning pydantic errors into one ConfigError."""
    try:
        return cls(**data)
    except ConfigError as err:
        if getattr(err, "validation_error", None) is None:
            raise
        raise ConfigError(format_validation_error(cls.__name__, err.validation_error, source, cls)) from None
    except ValidationError as err:
        raise ConfigError(format_validation_error(cls.__name__, err, source, cls)) from None
    except TypeError as err:
        raise ConfigError(f"Invalid {cls.__name__}{' in ' + source if source else ''}: {err}") from None


def load_config_file(cls, path: str | os.PathLike):
    from llm_analysis.utils import load_json_object
    path = Path(path)
    data = load_json_object(path, f"{cls.__name__} file {path}")
    return build_config(cls, data, source=str(path))
