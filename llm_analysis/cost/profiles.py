"""Calibration profiles: every fitted or assumed parameter of the calibrated
performance model, one JSON file per GPU generation (`cost/profiles/<gen>.json`).

File format::

    {"generation": "hopper",
     "gpus": {"h100-sxm-80gb": {"num_sms": 132}, ...},
     "parameters": {"<key>": {"value": <number or list>, "source": "<where it came from>"}, ...}}

Every key must be one of `PARAMETERS` (an unknown key is refused with a
`ConfigError` naming it); every value carries its source. Profiles are parsed
once and cached: the per-operator cost functions only read attributes.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from llm_analysis.errors import ConfigError

logger = logging.getLogger(__name__)

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"

# key -> (kind, meaning). kind: "fraction" (0 < v <= 2), "seconds" (>= 0), "bytes" (> 0),
# "count" (> 0), "tiles" (list of [M, N] positive ints).
PARAMETERS: dict[str, tuple[str, str]] = {
    "intra_bus_efficiency": ("fraction", "ring bus bandwidth / line rate of NVLink or xGMI"),
    "pcie_bus_efficiency": ("fraction", "ring bus bandwidth / line rate over PCIe"),
    "net_efficiency": ("fraction", "achieved / line rate of one NIC"),
    "nvls_busbw_factor": ("fraction0", "NVLink-SHARP all-reduce bus bandwidth / line rate (0: none)"),
    "tree_bw_factor": ("fraction", "tree all-reduce bus bandwidth / ring bus bandwidth"),
    "base_latency_s": ("seconds", "fixed cost of one collective call"),
    "nvls_latency_s": ("seconds", "fixed cost of an NVLink-SHARP all-reduce"),
    "intra_hop_latency_s": ("seconds", "one ring step over NVLink/xGMI"),
    "pcie_hop_latency_s": ("seconds", "one ring step over PCIe"),
    "net_hop_latency_s": ("seconds", "one step over the network"),
    "alltoall_net_per_peer_latency_s": ("seconds", "extra cost per remote peer of an all-to-all"),
    "nvlink_half_saturation_bytes": ("bytes", "message per GPU at half the NVLink bus-bandwidth plateau"),
    "pcie_half_saturation_bytes": ("bytes", "message per GPU at half the PCIe bus-bandwidth plateau"),
    "net_half_saturation_bytes": ("bytes", "message per GPU at half the network bandwidth plateau"),
    "gemm_plateau_efficiency": ("fraction", "large 16-bit GEMM throughput / dense peak"),
    "gemm_fp8_plateau_efficiency": ("fraction", "large fp8 GEMM throughput / dense fp8 peak"),
    "gemm_tile_shapes": ("tiles", "threadblock tiles [M, N, relative efficiency] the GEMM heuristics choose from"),
    "gemm_k_half": ("count", "K at which the main loop equals prologue+epilogue time"),
    "gemm_splitk_min_k": ("count", "least K per split-K slice when a GEMM has fewer tiles than SMs"),
    "hbm_efficiency": ("fraction", "streaming bandwidth plateau / HBM spec"),
    "hbm_half_saturation_bytes": ("bytes", "bytes moved at half the streaming plateau"),
    "weight_only_int8_stream_factor": ("fraction", "int8 weight-only GEMM streaming / 16-bit GEMM streaming"),
    "weight_only_int4_stream_factor": ("fraction", "int4 weight-only GEMM streaming / 16-bit GEMM streaming"),
    "attn_prefill_efficiency": ("fraction", "flash-attention forward throughput / dense peak (long sequences)"),
    "attn_prefill_half_seq": ("count", "sequence length at half the flash-attention plateau"),
    "attn_decode_hbm_efficiency": ("fraction", "paged-attention KV streaming / HBM spec"),
    "kernel_floor_graph_s": ("seconds", "least time per kernel under CUDA graphs (serving)"),
    "kernel_floor_eager_s": ("seconds", "least time per kernel in eager mode (training)"),
}
# Parameters added after the first profiles were written, with the value an older profile (one
# saved by `calibrate` or written by hand before the key existed) gets, and why. Each default
# reproduces the model that profile was fitted under, or is the shipped assumption where the
# new term was not fitted anywhere.
DEFAULTS: dict[str, tuple[Any, str]] = {
    "gemm_fp8_plateau_efficiency": (None, "the 16-bit GEMM plateau (fp8 GEMMs at the same efficiency)"),
    "gemm_splitk_min_k": (256.0, "split-K slices of >= 256 (4 k-tiles of 64), the shipped assumption "
                                 "(CUTLASS 'Split-K'; Osama et al. 2023, arXiv 2301.03598)"),
    "weight_only_int8_stream_factor": (1.0, "int8 weight-only GEMMs stream at the 16-bit rate (the model "
                                            "before this factor existed)"),
    "weight_only_int4_stream_factor": (1.0, "int4 weight-only GEMMs stream at the 16-bit rate (the model "
                                            "before this factor existed)"),
}
_TOP_KEYS = {"generation", "gpus", "parameters"}
_GPU_KEYS = {"num_sms"}


def _check_value(key: str, value: Any, origin: str) -> Any:
    kind = PARAMETERS[key][0]
    where = f"{origin}: parameter {key!r}"
    if kind == "tiles":
        ok = isinstance(value, list) and value and all(
            isinstance(t, list) and len(t) == 3 and all(isinstance(x, int) and x > 0 for x in t[:2])
            and isinstance(t[2], (int, float)) and 0 < t[2] <= 1 for t in value)
        if not ok:
            raise ConfigError(f"{where} = {value!r}: expected a non-empty list of [M, N, relative efficiency] "
                              "(positive integers, 0 < efficiency <= 1)")
        return tuple((int(t[0]), int(t[1]), float(t[2])) for t in value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where} = {value!r}: expected a finite number ({PARAMETERS[key][1]})")
    lo_ok = {"fraction": 0 < value <= 2, "fraction0": 0 <= value <= 2, "seconds": value >= 0,
             "bytes": value > 0, "count": value > 0}[kind]
    if not lo_ok:
        valid = {"fraction": "0 < v <= 2", "fraction0": "0 <= v <= 2", "seconds": ">= 0 seconds",
                 "bytes": "> 0 bytes", "count": "> 0"}[kind]
        raise ConfigError(f"{where} = {value!r}: must be {valid} ({PARAMETERS[key][1]})")
    return float(value)


@dataclass(frozen=True)
class Profile:
    """Parsed, validated profile. `p.values[key]` is the number; `p.sources[key]` its source."""

    generation: str
    values: Mapping[str, Any]
    sources: Mapping[str, str]
    gpus: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    origin: str = ""

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
        return Profile(self.generation, values, sources, self.gpus, source)

    def to_dict(self) -> dict:
        params = {k: {"value": [list(t) for t in v] if k == "gemm_tile_shapes" else v, "source": self.sources[k]}
                  for k, v in sorted(self.values.items())}
        return {"generation": self.generation, "gpus": {k: dict(v) for k, v in self.gpus.items()},
                "parameters": params}


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
    gpus = doc.get("gpus", {})
    for name, entry in gpus.items():
        bad = set(entry) - _GPU_KEYS
        if bad:
            raise ConfigError(f"{origin}: gpus[{name!r}] has unknown key {sorted(bad)[0]!r}; valid: num_sms")
        n = entry.get("num_sms")
        if not isinstance(n, int) or n <= 0:
            raise ConfigError(f"{origin}: gpus[{name!r}].num_sms = {n!r} must be a positive integer")
    values, sources = {}, {}
    for key, entry in doc.get("parameters", {}).items():
        if key not in PARAMETERS:
            raise ConfigError(f"{origin}: unknown parameter {key!r}; valid: {', '.join(sorted(PARAMETERS))}")
        if not isinstance(entry, Mapping) or set(entry) != {"value", "source"}:
            raise ConfigError(f"{origin}: parameter {key!r} must be {{\"value\": ..., \"source\": \"...\"}}")
        values[key] = _check_value(key, entry["value"], origin)
        sources[key] = str(entry["source"])
    _fill_defaults(values, sources, origin)
    return Profile(gen, values, sources, {k: dict(v) for k, v in gpus.items()}, origin)


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
        logger.warning("profile %s predates parameter(s) %s: using the defaults %s", origin, ", ".join(filled),
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
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json"))


@lru_cache(maxsize=None)
def _gpu_to_generation() -> dict[str, str]:
    return {gpu: gen for gen in list_generations() for gpu in load_profile(gen).gpus}


def generation_of(gpu_name: str) -> str:
    """'h100-sxm-80gb' -> 'hopper'. Unknown GPUs are refused, naming the shipped ones."""
    table = _gpu_to_generation()
    if gpu_name not in table:
        raise ConfigError(f"no calibration profile lists GPU {gpu_name!r}; known: {', '.join(sorted(table))}")
    return table[gpu_name]


def profile_for_gpu(gpu_name: str) -> Profile:
    return load_profile(generation_of(gpu_name))


def check_profile_matches_gpu(profile: Profile, gpu_name: str) -> None:
    """A user profile fitted on another GPU is refused (field 'gpus' named)."""
    if gpu_name not in profile.gpus:
        raise ConfigError(f"profile {profile.origin or profile.generation!r} field 'gpus' lists "
                          f"{', '.join(sorted(profile.gpus)) or 'no GPU'}, not the analysed GPU {gpu_name!r}")


def save_profile(profile: Profile, path: str | Path) -> None:
    Path(path).write_text(json.dumps(profile.to_dict(), indent=1) + "\n")
