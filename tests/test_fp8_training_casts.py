"""FP8 training's cast kernels (llm_analysis/training/fp8_casts.py), hand-derived for the small
GPT of test_training.py on an H100 under the calibrated model: per linear and micro-batch a
cast-transpose of its input X (M x K), of its weight W (K x N) and, in backward, of its output
gradient dY (M x N), each reading 2 bytes and writing 1 + 1 per element (TransformerEngine's
Linear under fp8_autocast), each one memory-bound kernel of the profile's HBM rate and eager floor."""

from __future__ import annotations

import pytest

from llm_analysis.analysis import ActivationRecomputation as R
from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_dtype_config_by_name, get_gpu_config_by_name
from llm_analysis.cost.profiles import load_profile
from test_training import A_, H_, L_, S_, V_, gpt

H100 = get_gpu_config_by_name("h100-sxm-80gb")
FP8 = get_dtype_config_by_name("fp8")
B, M_STEPS = 2, 3
KW = dict(batch_size_per_gpu=B, gradient_accumulation_steps=M_STEPS, seq_len=S_)


def _pass_s(nbytes: float) -> float:
    """One memory-only kernel under the Hopper profile: (bytes + half-saturation) / (HBM x
    efficiency), never below the eager kernel floor (training launches eagerly); none for 0 bytes."""
    v = load_profile("hopper").values
    if nbytes == 0:
        return 0.0
    return max((nbytes + v["hbm_half_saturation_bytes"]) / (H100.hbm_bandwidth_in_GB_per_sec * 1e9
                                                            * v["hbm_efficiency"]), v["kernel_floor_eager_s"])


def _layer_linears(h: int = H_):
    """(K, N, input cast here, recomputed under ATTN) of a GPT layer's linears: q, k, v read one
    input (cast once, with q), o; the MLP's 4h up and down projections."""
    return [(h, h, True, True), (h, h, False, True), (h, h, False, True), (h, h, True, True),
            (h, 4 * h, True, False), (4 * h, h, True, False)]


def _casts_per_micro_batch_s(recompute_attn: bool = False, recompute_all: bool = False, layers: int = L_,
                             h: int = H_, seq_len: int = S_) -> float:
    tokens = B * seq_len
    total = 0.0
    for k, n, input_cast, attn in _layer_linears(h):
        forward = _pass_s(4 * tokens * k if input_cast else 0) + _pass_s(4 * k * n)
        again = recompute_all or (recompute_attn and attn)
        total += forward * (2 if again else 1) + _pass_s(4 * tokens * n)
    return layers * total


def _analysis(perf_model: str = "calibrated", dtype=FP8) -> LLMAnalysis:
    return LLMAnalysis(gpt(L_, H_, A_, V_, S_), H100, dtype, perf_model=perf_model)


def test_each_linear_casts_its_input_weight_and_output_gradient():
    r = _analysis().training(**KW)  # (every pass at the kernel floor: 256-wide layers, 256 tokens)
    assert r["latency_per_iter_fp8_casts"] == pytest.approx(M_STEPS * _casts_per_micro_batch_s(), rel=1e-12)


def test_wide_layers_cast_at_the_hbm_rate():
    L, h, s = 2, 4096, 2048  # X of a 4096-wide linear: 4096 tokens x 4096 x 4 bytes = 67 MB, ~27 us > floor
    assert 4 * B * s * h / (H100.hbm_bandwidth_in_GB_per_sec * 1e9) > load_profile("hopper").values["kernel_floor_eager_s"]
    a = LLMAnalysis(gpt(L, h, 32, V_, s), H100, FP8, perf_model="calibrated")
    r = a.training(batch_size_per_gpu=B, gradient_accumulation_steps=M_STEPS, seq_len=s)
    expected = M_STEPS * _casts_per_micro_batch_s(layers=L, h=h, seq_len=s)
    assert r["latency_per_iter_fp8_casts"] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("mode, attn, everything", [(R.ATTN, True, False), (R.FULL, False, True)])
def test_a_recomputed_forward_casts_its_inputs_and_weights_again(mode, attn, everything):
    r = _analysis().training(**KW, activation_recomputation=mode)
    expected = M_STEPS * _casts_per_micro_batch_s(recompute_attn=attn, recompute_all=everything)
    assert r["latency_per_iter_fp8_casts"] == pytest.approx(expected, rel=1e-12)


def test_the_casts_are_part_of_the_iteration_and_nowhere_else():
    cal = _analysis().training(**KW)
    informative = ("latency_per_iter_dp_comm_total", "latency_per_iter_dp_comm_hidden", "latency_per_iter_using_flops",
                   "latency_per_iter_lower_bound")  # (beside the breakdown: not parts of the iteration)
    parts = sum(v for key, v in cal.items() if key.startswith("latency_per_iter_") and key not in informative)
    assert cal["latency_per_iter"] == pytest.approx(parts, rel=1e-12)
    # the roofline (a lower bound) and 16-bit training run no cast kernels: no entry
    assert "latency_per_iter_fp8_casts" not in _analysis("roofline").training(**KW)
    bf16 = get_dtype_config_by_name("w16a16e16")
    assert "latency_per_iter_fp8_casts" not in _analysis(dtype=bf16).training(**KW)
