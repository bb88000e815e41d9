"""Which tensor-core peak a matmul runs at, and which precisions a GPU can run.

Rules (stated in the README, "Assumptions"):
- A matmul runs in the wider of its weight and activation types: weight-only
  quantization (w4a16, w8a16, NVFP4/MXFP4 weights with 16-bit activations)
  dequantizes to 16 bits and uses the 16-bit peak; 4-bit weights with 8-bit float
  activations (MXFP4 W4A8, as gpt-oss serving) use the fp8 peak.
- NVFP4 / MXFP4 weights *and* activations run on FP4 tensor cores
  (`peak_fp4_TFLOPS`); a GPU without them (the field unset) is refused, naming
  the catalogue GPUs that have them.
- `peak_i8_TFLOPS` / `peak_i4_TFLOPS` = 0 mean the GPU has no integer tensor units
  (the mirrored system's V100 files): int8 / int4 GEMMs are refused there.
- 8-bit floats need fp8 tensor cores; without them the 16-bit peak is used (the
  kernel upcasts), with a warning.
- A KV-cache type needs the hardware path its attention kernel uses: bf16 needs a
  bf16 peak, fp8 an fp8 peak, int8 integer units; fp16 and fp32 run anywhere.
"""

from __future__ import annotations

import logging
from typing import Optional

from llm_analysis.catalogue.lookup import fp4_gpu_names
from llm_analysis.errors import ConfigError, warn
from llm_analysis.schema.formats import FP4_FORMATS, KV_CACHE_DTYPES
from llm_analysis.schema.dtype import DtypeConfig
from llm_analysis.schema.gpu import GPUConfig

logger = logging.getLogger(__name__)


def _is_fp4(fmt: str) -> bool:
    return fmt in FP4_FORMATS


def check_dtype_supported(gpu: GPUConfig, dtype: DtypeConfig) -> None:
    """Refuse a dtype the GPU has no tensor units for (one line: what and what is valid)."""
    if _is_fp4(dtype.activation_format) and not gpu.peak_fp4_TFLOPS:
        raise ConfigError(
            f"dtype {dtype.name!r} ({dtype.weight_format} weights and activations) needs FP4 tensor "
            f"cores; GPU {gpu.name!r} has none (peak_fp4_TFLOPS unset). GPUs with FP4: "
            f"{', '.join(fp4_gpu_names())}; or use FP4 weights only (w4a16e16-{dtype.activation_format})")
    if dtype.activation_format == "tf32" and not gpu.peak_tf32_TFLOPS:
        raise ConfigError(
            f"dtype {dtype.name!r} (TF32 matmuls of fp32 values) needs TF32 tensor cores; GPU {gpu.name!r} has "
            "none (peak_tf32_TFLOPS unset): use fp32 (w32a32e32), timed at its fp32 rate")
    bits = max(dtype.weight_bits, dtype.activation_bits)
    integer = dtype.activation_format == "int" or (
        dtype.weight_format == "int" and dtype.activation_bits <= 8)
    if integer and bits in (4, 8):
        field = "peak_i8_TFLOPS" if bits == 8 else "peak_i4_TFLOPS"
        if getattr(gpu, field) == 0:
            raise ConfigError(
                f"dtype {dtype.name!r} needs int{bits} tensor units; GPU {gpu.name!r} has none "
                f"({field} = 0). Use a weight-only dtype (w{dtype.weight_bits}a16e16) or 16-bit "
                "(w16a16e16)")


def matmul_peak_tflops(gpu: GPUConfig, dtype: DtypeConfig) -> float:
    """The dense tensor-core peak (TFLOP/s) a matmul of this dtype runs at."""
    check_dtype_supported(gpu, dtype)
    if _is_fp4(dtype.activation_format):
        return gpu.peak_fp4_TFLOPS
    bits = max(dtype.weight_bits, dtype.activation_bits)
    if bits >= 32:
        if dtype.activation_format == "tf32":  # (check_dtype_supported: the GPU has a TF32 rate)
            return gpu.peak_tf32_TFLOPS
        # fp32 matmuls do not use TF32 unless asked (PyTorch's default since 1.12,
        # torch.backends.cuda.matmul.allow_tf32 = False): the GPU's fp32 rate
        peak = gpu.peak_fp32_TFLOPS
        if peak is None:
            warn(logger, "%s lists no fp32 peak; assuming half the fp16 peak", gpu.name)
            peak = gpu.peak_fp16_TFLOPS / 2
        return peak
    if bits == 16:
        return gpu.peak_fp16_TFLOPS
    if bits == 8:
        if dtype.activation_format == "float" and dtype.weight_format != "int":
            if gpu.peak_fp8_TFLOPS is None:
                warn(logger, "%s has no fp8 tensor cores; fp8 matmuls timed at the fp16 peak", gpu.name)
                return gpu.peak_fp16_TFLOPS
            return gpu.peak_fp8_TFLOPS
        return gpu.peak_i8_TFLOPS
    return gpu.peak_i4_TFLOPS  # integer 4-bit weights and activations


def check_dtype_rate(gpu: GPUConfig, dtype: DtypeConfig) -> None:
    """Refuses a dtype the GPU has no units for and warns of a fallback rate (fp8 on a GPU without fp8 units):
    the checks of `matmul_peak_tflops`, run once with an analysis' setup so that every call's summary says it."""
    matmul_peak_tflops(gpu, dtype)


def kv_cache_bytes_per_element(name: Optional[str], gpu: GPUConfig) -> Optional[int]:
    """Bytes of one cached K/V element for a `kv_cache_dtype` name (None: the
    activation type, as before), refusing types the GPU cannot use."""
    if name is None:
        return None
    key = str(name).strip().lower()
    if key not in KV_CACHE_DTYPES:
        raise ConfigError(f"kv_cache_dtype = {name!r}; valid: {', '.join(KV_CACHE_DTYPES)}")
    kv = KV_CACHE_DTYPES[key]
    needs = {"bf16": "peak_bf16_TFLOPS", "fp8": "peak_fp8_TFLOPS", "int8": "peak_i8_TFLOPS"}
    field = needs.get(kv.requires or "")
    if field and not getattr(gpu, field):
        usable = [k for k, t in KV_CACHE_DTYPES.items()
                  if t.requires is None or getattr(gpu, needs[t.requires])]
        raise ConfigError(f"kv_cache_dtype = {name!r} needs {kv.requires} support, which GPU "
                          f"{gpu.name!r} lacks ({field} unset or 0); valid here: {', '.join(usable)}")
    return kv.bytes_per_element
