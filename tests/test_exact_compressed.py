"""DeepSeek-V4's compressed attention (CSA/HCA) under the exact path (issue 14;
llm_analysis/exact/derive_compressed.py).

Expected values: the transformers DeepseekV4ForCausalLM of a small config on the meta
device, counted with FlopCounterMode at lengths around the compression rate.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_analysis.config import get_gpu_config_by_name  # noqa: E402
from llm_analysis.errors import UnsupportedArchitectureError  # noqa: E402
from llm_analysis.exact import analysis_from_hf  # noqa: E402
from llm_analysis.exact.flops import prefill_flops  # noqa: E402
from llm_analysis.exact.meta_model import build_meta_models, config_object  # noqa: E402

GPU = get_gpu_config_by_name("h100-sxm-80gb")

# one HCA layer (an entry per 8 tokens), one CSA layer (per 4 tokens, indexer of 4 heads x 32)
DSV4 = {"model_type": "deepseek_v4", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 1, "head_dim": 64, "qk_rope_head_dim": 16, "q_lora_rank": 64, "o_lora_rank": 32,
        "o_groups": 2, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "vocab_size": 1024, "index_n_heads": 4, "index_head_dim": 32, "index_topk": 4, "sliding_window": 8,
        "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        "layer_types": ["heavily_compressed_attention", "compressed_sparse_attention"],
        "mlp_layer_types": ["hash_moe", "moe"], "max_position_embeddings": 512, "pad_token_id": 0}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_ANALYSIS_CACHE", str(tmp_path / "exact-cache"))


def test_the_compressed_keys_are_a_step_function_of_the_length():
    # why no per-token / per-pair description fits. Per-token work cancels in the second
    # difference f(16) - 2 f(15) + f(14); the eager cores' T x T window scores give
    # 2 x 2 layers x 1024 (2 x 4 heads x (64 + 64) per pair); the compressed entries,
    # T x floor(T / m) pairs, give HCA (m = 8) 1024 x (16x2 - 2x15x1 + 14x1) and CSA (m = 4,
    # core + indexer 2 x 4 x 32) 1280 x (16x4 - 2x15x3 + 14x3)
    lm = build_meta_models(config_object(DSV4), with_base=False).lm
    f = {t: prefill_flops(lm, 1, t)[0]["total"] for t in (14, 15, 16)}
    assert f[16] - 2 * f[15] + f[14] == 2 * 2 * 1024 + 1024 * (32 - 30 + 14) + 1280 * (64 - 90 + 42)


def test_refused_naming_compressed_attention():
    with pytest.raises(UnsupportedArchitectureError, match=r"compressed attention \(DeepSeek-V4 CSA/HCA\)"):
        analysis_from_hf(DSV4, GPU)
