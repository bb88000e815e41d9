"""KV-cache bytes per GPU derived by hand for Llama-3.1-8B (32 layers, 8 KV heads of dim 128; config.json
of meta-llama/Llama-3.1-8B) in 16-bit: 2 (K and V) x 8 x 128 x 2 B = 4096 B per token per layer.
Tensor parallelism splits the KV heads, context parallelism the cached positions (each of cp ranks
holds seq_len / cp tokens), pipeline stages the layers; an fp8 cache halves every byte."""

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name, get_model_config_by_name

from hand_counts import (QWEN35_27B, QWEN35_27B_KV_BYTES_PER_TOKEN,  # tests/support/hand_counts.py
                         QWEN35_27B_STATE_BYTES_PER_REQUEST)

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
    """A hybrid model's cache is its attention layers' K and V per token plus each mixer layer's fixed state
    per request (tests/support/hand_counts.py: Qwen3.5-27B by hand): a request of 2048 + 2 tokens keeps
    2050 tokens of the one and all of the other."""
    a = LLMAnalysis(get_model_config_by_name(QWEN35_27B), get_gpu_config_by_name("h100-sxm-80gb"))
    one = 2050 * QWEN35_27B_KV_BYTES_PER_TOKEN + QWEN35_27B_STATE_BYTES_PER_REQUEST
    for b in (1, 3):
        r = a.inference(batch_size_per_gpu=b, seq_len=2048, num_tokens_to_generate=2)
        assert r["kv_cache_memory_per_gpu"] == pytest.approx(b * one, rel=1e-12)
