"""Per-layer key/value heads, per-layer attention sinks and a value head width apart
from head_dim (ModelConfig.layer_kv_heads / layer_attn_sinks / v_head_dim on multi-head
attention; MiMo-V2-Flash). The transformers comparison is in tests/test_moe_variants.py
(CASES "mimo_v2_flash*"); here hand derivations of the KV cache, the grouping of layer
kinds, tensor parallelism and the validation errors."""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, ParallelismConfig, get_gpu_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.model.records import layer_groups

GPU = get_gpu_config_by_name("a100-sxm-80gb")
H, HEADS, D, DV, V, F = 64, 4, 16, 8, 96, 80
TYPES = ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]


def _cfg(**kw) -> ModelConfig:
    base = dict(name="mimo-like", num_layers=4, n_head=HEADS, num_key_value_heads=1, hidden_dim=H, head_dim=D,
                vocab_size=V, ffn_embed_dim=F, mlp_gated_linear_units=True, sliding_window=8, layer_types=TYPES,
                norm_type="rmsnorm", norm_bias=False, position_embedding_type="rotary", tie_word_embeddings=False)
    return ModelConfig(**{**base, **kw})


MIMO = dict(v_head_dim=DV, layer_kv_heads=[1, 2, 2, 1], layer_attn_sinks=[False, True, True, False])


def test_params_by_hand():
    """RMSNorm, rotary, untied. Per layer: q H*heads*D, k H*kv*D, v H*kv*DV, o heads*DV*H, a sink per head on the
    sinking layers, gated MLP 3*H*F, two norms; embeddings and head 2*V*H, final norm H."""
    def layer(kv, sinks):
        attention = H * HEADS * D + H * kv * D + H * kv * DV + HEADS * DV * H + (HEADS if sinks else 0)
        return attention + 3 * H * F + 2 * H
    expected = 2 * V * H + H + sum(layer(kv, s) for kv, s in zip(MIMO["layer_kv_heads"], MIMO["layer_attn_sinks"]))
    assert int(LLMAnalysis(_cfg(**MIMO), GPU).get_num_params_total()) == expected


def test_kinds_group_by_kv_heads_and_sinks():
    groups = layer_groups(_cfg(**MIMO))
    assert sorted(groups.values()) == [2, 2]
    assert {(k.attention, k.kv_heads, k.sinks) for k in groups} == {
        ("full_attention", 1, False), ("sliding_attention", 2, True)}


def test_kv_cache_by_hand():
    """Per token, per layer: kv * (D + DV) elements (keys D wide, values DV wide); full
    layers keep every token, sliding ones the last window - 1 = 7 (bf16: 2 bytes)."""
    a = LLMAnalysis(_cfg(**MIMO), GPU)
    seq = 100
    full = 2 * seq * 1 * (D + DV) * 2
    sliding = 2 * 7 * 2 * (D + DV) * 2
    assert a.get_memory_kv_cache_total(1, seq, kv_cache_dtype_bytes=2) == full + sliding


def test_tensor_parallel_keeps_the_total_and_checks_every_kv_count():
    total = int(LLMAnalysis(_cfg(**MIMO), GPU).get_num_params_total())
    two = LLMAnalysis(_cfg(**MIMO), GPU, parallelism_config=ParallelismConfig(tp_size=2))
    assert int(two.get_num_params_total()) == total
    with pytest.raises(ConfigError, match="num_key_value_heads = 2"):
        LLMAnalysis(_cfg(**{**MIMO, "n_head": 6, "layer_kv_heads": [3, 2, 2, 3]}), GPU,
                    parallelism_config=ParallelismConfig(tp_size=3))


@pytest.mark.parametrize("kw, field", [
    (dict(layer_kv_heads=[1, 2]), "layer_kv_heads"),
    (dict(layer_kv_heads=[1, 3, 3, 1]), "layer_kv_heads"),
    (dict(layer_attn_sinks=[True]), "layer_attn_sinks"),
    (dict(layer_attn_sinks=[True] * 4, attn_sinks=True), "layer_attn_sinks"),
    (dict(v_head_dim=0), "v_head_dim"),
    # per-layer KV heads combine with per-layer head widths (Gemma 4), not with sinks per width
    (dict(layer_attn_sinks=[True] * 4, layer_head_dims=[16] * 4), "layer_attn_sinks"),
    (dict(layer_kv_heads=[1, 2, 2, 1], kv_shared_layers=1), "layer_kv_heads"),
])
def test_invalid_fields_name_the_field(kw, field):
    with pytest.raises(ConfigError, match=field):
        _cfg(**kw)


def test_defaults_leave_a_model_unchanged():
    """v_head_dim = head_dim, one KV count everywhere and no sinks: the same figures."""
    plain = LLMAnalysis(_cfg(), GPU)
    same = LLMAnalysis(_cfg(v_head_dim=D, layer_kv_heads=[1] * 4, layer_attn_sinks=[False] * 4), GPU)
    assert plain.get_num_params_total() == same.get_num_params_total()
    assert plain.get_memory_kv_cache_total(1, 50) == same.get_memory_kv_cache_total(1, 50)
