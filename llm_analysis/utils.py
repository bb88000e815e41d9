"""Small formatting helpers kept for compatibility with the mirrored system."""

from __future__ import annotations

import math


def _num_to_string(num, precision: int = 2, divisor: int = 1000) -> str:
    """1234567 -> '1.23 M' (decimal prefixes by default; divisor=1024 for binary)."""
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
    """Seconds to a readable string: '12.3 us', '4.56 ms', '1.2 s', '3.4 min', '2.1 h', '5 days'."""
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


def within_range(val, target, tolerance) -> bool:
    """True when val is within `tolerance` (a fraction) of target."""
    return abs(val - target) / target <= tolerance


def load_json_object(path, what: str, error_cls=None, allow_non_finite: bool = False) -> dict:
    """The JSON object stored in `path` (`what` names it in errors).

    Hostile or broken files end in one `error_cls` (default ConfigError) naming
    the file: unreadable, not UTF-8 (e.g. a UTF-16 export), malformed, holding
    NaN/Infinity (not JSON; every size must be a finite number), nested deeper
    than Python's parser can follow, or not an object. `allow_non_finite`: read
    NaN/Infinity as Python's json does (a transformers config.json may hold them in
    keys that are no size, e.g. Mamba's time_step_limit); the reader of each value
    refuses a non-finite one where it means a size.
    """
    import json

    from llm_analysis.errors import ConfigError

    error_cls = error_cls or ConfigError
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as err:
        raise error_cls(f"Cannot read {what}: {err.strerror or err}") from None
    try:
        text = raw.decode("utf-8-sig")  # a UTF-8 byte-order mark is harmless
    except UnicodeDecodeError as err:
        raise error_cls(f"{what} is not UTF-8 text (byte {err.start}: {raw[err.start:err.start + 1]!r}); "
                        "save it as UTF-8 JSON") from None

    def no_constants(token):
        raise ValueError(f"{token} is not a JSON number; every value must be finite")

    try:
        data = json.loads(text, parse_constant=None if allow_non_finite else no_constants)
    except json.JSONDecodeError as err:
        raise error_cls(f"Malformed JSON in {what} (not valid JSON): {err.msg} at line {err.lineno} "
                        f"column {err.colno}") from None
    except ValueError as err:
        raise error_cls(f"{what} is not valid JSON: {err}") from None
    except RecursionError:
        raise error_cls(f"{what} is not valid JSON: nested too deeply for a config") from None
    if not isinstance(data, dict):
        raise error_cls(f"{what} must hold a JSON object, not {type(data).__name__}")
    return data
