"""Training activation memory under low-precision (fp8 / int8 / FP4) training, derived by hand.

TransformerEngine keeps activations and gradients in 16 bits and casts only the GEMM operands; what
an fp8 `Linear` saves for its weight-gradient GEMM is the quantised copy of its input. So of
Korthikanti et al.'s (arXiv 2205.05198) per-layer terms exactly four shrink to the cast width: the
QKV projection's input, the attention output projection's input, the fc1 / gate-up input and the
fc2 / down input. Q/K/V (the 16-bit flash kernel's), the gate and up outputs the SwiGLU reads, the
norm inputs, the embedding output and the logits stay 16-bit (docs/training.md "FP8 casts").

Llama-3-8B: h = 4096, 32 query heads and 8 KV heads of 128, FFN 14336 (gated), two RMSNorms per
layer (their inputs kept in fp32 by default: 4 bytes), no dropout, vocabulary 128256."""

from __future__ import annotations

import pytest

from llm_analysis.schema.options import ActivationRecomputation

MODEL = "meta-llama_Meta-Llama-3-8B"
H, KV, FFN, V = 4096, 8 * 128, 14336, 128256
S, B = 4096, 1


def _bf16_layer_bytes(tokens: float, tp: int = 1, sp: bool = False) -> float:
    """Korthikanti's terms of one Llama layer in bf16, flash attention, no recomputation."""
    outer = tp if sp else 1  # outside the TP region: split only by sequence parallelism
    qkv_input = tokens * H * 2 / outer
    q_k_v = tokens * (H + KV + KV) * 2 / tp
    out_proj_input = tokens * H * 2 / tp
    fc1_input = tokens * H * 2 / outer
    gate_and_up = tokens * 2 * FFN * 2 / tp
    fc2_input = tokens * FFN * 2 / tp
    norms = 2 * tokens * H * 4 / outer
    return qkv_input + q_k_v + out_proj_input + fc1_input + gate_and_up + fc2_input + norms


def _linear_inputs_elems(tokens: float, tp: int = 1, sp: bool = False) -> float:
    """Elements of the four fp8 linears' saved inputs on one GPU."""
    outer = tp if sp else 1
    return tokens * H / outer + tokens * H / tp + tokens * H / outer + tokens * FFN / tp


def _per_layer(analysis_builder, dtype, gpu="h100-sxm-80gb", **par):
    a = analysis_builder(MODEL, gpu=gpu, dtype=dtype, **par)
    return a.get_activation_memory_per_layer(B, S, False, ActivationRecomputation.NONE)


def test_bf16_layer_is_korthikanti(analysis_builder):
    # 2 + 3 + 2 + 2 + 14 + 7 + 8 = 38 sbh
    assert _bf16_layer_bytes(S * B) == 38 * S * B * H
    assert _per_layer(analysis_builder, "w16a16e16") == pytest.approx(_bf16_layer_bytes(S * B), rel=1e-12)


@pytest.mark.parametrize("dtype", ["fp8", "w8a8e16"])  # int8 training is timed as fp8's recipe
def test_fp8_keeps_only_the_four_linear_inputs_in_one_byte(analysis_builder, dtype):
    # saved: (4096 + 4096 + 4096 + 14336) x 4096 tokens x (2 - 1) bytes = 6.5 sbh; 38 - 6.5 = 31.5 sbh
    saved = _linear_inputs_elems(S * B) * (2 - 1)
    assert saved == 6.5 * S * B * H
    expected = _bf16_layer_bytes(S * B) - saved
    assert expected == 31.5 * S * B * H
    assert _per_layer(analysis_builder, dtype) == pytest.approx(expected, rel=1e-12)


def test_fp8_under_tensor_and_sequence_parallelism(analysis_builder):
    # t = 2 with SP: the QKV and fc1 inputs are sequence shards (/t), the out-proj and fc2 inputs
    # TP shards (/t) as well
    tp = 2
    expected = _bf16_layer_bytes(S * B, tp, True) - _linear_inputs_elems(S * B, tp, True) * (2 - 1)
    assert expected == 31.5 * S * B * H / tp
    assert _per_layer(analysis_builder, "fp8", tp_size=tp, sp_size=tp) == pytest.approx(expected, rel=1e-12)


def test_nvfp4_linear_inputs_carry_their_block_scales(analysis_builder):
    # NVFP4: 4-bit values + one 8-bit scale per 16 = 4.5 bits = 0.5625 bytes per element
    expected = _bf16_layer_bytes(S * B) - _linear_inputs_elems(S * B) * (2 - 0.5625)
    assert _per_layer(analysis_builder, "nvfp4", gpu="b200-180gb") == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("dtype", ["fp8", "w8a8e16"])
def test_fp8_embedding_output_and_logits_stay_16_bit(analysis_builder, dtype):
    a = analysis_builder(MODEL, gpu="h100-sxm-80gb", dtype=dtype)
    assert a.get_activation_memory_output_embedding(B, S) == B * S * V * 2  # 1050.7 MB
    assert a.get_activation_memory_input_embedding(B, S) == B * S * H * 2
    assert a.get_loss_bwd_memory(B, S) == B * S * V * 2
