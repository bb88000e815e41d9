"""Profiles written before a parameter existed (issue 10): the newer keys get their stated
defaults with one warning naming them; any other missing key and any unknown key is refused."""

from __future__ import annotations

import json
import logging

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_dtype_config_by_name, get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.cost.profiles import DEFAULTS, load_profile
from llm_analysis.errors import ConfigError

A100 = get_gpu_config_by_name("a100-sxm-80gb")
LLAMA8B = get_model_config_by_name("meta-llama_Llama-3.1-8B")
NEWER = ("weight_only_int8_stream_factor", "weight_only_int4_stream_factor", "gemm_splitk_min_k")


def _write(tmp_path, name, drop=(), add=None):
    doc = load_profile("ampere").to_dict()
    params = {k: v for k, v in doc["parameters"].items() if k not in drop}
    params.update(add or {})
    path = tmp_path / name
    path.write_text(json.dumps(dict(doc, parameters=params)))
    return str(path)


def test_old_profile_gets_the_defaults_with_one_warning(tmp_path, caplog):
    path = _write(tmp_path, "old.json", drop=NEWER)
    with caplog.at_level(logging.WARNING, logger="llm_analysis.cost.profiles"):
        profile = load_profile(path)
    lines = [r.getMessage() for r in caplog.records if r.name == "llm_analysis.cost.profiles"]
    assert len(lines) == 1 and all(k in lines[0] for k in NEWER)
    # the stated defaults: weight-only GEMMs at the 16-bit streaming rate (the model the old
    # profile was fitted under), split-K slices of 256 (the shipped CUTLASS assumption)
    assert profile.values["weight_only_int8_stream_factor"] == 1.0
    assert profile.values["weight_only_int4_stream_factor"] == 1.0
    assert profile.values["gemm_splitk_min_k"] == 256.0
    assert all(profile.sources[k].startswith("default") for k in NEWER)


def test_old_profile_predicts_like_the_same_profile_with_the_defaults_written_out(tmp_path):
    """int8 weight-only decode: the filled profile times it exactly as one that states 1.0 / 256."""
    written = {k: {"value": DEFAULTS[k][0], "source": "hand"} for k in NEWER}
    kw = dict(batch_size_per_gpu=1, seq_len=128, num_tokens_to_generate=16)
    w8 = get_dtype_config_by_name("w8a16e16")
    old = LLMAnalysis(LLAMA8B, A100, w8, perf_model=_write(tmp_path, "old.json", drop=NEWER)).inference(**kw)
    full = LLMAnalysis(LLAMA8B, A100, w8, perf_model=_write(tmp_path, "full.json", add=written)).inference(**kw)
    shipped = LLMAnalysis(LLAMA8B, A100, w8, perf_model="calibrated").inference(**kw)
    assert old["decode_latency"] == full["decode_latency"]
    # the shipped Ampere int8 factor (< 1, fitted on gpt-fast) streams slower than the default 1.0
    assert shipped["decode_latency"] > old["decode_latency"]


def test_missing_core_key_and_unknown_key_stay_refused(tmp_path):
    with pytest.raises(ConfigError, match="missing parameter.*hbm_efficiency"):
        load_profile(_write(tmp_path, "nohbm.json", drop=("hbm_efficiency",)))
    with pytest.raises(ConfigError, match="unknown parameter 'warp_magic'"):
        load_profile(_write(tmp_path, "magic.json", add={"warp_magic": {"value": 1, "source": "x"}}))
