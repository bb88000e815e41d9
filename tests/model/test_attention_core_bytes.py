"""Bytes the attention core moves, derived by hand for Llama-3.1-8B (32 query heads, 8 KV heads,
head dim 128; config.json of meta-llama/Llama-3.1-8B) in 16-bit at tp 1.

Decode step at context c (q_len 1): per sequence it reads its query (32 x 128 x 2 B), reads the cached
keys and values of all c positions (c x 2 x 8 x 128 x 2 B), writes its output (32 x 128 x 2 B) and
writes the new token's key and value into the cache (2 x 8 x 128 x 2 B). With tp 2 every head count
halves. An fp8 KV cache halves the cache bytes, not the query and output."""

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.model.records import Phase

H, KV, D = 32, 8, 128


def _core(tp=1, kv_cache_dtype_bytes=None, batch=3, context=1000):
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
                    parallelism_config=ParallelismConfig(tp_size=tp))
    d = a.describer_for(kv_cache_dtype_bytes)
    kind = next(iter(d.layer_groups))
    ops = [o for o in d.layer_ops(Phase("decode", batch, 1, context), kind) if o.name == "attention_core"]
    assert len(ops) == 1
    return ops[0]


@pytest.mark.parametrize("tp", [1, 2])
def test_decode_step_reads_query_and_cache_writes_output_and_new_kv(tp):
    b, c = 3, 1000
    core = _core(tp, batch=b, context=c)
    h, kv = H // tp, KV // tp
    assert core.bytes_read_per_gpu == b * h * D * 2 + b * c * 2 * kv * D * 2
    assert core.kv_cache_bytes_read_per_gpu == b * c * 2 * kv * D * 2
    assert core.bytes_written_per_gpu == b * h * D * 2 + b * 2 * kv * D * 2


def test_an_fp8_cache_halves_the_cache_bytes_only():
    b, c = 3, 1000
    core = _core(kv_cache_dtype_bytes=1, batch=b, context=c)
    assert core.bytes_read_per_gpu == b * H * D * 2 + b * c * 2 * KV * D * 1
    assert core.bytes_written_per_gpu == b * H * D * 2 + b * 2 * KV * D * 1
