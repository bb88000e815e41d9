"""Calibration profiles: every fitted or assumed parameter of the calibrated
performance model, one JSON file per GPU generation (`cost/profiles/<gen>.json`).

File format::

    {"generation": "hopper",
     "gpus": {"h100-sxm-80gb": {"num_sms": 132, "source": "<optional>"}, ...},
     "parameters": {"<key>": {"value": <number or list>, "source": "<where it came from>"}, ...}}

Every key must be one of `PARAMETERS` (an unknown key is refused with a
`ConfigError` naming it); every value carries its source and is checked against its
kind (`KINDS`: an efficiency is at most 1, a ratio of two rates may exceed it; a table
must be monotone where the physics says so). Profiles are parsed once and cached: the
per-operator cost functions only read attributes.

A generation without measurements of its own is a *derived* profile::

    {"generation": "blackwell-ultra", "derived_from": "blackwell",
     "fallback": "<the note the summary carries: what is assumed and why>",
     "gpus": {"b300-270gb": {"num_sms": 160, "source": "..."}},
     "parameters": {<only the values that differ from the base, each with its source>}}

Its efficiencies are the base generation's; the cost model applies them to the GPU's own
spec sheet (dense peaks, HBM bandwidth, links, SM count), which is how a generation's
profile is scaled to a GPU it was not measured on. The `fallback` text goes into the
`notes` of every calibrated summary on those GPUs (cost/profile_notes.py).

A GPU no profile lists (a user's GPUConfig) is answered with the profile of the listed
GPU nearest to it in spec (`profile_for_gpu`), again with a note saying so, never an
exception.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from llm_analysis.errors import ConfigError, warn

logger = logging.getLogger(__name__)

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"

# What each kind of parameter may hold: (least, whether the least is allowed, most, meaning).
# An "efficiency" is achieved / the hardware's own limit (a rate the spec sheet states): it can
# never exceed 1. A "ratio" compares two achieved rates and may exceed 1 (NVLink SHARP reduces
# in the switch, so its all-reduce bus bandwidth beats the ring's line rate: 1.067 on 8 H100);
# above 2 it is taken for a typo. "ratio0": a ratio where 0 means the feature is absent.
KINDS: dict[str, tuple[float, bool, float, str]] = {
    "efficiency": (0.0, False, 1.0, "0 < v <= 1 (achieved / spec: cannot exceed 1)"),
    "ratio": (0.0, False, 2.0, "0 < v <= 2 (a ratio of two achieved rates)"),
    "ratio0": (0.0, True, 2.0, "0 <= v <= 2 (a ratio of two achieved rates; 0: the feature is absent)"),
    "seconds": (0.0, True, 1.0, "0 <= v <= 1 seconds"),
    "bytes": (0.0, False, 1e12, "0 < v <= 1e12 bytes"),
    "count": (0.0, False, 1e9, "0 < v <= 1e9"),
}
# MoE kernel families measured apart from vLLM's fused MoE (whose shares are the unsuffixed
# moe_gemm_*share keys): the suffix of their share keys -> what was measured
MOE_KERNEL_FAMILIES = {
    "sglang": "SGLang's fused MoE kernels (experts not split over GPUs)",
    "trtllm": "TensorRT-LLM's fused MoE kernels (experts not split over GPUs)",
    "sglang_wide_ep": "SGLang's wide expert-parallel MoE (DeepEP + DeepGEMM) expert computation",
}
# key -> (kind, meaning). kind: one of KINDS, or "tiles" (a table: list of [M, N, relative
# efficiency], positive integer tile sides, 0 < relative efficiency <= 1, never rising as the
# tile shrinks: a smaller tile reuses its operands less).
PARAMETERS: dict[str, tuple[str, str]] = {
    "intra_bus_efficiency": ("efficiency", "ring bus bandwidth / line rate of NVLink or xGMI"),
    "pcie_bus_efficiency": ("efficiency", "ring bus bandwidth / line rate over PCIe"),
    "net_efficiency": ("efficiency", "achieved / line rate of one NIC"),
    "nvls_busbw_factor": ("ratio0", "NVLink-SHARP all-reduce bus bandwidth / line rate (0: none)"),
    "tree_bw_factor": ("ratio", "tree all-reduce bus bandwidth / ring bus bandwidth"),
    "base_latency_s": ("seconds", "fixed cost of one collective call"),
    "nvls_latency_s": ("seconds", "fixed cost of an NVLink-SHARP all-reduce"),
    "intra_hop_latency_s": ("seconds", "one ring step over NVLink/xGMI"),
    "pcie_hop_latency_s": ("seconds", "one ring step over PCIe"),
    "net_hop_latency_s": ("seconds", "one step over the network"),
    "alltoall_net_per_peer_latency_s": ("seconds", "extra cost per remote peer of an all-to-all"),
    "nvlink_half_saturation_bytes": ("bytes", "message per GPU at half the NVLink bus-bandwidth plateau"),
    "pcie_half_saturation_bytes": ("bytes", "message per GPU at half the PCIe bus-bandwidth plateau"),
    "net_half_saturation_bytes": ("bytes", "message per GPU at half the network bandwidth plateau"),
    "gemm_plateau_efficiency": ("efficiency", "large 16-bit GEMM throughput / dense peak"),
    "gemm_fp8_plateau_efficiency": ("efficiency", "large fp8 GEMM throughput / dense fp8 peak"),
    "gemm_fp4_plateau_efficiency": ("efficiency", "large FP4 (NVFP4 / MXFP4 weights and activations) GEMM "
                                                  "throughput / dense FP4 peak"),
    "moe_gemm_share": ("efficiency", "routed experts' grouped GEMM throughput / one dense GEMM of the per-expert "
                                     "shape (M = tokens per expert), on 16-bit tensor cores"),
    "moe_gemm_fp8_share": ("efficiency", "the same on fp8 tensor cores (block-scaled FP8 experts)"),
    "moe_gemm_fp4_share": ("efficiency", "the same on FP4 tensor cores (NVFP4 experts)"),
    # the same shares measured on other serving engines' MoE kernels (a serving engine's
    # `moe_kernels`; absent: cost/calibrated.py `moe_gemm_share` falls back)
    **{f"{key}_{family}": ("efficiency", f"{key} of {name}")
       for family, name in MOE_KERNEL_FAMILIES.items()
       for key in ("moe_gemm_share", "moe_gemm_fp8_share", "moe_gemm_fp4_share")},
    # what a quantized linear (fp8 / FP4 activations) takes at decode sizes beyond streaming its weights:
    # the activation quantize kernel(s) and the low-precision kernel's fixed costs (cost/calibrated.py
    # `quantized_gemm_terms`; read off measured GEMMs by benchmarks/measured_operator_values.py)
    "gemm_fp8_fixed_s": ("seconds", "time an fp8 linear (activation quantize + GEMM) takes beyond streaming its "
                                    "weights, over a 16-bit GEMM's"),
    "gemm_fp4_fixed_s": ("seconds", "the same for an FP4 linear (NVFP4 / MXFP4 weights and activations)"),
    "gemm_fp8_k_serial_s": ("seconds", "seconds per element of K of an fp8 GEMM's main loop at small M "
                                       "(K not split: the least streaming time is this x K)"),
    "gemm_fp4_k_serial_s": ("seconds", "the same for an FP4 GEMM"),
    # the rate a fused MoE layer streams its reached experts' weights at decode sizes (one token per
    # expert), per tensor-core precision, vLLM's kernels unsuffixed, other engines' suffixed
    # (benchmarks/moe_stream_values.py; absent: cost/calibrated.py `moe_stream_efficiency` falls back)
    **{f"{key}{suffix}": ("efficiency", f"routed experts' weight streaming at decode sizes / HBM spec{what}")
       for suffix, what in (("", ""), *((f"_{family}", f" ({name})") for family, name in MOE_KERNEL_FAMILIES.items()))
       for key in ("moe_stream_efficiency", "moe_fp8_stream_efficiency", "moe_fp4_stream_efficiency")},
    # a fused MoE layer's fixed time per expert GEMM at decode sizes beyond streaming the reached
    # experts' weights, same keying (benchmarks/moe_fixed_values.py; absent: 0, cost/calibrated.py
    # `moe_gemm_fixed_s`)
    **{f"{key}{suffix}": ("seconds", f"fused MoE fixed time per expert GEMM at decode sizes{what}")
       for suffix, what in (("", ""), *((f"_{family}", f" ({name})") for family, name in MOE_KERNEL_FAMILIES.items()))
       for key in ("moe_gemm_fixed_s", "moe_fp8_gemm_fixed_s", "moe_fp4_gemm_fixed_s")},
    "gemm_tile_shapes": ("tiles", "threadblock tiles [M, N, relative efficiency] the GEMM heuristics choose from"),
    "gemm_k_half": ("count", "K at which the main loop equals prologue+epilogue time"),
    "gemm_splitk_min_k": ("count", "least K per split-K slice when a GEMM has fewer tiles than SMs"),
    "gemm_wave_tail": ("ratio0", "share of a partly filled last wave's idle SM slots a 16-bit GEMM pays "
                                 "(1: whole waves; 0: a stream-K schedule, no idle tail)"),
    "hbm_efficiency": ("efficiency", "streaming bandwidth plateau / HBM spec"),
    "hbm_half_saturation_bytes": ("bytes", "bytes moved at half the streaming plateau"),
    "weight_only_int8_stream_factor": ("ratio", "int8 weight-only GEMM streaming / 16-bit GEMM streaming "
                                                "(x hbm_efficiency: at most 1)"),
    "weight_only_int4_stream_factor": ("ratio", "int4 weight-only GEMM streaming / 16-bit GEMM streaming "
                                                "(x hbm_efficiency: at most 1)"),
    "attn_prefill_efficiency": ("efficiency", "flash-attention forward throughput / dense peak (long sequences)"),
    "attn_prefill_half_seq": ("count", "sequence length at half the flash-attention plateau"),
    "attn_decode_hbm_efficiency": ("efficiency", "paged-attention KV streaming / HBM spec"),
    "attn_decode_fixed_s": ("seconds", "what one paged-attention decode call takes beyond streaming its KV "
                                       "cache (the attention op's fixed costs inside a CUDA graph)"),
    "kernel_floor_graph_s": ("seconds", "least time per kernel under CUDA graphs (serving)"),
    "kernel_floor_eager_s": ("seconds", "least time per kernel in eager mode (training)"),
    "kernel_floor_native_s": ("seconds", "least time per kernel launched from C++ without CUDA graphs "
                                         "(FasterTransformer)"),
    "training_compute_efficiency": ("efficiency", "compute rate of a training step's kernels / the operator "
                                                  "benchmarks' (long steps run at the power-limited sustained "
                                                  "clock, and overlapped communication kernels hold SMs)"),
}
# ratios whose product with an efficiency is itself an efficiency (a rate below the spec)
_RATIO_OF = {"weight_only_int8_stream_factor": "hbm_efficiency", "weight_only_int4_stream_factor": "hbm_efficiency"}
# Parameters added after the first profiles were written, with the value an older profile (one
# saved by `calibrate` or written by hand before the key existed) gets, and why. Each default
# reproduces the model that profile was fitted under, or is the shipped assumption where the
# new term was not fitted anywhere.
DEFAULTS: dict[str, tuple[Any, str]] = {
    "gemm_fp8_plateau_efficiency": (None, "the 16-bit GEMM plateau (fp8 GEMMs at the same efficiency)"),
    "gemm_fp4_plateau_efficiency": (None, "the 16-bit GEMM plateau (FP4 GEMMs at the same efficiency; the model "
                                          "before this key existed)"),
    "attn_decode_fixed_s": (None, "0: a paged-attention decode call streams its KV cache with no fixed part (no "
                                  "measured decode attention for this generation: the model before this key "
                                  "existed)"),
    "kernel_floor_native_s": (None, "kernel_floor_eager_s (C++ launches floored as eager PyTorch ones: the model "
                                    "before this key existed)"),
    "moe_gemm_share": (None, "1: the grouped expert GEMM as fast as one dense GEMM of the per-expert shape "
                             "(no measured MoE kernels for this generation)"),
    "moe_gemm_fp8_share": (None, "moe_gemm_share (no measured fp8 MoE kernels for this generation)"),
    "moe_gemm_fp4_share": (None, "moe_gemm_share (no measured FP4 MoE kernels for this generation)"),
    **{f"{key}_{family}": (None, f"the fallback of cost/calibrated.py moe_gemm_share (no {name} measured for "
                                 "this generation)")
       for family, name in MOE_KERNEL_FAMILIES.items()
       for key in ("moe_gemm_share", "moe_gemm_fp8_share", "moe_gemm_fp4_share")},
    **{key: (None, "0: a quantized linear streams like a 16-bit one (no measured fp8 / FP4 GEMMs for this "
                   "generation: the model before this key existed)")
       for key in ("gemm_fp8_fixed_s", "gemm_fp4_fixed_s", "gemm_fp8_k_serial_s", "gemm_fp4_k_serial_s")},
    **{f"{key}{suffix}": (None, "the fallback of cost/calibrated.py moe_stream_efficiency (no fused MoE measured "
                                "at decode sizes for this precision and engine; at last hbm_efficiency: the model "
                                "before this key existed)")
       for suffix in ("", *(f"_{family}" for family in MOE_KERNEL_FAMILIES))
       for key in ("moe_stream_efficiency", "moe_fp8_stream_efficiency", "moe_fp4_stream_efficiency")},
    **{f"{key}{suffix}": (None, "0: the kernel floors hold a fused MoE layer's fixed costs (no fixed time read "
                                "or written for this precision and engine: the model before this key existed)")
       for suffix in ("", *(f"_{family}" for family in MOE_KERNEL_FAMILIES))
       for key in ("moe_gemm_fixed_s", "moe_fp8_gemm_fixed_s", "moe_fp4_gemm_fixed_s")},
    "gemm_wave_tail": (1.0, "16-bit GEMMs run whole waves of tiles (the model before this key existed)"),
    "gemm_splitk_min_k": (256.0, "split-K slices of >= 256 (4 k-tiles of 64), the shipped assumption "
                                 "(CUTLASS 'Split-K'; Osama et al. 2023, arXiv 2301.03598)"),
    "weight_only_int8_stream_factor": (1.0, "int8 weight-only GEMMs stream at the 16-bit rate (the model "
                                            "before this factor existed)"),
    "weight_only_int4_stream_factor": (1.0, "int4 weight-only GEMMs stream at the 16-bit rate (the model "
                                            "before this factor existed)"),
    "training_compute_efficiency": (1.0, "training kernels compute at the operator benchmarks' rate (the model "
                                         "before this factor existed)"),
}
_TOP_KEYS = {"generation", "gpus", "parameters", "derived_from", "fallback"}
_GPU_KEYS = {"num_sms", "source"}


def _check_tiles(key: str, value: Any, where: str) -> tuple:
    ok = isinstance(value, list) and value and all(
        isinstance(t, list) and len(t) == 3 and all(isinstance(x, int) and not isinstance(x, bool) and x > 0
                                                    for x in t[:2])
        and isinstance(t[2], (int, float)) and not isinstance(t[2], bool) and 0 < t[2] <= 1 for t in value)
    if not ok:
        raise ConfigError(f"{where} = {value!r}: expected a non-empty list of [M, N, relative efficiency] "
                          "(positive integers, 0 < efficiency <= 1)")
    tiles = tuple((int(t[0]), int(t[1]), float(t[2])) for t in value)
    # monotone: a tile of larger area reuses each operand over more outputs, so its relative
    # efficiency is never below a smaller tile's (gemm.py: smaller tiles reuse operands less)
    for big in tiles:
        for small in tiles:
            if big[0] * big[1] > small[0] * small[1] and big[2] < small[2]:
                raise ConfigError(f"{where}: tile {list(big)} has a lower relative efficiency than the smaller "
                                  f"tile {list(small)}; the table must not rise as tiles shrink")
    return tiles


def _check_value(key: str, value: Any, origin: str) -> Any:
    kind = PARAMETERS[key][0]
    where = f"{origin}: parameter {key!r}"
    if kind == "tiles":
        return _check_tiles(key, value, where)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where} = {value!r}: expected a finite number ({PARAMETERS[key][1]})")
    least, least_allowed, most, valid = KINDS[kind]
    if not ((value >= least if least_allowed else value > least) and value <= most):
        raise ConfigError(f"{where} = {value!r}: must be {valid}, an {kind} ({PARAMETERS[key][1]})"
                          if kind == "efficiency" else
                          f"{where} = {value!r}: must be {valid} ({PARAMETERS[key][1]})")
    return float(value)


def _check_ratios(values: Mapping[str, Any], origin: str) -> None:
    """A ratio times the efficiency it scales is an efficiency too: at most 1."""
    for ratio, eff in _RATIO_OF.items():
        if ratio in values and eff in values and values[ratio] * values[eff] > 1:
            raise ConfigError(f"{origin}: parameter {ratio!r} = {values[ratio]!r} times {eff!r} = {values[eff]!r} "
                              f"is {values[ratio] * values[eff]:.3g}, above 1: streaming faster than the HBM spec")


@dataclass(frozen=True)
class Profile:
    """Parsed, validated profile. `p.values[key]` is the number; `p.sources[key]` its source.
    `fallback`: empty for a generation's own profile; for a derived one (or the nearest-spec
    stand-in of an unlisted GPU) the note saying what is assumed."""

    generation: str
    values: Mapping[str, Any]
    sources: Mapping[str, str]
    gpus: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    origin: str = ""
    fallback: str = ""
    derived_from: str = ""

    def __post_init__(self):
        # every parameter also as a plain attribute (p.hbm_efficiency): the cost functions read them
        # per collective and kernel, and a found attribute skips the `__getattr__` fallback below
        for key, value in self.values.items():
            if not hasattr(type(self), key):
                object.__setattr__(self, key, value)

    def __getattr__(self, key: str) -> Any:  # p.hbm_efficiency
        values = object.__getattribute__(self, "values")
        if key in values:
            return values[key]
        raise AttributeError(key)

    def num_sms(self, gpu_name: str) -> int:
        if gpu_name not in self.gpus:
            raise ConfigError(f"profile {self.generation!r} ({self.origin}) has no entry for GPU {gpu_name!r} "
                              f"in field 'gpus'; known: {', '.join(sorted(self.gpus))}")
        return int(self.gpus[gpu_name]["num_sms"])

    def with_values(self, new_values: Mapping[str, Any], source: str) -> "Profile":
        """A copy with some parameters replaced (e.g. by `calibrate`), each new value's source set."""
        for k in new_values:
            if k not in PARAMETERS:
                raise ConfigError(f"unknown profile parameter {k!r}; valid: {', '.join(sorted(PARAMETERS))}")
        values = {**self.values, **{k: _check_value(k, v, source) for k, v in new_values.items()}}
        sources = {**self.sources, **{k: source for k in new_values}}
        return Profile(self.generation, values, sources, self.gpus, source, self.fallback, self.derived_from)

    def to_dict(self) -> dict:
        """The whole profile as a plain (not derived) document: every value written out."""
        params = {k: {"value": [list(t) for t in v] if k == "gemm_tile_shapes" else v, "source": self.sources[k]}
                  for k, v in sorted(self.values.items())}
        return {"generation": self.generation, "gpus": {k: dict(v) for k, v in self.gpus.items()},
                "parameters": params}


def _check_gpus(gpus: Any, origin: str) -> dict:
    if not isinstance(gpus, Mapping) or not gpus:
        raise ConfigError(f"{origin}: field 'gpus' = {gpus!r} must list at least one GPU "
                          "({\"<gpu name>\": {\"num_sms\": <positive integer>}})")
    for name, entry in gpus.items():
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{origin}: gpus[{name!r}] = {entry!r} must be an object with key 'num_sms'")
        bad = set(entry) - _GPU_KEYS
        if bad:
            raise ConfigError(f"{origin}: gpus[{name!r}] has unknown key {sorted(bad)[0]!r}; valid: "
                              f"{', '.join(sorted(_GPU_KEYS))}")
        n = entry.get("num_sms")
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ConfigError(f"{origin}: gpus[{name!r}].num_sms = {n!r} must be a positive integer")
        if "source" in entry and not isinstance(entry["source"], str):
            raise ConfigError(f"{origin}: gpus[{name!r}].source = {entry['source']!r} must be a string")
    return {k: dict(v) for k, v in gpus.items()}


def _parameters(doc: Mapping, origin: str) -> tuple[dict, dict]:
    params = doc.get("parameters", {})
    if not isinstance(params, Mapping):
        raise ConfigError(f"{origin}: field 'parameters' = {params!r} must be an object")
    values, sources = {}, {}
    for key, entry in params.items():
        if key not in PARAMETERS:
            raise ConfigError(f"{origin}: unknown parameter {key!r}; valid: {', '.join(sorted(PARAMETERS))}")
        if not isinstance(entry, Mapping) or set(entry) != {"value", "source"}:
            raise ConfigError(f"{origin}: parameter {key!r} = {entry!r} must be "
                              "{\"value\": ..., \"source\": \"...\"}")
        values[key] = _check_value(key, entry["value"], origin)
        sources[key] = str(entry["source"])
    return values, sources


def profile_from_dict(doc: Mapping, origin: str = "<dict>") -> Profile:
    """Validate a profile document; unknown keys anywhere are refused, naming the key."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{origin}: a profile must be a JSON object with keys {sorted(_TOP_KEYS)}")
    for k in doc:
        if k not in _TOP_KEYS:
            raise ConfigError(f"{origin}: unknown key {k!r}; valid: {', '.join(sorted(_TOP_KEYS))}")
    gen = doc.get("generation")
    if not isinstance(gen, str) or not gen:
        raise ConfigError(f"{origin}: field 'generation' = {gen!r} must be a non-empty string")
    gpus = _check_gpus(doc.get("gpus"), origin)
    values, sources = _parameters(doc, origin)
    base_name, fallback = doc.get("derived_from"), doc.get("fallback")
    if base_name is None:
        if fallback is not None:
            raise ConfigError(f"{origin}: field 'fallback' = {fallback!r} without 'derived_from': only a profile "
                              "derived from another generation's is a fallback")
        _fill_defaults(values, sources, origin)
        _check_ratios(values, origin)
        return Profile(gen, values, sources, gpus, origin)
    return _derived(gen, base_name, fallback, gpus, values, sources, origin)


def _derived(gen: str, base_name: Any, fallback: Any, gpus: dict, values: dict, sources: dict,
             origin: str) -> Profile:
    """A derived profile: the base generation's values, those the file gives replacing them."""
    if not isinstance(base_name, str) or base_name not in list_generations():
        raise ConfigError(f"{origin}: field 'derived_from' = {base_name!r}; valid: a shipped generation "
                          f"({', '.join(list_generations())})")
    if not isinstance(fallback, str) or not fallback.strip():
        raise ConfigError(f"{origin}: field 'fallback' = {fallback!r} must say, in a sentence, what the derived "
                          "profile assumes (it is the note of every summary on its GPUs)")
    base = load_profile(base_name)
    if base.derived_from:
        raise ConfigError(f"{origin}: field 'derived_from' = {base_name!r} names a derived profile (from "
                          f"{base.derived_from!r}); derive from a generation with values of its own")
    merged = {**base.values, **values}
    merged_sources = {**{k: f"{base.origin}: {v}" for k, v in base.sources.items()}, **sources}
    _check_ratios(merged, origin)
    return Profile(gen, merged, merged_sources, gpus, origin, fallback.strip(), base_name)


def _fill_defaults(values: dict, sources: dict, origin: str) -> None:
    """Keys newer than the profile get their DEFAULTS (one warning naming them); any other
    missing key is refused, naming it."""
    missing = [k for k in PARAMETERS if k not in values]
    refused = [k for k in missing if k not in DEFAULTS]
    if refused:
        raise ConfigError(f"{origin}: missing parameter(s) {', '.join(refused)}")
    filled = [k for k in missing if DEFAULTS[k][0] is not None]
    for k in filled:
        values[k], sources[k] = DEFAULTS[k][0], f"default (absent from {origin}): {DEFAULTS[k][1]}"
    if filled:
        warn(logger, "profile %s predates parameter(s) %s: using the defaults %s", origin, ", ".join(filled),
                     ", ".join(f"{k}={values[k]:g}" for k in filled))


@lru_cache(maxsize=None)
def load_profile(generation_or_path: str) -> Profile:
    """A shipped generation ('hopper') or a JSON file path; parsed once and cached."""
    path = Path(generation_or_path)
    if not path.suffix:
        path = PROFILE_DIR / f"{generation_or_path}.json"
        if not path.exists():
            raise ConfigError(f"unknown profile generation {generation_or_path!r}; "
                              f"valid: {', '.join(list_generations())} or a .json file")
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"cannot read profile {str(path)!r}: {e}") from None
    return profile_from_dict(doc, origin=path.name)


def list_generations() -> list[str]:
    """The shipped generations (derived ones included): the profile files' stems."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json"))


@lru_cache(maxsize=None)
def _gpu_to_generation() -> dict[str, str]:
    table: dict[str, str] = {}
    for gen in list_generations():
        for gpu in load_profile(gen).gpus:
            if gpu in table:
                raise ConfigError(f"{gen}.json: gpus[{gpu!r}] is also listed by {table[gpu]}.json; a GPU has one "
                                  "calibration profile")
            table[gpu] = gen
    return table


def generation_of(gpu_name: str) -> str:
    """'h100-sxm-80gb' -> 'hopper'. Unknown GPUs are refused, naming the shipped ones."""
    table = _gpu_to_generation()
    if gpu_name not in table:
        raise ConfigError(f"no calibration profile lists GPU {gpu_name!r}; known: {', '.join(sorted(table))}")
    return table[gpu_name]


def profile_for_gpu(gpu) -> Profile:
    """The shipped profile of a GPU (a catalogue name or a GPUConfig). A GPUConfig no profile
    lists gets `nearest_spec_profile` (a stated fallback), never an exception."""
    name = gpu if isinstance(gpu, str) else gpu.name
    if isinstance(gpu, str) or name in _gpu_to_generation():
        return load_profile(generation_of(name))
    return nearest_spec_profile(gpu)


def _spec_distance(gpu, other) -> tuple:
    """How far two GPUs' spec sheets are apart: another kind of intra-node link first (NVLink,
    xGMI, ICI, PCIe fabrics behave differently), then |log| of the dense 16-bit peak ratio plus
    |log| of the HBM bandwidth ratio (the two rates every efficiency is a fraction of)."""
    return (gpu.intra_node_link != other.intra_node_link,
            abs(math.log(gpu.peak_fp16_TFLOPS / other.peak_fp16_TFLOPS))
            + abs(math.log(gpu.hbm_bandwidth_in_GB_per_sec / other.hbm_bandwidth_in_GB_per_sec)), other.name)


def nearest_spec_profile(gpu) -> Profile:
    """The profile of the listed catalogue GPU nearest to `gpu` in spec (`_spec_distance`), for
    `gpu` itself: its SM count assumed equal to that GPU's, the note saying so."""
    from llm_analysis.catalogue.lookup import get_gpu_config_by_name
    listed = [get_gpu_config_by_name(name) for name in sorted(_gpu_to_generation())]
    near = min(listed, key=lambda other: _spec_distance(gpu, other))
    profile = profile_for_gpu(near.name)
    sms = profile.num_sms(near.name)
    note = (f"no calibration profile lists GPU {gpu.name!r}: the profile of {near.name} ({profile.origin}), the "
            f"listed GPU nearest in spec (same kind of intra-node link, nearest dense 16-bit peak and HBM "
            f"bandwidth), applied to {gpu.name}'s own spec sheet; its SM count assumed {sms} as {near.name}'s")
    if profile.fallback:
        note += f"; that profile is itself a fallback: {profile.fallback}"
    return Profile(profile.generation, profile.values, profile.sources,
                   {gpu.name: {"num_sms": sms, "source": f"assumed: {near.name}'s"}}, profile.origin, note,
                   profile.derived_from or profile.generation)


def check_profile_matches_gpu(profile: Profile, gpu_name: str) -> None:
    """A user profile fitted on another GPU is refused (field 'gpus' named)."""
    if gpu_name not in profile.gpus:
        raise ConfigError(f"profile {profile.origin or profile.generation!r} field 'gpus' lists "
                          f"{', '.join(sorted(profile.gpus)) or 'no GPU'}, not the analysed GPU {gpu_name!r}")


def save_profile(profile: Profile, path: str | Path) -> None:
    Path(path).write_text(json.dumps(profile.to_dict(), indent=1) + "\n")
