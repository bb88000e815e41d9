"""perf_model="calibrated" at the roofline's speed (issue 10): a new shape is timed from the
phase tables (cost/calibrated_table.py) and its lower bound from the same tables
(inference/lower_bound.py). Both shortcuts must give exactly what the slow paths give: the
operators built and timed one by one, and a separate roofline call."""

from __future__ import annotations

import logging

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.cost.calibrated import CalibratedCostModel
from llm_analysis.model.describer import LayerDescriber

SETUPS = [("NousResearch_Llama-2-7b-hf", "a100-sxm-80gb", 4, 1), ("facebook_opt-1.3b", "h100-sxm-80gb", 2, 2),
          ("meta-llama_Llama-3.1-8B", "h100-sxm-80gb", 4, 1), ("facebook_opt-1.3b", "a100-sxm-40gb", 1, 4)]
SHAPES = [(1, 128, 1), (4, 512, 128), (16, 2000, 37), (3, 77, 2), (1, 100, 500)]
INFER_KEYS = ("prefill_latency", "decode_latency", "total_decode_latency", "total_latency")


def _analysis(name, gpu, tp, pp, **kw):
    return LLMAnalysis(get_model_config_by_name(name), get_gpu_config_by_name(gpu),
                       get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=tp, pp_size=pp), **kw)


def _figures(a):
    out = []
    for b, s, n in SHAPES:
        r = a.inference(batch_size_per_gpu=b, seq_len=s, num_tokens_to_generate=n)
        out += [r[k] for k in INFER_KEYS] + [r[k + "_lower_bound"] for k in INFER_KEYS]
    r = a.training(batch_size_per_gpu=2, seq_len=512, gradient_accumulation_steps=2, total_num_tokens=1e9)
    return out + [r["latency_per_iter"], r["latency_fwd"]]


@pytest.mark.parametrize("setup", SETUPS)
def test_table_path_equals_operator_path(setup, monkeypatch):
    logging.disable(logging.WARNING)
    fast = _figures(_analysis(*setup, perf_model="calibrated"))
    monkeypatch.setattr(CalibratedCostModel, "accepts_table", lambda self, table: False)
    slow = _figures(_analysis(*setup, perf_model="calibrated"))
    logging.disable(logging.NOTSET)
    assert fast == pytest.approx(slow, rel=1e-12)


@pytest.mark.parametrize("setup", SETUPS)
def test_lower_bound_is_the_roofline_call(setup):
    cal, roof = _analysis(*setup, perf_model="calibrated"), _analysis(*setup)
    for b, s, n in SHAPES:
        kw = dict(batch_size_per_gpu=b, seq_len=s, num_tokens_to_generate=n)
        c, r = cal.inference(**kw), roof.inference(**kw)
        for k in INFER_KEYS:
            assert c[k + "_lower_bound"] == pytest.approx(r[k], rel=1e-12, abs=1e-15), (setup, kw, k)
            assert c[k] >= c[k + "_lower_bound"]


def test_a_new_shape_builds_no_operator(monkeypatch):
    """After the tables are fitted, a calibrated call with an unseen shape times every operator
    from them, as the roofline does (building operators is the slow path of a sweep)."""
    from llm_analysis.model.phase_table import FIT_AFTER
    a = _analysis("NousResearch_Llama-2-7b-hf", "a100-sxm-80gb", 4, 1, perf_model="calibrated")
    for i in range(FIT_AFTER + 1):  # tables are fitted once a phase kind has been used FIT_AFTER times
        a.inference(batch_size_per_gpu=2, seq_len=300 + i, num_tokens_to_generate=20)

    def refuse(self, phase, stage=None):
        raise AssertionError(f"operators built for {phase}")
    monkeypatch.setattr(LayerDescriber, "build_model_parts", refuse)
    r = a.inference(batch_size_per_gpu=3, seq_len=333, num_tokens_to_generate=33)
    assert r["total_latency"] > r["total_latency_lower_bound"] > 0
