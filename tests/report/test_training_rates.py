"""A training summary and its report state the compute rate its times use.

Under the calibrated model a training step is timed by the cost model's training view (compute at the profile's
`training_compute_efficiency`, cost/choice.py `training`); the summary's `flops_efficiency` and the report's
"expected rates" line had stated the inference view's (Llama-3-70B tp8 pp4 dp2 on H100: flops_efficiency 0.80
beside achieved_tflops 659, i.e. 67% of the 989 TFLOP/s peak; the header said "793.3 TFLOP/s (80% of peak)"
above "2.06 s from FLOPs / achieved FLOP/s" computed at 659). Expected values come from laws:

- achieved_tflops = flops_efficiency x the dtype's dense peak (the GPU's datasheet 16-bit figure for bf16);
- latency_per_iter_using_flops = hardware FLOPs per GPU per iteration / achieved FLOP/s;
- the training rate is the inference rate x the profile's training_compute_efficiency (the share it states);
- the report's "expected rates" line prints the summary's achieved_tflops and flops_efficiency."""

import re

import pytest

from llm_analysis.report.render import render


@pytest.fixture
def analysis(analysis_builder):
    return analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", dp_size=8, perf_model="calibrated")


def _train(a):
    return a.training(batch_size_per_gpu=1, global_batch_size=16, seq_len=2048, ds_zero=1)


def test_training_summary_states_the_rate_its_times_use(analysis, quiet_package_warnings):
    s = _train(analysis)
    peak_tflops = analysis.gpu_config.peak_fp16_TFLOPS  # bf16: the dense 16-bit peak (989 on an H100 SXM)
    assert s["achieved_tflops"] == pytest.approx(s["flops_efficiency"] * peak_tflops, rel=1e-9)
    flops_per_gpu = s["num_hardware_flops_per_iter"] / analysis.parallelism_config.num_gpus
    assert s["latency_per_iter_using_flops"] == pytest.approx(flops_per_gpu / (s["achieved_tflops"] * 1e12),
                                                              rel=1e-9)
    # inference keeps its own view (the benchmarks' rate): the same law, and training's is its share of it
    inf = analysis.inference(batch_size_per_gpu=8, seq_len=2048, num_tokens_to_generate=16)
    assert inf["achieved_tflops"] == pytest.approx(inf["flops_efficiency"] * peak_tflops, rel=1e-9)
    share = analysis.profile.values["training_compute_efficiency"]
    assert share < 1  # (else the two views coincide and this test tells nothing)
    assert s["flops_efficiency"] == pytest.approx(inf["flops_efficiency"] * share, rel=1e-9)


def test_training_report_expected_rates_line_is_the_training_views(analysis, quiet_package_warnings):
    s = _train(analysis)
    text = " ".join(render(analysis, s, "training", color=False).split())
    m = re.search(r"expected rates large GEMMs and streaming at ([\d.]+) TFLOP/s \((\d+)% of peak\)", text)
    assert m, text[:2000]
    assert float(m.group(1)) == pytest.approx(s["achieved_tflops"], abs=0.05)
    assert int(m.group(2)) == round(100 * s["flops_efficiency"])
    assert "training compute share" in text


@pytest.mark.parametrize("launch", ["native", "eager"])
def test_inference_report_without_graphs_states_the_sustained_rate(analysis_builder, quiet_package_warnings, launch):
    # inference() without CUDA graphs is timed by the sustained view (compute at the profile's share): its
    # summary and the report's "expected rates" line state that rate (achieved_tflops = flops_efficiency x peak)
    a = analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", perf_model="calibrated", kernel_launch=launch)
    s = a.inference(batch_size_per_gpu=8, seq_len=2048, num_tokens_to_generate=16)
    assert s["achieved_tflops"] == pytest.approx(s["flops_efficiency"] * a.gpu_config.peak_fp16_TFLOPS, rel=1e-9)
    text = " ".join(render(a, s, "inference", color=False).split())
    m = re.search(r"expected rates large GEMMs and streaming at ([\d.]+) TFLOP/s \((\d+)% of peak\)", text)
    assert m, text[:2000]
    assert float(m.group(1)) == pytest.approx(s["achieved_tflops"], abs=0.05)
    assert "sustained compute share" in text
