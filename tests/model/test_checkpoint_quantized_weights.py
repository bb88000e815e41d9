"""Checkpoints that quantise only their routed experts (model/checkpoint_weights.py).

OpenAI's gpt-oss releases store the routed experts' weights in MXFP4 and nothing else: their config.json's
quantization_config is {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
"model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]} (the copies in
tests/data/hf_configs_aiconfigurator/). The expected bytes below are derived by hand from gpt-oss-120b's
config.json shapes: the experts' matrices at MXFP4's 4 + 8/32 = 4.25 bits (E2M1 values, one E8M0 scale per
32, OCP MX v1.0), every other weight (attention, sinks, router, norms, the experts' biases, embeddings and
LM head) at bf16's 16 bits. The sum agrees with the checkpoint size OpenAI publishes (gpt-oss model card,
arXiv 2508.10925, Table 1: gpt-oss-120b 60.8 GiB, gpt-oss-20b 12.8 GiB).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_model_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.hub.entry import model_config_from_hf_dict
from llm_analysis.model import Phase
from llm_analysis.schema.model import ModelConfig

RAW = Path(__file__).resolve().parents[1] / "data" / "hf_configs_aiconfigurator"
MXFP4_BYTES = (4 + 8 / 32) / 8  # per value
BF16_BYTES = 2
GIB = 2**30


def _gpt_oss_parts(layers: int, experts: int):
    """(expert matrix params, every other param, of which embeddings + LM head) of a gpt-oss config: hidden 2880,
    intermediate 2880 per expert (gate + up fused, then down), 64 query heads and 8 KV heads of 64, vocab 201088,
    untied LM head; biases on q/k/v/o, the router and the experts; one sink logit per head; two RMSNorms per
    layer and a final one."""
    h, f, head_dim, q_heads, kv_heads, vocab = 2880, 2880, 64, 64, 8, 201088
    q, kv = q_heads * head_dim, kv_heads * head_dim
    attention = (h * q + q) + 2 * (h * kv + kv) + (q * h + h) + q_heads
    router = h * experts + experts
    norms = 2 * h
    expert_matrices = experts * (h * 2 * f + f * h)
    expert_biases = experts * (2 * f + h)
    embeddings = 2 * vocab * h  # embed_tokens and lm_head
    other = layers * (attention + router + norms + expert_biases) + h + embeddings
    return layers * expert_matrices, other, embeddings


EXPERTS_120B, OTHER_120B, EMB_120B = _gpt_oss_parts(36, 128)
EXPECTED_120B = EXPERTS_120B * MXFP4_BYTES + OTHER_120B * BF16_BYTES
EXPERTS_20B, OTHER_20B, _ = _gpt_oss_parts(24, 32)
EXPECTED_20B = EXPERTS_20B * MXFP4_BYTES + OTHER_20B * BF16_BYTES


def _weights(model, gpu="h200-sxm-141gb", dtype="fp4", par=None) -> float:
    a = LLMAnalysis(model, gpu, dtype, par or ParallelismConfig())
    return a.inference(batch_size_per_gpu=1, seq_len=128, num_tokens_to_generate=4)["weight_memory_per_gpu"]


def test_hand_derivation_is_the_published_checkpoint_size():
    """The derivation counts the model card's parameters and its checkpoint's size."""
    assert EXPERTS_120B + OTHER_120B == 116_829_156_672  # the card's 116.83 B
    assert EXPECTED_120B / GIB == pytest.approx(60.8, abs=0.05)
    assert EXPECTED_20B / GIB == pytest.approx(12.8, abs=0.05)


@pytest.mark.parametrize("gpu,dtype", [("h200-sxm-141gb", "fp4"), ("b200-180gb", "fp4"),
                                       ("b200-180gb", "mxfp4"), ("h200-sxm-141gb", "w4a16e16-mxfp4")])
def test_gpt_oss_120b_weights_as_the_checkpoint_stores_them(gpu, dtype):
    """Every dtype in the checkpoint's own format (fp4 is w4a16e16-mxfp4 on Hopper, w4a8e16-mxfp4 on Blackwell)
    holds the experts in MXFP4 and the rest in bf16."""
    cfg = get_model_config_by_name("openai/gpt-oss-120b")
    assert cfg.checkpoint_quantized_weights == "routed_experts"
    assert _weights(cfg, gpu, dtype) == pytest.approx(EXPECTED_120B, rel=1e-12)


def test_gpt_oss_20b_weights():
    assert _weights("openai/gpt-oss-20b") == pytest.approx(EXPECTED_20B, rel=1e-12)


def test_experts_over_expert_parallel_ranks():
    """Experts over 4 ranks, everything else whole on each: inference() over 4 data-parallel replicas with
    ep_size 4, and serve()'s worker of 4 attention replicas (tp 1, attention data parallel 4, moe_ep 4)."""
    expert_biases = 36 * 128 * (2 * 2880 + 2880)
    experts_per_gpu = (EXPERTS_120B * MXFP4_BYTES + expert_biases * BF16_BYTES) / 4
    expected = (OTHER_120B - expert_biases) * BF16_BYTES + experts_per_gpu
    assert _weights("openai/gpt-oss-120b", par=ParallelismConfig(dp_size=4, ep_size=4)) == \
        pytest.approx(expected, rel=1e-12)
    a = LLMAnalysis("openai/gpt-oss-120b", "h200-sxm-141gb", "fp4",
                    ParallelismConfig(tp_size=1, attention_dp_size=4, moe_ep_size=4))
    served = a.serve(concurrency=8, input_len=256, output_len=16, framework="sglang", num_requests=16)
    assert served["weight_memory_per_gpu"] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("dtype,layer_bytes", [("w16a16e16", BF16_BYTES), ("nvfp4", (4 + 8 / 16) / 8)])
def test_other_dtypes_quantise_the_whole_model(dtype, layer_bytes):
    """A dtype other than the checkpoint's format is a quantisation of one's own: every layer weight at its width
    (NVFP4: 4 + 8/16 = 4.5 bits), embeddings and LM head at its 16-bit embedding width."""
    total = EXPERTS_120B + OTHER_120B
    expected = (total - EMB_120B) * layer_bytes + EMB_120B * BF16_BYTES
    a = LLMAnalysis("openai/gpt-oss-120b", "b200-180gb", dtype)  # (bf16 fits no single GPU: no inference())
    assert a.get_weight_memory_per_gpu() == pytest.approx(expected, rel=1e-12)


def test_all_keeps_every_layer_weight_in_the_format():
    """checkpoint_quantized_weights='all' (the default) counts every layer weight at 4.25 bits, as before."""
    cfg = get_model_config_by_name("openai/gpt-oss-120b").model_copy(update={"checkpoint_quantized_weights": "all"})
    expected = (EXPERTS_120B + OTHER_120B - EMB_120B) * MXFP4_BYTES + EMB_120B * BF16_BYTES
    assert _weights(cfg) == pytest.approx(expected, rel=1e-12)


def test_decode_reads_attention_weights_at_16_bits():
    """The time model reads what memory holds: a decode step's attention operators read what a bf16 run's do
    (16-bit weights and activations under w4a16e16-mxfp4), a routed expert's GEMM the k = 4 experts one token
    reaches at 4.25 bits instead of 16 (its biases stay 16-bit in both)."""
    phase = Phase("decode", 1, 1, 100)

    def layer_ops(dtype):
        d = LLMAnalysis("openai/gpt-oss-120b", "h200-sxm-141gb", dtype).describer
        kind = next(iter(d.layer_groups))
        return {o.name: o for o in d.layer_ops(phase, kind)}

    mx, bf = layer_ops("w4a16e16-mxfp4"), layer_ops("w16a16e16")
    attention = [n for n, o in bf.items() if o.group == "attention" and o.kind == "matmul"]
    assert attention
    for name in attention + ["router"]:
        assert mx[name].bytes_read_per_gpu == bf[name].bytes_read_per_gpu, name
        assert mx[name].weight_bytes_per_gpu == bf[name].weight_bytes_per_gpu, name
    h, f, k = 2880, 2880, 4
    for name, matrix in (("expert_gate_proj", h * f), ("expert_up_proj", h * f), ("expert_down_proj", f * h)):
        saved = k * matrix * (BF16_BYTES - MXFP4_BYTES)
        assert mx[name].bytes_read_per_gpu == pytest.approx(bf[name].bytes_read_per_gpu - saved, rel=1e-9), name


def test_bad_values_are_refused_naming_the_field():
    base = get_model_config_by_name("openai/gpt-oss-120b").model_dump()
    with pytest.raises(ConfigError, match=r"checkpoint_quantized_weights.*'experts'.*'all' or 'routed_experts'"):
        ModelConfig(**dict(base, checkpoint_quantized_weights="experts"))
    with pytest.raises(ConfigError, match=r"checkpoint_quantized_weights.*checkpoint_weight_format = None"):
        ModelConfig(**dict(base, checkpoint_weight_format=None))
    dense = get_model_config_by_name("meta-llama/Llama-3.1-8B").model_dump()
    with pytest.raises(ConfigError, match=r"checkpoint_quantized_weights.*moe_num_experts = 1"):
        ModelConfig(**dict(dense, checkpoint_weight_format="fp8", checkpoint_quantized_weights="routed_experts"))


# ------------------------------------------------------------------ the Hub import

@pytest.mark.parametrize("stem", ["openai_gpt-oss-120b", "openai_gpt-oss-20b"])
def test_import_reads_modules_to_not_convert_from_a_local_config(stem, tmp_path):
    """The real config.json, as a .json path and as a local model directory, maps to routed_experts; the
    catalogue entry says the same."""
    raw = json.loads((RAW / f"{stem}.json").read_text())
    assert raw["quantization_config"]["modules_to_not_convert"] == [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]
    directory = tmp_path / stem
    directory.mkdir()
    shutil.copy(RAW / f"{stem}.json", directory / "config.json")
    for path in (RAW / f"{stem}.json", directory):
        cfg = get_model_config_by_name(str(path))
        assert (cfg.checkpoint_weight_format, cfg.checkpoint_quantized_weights) == ("mxfp4", "routed_experts")
    assert get_model_config_by_name(stem).checkpoint_quantized_weights == "routed_experts"
    if stem == "openai_gpt-oss-120b":
        assert _weights(str(directory)) == pytest.approx(EXPECTED_120B, rel=1e-12)


def _imported(kept, caplog, quant_method="mxfp4"):
    raw = json.loads((RAW / "openai_gpt-oss-20b.json").read_text())
    raw["quantization_config"] = {"quant_method": quant_method}
    if kept is not None:
        raw["quantization_config"]["modules_to_not_convert"] = kept
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="llm_analysis.hub.entry"):
        return model_config_from_hf_dict(raw, name="x").checkpoint_quantized_weights


@pytest.mark.parametrize("kept", [
    ["model.layers.*.self_attn", "lm_head"],  # the router quantised: not the rule
    ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head",
     "model.layers.0.mlp.experts"],  # one layer's experts kept too
    ["model.layers.3.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"],  # one layer
])
def test_a_list_the_rule_does_not_describe_is_warned_of(kept, caplog):
    assert _imported(kept, caplog) == "all"
    assert "modules_to_not_convert" in caplog.text and repr(kept) in caplog.text


@pytest.mark.parametrize("kept", [None, [], ["lm_head"], ["model.embed_tokens", "lm_head"]])
def test_lists_counted_as_all_without_a_warning(kept, caplog):
    """No list: every layer weight in MXFP4; embeddings and LM head only: already at the 16-bit embedding width."""
    assert _imported(kept, caplog) == "all"
    assert "modules_to_not_convert" not in caplog.text


def test_other_formats_are_not_read(caplog):
    kept = ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]
    assert _imported(kept, caplog, quant_method="fp8") == "all"
    assert "modules_to_not_convert" not in caplog.text


def test_exact_path_reads_the_checkpoint_too():
    """--exact derives the operators from the transformers module tree, which holds no quantisation: the weight
    format and what it covers come from the same config.json (exact/entry.py with_checkpoint_weights)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from llm_analysis.exact.entry import analysis_from_hf
    a = analysis_from_hf(str(RAW / "openai_gpt-oss-20b.json"), "h200-sxm-141gb", "w4a16e16-mxfp4")
    assert (a.model_config.checkpoint_weight_format, a.model_config.checkpoint_quantized_weights) == \
        ("mxfp4", "routed_experts")
    assert a.get_weight_memory_per_gpu() == pytest.approx(EXPECTED_20B, rel=1e-12)


def test_the_kv_cache_of_an_experts_only_checkpoint_is_16_bit_by_default():
    """gpt-oss's attention is not converted (modules_to_not_convert: self_attn), and W4A8's 8-bit activations
    are the MoE kernels' input only: the cache defaults to bf16, 2 bytes per element, what the engines hold.
    gpt-oss-120b caches 8 KV heads x (64 + 64) per layer, 36 layers (18 of them keep only the last 127 tokens
    of the window): 4 sequences of 1,024 + 64 tokens hold 4 x 2 x 128 x 8 x (18 x 1088 + 18 x 127) bytes.
    A 16-bit checkpoint quantised to the same dtype keeps the mirrored rule: the cache at the activation width."""
    gpt_oss = LLMAnalysis("openai/gpt-oss-120b", "b200-180gb", "w4a8e16-mxfp4", ParallelismConfig())
    kv = gpt_oss.inference(batch_size_per_gpu=4, seq_len=1024, num_tokens_to_generate=64)["kv_cache_memory_per_gpu"]
    assert kv == pytest.approx(4 * 2 * 128 * 8 * (18 * 1088 + 18 * 127), rel=1e-12)
    llama = LLMAnalysis("meta-llama/Llama-3.1-8B", "b200-180gb", "w4a8e16-mxfp4", ParallelismConfig())
    run = llama.inference(batch_size_per_gpu=4, seq_len=1024, num_tokens_to_generate=64)
    one_byte = llama.inference(batch_size_per_gpu=4, seq_len=1024, num_tokens_to_generate=64, kv_cache_dtype_bytes=1)
    assert run["kv_cache_memory_per_gpu"] == one_byte["kv_cache_memory_per_gpu"]
