"""Small formatting helpers kept for compatibility with the mirrored system."""

from __future__ import annotations


def _num_to_string(num, precision=2, divisor=1024):
    """The mirrored system's count formatting, kept to the letter: binary steps (divisor 1024) by default,
    ' K' / ' M' / ' G' / ' T' from the largest whole step, the number as given below one step. (The
    reports format counts with decimal prefixes: report/units.py.)"""
    if num is None:
        return "None"
    for power, unit in ((4, " T"), (3, " G"), (2, " M"), (1, " K")):
        if num // divisor ** power > 0:
            return str(round(num / divisor ** power, precision)) + unit
    return str(num)


# (seconds in a unit, its name) from the largest: the mirrored system's steps
_LATENCY_UNITS = ((86400, " days"), (3600, " hours"), (60, " minutes"))


def _latency_to_string(latency_in_s, precision=2):
    """The mirrored system's latency formatting, kept to the letter: days, hours and minutes from one whole
    unit on, seconds above 1 s, milliseconds above 1 ms, microseconds below (1.0 s reads '1000.0 ms')."""
    if latency_in_s is None:
        return "None"
    for seconds, unit in _LATENCY_UNITS:
        if latency_in_s // seconds > 0:
            return str(round(latency_in_s / seconds, precision)) + unit
    if latency_in_s > 1:
        return str(round(latency_in_s, precision)) + " s"
    if latency_in_s > 1e-3:
        return str(round(latency_in_s * 1e3, precision)) + " ms"
    return str(round(latency_in_s * 1e6, precision)) + " us"


def within_range(val, target, tolerance):
    """True when val is strictly within `tolerance` (a fraction) of target (the mirrored system's test)."""
    return abs(val - target) / target < tolerance


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
