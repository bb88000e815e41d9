"""The breakdowns' shapes and keys as llm-analysis 0.2.2 returns them (API reference:
get_weight_memory_per_layer / get_activation_memory_per_layer with return_breakdown give a
tuple (total, attn, mlp, layernorm); get_latency_fwd's dict has `<prefix>latency_fwd_{attn, mlp,
layernorm, tp_comm, input_embedding, output_embedding_loss}`; a layer's has attn, mlp,
layernorm, tp_comm). Expected values are hand counts of OPT-1.3b (h = 2048, 24 layers)."""

import pytest

from llm_analysis.analysis import ActivationRecomputation as AR, LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name

H, L = 2048, 24
SIX = ("attn", "mlp", "layernorm", "tp_comm", "input_embedding", "output_embedding_loss")


def _opt(tp=1):
    return LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), get_gpu_config_by_name("a100-sxm-40gb"),
                       get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=tp))


def test_weight_memory_breakdown_is_the_mirrors_four_tuple():
    total, attn, mlp, ln = _opt().get_weight_memory_per_layer(return_breakdown=True)
    assert attn == (4 * H * H + 4 * H) * 2  # q, k, v, o weights and biases, 16 bits
    assert mlp == (8 * H * H + 4 * H + H) * 2  # fc1 (h x 4h + 4h bias), fc2 (4h x h + h bias)
    assert ln == 2 * (2 * H) * 2  # two LayerNorms, weight and bias
    assert total == attn + mlp + ln


def test_activation_memory_breakdown_is_the_mirrors_four_tuple():
    a, b, s = _opt(), 1, 1024
    sbh = s * b * H
    total, attn, mlp, ln = a.get_activation_memory_per_layer(b, s, is_inference=False, layernorm_dtype_bytes=2,
                                                             return_breakdown=True)
    # Korthikanti et al. 2022 with flash attention (no s x s terms): attention 11sbh, MLP 19sbh, norms 4sbh
    assert (attn, mlp, ln) == (pytest.approx(11 * sbh), pytest.approx(19 * sbh), pytest.approx(4 * sbh))
    assert total == pytest.approx(attn + mlp + ln)
    # full recomputation keeps only the layer input: 0.2.2 gives its parts as 0
    total, *parts = a.get_activation_memory_per_layer(b, s, is_inference=False, activation_recomputation=AR.FULL,
                                                      return_breakdown=True)
    assert parts == [0.0, 0.0, 0.0] and total == pytest.approx(2 * sbh)


def test_latency_fwd_breakdown_has_the_mirrors_keys_and_sums():
    a, b, s = _opt(tp=2), 4, 1024
    per_layer, parts = a.get_latency_fwd_per_layer(b, s)
    assert list(parts) == ["attn", "mlp", "layernorm", "tp_comm"]
    # Megatron's two forward all-reduces per layer (after attention and after the MLP)
    assert parts["tp_comm"] == pytest.approx(2 * a.get_latency_fwd_per_tp_comm(b, s, 2), rel=1e-12)
    fwd, breakdown = a.get_latency_fwd(b, s, breakdown_prefix="p_")
    assert list(breakdown) == [f"p_latency_fwd_{k}" for k in SIX]
    for k in ("attn", "mlp"):
        assert breakdown[f"p_latency_fwd_{k}"] == pytest.approx(L * parts[k], rel=1e-12)
    # tp_comm holds every TP collective: the layers' and the vocab-parallel embedding's all-reduce
    # (which get_latency_fwd_input_embedding, as 0.2.2's, counts with the lookups)
    embedding_all_reduce = a.get_latency_fwd_per_tp_comm(b, s, 2)
    assert breakdown["p_latency_fwd_tp_comm"] == pytest.approx(L * parts["tp_comm"] + embedding_all_reduce, rel=1e-12)
    # the layers' two norms each plus the final LayerNorm, on the same T x h tensor (its 2h parameters aside)
    assert breakdown["p_latency_fwd_layernorm"] == pytest.approx(L * parts["layernorm"] * (2 * L + 1) / (2 * L),
                                                                 rel=1e-3)
    assert breakdown["p_latency_fwd_input_embedding"] + embedding_all_reduce == pytest.approx(
        a.get_latency_fwd_input_embedding(b, s), rel=1e-12)
    assert breakdown["p_latency_fwd_output_embedding_loss"] == pytest.approx(
        a.get_latency_fwd_output_embedding_loss(b, s))
    assert fwd == pytest.approx(sum(breakdown.values()), rel=1e-12)
