"""The optimizer's master copy of the weights (quantities/state.py `master_copy_bytes_per_param`): held
only where the weights are stored in fewer bytes than the master dtype.

Published figures: Rajbhandari et al. 2020 (ZeRO, arXiv 1910.02054) §3.1: mixed-precision Adam holds
2 (fp16 weights) + 2 (fp16 gradients) + 12 (fp32 master copy, momentum, variance) = 16 bytes per
parameter. fp32 training has no separate master copy, the fp32 weights are the master: 4 (weights) + 4
(gradients) + 8 (two fp32 moments) = 16 bytes per parameter, not 20. Pure-bf16 AdamW (no master copy,
`master_weights_dtype_bytes=0`) holds 2 + 2 + 8 = 12.

Every expected value is derived by hand below from the model's shapes; none is copied from our output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import DtypeConfig, ModelConfig, ParallelismConfig, get_gpu_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.training import LoRAConfig

REPO = Path(__file__).resolve().parents[2]
A100 = get_gpu_config_by_name("a100-sxm-80gb")
BF16 = DtypeConfig(name="w16a16e16", weight_bits=16, activation_bits=16, embedding_bits=16)
FP32 = DtypeConfig(name="w32a32e32", weight_bits=32, activation_bits=32, embedding_bits=32)
FP8 = DtypeConfig(name="w8a8e16-fp8", weight_bits=8, activation_bits=8, embedding_bits=16, weight_format="float",
                  activation_format="float")
L_, H_, A_, V_, S_ = 2, 256, 4, 1024, 128


def small_gpt() -> ModelConfig:
    """A GPT layer as Megatron-LM builds it (biases, learned positions, tied embeddings)."""
    return ModelConfig(name="gpt-small", num_layers=L_, n_head=A_, hidden_dim=H_, vocab_size=V_, max_seq_len=S_,
                       qkv_bias=True, attn_out_bias=True, mlp_bias=True, position_embedding_type="learned")


# hand count: per layer q,k,v,o 4h^2 + 4h, MLP 8h^2 + 5h, two LayerNorms 4h; word and position
# embeddings (tied head), final LayerNorm 2h
PARAMS = L_ * (12 * H_ * H_ + 13 * H_) + V_ * H_ + S_ * H_ + 2 * H_


def _analysis(dtype: DtypeConfig, dp: int = 1) -> LLMAnalysis:
    return LLMAnalysis(small_gpt(), A100, dtype, ParallelismConfig(dp_size=dp))


def _train(dtype: DtypeConfig, **kw):
    return _analysis(dtype).training(batch_size_per_gpu=1, seq_len=S_, **kw)


def _bytes_per_param(r) -> tuple:
    return tuple(r[k] / PARAMS for k in ("weight_memory_per_gpu", "gradient_memory_per_gpu",
                                         "optimizer_state_memory_per_gpu"))


def test_mixed_precision_adam_is_the_zero_papers_16_bytes():
    # ZeRO §3.1: 2 (bf16 weights) + 2 (bf16 gradients) + 12 (fp32 master 4 + momentum 4 + variance 4)
    assert _bytes_per_param(_train(BF16)) == pytest.approx((2, 2, 4 + 4 + 4), rel=1e-12)


def test_fp32_weights_are_their_own_master():
    # fp32 weights 4 + fp32 gradients 4 + two fp32 moments 8 = 16, as fp32 PyTorch / DeepSpeed hold; was 20
    w, g, o = _bytes_per_param(_train(FP32))
    assert (w, g, o) == pytest.approx((4, 4, 4 + 4), rel=1e-12)
    assert w + g + o == pytest.approx(16, rel=1e-12)


def test_no_master_copy_with_bf16_weights_is_12_bytes():
    # pure-bf16 AdamW: bf16 weights 2 + bf16 gradients 2 + two fp32 moments 8 (was refused: "must be a number of
    # bytes in [0.125, 8]")
    w, g, o = _bytes_per_param(_train(BF16, master_weights_dtype_bytes=0))
    assert (w, g, o) == pytest.approx((2, 2, 8), rel=1e-12)
    assert w + g + o == pytest.approx(12, rel=1e-12)


def test_master_as_wide_as_the_weights_is_no_separate_copy():
    # bf16 master over bf16 weights: the weights are the master (2 + 2 + 8)
    assert _bytes_per_param(_train(BF16, master_weights_dtype_bytes=2)) == pytest.approx((2, 2, 8), rel=1e-12)


def test_fp8_weights_keep_the_fp32_master():
    # 8-bit weights beside an fp32 master (Megatron's --fp8-param-gather): 1 (embeddings 2) + 2 + 12; the optimizer
    # states of every parameter are 4 + 8
    r = _train(FP8)
    assert r["optimizer_state_memory_per_gpu"] / PARAMS == pytest.approx(12, rel=1e-12)


def test_the_facade_views_follow_the_same_rule():
    # one layer's parameters: 12h^2 + 13h; optimizer states: fp32 weights 8, bf16 weights 12 per parameter
    layer = 12 * H_ * H_ + 13 * H_
    opt32, grad32 = _analysis(FP32).get_memory_optimizer_state_and_gradient_per_layer()
    opt16, grad16 = _analysis(BF16).get_memory_optimizer_state_and_gradient_per_layer()
    assert (opt32, grad32) == pytest.approx((8 * layer, 4 * layer), rel=1e-12)
    assert (opt16, grad16) == pytest.approx((12 * layer, 2 * layer), rel=1e-12)
    assert _analysis(BF16).get_memory_optimizer_state_and_gradient_per_layer(master_weights_dtype_bytes=0)[0] == \
        pytest.approx(8 * layer, rel=1e-12)


@pytest.mark.parametrize("dtype,master,bytes_per_param", [
    # with a master copy: read + write the fp32 master (4 + 4), read + write two fp32 moments (16), read the
    # gradient, write the 16-bit working weight (2)
    (BF16, 4, 4 + 4 + 16 + 2 + 2),
    # fp8 weights beside an fp32 master: the same, the gradient 16-bit (2), the weight written at the 1 byte
    # memory holds it in (weight_memory_per_gpu)
    (FP8, 4, 4 + 4 + 16 + 2 + 1),
    # no master copy: read + write the bf16 weights (2 + 2), read the bf16 gradient (2), the moments (16)
    (BF16, 0, 2 + 2 + 2 + 16),
    # fp32 weights, their own master: read + write them (4 + 4), read the fp32 gradient (4), the moments (16)
    (FP32, 4, 4 + 4 + 4 + 16),
])
def test_optimizer_step_moves_the_bytes_the_rule_holds(dtype, master, bytes_per_param):
    r = _train(dtype, master_weights_dtype_bytes=master)
    assert r["latency_per_iter_optimizer_step"] == pytest.approx(
        PARAMS * bytes_per_param / (A100.hbm_bandwidth_in_GB_per_sec * 1e9), rel=1e-12)


def test_optimizer_step_reads_fp32_main_grads_at_4_bytes():
    # grad_reduce_in_fp32 holds the gradients in an fp32 buffer (4 bytes each, gradient_memory_per_gpu): the step
    # reads them there: master 4 + 4, moments 16, gradient 4, bf16 working weight 2
    r = _train(BF16, grad_reduce_in_fp32=True)
    assert r["gradient_memory_per_gpu"] / PARAMS == pytest.approx(4, rel=1e-12)
    assert r["latency_per_iter_optimizer_step"] == pytest.approx(
        PARAMS * (4 + 4 + 16 + 4 + 2) / (A100.hbm_bandwidth_in_GB_per_sec * 1e9), rel=1e-12)


@pytest.mark.parametrize("order", [(2, 4), (4, 2)])
def test_lora_optimizer_step_moves_the_adapters_bytes_whatever_ran_before(order):
    # no master copy (master_weights_dtype_bytes=0): the adapters read + written at their width, the two fp32
    # moments read + written (16), the gradient read at the adapters' width (as gradient_memory holds it):
    # bf16 2 + 2 + 16 + 2 = 22, fp32 4 + 4 + 16 + 4 = 28. Each width on a fresh analysis and after the other on the
    # same one: a step remembered across the widths (once keyed without the adapters' width) gave the second
    # the first's figure
    per_width = {2: 2 + 2 + 16 + 2, 4: 4 + 4 + 16 + 4}
    a = LLMAnalysis(small_gpt(), A100, BF16, ParallelismConfig(), perf_model="roofline")
    for width in order:
        r = a.training(batch_size_per_gpu=1, seq_len=S_, lora=LoRAConfig(rank=8, adapter_dtype_bytes=width),
                       master_weights_dtype_bytes=0)
        assert r["latency_per_iter_optimizer_step"] == pytest.approx(
            r["num_trainable_params_total"] * per_width[width] / (A100.hbm_bandwidth_in_GB_per_sec * 1e9), rel=1e-12)


def test_lora_adapters_in_fp32_hold_no_master_copy():
    # the same adapters: in bf16 beside an fp32 master 4 + 8 = 12 bytes of state each, in fp32 the 8 of moments
    a = _analysis(BF16)
    kw = dict(batch_size_per_gpu=1, seq_len=S_)
    bf16 = a.training(lora=LoRAConfig(rank=8, adapter_dtype_bytes=2), **kw)
    fp32 = a.training(lora=LoRAConfig(rank=8, adapter_dtype_bytes=4), **kw)
    assert fp32["optimizer_state_memory_per_gpu"] / bf16["optimizer_state_memory_per_gpu"] == \
        pytest.approx(8 / 12, rel=1e-12)


@pytest.mark.parametrize("value", [0.05, -1, float("nan"), 9, "x"])
def test_a_master_width_neither_zero_nor_a_dtype_is_refused(value):
    with pytest.raises(ConfigError, match=r"master_weights_dtype_bytes = .* must be 0 \(no master copy"):
        _train(BF16, master_weights_dtype_bytes=value)


def test_the_planners_memory_bound_stays_below_fp32_training():
    """The planner rules a layout out when its bound exceeds the memory: the bound must not exceed what
    training() holds. fp32: weights 4 + gradients at least 2 + moments 8 = 14 <= 16 held; with the old
    constant 12 bytes of Adam state it was 4 + 2 + 12 = 18 > 16."""
    from llm_analysis.planner.space import adam_state_bytes_per_param, training_state_bytes_lower_bound
    assert adam_state_bytes_per_param(FP32) == 8 and adam_state_bytes_per_param(BF16) == 12
    assert adam_state_bytes_per_param(BF16, 0) == 8
    bound = training_state_bytes_lower_bound(PARAMS, FP32, 1, 1, 1, 1, 0)
    assert bound == pytest.approx(PARAMS * (4 + 2 + 8), rel=1e-12)
    r = _train(FP32)
    held = sum(r[k] for k in ("weight_memory_per_gpu", "gradient_memory_per_gpu", "optimizer_state_memory_per_gpu"))
    assert bound <= held


def _cli(*extra):
    return subprocess.run([sys.executable, "-m", "llm_analysis.analysis", "train", "--model_name", "facebook_opt-125m",
                           "--gpu_name", "a100-sxm-80gb", "--batch_size_per_gpu", "1", "--seq_len", "128",
                           "--output_format", "json", *extra], capture_output=True, text=True, cwd=REPO, timeout=300)


def test_the_command_line_takes_no_master_copy_and_refuses_a_bad_width():
    ok = _cli("--master_weights_dtype_bytes", "0")
    assert ok.returncode == 0, ok.stderr
    with_master = _cli()
    assert with_master.returncode == 0, with_master.stderr
    # bf16 Adam: 12 bytes of state per parameter with the master copy, 8 without
    s0, s4 = json.loads(ok.stdout), json.loads(with_master.stdout)
    assert s0["optimizer_state_memory_per_gpu"] / s4["optimizer_state_memory_per_gpu"] == pytest.approx(8 / 12)
    bad = _cli("--master_weights_dtype_bytes", "0.05")
    assert bad.returncode == 2
    assert "master_weights_dtype_bytes = 0.05" in bad.stderr and "0 (no master copy" in bad.stderr
