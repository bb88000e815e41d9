"""KV-cache bytes per GPU derived by hand for Llama-3.1-8B (32 layers, 8 KV heads of dim 128; config.json
of meta-llama/Llama-3.1-8B) in 16-bit: 2 (K and V) x 8 x 128 x 2 B = 4096 B per token per layer.
Tensor parallelism splits the KV heads, context parallelism the cached positions (each of cp ranks
holds seq_len / cp tokens), pipeline stages the layers; an fp8 cache halves every byte."""

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name, get_model_config_by_name

PER_TOKEN_PER_LAYER_B = 2 * 8 * 128 * 2
LAYERS = 32


def _kv(batch, seq_len, kv_cache_dtype_bytes=None, **par):
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
                    parallelism_config=ParallelismConfig(**par))
    return a.get_memory_kv_cache_per_gpu(batch, seq_len, kv_cache_dtype_bytes)


@pytest.mark.parametrize("par,divisor", [({}, 1), ({"tp_size": 2}, 2), ({"tp_size": 8}, 8), ({"cp_size": 2}, 2),
                                         ({"cp_size": 4, "tp_size": 2}, 8), ({"pp_size": 2}, 2)])
def test_kv_cache_per_gpu_is_split_by_tp_cp_and_pp(par, divisor):
    b, s = 4, 4096
    assert _kv(b, s, **par) == pytest.approx(b * s * LAYERS * PER_TOKEN_PER_LAYER_B / divisor, rel=1e-12)


def test_an_fp8_cache_halves_it():
    assert _kv(2, 1000, kv_cache_dtype_bytes=1) == pytest.approx(2 * 1000 * LAYERS * PER_TOKEN_PER_LAYER_B / 2)


def test_a_hybrid_models_cache_holds_each_mixer_layers_state():
    """Qwen3.5-27B (config.json): of its 64 layers every 4th is full attention (16 layers: 4 KV heads x head
    dim 256, K and V, 16-bit) and 48 are gated-delta-net layers, each holding per request a conv state of
    (2 x 16 key heads x 128 + 48 value heads x 128) channels x kernel 4 at 2 bytes and a recurrent state of
    48 value heads x 128 x 128 in float32 (ssm_state_dtype_bytes 4), whatever the length. A request of
    2048 + 2 tokens keeps 2050 tokens of the attention layers' cache and the 48 states."""
    a = LLMAnalysis(get_model_config_by_name("Qwen/Qwen3.5-27B"), get_gpu_config_by_name("h100-sxm-80gb"))
    state = 48 * ((2 * 16 * 128 + 48 * 128) * 4 * 2 + 48 * 128 * 128 * 4)
    one = 2050 * 16 * 4 * (256 + 256) * 2 + state
    for b in (1, 3):
        r = a.inference(batch_size_per_gpu=b, seq_len=2048, num_tokens_to_generate=2)
        assert r["kv_cache_memory_per_gpu"] == pytest.approx(b * one, rel=1e-12)
