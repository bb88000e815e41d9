"""numpy scalars at the coercers every option goes through (schema/options.py): numpy's bool is a flag,
never a number (np.bool_ is not a subclass of bool and float(np.True_) is 1.0, so it was taken as a batch
of one, a ZeRO stage 1 or a byte), and a flag given as np.True_ / np.int64(0) is read as the flag it is
(it was refused). The library sweeps (tests/test_library_fuzz.py, tests/serving/test_serve_library_fuzz.py)
check the same at the public calls."""

from __future__ import annotations

import numpy as np
import pytest

from llm_analysis.errors import ConfigError
from llm_analysis.schema.options import (DSZeRO, as_enum, boolean, dtype_bytes, integer, number, positive_int,
                                         positive_number)

NUMERIC = [lambda v: positive_int(v, "batch_size_per_gpu"), lambda v: integer(v, "stage", 0, 5),
           lambda v: number(v, "share"), lambda v: positive_number(v, "rate"), lambda v: dtype_bytes(v, "bytes"),
           lambda v: as_enum(DSZeRO, v, "ds_zero")]


@pytest.mark.parametrize("coerce", NUMERIC)
@pytest.mark.parametrize("value", [np.True_, np.False_])
def test_numpy_bool_is_not_a_number(coerce, value):
    with pytest.raises(ConfigError, match=repr(value).replace("(", r"\(").replace(")", r"\)")):
        coerce(value)


@pytest.mark.parametrize("value, expected", [(np.True_, True), (np.False_, False), (np.int64(1), True),
                                             (np.uint8(0), False), (1, True), (False, False)])
def test_numpy_flags_read_as_flags(value, expected):
    out = boolean(value, "use_kv_cache")
    assert out is expected  # a Python bool, not numpy's


@pytest.mark.parametrize("value", [np.int64(2), np.float64(0.5)])
def test_numpy_numbers_other_than_0_1_are_not_flags(value):
    with pytest.raises(ConfigError, match="use_kv_cache"):
        boolean(value, "use_kv_cache")


def test_numpy_integers_mean_their_python_integers():
    out = positive_int(np.int64(8), "batch_size_per_gpu")
    assert out == 8 and type(out) is int
    assert as_enum(DSZeRO, np.int64(3), "ds_zero") is DSZeRO.STAGE_3
