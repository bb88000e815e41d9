"""A recurrent state kept in its own dtype: Nemotron-H configs state `mamba_ssm_cache_dtype`
("float32" in every Nemotron-3 config), and vLLM keeps the SSM state of NemotronH models in it
(NemotronHForCausalLMConfig copies the config's value into the engine's mamba_ssm_cache_dtype),
while the conv state stays in the KV cache's dtype. Expected bytes are derived by hand below from
the config fields: Mamba-2 conv state (d_inner + 2 groups N) x conv kernel per layer, SSM state
heads x head width x N per layer, attention K and V per token."""

from __future__ import annotations

import copy

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, get_gpu_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.hub.mapping import map_hf_config

GPU = get_gpu_config_by_name("a100-sxm-80gb")
H, HEADS, KV_HEADS, HEAD_DIM, V = 64, 4, 2, 16, 96
M_HEADS, M_HEAD_DIM, GROUPS, N, CONV = 8, 16, 2, 16, 4
TINY = dict(model_type="nemotron_h", architectures=["NemotronHForCausalLM"], hidden_size=H, vocab_size=V,
            num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM,
            hybrid_override_pattern="M*M-", num_hidden_layers=4, intermediate_size=128, mlp_bias=False,
            mlp_hidden_act="relu2", tie_word_embeddings=False, mamba_num_heads=M_HEADS,
            mamba_head_dim=M_HEAD_DIM, n_groups=GROUPS, ssm_state_size=N, chunk_size=8, conv_kernel=CONV,
            max_position_embeddings=256, mamba_ssm_cache_dtype="float32")
MAMBA_LAYERS, ATTENTION_LAYERS = 2, 1  # "M*M-": two Mamba-2 layers, one attention layer, one MLP layer
CONV_ELEMS = (M_HEADS * M_HEAD_DIM + 2 * GROUPS * N) * CONV  # per layer and sequence
SSM_ELEMS = M_HEADS * M_HEAD_DIM * N


def _config(**changes) -> ModelConfig:
    raw = copy.deepcopy(TINY)
    raw.update(changes)
    raw = {k: v for k, v in raw.items() if v is not None}
    return map_hf_config(raw, name="test/nemotron-state", source="test", what="test/nemotron-state",
                         trust_remote_code=False, revision=None)


def _kv_memory_bytes(cfg: ModelConfig, batch: int, prompt: int, generated: int) -> float:
    a = LLMAnalysis(cfg, GPU)  # 16-bit weights, activations and KV cache
    return a.inference(batch_size_per_gpu=batch, seq_len=prompt, num_tokens_to_generate=generated)[
        "kv_cache_memory_per_gpu"]


@pytest.mark.parametrize("batch", [1, 3])
def test_ssm_state_in_float32_conv_state_and_kv_in_16_bits(batch):
    prompt, generated = 32, 8
    context = prompt + generated
    attention = ATTENTION_LAYERS * batch * context * 2 * KV_HEADS * HEAD_DIM * 2
    state = MAMBA_LAYERS * batch * (CONV_ELEMS * 2 + SSM_ELEMS * 4)
    assert _kv_memory_bytes(_config(), batch, prompt, generated) == pytest.approx(attention + state, rel=1e-12)


def test_auto_state_follows_the_kv_cache_dtype():
    """"auto" (and a config without the key would get transformers' default, "float32"): the
    state in the KV cache's dtype, as before the field existed."""
    batch, prompt, generated = 2, 32, 8
    attention = ATTENTION_LAYERS * batch * (prompt + generated) * 2 * KV_HEADS * HEAD_DIM * 2
    state = MAMBA_LAYERS * batch * (CONV_ELEMS + SSM_ELEMS) * 2
    cfg = _config(mamba_ssm_cache_dtype="auto")
    assert cfg.ssm_state_dtype_bytes is None
    assert _kv_memory_bytes(cfg, batch, prompt, generated) == pytest.approx(attention + state, rel=1e-12)


def test_decode_step_reads_the_float32_state():
    """A decode step reads each sequence's SSM state once per Mamba layer, at 4 bytes an element;
    the conv reads its state at the KV cache's 2."""
    from llm_analysis.model import Phase
    a = LLMAnalysis(_config(), GPU)
    batch = 2
    mamba = next(kind for kind in a.describer.layer_groups if kind.attention == "mamba2")
    ops = {o.name: o for o in a.describer.layer_ops(Phase("decode", batch, 1, 31), mamba)}
    assert ops["ssd_scan"].kv_cache_bytes_read_per_gpu == batch * SSM_ELEMS * 4
    assert ops["conv1d"].kv_cache_bytes_read_per_gpu == batch * CONV_ELEMS * 2


def test_unknown_state_dtype_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match="mamba_ssm_cache_dtype = 'int3'"):
        _config(mamba_ssm_cache_dtype="int3")


def test_state_dtype_without_a_recurrent_layer_is_refused():
    from llm_analysis.config import get_model_config_by_name
    base = get_model_config_by_name("facebook_opt-125m")
    with pytest.raises(ConfigError, match="ssm_state_dtype_bytes"):
        ModelConfig(**{**base.__dict__, "ssm_state_dtype_bytes": 4})
