"""A repeated inference() call returns what its first call returned (a call's times are kept per
shape: inference/run.py). What must hold: nothing a caller does to a returned summary reaches a
later one, and every input that changes the summary (configs replaced with the update_* methods,
cost per GPU-hour, KV-cache dtype, conventions, perf_model) gives the summary a fresh analysis
gives for it."""

from __future__ import annotations

import copy

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name, get_model_config_by_name

OPT = get_model_config_by_name("facebook_opt-1.3b")
LLAMA = get_model_config_by_name("NousResearch_Llama-2-7b-hf")
H100 = get_gpu_config_by_name("h100-sxm-80gb")
A100_40 = get_gpu_config_by_name("a100-sxm-40gb")
KW = {"batch_size_per_gpu": 4, "seq_len": 512, "num_tokens_to_generate": 64}


def _containers(value, found):
    """Every dict and list inside `value` (itself included)."""
    if isinstance(value, (dict, list)):
        found.append(value)
        for item in (value.values() if isinstance(value, dict) else value):
            _containers(item, found)
    return found


def _spoil(value) -> None:
    """Change every number, list and dict inside `value` in place."""
    if isinstance(value, dict):
        for key, item in list(value.items()):
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                value[key] = -1.0
            else:
                _spoil(item)
        value["spoiled"] = True
    elif isinstance(value, list):
        value.append("spoiled")


@pytest.mark.parametrize("perf_model", ["roofline", "calibrated"])
def test_a_changed_summary_does_not_reach_the_next_call(perf_model):
    a = LLMAnalysis(LLAMA, H100, parallelism_config=ParallelismConfig(tp_size=2), perf_model=perf_model)
    first = a.inference(**KW)
    expected = copy.deepcopy(first)
    _spoil(first)
    assert first != expected  # (the spoiling changed it)
    second = a.inference(**KW)
    assert second == expected
    # ... and no dict or list is shared between two summaries, either way round
    assert not {id(c) for c in _containers(second, [])} & {id(c) for c in _containers(a.inference(**KW), [])}
    _spoil(second)
    assert a.inference(**KW) == expected


@pytest.mark.parametrize("perf_model", ["roofline", "calibrated"])
def test_a_replaced_config_gives_a_fresh_analysis_summary(perf_model):
    a = LLMAnalysis(OPT, A100_40, perf_model=perf_model)
    a.inference(**KW)
    a.update_gpu_config(get_gpu_config_by_name("a100-sxm-80gb"))  # another memory size and bandwidth
    a.update_parallelism_config(ParallelismConfig(tp_size=2))
    fresh = LLMAnalysis(OPT, get_gpu_config_by_name("a100-sxm-80gb"), parallelism_config=ParallelismConfig(tp_size=2),
                        perf_model=perf_model)
    assert a.inference(**KW) == fresh.inference(**KW)
    b = LLMAnalysis(OPT, H100, perf_model=perf_model)
    b.inference(**KW)
    b.update_hbm_memory_efficiency(0.5)
    assert b.inference(**KW) == LLMAnalysis(OPT, H100, hbm_memory_efficiency=0.5,
                                            perf_model=perf_model).inference(**KW)


def test_cost_per_gpu_hour_reaches_a_repeated_call():
    a = LLMAnalysis(OPT, H100)
    with_cost = a.inference(**KW, cost_per_gpu_hour=2.0)
    without = a.inference(**KW)
    assert "prefill_cost_per_1k_tokens" in with_cost and "prefill_cost_per_1k_tokens" not in without
    tripled = a.inference(**KW, cost_per_gpu_hour=6.0)
    for key in ("prefill_cost_per_1k_tokens", "decode_cost_per_1k_tokens", "total_cost_per_1k_tokens"):
        # dollars are linear in the hourly price (run.py: price x GPUs / 3600 x seconds per token)
        assert tripled[key] == pytest.approx(3 * with_cost[key], rel=1e-12)
    assert a.inference(**KW, cost_per_gpu_hour=2.0) == with_cost


def test_kv_cache_dtype_and_conventions_are_part_of_it():
    a = LLMAnalysis(LLAMA, H100)
    fp16 = a.inference(**KW)
    fp8 = a.inference(**KW, kv_cache_dtype="fp8")
    # one byte per element instead of two: half the cache
    assert fp8["kv_cache_memory_per_gpu"] == pytest.approx(fp16["kv_cache_memory_per_gpu"] / 2, rel=1e-12)
    eager = a.inference(**KW, conventions="transformers")
    assert eager == LLMAnalysis(LLAMA, H100).inference(**KW, conventions="transformers")
    assert eager["prefill_num_flops_fwd_total"] != fp16["prefill_num_flops_fwd_total"]
    assert a.inference(**KW) == fp16


def test_a_repeated_calibrated_call_keeps_its_lower_bound_entries():
    a = LLMAnalysis(LLAMA, H100, perf_model="calibrated")
    first = a.inference(**KW)
    bound_keys = [k for k in first if k.endswith("_lower_bound")]
    assert len(bound_keys) == 6 and first["perf_model"]  # (the six times of cost/choice.py _calibrated_entries)
    second = a.inference(**KW)
    assert list(second) == list(first) and second == first
    # the bound is the roofline's time of the call (cost/choice.py): a roofline analysis gives it
    roof = LLMAnalysis(LLAMA, H100).inference(**KW)
    assert second["total_latency_lower_bound"] == pytest.approx(roof["total_latency"], rel=1e-12)


def test_attributes_set_directly_reach_the_summary():
    """Set without update_* (which rebuilds the cost model), a config or an efficiency still
    reaches the entries the summary reads from the analysis: the GPU's name, the efficiency
    entries themselves (the times stay those of the cost model, as before)."""
    from llm_analysis.inference import run_inference  # (inference() runs on a cached conventions view)

    a = LLMAnalysis(OPT, H100)
    run_inference(a, **KW)
    a.gpu_config = H100.model_copy(update={"name": "h100-renamed"})
    assert run_inference(a, **KW)["gpu_name"] == "h100-renamed"
    a.flops_efficiency = 0.5
    assert run_inference(a, **KW)["flops_efficiency"] == 0.5


def test_a_callers_hook_reaches_only_its_own_calls():
    from llm_analysis.inference import run_inference

    a = LLMAnalysis(OPT, H100)
    def hook(analysis, d, t, summary, ds_zero):  # noqa: E306
        summary["mine"] = {"value": 1}
    first = run_inference(a, **KW, summary_hook=hook)
    first["mine"]["value"] = 99
    assert run_inference(a, **KW, summary_hook=hook)["mine"] == {"value": 1}
    assert "mine" not in run_inference(a, **KW) and "mine" not in a.inference(**KW)


def test_a_view_timed_by_another_cost_model_gets_no_calibrated_entries():
    """cost/choice.py with_cost_model: the calibrated analysis' roofline view is a roofline summary."""
    from llm_analysis.cost.choice import with_cost_model
    from llm_analysis.inference import run_inference

    cal = LLMAnalysis(LLAMA, H100, perf_model="calibrated")
    view = with_cost_model(cal, cal.lower_bound_cost_model)
    s = run_inference(view, **KW)
    assert "perf_model" not in s and not [k for k in s if k.endswith("_lower_bound")]
    assert s["total_latency"] == run_inference(LLMAnalysis(LLAMA, H100), **KW)["total_latency"]
