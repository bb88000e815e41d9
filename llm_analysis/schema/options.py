"""Options users choose, and the one set of coercers that checks them.

Leaf module: imports only `errors` (and logging, numpy for its bool type). The enums keep the mirrored system's names
and values (`DSZeRO.STAGE_3 == 3`, `ActivationRecomputation.FULL == 4`), so
code written against it passes ints or members alike.
"""

from __future__ import annotations

import logging
import math
import numbers
from enum import Enum
from typing import Optional, Type, TypeVar

import numpy as np

from llm_analysis.errors import ConfigError

E = TypeVar("E", bound=Enum)
T = TypeVar("T")

logger = logging.getLogger(__name__)

# a flag, never a number: numpy's bool is not a subclass of bool, and float(np.True_) is 1.0 (a batch of one)
_BOOLS = (bool, np.bool_)


class DSZeRO(Enum):
    """DeepSpeed ZeRO stage (Rajbhandari et al. 2020, arXiv 1910.02054)."""

    NONE = 0  # nothing sharded
    STAGE_1 = 1  # optimizer states sharded over data parallel ranks
    STAGE_2 = 2  # + gradients
    STAGE_3 = 3  # + weights

    # members are singletons compared by identity: the identity hash (a C call) is
    # consistent with that and avoids Enum's Python-level hash of the name, which cache
    # keys built on every analysis call would otherwise pay several times
    __hash__ = object.__hash__


class ActivationRecomputation(Enum):
    """What the backward pass recomputes instead of storing."""

    NONE = 0  # store everything
    ATTN_COMPUTE = 1  # selective: recompute QK^T, softmax, dropout, attention over V
    ATTN = 2  # store only the attention block's input; recompute the block
    NORM_ATTN_NORM = 3  # store only the input of norm-attention-norm; recompute it
    FULL = 4  # store only each layer's input; recompute the whole layer

    __hash__ = object.__hash__  # as DSZeRO's


def as_enum(cls: Type[E], value, field: str) -> E:
    """A member of `cls` from a member, its int value or its name."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str) and value.strip().upper() in cls.__members__:
        return cls[value.strip().upper()]
    try:
        if isinstance(value, _BOOLS) or float(value) != int(value):
            raise ValueError
        return cls(int(value))
    except (ValueError, TypeError, OverflowError):
        valid = ", ".join(f"{m.value} ({m.name})" for m in cls)
        raise ConfigError(f"{field} = {value!r} is not valid; use one of {valid}") from None


# ------------------------------------------------------------ sanity limits
# Sizes beyond these are typos or hostile input, not models: the largest
# published transformers have ~10^2 layers, hidden sizes ~3*10^4, vocabularies
# ~2.6*10^5 and contexts ~10^7 tokens; the largest GPUs ~10^4 TFLOP/s, ~10^4 GB/s
# and ~300 GB. Each limit leaves two or more orders of magnitude of headroom while
# keeping every product the analysis forms (batch x context x hidden x layers x
# bytes) far inside float range, and the analysis of any accepted input bounded.
MAX_NUM_LAYERS = 100_000
MAX_DIM = 2**24  # hidden, FFN, head, embedding, vocabulary and LoRA widths
MAX_HEADS = 2**16  # attention / KV heads, experts
MAX_NORMS_PER_LAYER = 16
MAX_SEQ_LEN = 2**30  # tokens of context, prompt or generation (~1.07e9)
MAX_BATCH_SIZE = 2**30  # sequences per GPU, micro-batches, global batch
MAX_PARALLEL_SIZE = 2**24  # tp/pp/dp/ep/sp sizes, GPUs per node, total GPUs
MAX_TOTAL_TOKENS = 10**17  # training tokens (largest published runs: ~3.6e13)
MAX_TFLOPS = 10**6  # per GPU (an exaFLOP/s), any precision
MAX_BANDWIDTH_GB_PER_S = 10**6  # per GPU (a petabyte per second), HBM or links
MAX_MEMORY_GB = 10**6  # per GPU (a petabyte)
MAX_SECONDS = 3600.0  # a message latency or hop time
MAX_COST_PER_GPU_HOUR = 10**6  # dollars
MAX_DTYPE_BYTES = 8  # a KV-cache / norm / master-weight element (fp64 at most)

def _plain_number(value) -> bool:
    """A float, or an int a float holds exactly: checked without formatting any message."""
    return type(value) is float or (type(value) is int and -_EXACT_INT < value < _EXACT_INT)


_EXACT_INT = 2**53


def _as_float(value, field: str, what: str) -> float:
    """`value` as a float: ints, floats and numeric strings ('8', '1e3', '0x10');
    never bools (numpy's included: np.True_ converts to 1.0), None, containers or NaN."""
    if isinstance(value, _BOOLS) or value is None:
        raise ConfigError(f"{field} = {value!r} must be {what}")
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        try:
            value = int(text, 0) if text[:2].lower() in ("0x", "0o", "0b") else float(text)
        except (ValueError, IndexError):
            raise ConfigError(f"{field} = {value!r} must be {what}") from None
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{field} = {value!r} must be {what}") from None
    if math.isnan(v):
        raise ConfigError(f"{field} = {value!r} must be {what}, not NaN")
    return v


def integer(value, field: str, lo: int = 1, hi: int = MAX_BATCH_SIZE) -> int:
    """An integer in [lo, hi]; an integral float or numeric string ('8', 2048.0,
    '1e3') is accepted. Refuses bools, NaN, infinities, fractions and values out
    of range with a ConfigError naming field, value and the valid range."""
    if type(value) is int and lo <= value <= hi:  # the common case, before any message is formatted
        return value
    what = f"an integer in [{lo}, {hi}]"
    if isinstance(value, int) and not isinstance(value, bool):
        v = value
    else:
        f = _as_float(value, field, what)
        if not math.isfinite(f) or f != int(f):
            raise ConfigError(f"{field} = {value!r} must be {what}")
        v = int(f)
    if not lo <= v <= hi:
        limit = " (sanity limit, see README 'Input limits')" if v > hi else ""
        raise ConfigError(f"{field} = {value!r} must be {what}{limit}")
    return v


def optional_integer(value, field: str, lo: int = 1, hi: int = MAX_BATCH_SIZE) -> Optional[int]:
    return None if value is None else integer(value, field, lo, hi)


def integer_or_default(value, default: int, field: str, lo: int = 1, hi: int = MAX_BATCH_SIZE) -> int:
    """`integer(value, ...)`, or `default` (taken as given) when value is None."""
    return default if value is None else integer(value, field, lo, hi)


def number(value, field: str, lo: float = 0.0, hi: float = math.inf, *, lo_open: bool = True,
           what: Optional[str] = None) -> float:
    """A finite float in (lo, hi] (or [lo, hi] with lo_open=False)."""
    if _plain_number(value):  # the common case, before any message is formatted
        v = float(value)
        if (lo < v <= hi or (v == lo and not lo_open)) and math.isfinite(v):
            return v
    left = "(" if lo_open else "["
    what = what or (f"a finite number in {left}{lo:g}, {hi:g}]" if hi < math.inf
                    else f"a finite number {'>' if lo_open else '>='} {lo:g}")
    v = _as_float(value, field, what)
    if not math.isfinite(v) or v > hi or v < lo or (lo_open and v == lo):
        raise ConfigError(f"{field} = {value!r} must be {what}")
    return v


def choice(value, field: str, valid) -> object:
    """One of `valid` (by equality; bools and unhashable values are simply invalid). Strings and real
    numbers compare, numpy's included (np.int64(1), np.str_('vllm'): what array code hands over); the valid
    value itself is returned."""
    if not isinstance(value, bool) and isinstance(value, (str, numbers.Real)):
        for v in valid:
            if value == v:
                return v
    raise ConfigError(f"{field} = {value!r} is not valid; use one of {', '.join(repr(v) for v in valid)}")


def name(value, field: str) -> str:
    """A non-empty string (catalogue names, file paths, model ids)."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{field} = {value!r} must be a non-empty string (a name or a .json path)")
    return value


def boolean(value, field: str) -> bool:
    """True/False (or 0/1, 'true'/'false' as command lines give them; numpy's bools and integers, as
    array code hands them over)."""
    if isinstance(value, _BOOLS):
        return bool(value)
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise ConfigError(f"{field} = {value!r} must be True or False")


def string_list(value, field: str, example: str = "('q_proj', 'v_proj')") -> tuple:
    """A non-empty list/tuple of non-empty strings (a single string is one item)."""
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (list, tuple)) or not value \
            or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{field} = {value!r} must be a non-empty list of names, e.g. {example}")
    return tuple(value)


def positive_int(value, field: str) -> int:
    """An integer >= 1 (an integral float such as 2048.0 or 1e3 is accepted),
    at most the sanity limit MAX_SEQ_LEN (the largest of the count limits)."""
    return integer(value, field, 1, max(MAX_SEQ_LEN, MAX_BATCH_SIZE))


def optional_positive_int(value, field: str) -> Optional[int]:
    return None if value is None else positive_int(value, field)


# An efficiency (or an achieved rate, cost/roofline.py) below a millionth of its peak is a slip, not a
# measurement: real kernels and links reach ~1e-2 .. 1 of their peaks, and from ~1e-300 on the rates it makes
# are subnormal and every time overflows to inf (or NaN)
MIN_EFFICIENCY = 1e-6


def efficiency(value, field: str, default: float = 1.0) -> float:
    """A fraction of a peak, in [MIN_EFFICIENCY, 1]."""
    if value is None:
        return default
    v = _as_float(value, field, "a number in (0, 1]")
    if not 0 < v <= 1:
        raise ConfigError(f"{field} = {value!r} must be in (0, 1] (a fraction of the peak)")
    if v < MIN_EFFICIENCY:
        raise ConfigError(f"{field} = {value!r} must be in [{MIN_EFFICIENCY:g}, 1] (a fraction of the peak; "
                          "below a millionth of it is taken for a slip)")
    return v


def efficiency_beside_rate(value, field: str, rate, rate_field: str, peak: float) -> float:
    """`efficiency(value, field)`, or with an achieved rate given (checked against `peak` by
    cost/roofline.py check_achieved_rates) the rate over the peak: the rate wins, as in the mirrored
    system's constructor (the cost model times operators at the rate itself: cost/model.py); the log
    says so when both are given."""
    if rate is None:
        return efficiency(value, field)
    if value is not None:
        efficiency(value, field)  # still a valid efficiency, or refused as one
        logger.info("%s given: it overrides %s", rate_field, field)
    return float(rate) / peak


def instance(value: T, cls: type, field: str) -> T:
    """`value` when it is a `cls` (a configuration object), else a ConfigError naming both types."""
    if not isinstance(value, cls):
        raise ConfigError(f"{field} must be a {cls.__name__}, got {type(value).__name__}")
    return value


def owned_instance(value: T, cls: type, field: str, signature_default: T) -> T:
    """`instance`, with the signature's default object replaced by a fresh one: a Python default argument is
    one object shared by every call, so an analysis built without a layout or data type must own its default
    (an edit to `analysis.parallelism_config.tp_size` must not reach every later analysis, nor the planner's)."""
    value = instance(value, cls, field)
    return cls() if value is signature_default else value


def positive_number(value, field: str, what: str = "a positive number", hi: float = math.inf) -> float:
    """A finite number > 0 (and <= hi)."""
    if _plain_number(value) and 0 < value <= hi and math.isfinite(value):  # before any message is formatted
        return float(value)
    return number(value, field, 0.0, hi, what=f"{what} (finite, > 0{', <= %g' % hi if hi < math.inf else ''})")


def non_negative_number(value, field: str, hi: float = math.inf) -> float:
    """A finite number >= 0 (and <= hi)."""
    if _plain_number(value) and 0 <= value <= hi and math.isfinite(value):  # before any message is formatted
        return float(value)
    return number(value, field, 0.0, hi, lo_open=False,
                  what=f"a finite non-negative number{' <= %g' % hi if hi < math.inf else ''}")


# the smallest stored element taken: one bit (2- and 4-bit KV quantisations exist); near 0 the largest batch and
# token count (memory / bytes per token) overflow (1e-320 bytes was an OverflowError)
MIN_DTYPE_BYTES = 1 / 8


def dtype_bytes(value, field: str) -> float:
    """Bytes of one stored element: [MIN_DTYPE_BYTES, MAX_DTYPE_BYTES]."""
    if _plain_number(value) and MIN_DTYPE_BYTES <= value <= MAX_DTYPE_BYTES:  # before the message is formatted
        return float(value)
    return number(value, field, MIN_DTYPE_BYTES, MAX_DTYPE_BYTES, lo_open=False,
                  what=f"a number of bytes in [{MIN_DTYPE_BYTES}, {MAX_DTYPE_BYTES}] (one bit per element at least)")


def master_weights_bytes(value, field: str = "master_weights_dtype_bytes") -> float:
    """Bytes of the optimizer's master copy of a weight: 0 (no master copy: the optimizer updates the
    stored weights in place, as pure-bf16 AdamW does) or a dtype width, [MIN_DTYPE_BYTES, MAX_DTYPE_BYTES]."""
    if _plain_number(value) and (value == 0 or MIN_DTYPE_BYTES <= value <= MAX_DTYPE_BYTES):
        return float(value)
    what = (f"0 (no master copy: the weights are updated in place) or a number of bytes in "
            f"[{MIN_DTYPE_BYTES}, {MAX_DTYPE_BYTES}]")
    v = number(value, field, 0, MAX_DTYPE_BYTES, lo_open=False, what=what)
    if 0 < v < MIN_DTYPE_BYTES:
        raise ConfigError(f"{field} = {value!r} must be {what}")
    return v


QUANT_BITS = (4, 8, 16, 32)


def quant_bits(value, field: str) -> Optional[int]:
    """Bits of a quantised activation: None (not quantised) or one of QUANT_BITS."""
    return None if value is None else int(choice(value, field, QUANT_BITS))


def keep_number(value):
    """A validated number as given (summaries echo it); a numeric string as a float."""
    return value if value is None or isinstance(value, (int, float)) else float(value)
