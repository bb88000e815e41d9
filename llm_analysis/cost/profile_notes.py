"""The notes a calibrated summary carries where its profile has no measured data for the
GPU or the dtype asked about: what stands in for the measurement, said once in words.

- A GPU whose profile is derived from another generation's (cost/profiles/<gen>.json with
  `derived_from`), or a GPU no profile lists (the nearest-spec stand-in): the profile's
  `fallback` text.
- A dtype whose GEMMs run at a peak other than the 16-bit one (fp8, fp4, int8, int4, tf32)
  with no plateau efficiency of its own in the profile: the calibrated model times them at
  the 16-bit GEMM plateau of that peak (cost/calibrated.py); the note says so. fp8 and FP4
  have their own parameters (`gemm_fp8_plateau_efficiency`, `gemm_fp4_plateau_efficiency`)
  where a profile gives them; fp8 on a GPU
  without fp8 units runs at the 16-bit peak (cost/precision.py), which the 16-bit plateau
  describes: no note.
- Weight-only int8 / int4 GEMMs on a profile whose streaming factor is the stated default
  (the profile predates the factor): the 16-bit streaming rate.

Nothing here changes a time; it only says what a time rests on.
"""

from __future__ import annotations

from typing import List

from llm_analysis.config import DtypeConfig, GPUConfig
from llm_analysis.cost.calibrated import PLATEAU_KEYS, _weight_only_int_bits, gemm_precision
from llm_analysis.cost.precision import matmul_peak_tflops
from llm_analysis.cost.profiles import Profile
from llm_analysis.schema.formats import FP4_FORMATS


def _matmul_precision(dtype: DtypeConfig) -> str:
    """The tensor-core precision a matmul of this dtype runs in (cost/precision.py's rules), as a word."""
    if dtype.activation_format in FP4_FORMATS:
        return "fp4"
    bits = max(dtype.weight_bits, dtype.activation_bits)
    if bits >= 32:
        return "tf32" if dtype.activation_format == "tf32" else "fp32"
    if bits == 8 and dtype.activation_format == "float" and dtype.weight_format != "int":
        return "fp8"
    return f"int{bits}"


def profile_notes(profile: Profile, gpu: GPUConfig, dtype: DtypeConfig) -> List[str]:
    """The fallback notes of a calibrated analysis on `gpu` with `dtype` (empty where every
    number the times rest on is the profile's own)."""
    notes = [profile.fallback] if profile.fallback else []
    label = profile.origin or profile.generation
    plateau = profile.values["gemm_plateau_efficiency"]
    peak_tflops = matmul_peak_tflops(gpu, dtype)
    # GEMMs at the 16-bit peak (16-bit dtypes, weight-only ones, fp8 upcast where the GPU has no
    # fp8 units) are what the 16-bit plateau measures: nothing borrowed
    precision = gemm_precision(dtype)
    own = peak_tflops == gpu.peak_fp16_TFLOPS or (precision != "16-bit" and PLATEAU_KEYS[precision] in profile.values)
    if not own:
        precision = _matmul_precision(dtype)
        notes.append(f"no {precision} GEMM efficiency in profile {label}: {precision} GEMMs are timed at its 16-bit "
                     f"GEMM plateau ({plateau:.0%}) of the {precision} peak ({peak_tflops:g} TFLOP/s)")
    bits = _weight_only_int_bits(dtype)
    key = f"weight_only_int{bits}_stream_factor"
    if bits and profile.sources.get(key, "").startswith("default"):
        notes.append(f"no int{bits} weight-only GEMM measurement in profile {label}: their weights stream at the "
                     "16-bit GEMM rate")
    return notes
