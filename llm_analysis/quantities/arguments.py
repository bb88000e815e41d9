"""The arguments of `LLMAnalysis` (facade.py) as a user's Python code passes them, checked where
they enter (the facade only delegates: its checks live here and in schema/options.py).

schema/options.py's coercers read numpy scalars (np.int64(8), np.bool_ as a flag, never a
number) and return Python values. `plain` is for the values no coercer returns: a number kept
as given (a raw np.uint8 or np.float16 overflows in numpy's own width once it is multiplied by a
hidden size), the arguments an inference() / training() call hands on, and values checked by
`isinstance(x, int)` further on (encoder_seq_len, image_tokens).
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from llm_analysis.errors import ConfigError
from llm_analysis.model.records import NAMED_CONVENTIONS
from llm_analysis.schema.options import (MAX_DTYPE_BYTES, ActivationRecomputation, DSZeRO, as_enum, boolean,
                                         dtype_bytes, integer, master_weights_bytes, non_negative_number,
                                         positive_int, positive_number, quant_bits)
from llm_analysis.units import BYTES_FP32

_PLAIN_TYPES = frozenset((int, float, str, bool, type(None)))
# ... and the types an inference() / training() call passes as they are (its defaults among them)
_KEPT_TYPES = _PLAIN_TYPES | {DSZeRO, ActivationRecomputation}


def plain(value):
    """`value`, a numpy scalar or 0-d array as the Python value it holds (`.item()`)."""
    if type(value) in _PLAIN_TYPES:  # the common case, one set lookup
        return value
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


def plain_values(args: Dict[str, Any]) -> Dict[str, Any]:
    """`args` (an inference() / training() call's) with every value `plain` (`args` itself when
    none is a numpy value: the common case, checked in one pass)."""
    if _KEPT_TYPES.issuperset(map(type, args.values())):
        return args
    return {k: plain(v) for k, v in args.items()}


def count(value, field: str) -> int:
    """A batch size or a length: an integer >= 1 (schema/options.py `positive_int`)."""
    return positive_int(value, field)


def amount(value, field: str, hi: float) -> float:
    """A positive number up to `hi` where a mean may stand for a count (serve() hands a pipeline
    stage a fractional number of tokens per micro-batch); a plain number is kept as given."""
    if type(value) in (int, float) and 0 < value <= hi:  # the common case (NaN fails the comparison)
        return value
    return positive_number(plain(value), field, hi=hi)


def flag(value, field: str) -> bool:
    return value if type(value) is bool else boolean(value, field)


def optional_flag(value, field: str) -> Optional[bool]:
    return None if value is None else flag(value, field)


def element_bytes(value, field: str):
    """Bytes of one stored element, in (0, MAX_DTYPE_BYTES]; a plain number is kept as given
    (an int stays an int in the figures it multiplies, as before it was checked)."""
    checked = dtype_bytes(plain(value), field)
    return value if type(value) in (int, float) else checked


def optional_element_bytes(value, field: str):
    return None if value is None else element_bytes(value, field)


def optimizer_bytes(master_weights_dtype_bytes, other_op_bytes):
    """(master-weight bytes, optimizer-state bytes or None) per parameter, as training() checks them."""
    checked = master_weights_bytes(plain(master_weights_dtype_bytes))  # 0: no master copy
    master = master_weights_dtype_bytes if type(master_weights_dtype_bytes) in (int, float) else checked
    if other_op_bytes is None:
        return master, None
    other = non_negative_number(plain(other_op_bytes), "other_op_bytes", MAX_DTYPE_BYTES)
    return master, (other_op_bytes if type(other_op_bytes) in (int, float) else other)


def zero_stage(value) -> DSZeRO:
    return value if type(value) is DSZeRO else as_enum(DSZeRO, value, "ds_zero")


def recomputation(value) -> ActivationRecomputation:
    return value if type(value) is ActivationRecomputation else \
        as_enum(ActivationRecomputation, value, "activation_recomputation")


def bits(value, field: str) -> Optional[int]:
    """Storage bits of a quantised activation: None or one of schema/options.py `QUANT_BITS`."""
    return None if value is None else quant_bits(value, field)


def stage_index(value, pp_size: int) -> int:
    """A pipeline stage: 0 .. pp_size - 1 (a negative index is refused, not read from the end)."""
    try:
        return integer(value, "stage", 0, pp_size - 1)
    except ConfigError:
        raise ConfigError(f"stage = {value!r}; valid: None (every stage) or a pipeline stage 0 .. {pp_size - 1} "
                          f"(pp_size = {pp_size})") from None


def text(value, field: str) -> str:
    """A string argument (a prefix, a name)."""
    value = plain(value)
    if not isinstance(value, str):
        raise ConfigError(f"{field} = {value!r} must be a string")
    return value


# ------------------------------------------------------------------------ the constructor's
def convention_name(value) -> Optional[str]:
    """`conventions`: None (the default) or a name, checked by model/records.py `Conventions.named`.
    A non-string is refused here: `ConventionChoice` would take a false one (0, [], False) for the
    default (`conventions or "transformers"`), and hashing an unhashable one raised a TypeError."""
    value = plain(value)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"conventions = {value!r}; valid: None, {', '.join(map(repr, NAMED_CONVENTIONS))}")
    return value


# ---------------------------------------------------------------------- the methods'
def output_dir(value):
    """None, or the folder (a str or os.PathLike) inference() / training() write their summary to."""
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise ConfigError(f"output_dir = {value!r} must be None or a folder path (a str or os.PathLike)")
    return value


def unused(is_inference=True, activation_recomputation=ActivationRecomputation.NONE,
           layernorm_dtype_bytes=BYTES_FP32, ds_zero=DSZeRO.NONE, dtype_bytes=BYTES_FP32) -> None:
    """Checks the arguments a view takes for API compatibility and does not use as where they are
    used, so that a slip (ds_zero="3x", is_inference=[]) is refused rather than silently ignored."""
    flag(is_inference, "is_inference")
    recomputation(activation_recomputation)
    element_bytes(layernorm_dtype_bytes, "layernorm_dtype_bytes")
    zero_stage(ds_zero)
    element_bytes(dtype_bytes, "dtype_bytes")
