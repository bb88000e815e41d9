"""Options users choose, and the one set of coercers that checks them.

Leaf module: imports only `errors`. The enums keep the mirrored system's names
and values (`DSZeRO.STAGE_3 == 3`, `ActivationRecomputation.FULL == 4`), so
code written against it passes ints or members alike.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Optional, Type, TypeVar

from .errors import ConfigError

E = TypeVar("E", bound=Enum)


class DSZeRO(Enum):
    """DeepSpeed ZeRO stage (Rajbhandari et al. 2020, arXiv 1910.02054)."""

    NONE = 0  # nothing sharded
    STAGE_1 = 1  # optimizer states sharded over data parallel ranks
    STAGE_2 = 2  # + gradients
    STAGE_3 = 3  # + weights


class ActivationRecomputation(Enum):
    """What the backward pass recomputes instead of storing."""

    NONE = 0  # store everything
    ATTN_COMPUTE = 1  # selective: recompute QK^T, softmax, dropout, attention over V
    ATTN = 2  # store only the attention block's input; recompute the block
    NORM_ATTN_NORM = 3  # store only the input of norm-attention-norm; recompute it
    FULL = 4  # store only each layer's input; recompute the whole layer


def as_enum(cls: Type[E], value, field: str) -> E:
    """A member of `cls` from a member, its int value or its name."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str) and value.strip().upper() in cls.__members__:
        return cls[value.strip().upper()]
    try:
        if isinstance(value, bool) or float(value) != int(value):
            raise ValueError
        return cls(int(value))
    except (ValueError, TypeError, OverflowError):
        valid = ", ".join(f"{m.value} ({m.name})" for m in cls)
        raise ConfigError(f"{field} = {value!r} is not valid; use one of {valid}") from None


def positive_int(value, field: str) -> int:
    """An integer >= 1 (an integral float such as 2048.0 or 1e3 is accepted)."""
    if isinstance(value, bool):
        raise ConfigError(f"{field} = {value!r} must be a positive integer")
    if isinstance(value, int):
        if value > 0:
            return value
        raise ConfigError(f"{field} = {value!r} must be a positive integer")
    try:
        f = float(value)
        if math.isfinite(f) and f == int(f) and f > 0:
            return int(f)
    except (TypeError, ValueError, OverflowError):
        pass
    raise ConfigError(f"{field} = {value!r} must be a positive integer")


def optional_positive_int(value, field: str) -> Optional[int]:
    return None if value is None else positive_int(value, field)


def efficiency(value, field: str, default: float = 1.0) -> float:
    """A fraction of a peak, in (0, 1]."""
    if value is None:
        return default
    try:
        if isinstance(value, bool):
            raise TypeError
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{field} = {value!r} must be a number in (0, 1]") from None
    if not 0 < v <= 1:
        raise ConfigError(f"{field} = {value!r} must be in (0, 1] (a fraction of the peak)")
    return v


def positive_number(value, field: str, what: str = "a positive number") -> float:
    """A finite number > 0."""
    try:
        if isinstance(value, bool):
            raise TypeError
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{field} = {value!r} must be {what}") from None
    if not (math.isfinite(v) and v > 0):
        raise ConfigError(f"{field} = {value!r} must be {what}")
    return v


def non_negative_number(value, field: str) -> float:
    """A finite number >= 0."""
    try:
        if isinstance(value, bool):
            raise TypeError
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{field} = {value!r} must be a non-negative number") from None
    if not (math.isfinite(v) and v >= 0):
        raise ConfigError(f"{field} = {value!r} must be a finite non-negative number")
    return v
