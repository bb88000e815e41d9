"""`get_latency_fwd(b, seq_len, is_inference=False)` is the forward pass training() times: its total equals
the summary's `latency_fwd` for the same layout and micro-batch, under the roofline and under
perf_model="calibrated", whose training() is timed with its training view (training rates, the eager kernel
floor: cost/calibrated.py `for_call`). Before, the calibrated call timed the forward with the serving view
and came out 13-22% below training()'s `latency_fwd` for these setups. The relation is between two entry
points, not a figure of our own output: training() sums its stages' forward parts (training/summary.py),
get_latency_fwd the phase's operator groups (quantities/latency.py)."""

import pytest

from llm_analysis.analysis import LLMAnalysis, ParallelismConfig

SETUPS = {  # (model, GPU, layout, micro-batch, sequence length, training() options)
    "dense": ("facebook_opt-1.3b", "a100-sxm-80gb", dict(tp_size=1, dp_size=2), 4, 1024, {}),
    "dense-pipelined": ("facebook_opt-1.3b", "a100-sxm-80gb", dict(tp_size=2, pp_size=2), 2, 1024, {}),
    "moe": ("Qwen_Qwen3-30B-A3B", "h100-sxm-80gb", dict(tp_size=2, dp_size=8, ep_size=8), 1, 2048,
            dict(ds_zero=3)),
}


@pytest.mark.parametrize("perf_model", ["roofline", "calibrated"])
@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_training_forward_equals_training_latency_fwd(setup, perf_model):
    model, gpu, layout, b, seq_len, options = SETUPS[setup]
    a = LLMAnalysis(model, gpu, "w16a16e16", ParallelismConfig(**layout), perf_model=perf_model)
    summary = a.training(batch_size_per_gpu=b, seq_len=seq_len, gradient_accumulation_steps=4, **options)
    forward_s, parts = a.get_latency_fwd(b, seq_len, is_inference=False)
    assert forward_s == pytest.approx(summary["latency_fwd"], rel=1e-9)
    assert sum(parts.values()) == pytest.approx(forward_s, rel=1e-12)


def test_the_inference_forward_is_unchanged_by_the_training_view():
    # is_inference=True (the default) stays the serving view: under calibrated it differs from the training one
    model, gpu, layout, b, seq_len, _ = SETUPS["dense"]
    a = LLMAnalysis(model, gpu, "w16a16e16", ParallelismConfig(**layout), perf_model="calibrated")
    assert a.get_latency_fwd(b, seq_len)[0] == a.get_latency_fwd(b, seq_len, is_inference=True)[0]
    assert a.get_latency_fwd(b, seq_len)[0] != a.get_latency_fwd(b, seq_len, is_inference=False)[0]
