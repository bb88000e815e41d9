"""The training loss over the vocabulary (llm_analysis/training/loss.py), hand-derived: per
micro-batch, on the last pipeline stage, the float32 cross-entropy chain PyTorch runs under autocast
moves 14 bytes per logit element forward (cast bf16 -> fp32: read 2, write 4; log-softmax: read 4,
write 4) and 22 backward (nll_loss's dense gradient: write 4; log-softmax backward: read 4 + 4,
write 4; cast back: read 4, write 2), each direction one memory-bound pass at the profile's HBM
rate and eager floor. Logits per GPU: tokens / cp x V / tp."""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name
from llm_analysis.cost.profiles import load_profile
from test_training import gpt

H100 = get_gpu_config_by_name("h100-sxm-80gb")
BF16 = get_dtype_config_by_name("w16a16e16")
# a 125M-class GPT with a 50k vocabulary: the loss is a visible share of its step
L, H, A, V, S = 12, 768, 12, 50368, 2048
B, M_STEPS = 4, 2
KW = dict(batch_size_per_gpu=B, gradient_accumulation_steps=M_STEPS, seq_len=S)


def _pass_s(nbytes: float) -> float:
    """One memory-only kernel under the Hopper profile: (bytes + half-saturation) / (HBM x efficiency),
    never below the eager floor (training launches eagerly)."""
    v = load_profile("hopper").values
    return max((nbytes + v["hbm_half_saturation_bytes"]) / (H100.hbm_bandwidth_in_GB_per_sec * 1e9
                                                            * v["hbm_efficiency"]), v["kernel_floor_eager_s"])


def _loss_per_micro_batch_s(tp: int = 1, cp: int = 1) -> float:
    logits = B * S / cp * V / tp
    return _pass_s((2 + 4 + 4 + 4) * logits) + _pass_s((4 + 4 + 4 + 4 + 4 + 2) * logits)


def _analysis(perf_model="calibrated", **par) -> LLMAnalysis:
    return LLMAnalysis(gpt(L, H, A, V, S), H100, BF16, ParallelismConfig(**par), perf_model=perf_model)


def test_the_loss_streams_the_logits_forward_and_backward():
    r = _analysis().training(**KW)
    assert r["latency_per_iter_loss"] == pytest.approx(M_STEPS * _loss_per_micro_batch_s(), rel=1e-12)
    # what it is worth for a small model: per token 36 x 50368 bytes = 1.8 MB (~0.6 us at the H100's
    # streaming rate) against ~6 x 124M FLOPs plus attention (~2.5 us at its training rate): ~20%
    assert 0.1 < r["latency_per_iter_loss"] / r["latency_per_iter"] < 0.3


def test_tensor_parallel_ranks_hold_a_vocabulary_shard():
    r = _analysis(tp_size=2).training(**KW)
    assert r["latency_per_iter_loss"] == pytest.approx(M_STEPS * _loss_per_micro_batch_s(tp=2), rel=1e-12)


def test_context_parallel_ranks_hold_a_sequence_shard():
    r = _analysis(cp_size=2).training(**KW)
    assert r["latency_per_iter_loss"] == pytest.approx(M_STEPS * _loss_per_micro_batch_s(cp=2), rel=1e-12)


def test_the_loss_is_part_of_the_iteration():
    r = _analysis().training(**KW)
    parts = sum(v for k, v in r.items() if k.startswith("latency_per_iter_") and k not in (
        "latency_per_iter_using_flops", "latency_per_iter_lower_bound", "latency_per_iter_dp_comm_total",
        "latency_per_iter_dp_comm_hidden"))
    assert parts == pytest.approx(r["latency_per_iter"], rel=1e-12)


def test_the_roofline_bound_charges_no_loss_pass():
    r = _analysis("roofline").training(**KW)
    assert "latency_per_iter_loss" not in r
