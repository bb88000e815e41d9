"""A number passed as a string to a library argument ('2' for 2) is read as that number, or refused
with a ConfigError naming the argument; never a TypeError from inside the arithmetic (issue 28, bad
input: `training(layernorm_dtype_bytes='2')` raised "can't multiply sequence by non-int")."""

from __future__ import annotations

import inspect
import logging

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.errors import ConfigError

BASE = {"training": {"batch_size_per_gpu": 1, "seq_len": 512}, "inference": {"batch_size_per_gpu": 1, "seq_len": 512}}
SKIP = {"output_dir", "output_file_suffix"}  # strings by nature


def _analysis():
    return LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), get_gpu_config_by_name("a100-sxm-40gb"))


def _cases():
    a = _analysis()
    for method in ("training", "inference"):
        for name, p in inspect.signature(getattr(a, method)).parameters.items():
            if p.kind is not p.VAR_KEYWORD and name not in SKIP:
                yield method, name


@pytest.mark.parametrize("method, name", list(_cases()))
def test_a_numeric_string_is_the_number_or_a_named_refusal(method, name):
    a = _analysis()
    call = getattr(a, method)
    logging.disable(logging.CRITICAL)
    try:
        try:
            as_string = call(**{**BASE[method], name: "2"})
        except ConfigError as err:
            assert name in str(err) and "'2'" in str(err)
            return
        as_number = call(**{**BASE[method], name: 2})
    finally:
        logging.disable(logging.NOTSET)
    assert as_string == as_number


def test_the_reported_case():
    s = _analysis().training(batch_size_per_gpu=1, seq_len=512, layernorm_dtype_bytes="2")
    assert s == _analysis().training(batch_size_per_gpu=1, seq_len=512, layernorm_dtype_bytes=2)
    with pytest.raises(ConfigError, match="layernorm_dtype_bytes = 'two'"):
        _analysis().training(batch_size_per_gpu=1, seq_len=512, layernorm_dtype_bytes="two")
