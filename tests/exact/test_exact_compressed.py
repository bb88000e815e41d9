"""DeepSeek-V4's compressed attention (CSA/HCA) under the exact path (issue 14;
llm_analysis/exact/architectures/deepseek_v4.py).

Expected values: the transformers DeepseekV4ForCausalLM of a small config on the meta
device (parameters; FlopCounterMode at prompt lengths around the compression rates and
for decode steps after a real prefill; the tensors its cache holds), and the serving
kernels' causal pairs written out by hand.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_analysis.config import get_gpu_config_by_name  # noqa: E402
from llm_analysis.exact import analysis_from_hf  # noqa: E402
from llm_analysis.exact.flops import prefill_flops  # noqa: E402
from llm_analysis.exact.meta_model import build_meta_models, config_object  # noqa: E402
from exact_pairs import exact_and_truth  # noqa: E402
from exact_steps import decode_step, matmul_flops  # noqa: E402

GPU = get_gpu_config_by_name("h100-sxm-80gb")

# one HCA layer (an entry per 8 tokens), one CSA layer (per 4 tokens, indexer of 4 heads x 32)
DSV4 = {"model_type": "deepseek_v4", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 1, "head_dim": 64, "qk_rope_head_dim": 16, "q_lora_rank": 64, "o_lora_rank": 32,
        "o_groups": 2, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "vocab_size": 1024, "index_n_heads": 4, "index_head_dim": 32, "index_topk": 4, "sliding_window": 8,
        "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        "layer_types": ["heavily_compressed_attention", "compressed_sparse_attention"],
        "mlp_layer_types": ["hash_moe", "moe"], "max_position_embeddings": 512, "pad_token_id": 0}


pytestmark = pytest.mark.usefixtures("exact_cache")  # tests/conftest.py


def test_the_compressed_keys_are_a_step_function_of_the_length():
    # why no per-token / per-pair description fits. Per-token work cancels in the second
    # difference f(16) - 2 f(15) + f(14); the eager cores' T x T window scores give
    # 2 x 2 layers x 1024 (2 x 4 heads x (64 + 64) per pair); the compressed entries,
    # T x floor(T / m) pairs, give HCA (m = 8) 1024 x (16x2 - 2x15x1 + 14x1) and CSA (m = 4,
    # core + indexer 2 x 4 x 32) 1280 x (16x4 - 2x15x3 + 14x3)
    lm = build_meta_models(config_object(DSV4), with_base=False).lm
    f = {t: prefill_flops(lm, 1, t)[0]["total"] for t in (14, 15, 16)}
    assert f[16] - 2 * f[15] + f[14] == 2 * 2 * 1024 + 1024 * (32 - 30 + 14) + 1280 * (64 - 90 + 42)


def test_params_and_prefill_flops_at_lengths_around_the_rates():
    (params, flops), (model_params, model_flops), a = exact_and_truth(DSV4, GPU)
    assert (params, flops) == (model_params, model_flops)
    lm = build_meta_models(config_object(DSV4), with_base=False).lm
    for seq_len in (3, 7, 9, 33, 100):  # no entry yet, one HCA entry, ragged windows, many
        assert matmul_flops(a, "prefill", 2, seq_len) == prefill_flops(lm, 2, seq_len)[0]["total"]


def _cache_elems(cache):
    """Elements transformers' cache holds: the window's K=V tensor once, compressed entries,
    pooling buffers and overlap state."""
    total, seen = 0, set()
    for layer in cache.layers:
        tensors = [getattr(layer, "keys", None), getattr(layer, "values", None)]
        for name in ("buffer_kv", "buffer_gate", "compressed_kv", "overlap_kv", "overlap_gate"):
            tensors += list((getattr(layer, name, None) or {}).values())
        for x in tensors:
            if x is not None and id(x) not in seen:
                seen.add(id(x))
                total += int(x.numel())
    return total


@pytest.mark.parametrize("prompt_len", [3, 12, 21, 30])
def test_decode_step_and_cache_match_transformers(prompt_len):
    a = analysis_from_hf(DSV4, GPU)
    measured, cache = decode_step(DSV4, 2, prompt_len)
    assert matmul_flops(a, "decode", 2, prompt_len, context_len=prompt_len + 1) == measured
    kv_bytes = a.dtype_config.activation_bits / 8
    assert a.get_memory_kv_cache_per_gpu(2, prompt_len + 1) == _cache_elems(cache) * kv_bytes


def test_serving_kernels_attend_to_causal_entries_and_csa_to_its_top_k():
    # 20 tokens, window 8: causal window pairs 1 + .. + 8 + 12 x 8 = 132 per core;
    # HCA (m = 8): sum of j // 8 for j = 1..20 = 8 + 10 = 18 entries;
    # CSA (m = 4, top-4): sum of min(4, j // 4) = 4 + 8 + 12 + 16 + 4 = 44;
    # indexer (4 heads x 32, no value matmul): every causal entry, sum of j // 4 = 45
    a = analysis_from_hf(DSV4, GPU, attention_flops="causal")
    rows = [r for r in a.operators("prefill", 1, 20, per_layer=False) if r["kind"] == "attention"]
    per_pair = 2 * 4 * (64 + 64)
    assert sum(r["flops"] for r in rows) == per_pair * ((132 + 18) + (132 + 44)) + 2 * 4 * 32 * 45
