"""Qwen3.5's Gated DeltaNet state in its own dtype: every Qwen3.5 config.json states
`mamba_ssm_dtype` ("float32"), and SGLang and vLLM keep the recurrent (delta-rule) state in it while
the conv state stays in the KV cache's dtype. Expected bytes are derived by hand below from the
config fields: conv state (2 key widths + value width) x conv kernel per Gated DeltaNet layer, the
recurrent state value heads x key width x value width per layer, full attention K and V per token."""

from __future__ import annotations

import copy

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, get_gpu_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.hub.mapping import map_hf_config
from llm_analysis.model import Phase

GPU = get_gpu_config_by_name("a100-sxm-80gb")
H, HEADS, KV_HEADS, HEAD_DIM = 64, 4, 2, 16
K_HEADS, V_HEADS, K_DIM, V_DIM, CONV = 2, 4, 8, 8, 4
TEXT = dict(model_type="qwen3_5_moe_text", hidden_size=H, vocab_size=96, num_attention_heads=HEADS,
            num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, num_hidden_layers=4,
            layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
            linear_conv_kernel_dim=CONV, linear_num_key_heads=K_HEADS, linear_num_value_heads=V_HEADS,
            linear_key_head_dim=K_DIM, linear_value_head_dim=V_DIM, moe_intermediate_size=16,
            shared_expert_intermediate_size=16, num_experts=8, num_experts_per_tok=2, max_position_embeddings=256,
            tie_word_embeddings=False, attn_output_gate=True, mamba_ssm_dtype="float32")
GDN_LAYERS, ATTENTION_LAYERS = 3, 1
CONV_ELEMS = (2 * K_HEADS * K_DIM + V_HEADS * V_DIM) * CONV  # q, k and v channels, per layer and sequence
STATE_ELEMS = V_HEADS * K_DIM * V_DIM


def _config(**changes) -> ModelConfig:
    raw = copy.deepcopy(TEXT)
    raw.update(changes)
    raw = {k: v for k, v in raw.items() if v is not None}
    return map_hf_config(raw, name="test/qwen3.5-state", source="test", what="test/qwen3.5-state",
                         trust_remote_code=False, revision=None)


def test_float32_state_from_the_config():
    assert _config().ssm_state_dtype_bytes == 4
    assert _config(mamba_ssm_dtype="bfloat16").ssm_state_dtype_bytes == 2
    assert _config(mamba_ssm_dtype=None).ssm_state_dtype_bytes is None  # Qwen3-Next: the KV cache's dtype


@pytest.mark.parametrize("batch", [1, 3])
def test_state_memory_float32_conv_and_kv_in_16_bits(batch):
    prompt, generated = 32, 8
    a = LLMAnalysis(_config(), GPU)  # 16-bit weights, activations and KV cache
    got = a.inference(batch_size_per_gpu=batch, seq_len=prompt, num_tokens_to_generate=generated)[
        "kv_cache_memory_per_gpu"]
    attention = ATTENTION_LAYERS * batch * (prompt + generated) * 2 * KV_HEADS * HEAD_DIM * 2
    state = GDN_LAYERS * batch * (CONV_ELEMS * 2 + STATE_ELEMS * 4)
    assert got == pytest.approx(attention + state, rel=1e-12)


def test_decode_step_reads_and_writes_the_float32_state():
    """The recurrent update reads each sequence's state and writes it back, 4 bytes an element."""
    a = LLMAnalysis(_config(), GPU)
    batch = 2
    gdn = next(kind for kind in a.describer.layer_groups if kind.attention == "gated_delta_net")
    ops = {o.name: o for o in a.describer.layer_ops(Phase("decode", batch, 1, 31), gdn)}
    assert ops["gated_delta_rule"].kv_cache_bytes_read_per_gpu == batch * STATE_ELEMS * 4
    assert ops["conv1d"].kv_cache_bytes_read_per_gpu == batch * CONV_ELEMS * 2


def test_unknown_state_dtype_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match="mamba_ssm_dtype = 'int3'"):
        _config(mamba_ssm_dtype="int3")


def test_shipped_qwen35_keeps_its_state_in_float32():
    from llm_analysis.config import get_model_config_by_name
    assert get_model_config_by_name("Qwen/Qwen3.5-397B-A17B").ssm_state_dtype_bytes == 4
