"""The lower bound beside a calibrated prediction, once the phase tables are compiled, comes
from the calibrated programs themselves (cost/calibrated_programs.py writes the roofline's
totals into `bound_out`; facade_perf._fused_bounds reads them, and the call's kept summary holds
them for a repeated call) and, for training, from the
calibrated run's batch choice (facade_perf._training_bounds). Expected values: the same call
on an analysis with perf_model="roofline" (a separate code path: the roofline's own programs,
group sums and full training run), to 1e-12 (its sums are added in another order)."""

from __future__ import annotations

import itertools
import logging

import pytest

import llm_analysis.cost.choice as facade_perf
from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
from llm_analysis.inference import inference_times
from llm_analysis.inference.run import FINISHED_SUMMARY
from llm_analysis.model.phase_table import COMPILE_AFTER, FIT_AFTER
from llm_analysis.schema.options import DSZeRO

INFER_KEYS = ("prefill_latency", "time_to_first_token", "decode_latency", "time_per_output_token",
              "total_decode_latency", "total_latency")
TRAIN_KEYS = ("latency_fwd", "latency_per_micro_batch", "latency_per_iter", "total_training_latency")
SETUPS = [("facebook_opt-1.3b", "a100-sxm-40gb", dict(tp_size=2), {}),
          ("meta-llama_Llama-3.1-8B", "h100-sxm-80gb", dict(tp_size=2, dp_size=2), dict(flops_efficiency=0.7)),
          ("NousResearch_Llama-2-7b-hf", "a100-sxm-80gb", dict(tp_size=2, pp_size=2), {})]  # pp: not fused


def _analysis(name, gpu, par, opts, perf_model):
    return LLMAnalysis(get_model_config_by_name(name), get_gpu_config_by_name(gpu),
                       get_dtype_config_by_name("w16a16e16"), ParallelismConfig(**par), perf_model=perf_model,
                       **opts)


def _warm(a):
    """Past FIT_AFTER + COMPILE_AFTER uses of each phase kind: tables fitted, programs compiled
    (prompts of 200 to 339 tokens: the shapes below are new)."""
    for i in range(FIT_AFTER + COMPILE_AFTER + 10):
        a.inference(batch_size_per_gpu=1 + i % 3, seq_len=200 + i, num_tokens_to_generate=9)


@pytest.mark.parametrize("setup", SETUPS)
def test_fused_bounds_are_the_roofline_call(setup, monkeypatch):
    logging.disable(logging.WARNING)
    cal, roof = _analysis(*setup, "calibrated"), _analysis(*setup, "roofline")
    _warm(cal)
    fallbacks = []
    real = facade_perf.inference_lower_bounds
    monkeypatch.setattr(facade_perf, "inference_lower_bounds", lambda *a: fallbacks.append(a) or real(*a))
    # new shapes, the last shape again, an earlier shape again after others (its summary kept with
    # its cached times), and a shape whose times another caller put in the cache (inference_times:
    # no bound kept) after others ran the programs: their bound is another shape's (fallback)
    view = cal.with_conventions(cal.conventions_named(None))  # what inference() analyses
    kept = inference_times(view, view.describer, 2, 611, 7, True, DSZeRO.NONE)
    assert FINISHED_SUMMARY not in kept  # (inference_times hands out no summary)
    shapes = [(3, 517, 40), (1, 900, 1), (2, 1333, 2), (2, 1333, 2), (3, 517, 40), (4, 128, 300), (2, 611, 7)]
    used_fallback = []
    for b, s, n in shapes:
        kw = dict(batch_size_per_gpu=b, seq_len=s, num_tokens_to_generate=n)
        before = len(fallbacks)
        c, r = cal.inference(**kw), roof.inference(**kw)
        used_fallback.append(len(fallbacks) > before)
        for k in INFER_KEYS:
            assert c[k + "_lower_bound"] == pytest.approx(r[k], rel=1e-12), (setup, kw, k)
        again = cal.inference(**kw)  # repeated: the summary, bound included, kept beside the times
        assert all(again[k + "_lower_bound"] == c[k + "_lower_bound"] for k in INFER_KEYS)
    assert FINISHED_SUMMARY not in inference_times(view, view.describer, 3, 517, 40, True, DSZeRO.NONE)
    logging.disable(logging.NOTSET)
    pipelined = setup[2].get("pp_size", 1) > 1  # pipeline hand-offs: never fused
    if pipelined:
        assert used_fallback[:3] == [True] * 3
    else:
        assert used_fallback == [False] * 6 + [True]


@pytest.mark.parametrize("setup", SETUPS)
def test_training_bounds_are_the_roofline_call(setup):
    logging.disable(logging.WARNING)
    cal, roof = _analysis(*setup, "calibrated"), _analysis(*setup, "roofline")
    for b, s, m, rc, zero in itertools.islice(itertools.product((1, 2), (256, 1000), (1, 4), (0, 2), (0, 1)), 12):
        kw = dict(batch_size_per_gpu=b, seq_len=s, gradient_accumulation_steps=m, activation_recomputation=rc,
                  ds_zero=zero, total_num_tokens=1e9)
        c, r = cal.training(**kw), roof.training(**kw)
        for k in TRAIN_KEYS:
            assert c[k + "_lower_bound"] == pytest.approx(r[k], rel=1e-12), (setup, kw, k)
    r = cal.training(batch_size_per_gpu=1, seq_len=512, gradient_accumulation_steps=2)  # no token total
    assert r["total_training_latency_lower_bound"] is None and r["latency_per_iter_lower_bound"] > 0
    logging.disable(logging.NOTSET)


def test_bound_reads_the_kv_cache_dtype():
    """kv_cache_dtype names the cache's element size: the bound times the same cache as the
    calibrated pass (it once read the activation-size cache: a 'lower bound' above the prediction)."""
    logging.disable(logging.WARNING)
    setup = ("meta-llama_Llama-3.1-8B", "h100-sxm-80gb", {}, {})
    cal, roof = _analysis(*setup, "calibrated"), _analysis(*setup, "roofline")
    kw = dict(batch_size_per_gpu=32, seq_len=4000, num_tokens_to_generate=200, kv_cache_dtype="fp8")
    c, r = cal.inference(**kw), roof.inference(**kw)
    logging.disable(logging.NOTSET)
    for k in INFER_KEYS:
        assert c[k + "_lower_bound"] == pytest.approx(r[k], rel=1e-12), k
        assert c[k] >= c[k + "_lower_bound"], k


@pytest.mark.parametrize("setup", [("facebook_opt-1.3b", "a100-sxm-40gb", dict(tp_size=2), {}),
                                   ("meta-llama_Llama-3.1-70B", "a100-sxm-80gb", dict(tp_size=8),
                                    dict(num_gpus_per_node=4))],  # TP across nodes: a called collective
                         ids=lambda s: s[0])
def test_program_bounds_are_the_loops_bit_for_bit(setup, monkeypatch):
    """The lower bound the calibrated programs leave in `bound_out` is the roofline loops' float
    (`roofline_phase_s` / `roofline_decode_s` walking the tables), not only close to it."""
    from llm_analysis.cost.calibrated_bound import roofline_decode_s, roofline_phase_s
    import llm_analysis.model.phase_table as phase_table_module
    from llm_analysis.model.phase_table import phase_table
    from llm_analysis.cost.phase_programs import phase_program
    monkeypatch.setattr(phase_table_module, "COMPILE_AFTER", 0)
    a = _analysis(*setup, "calibrated")
    cm, d = a.cost_model, a.describer
    prefill, decode = phase_table(d, "prefill"), phase_table(d, "decode")
    programs = phase_program(cm, prefill, "prefill"), phase_program(cm, decode, "decode")
    shapes = [(1, 2), (3, 1000), (64, 8191), (7, 100_003)]
    got = []
    for b, x in shapes:
        programs[0](b, x)
        got.append(programs[0].bound_out[0][1])  # (groups, total)
        for steps in (1, 2, 500):
            programs[1](b, x, x + steps - 1, steps)
            got += programs[1].bound_out[0][1:3]  # (groups, first, total, b, x0, n)
    monkeypatch.setattr(phase_table_module, "COMPILE_AFTER", 10**9)  # the loops
    roof = a.lower_bound_cost_model
    roof.__dict__.pop("_bound_functions", None)
    want = []
    for b, x in shapes:
        want.append(roofline_phase_s(roof, prefill, b, x))
        for steps in (1, 2, 500):
            want += roofline_decode_s(roof, decode, b, x, steps)
    assert got == want
