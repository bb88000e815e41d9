"""Architectures the exact path derives beyond plain projections and attention cores
(llm_analysis/exact): matmuls on activations measured per token (`row_flops`: Gemma 3n's
AltUp, MobileBERT's LM head).

Small configs keep CI time low. Expected values come from the transformers model of the
same config built here on the meta device: its parameters (named_parameters, tied weights
once) and FlopCounterMode's count of one prefill (batch 1, 16 tokens), a phase the
derivation does not probe (it probes batch 2).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name  # noqa: E402
from llm_analysis.errors import ConfigError  # noqa: E402
from llm_analysis.exact import analysis_from_hf  # noqa: E402
from exact_pairs import exact_and_truth  # noqa: E402

GPU = get_gpu_config_by_name("h100-sxm-80gb")

GEMMA3N = {"model_type": "gemma3n_text", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": [512] * 4, "vocab_size": 1024,
           "vocab_size_per_layer_input": 1024, "hidden_size_per_layer_input": 32, "laurel_rank": 16,
           "layer_types": ["sliding_attention", "full_attention"] * 2, "num_kv_shared_layers": 2,
           "activation_sparsity_pattern": [0.95, 0.0, 0.0, 0.0], "sliding_window": 64,
           "max_position_embeddings": 2048}
MOBILEBERT = {"model_type": "mobilebert", "num_hidden_layers": 2, "vocab_size": 2048}


pytestmark = pytest.mark.usefixtures("exact_cache")  # tests/conftest.py


def _exact_and_truth(cfg):
    return exact_and_truth(cfg, GPU)


@pytest.mark.parametrize("cfg", [GEMMA3N, MOBILEBERT], ids=["gemma3n_text", "mobilebert"])
def test_matmuls_on_activations_are_counted_per_token(cfg):
    derived, truth, a = _exact_and_truth(cfg)
    assert derived == truth
    kinds = [s for k in a.describer.description["kinds"] for s in k] + a.describer.description["head"]
    assert any(s["op"] == "row_flops" for s in kinds)  # the new spec is what made it exact
    with pytest.raises(ConfigError, match="cannot tell how to shard"):
        analysis_from_hf(cfg, GPU, parallelism_config=ParallelismConfig(tp_size=2))


DSA = {"model_type": "deepseek_v32", "hidden_size": 256, "num_hidden_layers": 2, "first_k_dense_replace": 1,
       "intermediate_size": 512, "moe_intermediate_size": 64, "n_routed_experts": 8, "num_experts_per_tok": 2,
       "n_group": 2, "topk_group": 1, "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 64,
       "kv_lora_rank": 32, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "qk_head_dim": 48, "head_dim": 16,
       "v_head_dim": 32, "index_n_heads": 4, "index_head_dim": 32, "index_topk": 8, "vocab_size": 1024,
       "max_position_embeddings": 256}


def test_sparse_attention_indexer_is_an_attention_core_with_one_key_and_weighted_heads():
    # index_topk (8) below the probe lengths: the indexer selects a subset of the keys,
    # while the eager attention still computes every pair and masks the rest
    derived, truth, a = _exact_and_truth(DSA)
    assert derived == truth
    cores = [s for s in a.describer.description["kinds"][0] if s["op"] == "attention"]
    indexer = next(s for s in cores if "indexer" in s["name"])
    assert (indexer["heads"], indexer["d_qk"], indexer["d_v"], indexer["cache_elems"]) == (4, 32, 1, 32)


HYPER = {"model_type": "hy_v4", "hidden_size": 128, "num_hidden_layers": 3, "hc_mult": 4,
         "layer_types": ["indexed_attention"] * 3, "indexer_types": ["full", "full", "shared"],
         "mlp_layer_types": ["dense", "sparse", "sparse"], "intermediate_size": 256, "moe_intermediate_size": 32,
         "n_routed_experts": 8, "num_experts_per_tok": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
         "q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "qk_head_dim": 48,
         "head_dim": 16, "v_head_dim": 32, "index_n_heads": 4, "index_head_dim": 32, "index_topk": 8,
         "vocab_size": 1024, "max_position_embeddings": 256, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


def test_hyper_connection_streams_are_counted_per_token():
    # each hyper-connection module sees hc_mult rows per token (the residual streams) and
    # multiplies the flattened streams by its own matrix: FLOPs measured per token
    derived, truth, a = _exact_and_truth(HYPER)
    assert derived == truth
    hc = [s for s in a.describer.description["kinds"][0] if s.get("module") == "attn_hc"]
    assert [s["op"] for s in hc] == ["row_flops", "param"]  # fn, base, scale: parameters only
