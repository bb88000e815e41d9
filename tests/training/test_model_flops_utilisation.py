"""mfu and hfu count the model's FLOPs: routed experts top-k, as the active parameters do, also for a model whose
eager code runs every expert on every token (Llama 4: transformers' Llama4TextMoe repeats each token for all E
experts and scales each copy by its router score, 0 outside the top-k; FlopCounterMode counts E / k times the
routed expert matmuls, and so do num_flops_* and num_model_flops_per_iter under the default conventions). Before,
mfu divided that count by a time that follows the routed work: 12.2 for Llama 4 Maverick on TPU v5p."""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig

H200_BF16_DENSE_FLOPS = 989e12  # NVIDIA H200 SXM datasheet: 989 TFLOPS bf16 dense (1,979 with sparsity)


@pytest.mark.parametrize("model,experts,moe_layers", [
    # Llama 4 Scout: 48 layers, every one MoE, 16 experts top-1, expert width 8192 (config.json
    # intermediate_size; hidden 5120); Maverick: 128 experts, MoE every other layer (interleave_moe_layer_step 2)
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", 16, 48),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", 128, 24)])
def test_eager_experts_leave_mfu_to_the_routed_work(model, experts, moe_layers):
    a = LLMAnalysis(model, "h200-sxm-141gb", "bf16", ParallelismConfig(tp_size=8, dp_size=8))
    s = a.training(batch_size_per_gpu=1, seq_len=4096, total_num_tokens=1e10, ds_zero=3, activation_recomputation=4)
    tokens, h, f, top_k = s["global_batch_size"] * 4096, 5120, 8192, 1
    # by hand: the eager forward's extra, (E / k - 1) x the routed experts' 2 x tokens x 3 gated matrices of h x f,
    # forward + backward (3x) per iteration
    extra_fwd = (experts // top_k - 1) * 2 * tokens * 3 * h * f * moe_layers
    assert s["num_model_flops_per_iter"] - s["num_model_flops_per_iter_routed"] == pytest.approx(3 * extra_fwd,
                                                                                                  rel=1e-9)
    assert s["mfu"] == pytest.approx(s["num_model_flops_per_iter_routed"]
                                     / (s["latency_per_iter"] * 64 * H200_BF16_DENSE_FLOPS), rel=1e-9)
    # full recomputation runs the forward once more: hfu drops its extra too (3x forward + 1x recomputed)
    hw_routed = s["num_hardware_flops_per_iter"] - 4 * extra_fwd
    assert s["hfu"] == pytest.approx(hw_routed / (s["latency_per_iter"] * 64 * H200_BF16_DENSE_FLOPS), rel=1e-9)
    assert 0 < s["mfu"] < s["hfu"] <= 1
    assert any("num_model_flops_per_iter_routed" in n for n in s["notes"])


def test_routed_models_keep_their_count():
    """A MoE whose eager code runs top-k only (Qwen3-30B-A3B) counts the same FLOPs for mfu as the conventions do."""
    a = LLMAnalysis("Qwen/Qwen3-30B-A3B", "h200-sxm-141gb", "bf16", ParallelismConfig(tp_size=8))
    s = a.training(batch_size_per_gpu=1, seq_len=4096, total_num_tokens=1e9)
    assert s["num_model_flops_per_iter_routed"] == s["num_model_flops_per_iter"]
    assert s["mfu"] == pytest.approx(s["num_model_flops_per_iter"]
                                     / (s["latency_per_iter"] * 8 * H200_BF16_DENSE_FLOPS), rel=1e-9)
    assert not any("num_model_flops_per_iter_routed" in n for n in s["notes"])
