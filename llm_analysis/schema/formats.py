"""Number formats as data: block-scaled 4-bit floats and KV-cache element types.

A leaf module (no package imports) read by the schema (validation) and by
`precision.py` (peak selection and support checks).

Block-scaled formats store small elements plus one shared scale per block, so
the bits per value are `element_bits + scale_bits / block_size`:
- NVFP4: E2M1 elements, one FP8 E4M3 scale per 16 values, plus one FP32 scale
  per tensor (NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision
  Inference", 2025): 4 + 8/16 = 4.5 bits; the per-tensor scale is negligible.
- MXFP4: E2M1 elements, one E8M0 scale per 32 values (OCP Microscaling Formats
  (MX) Specification v1.0, 2023): 4 + 8/32 = 4.25 bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional


@dataclass(frozen=True)
class BlockFormat:
    element_bits: int
    block_size: int
    scale_bits: int
    citation: str

    @property
    def bits_per_value(self) -> float:
        return self.element_bits + self.scale_bits / self.block_size


FP4_FORMATS: Dict[str, BlockFormat] = {
    "nvfp4": BlockFormat(4, 16, 8, "NVIDIA NVFP4: E2M1 + E4M3 scale per 16 values"),
    "mxfp4": BlockFormat(4, 32, 8, "OCP MX v1.0 MXFP4: E2M1 + E8M0 scale per 32 values"),
}


@dataclass(frozen=True)
class KVCacheType:
    bytes_per_element: int
    # the hardware path the attention kernel needs: None (any GPU), "bf16", "fp8" or
    # "int8" (a GPU whose peak for it is unset or 0 cannot use this cache type)
    requires: Optional[str]


# `--kv_cache_dtype` names (the vLLM / TensorRT-LLM spellings) -> element type.
KV_CACHE_DTYPES: Dict[str, KVCacheType] = {
    "fp32": KVCacheType(4, None),
    "fp16": KVCacheType(2, None),
    "bf16": KVCacheType(2, "bf16"),
    "fp8": KVCacheType(1, "fp8"),
    "fp8_e4m3": KVCacheType(1, "fp8"),
    "fp8_e5m2": KVCacheType(1, "fp8"),
    "int8": KVCacheType(1, "int8"),
}
