"""Redundant expert copies (ParallelismConfig.moe_redundant_experts): expert-parallel load balancing lets a
worker spread the experts over a moe_ep_size that does not divide them (256 experts over 72 GPUs of an NVL72
rack with 32 copies: 4 slots a GPU). Expected values are derived by hand from the model's shapes and the
placement rule written out in each test (serving/layout.py, model/mlp.py expert_placement)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from answers import serve_refused

from llm_analysis.errors import ConfigError
from llm_analysis.model.mlp import expert_placement
from llm_analysis.serving.layout import WorkerLayout, weight_bytes_per_gpu, worker_layout

MOE = "Qwen/Qwen3-30B-A3B"  # 48 MoE layers, 128 experts top-8, hidden 2048, expert width 768 (gated: 3 matrices)
LOAD = dict(concurrency=32, input_len=512, output_len=64, num_requests=0)


def test_placement_without_copies_is_the_uniform_routing_rule():
    """No copies: E / ep experts held per GPU; `tokens` tokens reach E (1 - (1 - k/E)^tokens) experts on the mean."""
    e, k, ep = 256, 8, 8
    for tokens in (1, 7, 64, 4096):
        held, reached = expert_placement(e, 0, ep, k / e, tokens)
        assert held == 32
        assert reached == pytest.approx(min(32, e * (1 - (1 - k / e) ** tokens) / ep), rel=1e-15)


def test_placement_with_copies_by_hand():
    """256 experts and 32 copies over 72 GPUs: 288 slots, 4 a GPU. One token picks 8 experts: of them the
    copied ones send it to one of their two copies, so it reaches 8 slots in all (8/72 a GPU), not 9; a long
    run of tokens reaches every slot: 4 a GPU."""
    held, reached = expert_placement(256, 32, 72, 8 / 256, 1)
    assert held == 4
    assert reached == pytest.approx(8 / 72, rel=1e-12)
    # 224 single experts and 32 doubled: 224 (1 - (1 - p)^T) + 64 (1 - (1 - p/2)^T), p = 8/256, T = 40
    p, t = 8 / 256, 40
    assert expert_placement(256, 32, 72, p, t)[1] == pytest.approx(
        (224 * (1 - (1 - p) ** t) + 64 * (1 - (1 - p / 2) ** t)) / 72, rel=1e-12)
    assert expert_placement(256, 32, 72, p, 10**6) == (4, 4)
    # more copies than experts: 128 experts, 200 copies over 8 ranks: every expert twice, 72 of them three times
    p = 8 / 128
    assert expert_placement(128, 200, 8, p, 3)[1] == pytest.approx(
        (56 * 2 * (1 - (1 - p / 2) ** 3) + 72 * 3 * (1 - (1 - p / 3) ** 3)) / 8, rel=1e-12)


def test_copies_make_an_uneven_split_servable(analysis_builder):
    """128 experts over 6 expert-parallel GPUs: refused alone (6 does not divide 128), served with 4 copies
    (132 slots, 22 a GPU), and the answer states them."""
    fields = dict(tp_size=1, attention_dp_size=6, moe_ep_size=6)
    with pytest.raises(ConfigError) as err:
        analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="calibrated", **fields).serve(**LOAD)
    for named in ("moe_ep_size = 6", "moe_num_experts = 128", "moe_redundant_experts = 4"):
        assert named in str(err.value)
    s = analysis_builder(MOE, gpu="h100-sxm-80gb", perf_model="calibrated", moe_redundant_experts=4,
                         **fields).serve(**LOAD)
    assert s["moe_redundant_experts"] == 4 and s["moe_ep_size"] == 6 and s["num_gpus"] == 6
    assert 0 < s["tpot_s"] < s["e2e_s"]
    assert any("4 redundant copies" in n for n in s["notes"])


def test_copies_hold_their_weights_on_each_gpu(analysis_builder):
    """Routed expert weights per GPU follow the slots: 128 experts over 4 GPUs hold 32 a GPU, with 4 copies over
    6 GPUs 22, with 4 more copies over 4 GPUs 33; the attention side (tp = 1, replicated) is the same in all.
    One slot: 48 layers x 3 matrices x 2048 x 768 x 2 bytes (bf16)."""
    a = analysis_builder(MOE, gpu="h100-sxm-80gb")
    slot_bytes = 48 * 3 * 2048 * 768 * 2
    even = weight_bytes_per_gpu(a, WorkerLayout(1, 4, 1, 4, 1))
    copied = weight_bytes_per_gpu(a, WorkerLayout(1, 6, 1, 6, 1, redundant_experts=4))
    more = weight_bytes_per_gpu(a, WorkerLayout(1, 4, 1, 4, 1, redundant_experts=4))
    assert even - copied == pytest.approx((32 - 22) * slot_bytes, rel=1e-12)
    assert more - even == pytest.approx((33 - 32) * slot_bytes, rel=1e-12)


def test_worker_layout_reads_the_copies(analysis_builder):
    a = analysis_builder(MOE, gpu="h100-sxm-80gb", tp_size=1, attention_dp_size=6, moe_ep_size=6,
                         moe_redundant_experts=10)
    assert worker_layout(a).redundant_experts == 10
    assert worker_layout(analysis_builder(MOE, gpu="h100-sxm-80gb", tp_size=2)).redundant_experts == 0


@pytest.mark.parametrize("model, fields, named", [
    # copies that do not make the split even: 128 + 5 over 6 ranks
    (MOE, dict(tp_size=1, attention_dp_size=6, moe_ep_size=6, moe_redundant_experts=5),
     ("moe_redundant_experts = 5", "4 + a multiple of 6")),
    # a rank would hold an expert twice: at most 128 x (2 - 1) copies over 2 ranks
    (MOE, dict(tp_size=1, attention_dp_size=2, moe_ep_size=2, moe_redundant_experts=130),
     ("moe_redundant_experts = 130", "at most 128")),
    # copies without expert parallelism
    (MOE, dict(tp_size=2, moe_redundant_experts=2), ("moe_redundant_experts = 2", "moe_ep_size > 1")),
    # a model without experts
    ("meta-llama/Llama-3.1-8B", dict(tp_size=2, moe_redundant_experts=2),
     ("moe_redundant_experts = 2", "has no experts")),
])
def test_bad_copies_are_refused_by_name(analysis_builder, model, fields, named):
    serve_refused(analysis_builder(model, gpu="h100-sxm-80gb", **fields), *named, **LOAD)


@pytest.mark.parametrize("value", [-1, 2.5, True, "many"])
def test_bad_values_are_refused_by_the_schema(analysis_builder, value):
    with pytest.raises(ConfigError) as err:
        analysis_builder(MOE, gpu="h100-sxm-80gb", moe_redundant_experts=value)
    assert "moe_redundant_experts" in str(err.value)


def test_training_refuses_copies(analysis_builder):
    """Training places each expert once: copies on a training-style expert-parallel layout are refused."""
    a = analysis_builder(MOE, gpu="h100-sxm-80gb", tp_size=1, dp_size=8, ep_size=8, moe_redundant_experts=8)
    with pytest.raises(ConfigError) as err:
        a.training(batch_size_per_gpu=1, seq_len=512)
    assert "moe_redundant_experts = 8" in str(err.value) and "serving layout" in str(err.value)


def test_cli_serves_copies_and_refuses_bad_ones_in_one_line(tmp_path):
    base = [sys.executable, "-m", "llm_analysis", "serve", "--model_name", MOE, "--gpu_name", "h100-sxm-80gb",
            "--tp_size", "1", "--attention_dp_size", "6", "--moe_ep_size", "6", "--concurrency", "16",
            "--input_len", "512", "--output_len", "64", "--num_requests", "0"]
    ok = subprocess.run(base + ["--moe_redundant_experts", "4"], capture_output=True, text=True, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "4 redundant expert copies" in ok.stdout
    bad = subprocess.run(base, capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and "moe_redundant_experts = 4" in lines[0]


def test_a_tensor_parallel_size_that_cannot_split_the_heads_names_the_attention_dp_worker(analysis_builder):
    """TensorRT-LLM's --tp_size and SGLang's --tp-size count a worker's GPUs: tp_size = 6 for Qwen3-30B-A3B
    (32 heads) cannot be attention tensor parallelism, and the refusal names the layout that runs 6 GPUs with
    attention data parallelism, copies included (128 experts over 6: 4); that layout serves. A dense model's
    refusal names no such layout."""
    with pytest.raises(ConfigError) as err:
        analysis_builder(MOE, gpu="h100-sxm-80gb", tp_size=6)
    hint = "ParallelismConfig(tp_size=1, attention_dp_size=6, moe_ep_size=6, moe_redundant_experts=4)"
    assert "tp_size = 6 must divide n_head = 32" in str(err.value) and hint in str(err.value)
    s = analysis_builder(MOE, gpu="h100-sxm-80gb", tp_size=1, attention_dp_size=6, moe_ep_size=6,
                         moe_redundant_experts=4).serve(**LOAD)
    assert s["num_gpus"] == 6
    with pytest.raises(ConfigError) as dense:
        analysis_builder("meta-llama/Llama-3.1-8B", gpu="h100-sxm-80gb", tp_size=6)
    assert "attention_dp_size" not in str(dense.value)


def test_a_training_style_expert_parallel_layout_keeps_the_same_rules(analysis_builder):
    """Experts over ep_size = 2 data-parallel replicas with copies (the describer's own expert parallelism):
    128 copies put every expert on both ranks (128 + 128 slots, 128 a GPU); 130 would put one twice on a rank."""
    with pytest.raises(ConfigError) as err:
        analysis_builder(MOE, gpu="h200-sxm-141gb", tp_size=1, dp_size=2, ep_size=2, moe_redundant_experts=130)
    assert "moe_redundant_experts = 130" in str(err.value) and "at most 128" in str(err.value)
    plain = analysis_builder(MOE, gpu="h200-sxm-141gb", tp_size=1, dp_size=2, ep_size=2)
    full = analysis_builder(MOE, gpu="h200-sxm-141gb", tp_size=1, dp_size=2, ep_size=2, moe_redundant_experts=128)
    slot_bytes = 48 * 3 * 2048 * 768 * 2
    assert full.get_weight_memory_per_gpu() - plain.get_weight_memory_per_gpu() == pytest.approx(
        (128 - 64) * slot_bytes, rel=1e-12)
