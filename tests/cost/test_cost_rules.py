"""Hand-derived checks of rules that are easy to get subtly wrong: each test
names the bug it would catch, and its expected value is written out from the
published figure or the formula, never from our own output."""

from __future__ import annotations

import pytest

from llm_analysis.analysis import ActivationRecomputation as R, LLMAnalysis
from llm_analysis.config import (DtypeConfig, ModelConfig, ParallelismConfig, get_dtype_config_by_name,
                                 get_gpu_config_by_name, get_model_config_by_name)
from llm_analysis.training import LoRAConfig

# this module's analyses warn of nothing its tests check (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("quiet_package_warnings")

A100 = get_gpu_config_by_name("a100-sxm-80gb")
H100 = get_gpu_config_by_name("h100-sxm-80gb")
BF16 = DtypeConfig(name="w16a16e16", weight_bits=16, activation_bits=16, embedding_bits=16)


def _llama8b():
    try:
        return get_model_config_by_name("meta-llama/Llama-3.1-8B")
    except Exception:
        return get_model_config_by_name("meta-llama_Llama-3.1-8B")


# Llama-3.1-8B shapes (its config.json): 32 layers, hidden 4096, 32 heads of 128, 8 KV heads,
# SwiGLU MLP 14336, vocabulary 128256, untied embeddings, RMSNorm without bias.
L, H, KV_W, FFN, VOCAB = 32, 4096, 8 * 128, 14336, 128256
LLAMA_8B_PARAMS = 8_030_261_248  # Meta's model card: 8.03B


def test_recomputing_norm_attn_norm_repeats_the_second_norm():
    """Bug caught: NORM_ATTN_NORM recomputing the same as ATTN (forgetting the
    norm before the MLP). The difference is one RMSNorm forward per layer:
    read s*h activations and h weights, write s*h (2 bytes each), memory-bound."""
    a = LLMAnalysis(_llama8b(), A100, BF16, ParallelismConfig(dp_size=8), hbm_memory_efficiency=1.0)
    s = 256
    kw = dict(batch_size_per_gpu=1, seq_len=s, gradient_accumulation_steps=1, ds_zero=3)
    attn = a.training(activation_recomputation=R.ATTN, **kw)["latency_per_iter_recompute"]
    nan = a.training(activation_recomputation=R.NORM_ATTN_NORM, **kw)["latency_per_iter_recompute"]
    norm_s = (2 * s * H * 2 + H * 2) / (A100.hbm_bandwidth_in_GB_per_sec * 1e9)
    assert nan - attn == pytest.approx(L * norm_s, rel=1e-9)


def test_qlora_nf4_bits_with_and_without_double_quantization():
    """Bug caught: NF4 stored without (or always with) double quantization.
    QLoRA (Dettmers et al. 2023, arXiv 2305.14314 §3): 4-bit codes + a 32-bit
    absmax per 64 weights = 4.5 bits; double quantization stores the absmax in
    8 bits with a 32-bit constant per 256 blocks = 4 + 8/64 + 32/(64*256) ~= 4.127."""
    assert LoRAConfig(base_weight_bits=4, double_quant=False).base_bytes_per_param * 8 == 4.5
    assert LoRAConfig(base_weight_bits=4).base_bytes_per_param * 8 == pytest.approx(4.127, abs=5e-4)
    a = LLMAnalysis(_llama8b(), A100, BF16, ParallelismConfig())
    kw = dict(batch_size_per_gpu=1, seq_len=256, gradient_accumulation_steps=1)
    w = {dq: a.training(lora=dict(rank=8, base_weight_bits=4, double_quant=dq, target_modules=["q_proj"]), **kw)
         ["weight_memory_per_gpu"] for dq in (True, False)}
    # the layers' linear weights (q, k, v, o; gate, up, down) are the ones stored as NF4
    linear = L * (2 * H * H + 2 * H * KV_W + 3 * H * FFN)
    assert w[False] - w[True] == pytest.approx(linear * (4.5 - (4 + 8 / 64 + 32 / (64 * 256))) / 8, rel=1e-9)


def test_int8_matmuls_run_at_the_int8_peak():
    """Bug caught: int8 weights and activations timed at the 16-bit peak. A100:
    312 dense bf16 TFLOP/s, 624 dense int8 TOP/s (NVIDIA A100 datasheet)."""
    a = LLMAnalysis(_llama8b(), A100, get_dtype_config_by_name("w8a8e16"), ParallelismConfig())
    assert a.get_TFLOPS_per_gpu() == 624.0
    b, s = 8, 2048
    q = next(r for r in a.operators("prefill", b, s) if r["name"] == "q_proj")
    flops = 2 * b * s * H * H
    # compute-bound: weights H*H bytes + in/out b*s*H bytes each, far below flops / ridge point
    assert q["bound"] == "compute"
    assert q["latency_s"] == pytest.approx(flops / 624e12, rel=1e-12)


def test_zero3_weight_gather_is_exposed_in_prefill():
    """Bug caught: ZeRO-3 inference never paying for the weight all-gather. With
    a short prompt the gather of the dp-sharded weights outlasts the prefill;
    only the excess is exposed. Ring all-gather over dp = 8 GPUs of one node
    (NVLink): (n-1)/n x bytes / bandwidth + (n-1) hop latencies."""
    a = LLMAnalysis(_llama8b(), A100, BF16, ParallelismConfig(dp_size=8))
    kw = dict(batch_size_per_gpu=1, seq_len=16, num_tokens_to_generate=1)
    plain = a.inference(ds_zero=0, **kw)["prefill_latency"]
    zero3 = a.inference(ds_zero=3, **kw)["prefill_latency"]
    n, weight_bytes = 8, LLAMA_8B_PARAMS * 2
    gather = max((n - 1) / n * weight_bytes / (A100.intra_node_bandwidth_in_GB_per_sec * 1e9)
                 + (n - 1) * A100.intra_node_hop_latency, A100.intra_node_min_message_latency)
    assert gather > plain  # the premise: the gather cannot hide under this prefill
    assert zero3 == pytest.approx(gather, rel=1e-9)  # plain + (gather - plain)


def test_decode_step_reads_the_weights_and_the_kv_cache_once():
    """Bug caught: a decode step costed as a prefill of the context. A batch-1
    step is memory-bound: it reads every weight except the embedding table (one
    row is looked up) and the KV cache of its context, c x 2 x 8 x 128 values
    of 2 bytes per layer; activations add ~0.1%."""
    a = LLMAnalysis(_llama8b(), H100, BF16, ParallelismConfig(), hbm_memory_efficiency=1.0)
    s = 1024
    r = a.inference(batch_size_per_gpu=1, seq_len=s, num_tokens_to_generate=2)
    weights_read = (LLAMA_8B_PARAMS - VOCAB * H) * 2
    kv_read = L * (s + 1) * 2 * KV_W * 2
    expected = (weights_read + kv_read) / (H100.hbm_bandwidth_in_GB_per_sec * 1e9)
    assert r["decode_first_step_latency"] == pytest.approx(expected, rel=5e-3)


def test_shared_expert_gate_is_counted():
    """Bug caught: the shared expert's sigmoid gate Linear(hidden, 1) dropped
    (Qwen1.5-MoE / Qwen2-MoE, transformers Qwen2MoeSparseMoeBlock.shared_expert_gate).
    Router parameters per layer: hidden x experts (router) + hidden x 1 (gate)."""
    h, e = 2048, 60
    m = ModelConfig(name="qwen1.5-moe-a2.7b", num_layers=24, n_head=16, num_key_value_heads=16, hidden_dim=h,
                    vocab_size=151936, ffn_embed_dim=5632, mlp_gated_linear_units=True, qkv_bias=True,
                    moe_num_experts=e, moe_top_k=4, moe_ffn_embed_dim=1408, moe_num_shared_experts=1,
                    moe_shared_expert_ffn_dim=5632, moe_shared_expert_gate=True)
    a = LLMAnalysis(m, A100, BF16, ParallelismConfig())
    assert a.get_num_params_per_layer_router() == h * e + h
    # one token uses the gate too: active = dense parts + router + gate + shared + top-4 of 60 experts
    expert = 3 * h * 1408
    no_gate = LLMAnalysis(m.model_copy(update=dict(moe_shared_expert_gate=False)), A100, BF16, ParallelismConfig())
    assert a.get_num_params_total() - no_gate.get_num_params_total() == 24 * h
    assert a.get_num_active_params_total() - no_gate.get_num_active_params_total() == 24 * h
    assert a.get_num_params_total() - a.get_num_active_params_total() == 24 * (e - 4) * expert
