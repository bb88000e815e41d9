"""Units of summary values: the unit a key's value is in (from its name) and
numbers in base units formatted for reading."""

from __future__ import annotations

import math
from enum import Enum
from typing import Any, Optional


def _num_to_string(num, precision: int = 2, divisor: int = 1000) -> str:
    """1234567 -> '1.23 M': decimal prefixes (the mirrored `utils._num_to_string` steps by 1024)."""
    if num is None:
        return "None"
    if not isinstance(num, (int, float)) or isinstance(num, bool):
        return str(num)
    if math.isnan(num) or math.isinf(num):
        return str(num)
    sign = "-" if num < 0 else ""
    num = abs(num)
    for unit in ("", " K", " M", " G", " T", " P"):
        if num < divisor:
            return f"{sign}{round(num, precision)}{unit}"
        num /= divisor
    return f"{sign}{round(num, precision)} E"


def _latency_to_string(latency_in_s, precision: int = 2) -> str:
    """Seconds to a readable string: '12.3 us', '4.56 ms', '1.2 s', '3.4 minutes', '2.1 hours', '5 days'
    (1.0 s reads '1.0 s'; the mirrored `utils._latency_to_string` reads it '1000.0 ms')."""
    if latency_in_s is None:
        return "None"
    if latency_in_s < 1e-3:
        return f"{round(latency_in_s * 1e6, precision)} us"
    if latency_in_s < 1:
        return f"{round(latency_in_s * 1e3, precision)} ms"
    if latency_in_s < 60:
        return f"{round(latency_in_s, precision)} s"
    if latency_in_s < 3600:
        return f"{round(latency_in_s / 60, precision)} minutes"
    if latency_in_s < 86400:
        return f"{round(latency_in_s / 3600, precision)} hours"
    return f"{round(latency_in_s / 86400, precision)} days"


def unit_of(key: str) -> Optional[str]:
    """The unit a summary key's value is in, guessed from its name (base units).

    Returns one of: ratio, GB/s, TFLOP/s, FLOP/s, FLOPs/byte, tok/s, $, GPU-hours,
    s, days, bytes, FLOPs, params, or None (plain number)."""
    k = key.lower()
    if k.endswith(("_stage", "_index", "_interleave")):
        return None
    if "efficiency" in k or k in ("mfu", "hfu") or k.endswith(("_mfu", "_hfu", "_fraction", "_share", "_ratio")) \
            or "utilization" in k:
        return "ratio"
    if k.endswith("_gbs") or "bandwidth_in_gb" in k:
        return "GB/s"
    if "bytes_per_s" in k or ("bandwidth" in k and "bytes" in k):
        return "bytes/s"
    if "tflops" in k or k == "achieved_flops":  # (llm-analysis 0.2.2's name of achieved_tflops)
        return "TFLOP/s"
    if "flops_per_s" in k:  # (before the "_s" of a time)
        return "FLOP/s"
    if "intensity" in k or "ridge_point" in k or "flops_per_byte" in k:
        return "FLOPs/byte"
    if "tokens_per_sec" in k or "tokens_per_s" in k:
        return "tok/s"
    if "cost" in k or "dollar" in k:
        return "$"
    if "gpu_hours" in k:
        return "GPU-hours"
    if k.endswith("_days") or k == "days":
        return "days"
    if "latency" in k or k.endswith("_s") or k.startswith("time_") or k.endswith("_time") or "seconds" in k:
        return "s"
    if "memory" in k or "bytes" in k:
        return "bytes"
    if "flops" in k:
        return "FLOP/s" if ("per_s" in k or "per_gpu_per" in k or k.startswith("achieved")) else "FLOPs"
    if "params" in k:
        return "params"
    return None


def format_bytes(value: float) -> str:
    for size, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if abs(value) >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f} B"


def format_seconds(value: float) -> str:
    if value < 0:
        return "-" + format_seconds(-value)
    if value == 0:
        return "0 s"
    return _latency_to_string(value)


def expected_time(value: float, lower_bound=None, text=None) -> str:
    """A time as the report shows it: 'X' under the roofline; 'expected X (lower bound Y)'
    when a calibrated performance model gave X and the roofline Y (summary `*_lower_bound`)."""
    text = text or format_seconds
    if lower_bound is None:
        return text(value)
    return f"expected {text(value)} (lower bound {text(lower_bound)})"


def perf_model_line(name: str) -> str:
    return (f"calibrated ({name}): times are what a tuned framework is expected to measure; lower bounds "
            "are the roofline at the lower-bound rates above")


def format_count(value: float) -> str:
    if isinstance(value, int) and abs(value) < 10_000:
        return str(value)
    if isinstance(value, float) and abs(value) < 10_000:
        return f"{value:.4g}"
    return _num_to_string(value)


def format_number(value: float, unit: Optional[str]) -> str:
    """A number in base units with its unit, e.g. 1.6e10 bytes -> '16.06 GB'."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if unit == "ratio":
        return f"{value:.3g}" if value > 1.5 else f"{value * 100:.3g}%"
    if unit == "GB/s":
        return f"{value:.4g} GB/s" if value < 1e5 else f"{value / 1e3:.4g} TB/s"
    if unit == "bytes/s":
        return f"{value / 1e9:.4g} GB/s"
    if unit == "TFLOP/s":
        return f"{value:.4g} TFLOP/s"
    if unit == "FLOP/s":
        return f"{value / 1e12:.4g} TFLOP/s" if value >= 1e9 else f"{value:.4g} FLOP/s"
    if unit == "FLOPs/byte":
        return f"{value:.3g} FLOPs/byte" if value < 1e4 else f"{value:.0f} FLOPs/byte"
    if unit == "tok/s":
        return _num_to_string(value, 1) + " tok/s" if value >= 1000 else f"{value:.4g} tok/s"
    if unit == "$":
        if abs(value) >= 1 or value == 0:
            return f"${value:,.2f}"
        digits = min(max(2, 2 - math.floor(math.log10(abs(value)))), 10)  # 3 significant digits
        return f"${value:.{digits}f}"
    if unit == "GPU-hours":
        return f"{value:,.0f} GPU-hours" if value >= 100 else f"{value:.3g} GPU-hours"
    if unit == "days":
        return f"{value:.3g} days"
    if unit == "s":
        return format_seconds(value)
    if unit == "bytes":
        return format_bytes(value)
    if unit == "FLOPs":
        return _num_to_string(value) + "FLOPs" if abs(value) >= 1000 else f"{value:.4g} FLOPs"
    if unit == "params":
        return _num_to_string(value)
    return format_count(value)


def fmt(key: str, value: Any, parent: str = "") -> str:
    """Format one summary value for reading; `parent` is the key of the dict the
    value sits in (breakdowns: 'memory_breakdown_per_gpu' -> {'weights': ...})."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return str(value)
    if isinstance(value, Enum):
        return value.name
    if not isinstance(value, (int, float)):
        return str(value)
    unit = unit_of(key)
    if unit is None and parent:
        unit = unit_of(parent)
    return format_number(value, unit)


def format_duration(seconds: float) -> str:
    """Seconds for reading; from one day on, in days."""
    return f"{seconds / 86400:.3g} days" if seconds >= 86400 else format_seconds(seconds)
