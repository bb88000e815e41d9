"""The flash-attention backward below its forward's FLOP rate (cost/gemm.py `flash_backward_rate`,
calibrated models only).

Independent source: Shah et al. 2024 (FlashAttention-3, arXiv 2407.08608), forward and backward
speed plots on H100 SXM5 at head dim 128 without a causal mask, TFLOP/s per sequence length
512, 1k, 2k, 4k, 8k, 16k, three kernels (values printed on the bars)."""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name
from llm_analysis.cost.calibrated import CalibratedCostModel
from llm_analysis.cost.gemm import flash_backward_rate
from test_training import gpt

SEQ = (512, 1024, 2048, 4096, 8192, 16384)
FORWARD = {"FlashAttention-2": (309, 350, 362, 368, 370, 370), "cuDNN": (497, 574, 617, 609, 600, 595),
           "FlashAttention-3": (467, 565, 625, 638, 646, 648)}
BACKWARD = {"FlashAttention-2": (214, 260, 291, 310, 318, 322), "cuDNN": (305, 408, 465, 499, 518, 516),
            "FlashAttention-3": (316, 424, 501, 542, 559, 561)}


def test_the_backward_rate_follows_the_measured_kernels():
    for i, s in enumerate(SEQ):
        mean = sum(BACKWARD[k][i] / FORWARD[k][i] for k in FORWARD) / len(FORWARD)
        assert flash_backward_rate(s) == pytest.approx(mean, abs=0.02), s


H100 = get_gpu_config_by_name("h100-sxm-80gb")
BF16 = get_dtype_config_by_name("w16a16e16")
L, H, A, V, S = 4, 1024, 8, 1000, 4096
KW = dict(batch_size_per_gpu=1, gradient_accumulation_steps=1, seq_len=S)


def _backward_excess_s(monkeypatch, slowed: bool, cp: int = 1) -> float:
    """latency_per_iter_bwd_compute - 2 x fwd: what the attention backward adds over 2x its forward."""
    if not slowed:
        monkeypatch.setattr(CalibratedCostModel, "attention_backward_slowdown", lambda self, s: 1.0)
    r = LLMAnalysis(gpt(L, H, A, V, S), H100, BF16, ParallelismConfig(cp_size=cp),
                    perf_model="calibrated").training(**KW)
    monkeypatch.undo()
    return r["latency_per_iter_bwd_compute"] - 2 * r["latency_per_iter_fwd_compute"]


@pytest.mark.parametrize("cp", [1, 2])
def test_the_attention_backward_takes_2_5x_its_forward_at_the_slower_rate(monkeypatch, cp):
    # at the forward's rate the attention backward is 2.5x its forward time, 0.5x more than the
    # other kernels' 2x; at rate r(s) of the forward's it is 2.5 / r(s), (2.5 / r - 2) over 2x;
    # each CP rank's kernel sees s / cp queries
    r = flash_backward_rate(S / cp)
    ratio = _backward_excess_s(monkeypatch, True, cp) / _backward_excess_s(monkeypatch, False, cp)
    assert ratio == pytest.approx((2.5 / r - 2.0) / 0.5, rel=1e-9)


def test_the_roofline_keeps_the_forward_rate():
    r = LLMAnalysis(gpt(L, H, A, V, S), H100, BF16, perf_model="roofline").training(**KW)
    assert LLMAnalysis(gpt(L, H, A, V, S), H100, BF16).cost_model.attention_backward_slowdown(S) == 1.0
    assert r["latency_per_iter_bwd_compute"] > 2 * r["latency_per_iter_fwd_compute"]
