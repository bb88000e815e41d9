"""LoRA / QLoRA hold the frozen base at LoRAConfig.base_weight_bits (16, or 4 for QLoRA NF4), not at the
dtype's weight width: PEFT has no LoRA layer over fp8 linears (an fp8 checkpoint loads dequantised to 16 bits;
TransformerEngine's fp8 recipe keeps 16-bit weights), and its AWQ / GPTQ layers keep the packed 4-bit weights,
which base_weight_bits=4 approximates. A quantised dtype whose width the base does not take warns in one line."""

import pytest

from llm_analysis.analysis import LLMAnalysis

# Llama-3-8B by hand: 32 layers, hidden 4096, K/V 1024 wide, FFN 14336, vocabulary 128256 untied, 65 RMSNorms
L, H, KV, FFN, VOCAB = 32, 4096, 1024, 14336, 128256
PARAMS = L * (2 * H * H + 2 * H * KV + 3 * H * FFN + 2 * H) + 2 * H * VOCAB + H
# rank-16 adapters on q_proj (4096 -> 4096) and v_proj (4096 -> 1024): r x (in + out) per projection and layer
ADAPTERS = L * 16 * ((H + H) + (H + KV))


def _train(dtype, base_bits):
    a = LLMAnalysis("meta-llama_Meta-Llama-3-8B", "h100-sxm-80gb", dtype, perf_model="roofline")
    return a.training(batch_size_per_gpu=1, seq_len=2048, gradient_accumulation_steps=1,
                      lora=dict(rank=16, target_modules=["q_proj", "v_proj"], base_weight_bits=base_bits))


@pytest.mark.parametrize("dtype, bits", [("fp8", 8), ("w4a16e16", 4)])
def test_a_quantised_dtype_under_16_bit_lora_holds_16_bit_base_and_warns(dtype, bits):
    s = _train(dtype, 16)
    # base and adapters at 2 bytes (the 65 norms, 266k parameters, aside: rel 1e-4)
    assert s["weight_memory_per_gpu"] == pytest.approx((PARAMS + ADAPTERS) * 2, rel=1e-4)
    said = [w for w in s["warnings"] if w.startswith(f"lora with {dtype}:")]
    assert len(said) == 1 and "\n" not in said[0]
    assert "held at 16 bits" in said[0] and f"dtype's {bits} bits" in said[0] and "base_weight_bits" in said[0]
    assert "QLoRA" in said[0]


@pytest.mark.parametrize("dtype, base_bits", [("w16a16e16", 16), ("w16a16e16", 4), ("w4a16e16", 4)])
def test_no_warning_where_the_base_width_is_the_dtypes_or_a_16_bit_dtype_runs_qlora(dtype, base_bits):
    assert not [w for w in _train(dtype, base_bits)["warnings"] if w.startswith("lora with")]
