"""ZAYA's CCA attention projection derived exactly (issue 14; llm_analysis/exact/architectures/zaya.py).

Expected values come from the transformers ZayaForCausalLM of a small config on the
meta device: parameters, FlopCounterMode's count of a prefill (at 16 tokens and at a
longer batch-2 input, where the convolutions' extra outputs and the per-sequence
initial delayed value scale differently from the tokens), of one decode step after a
real prefill (cache of transformers), and the cache's conv / recurrent state sizes.
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

# kernels 2 and 3 (different, so the depthwise conv's k1 - 1 extra outputs show), a
# sliding-window layer between two full ones
ZAYA = {"model_type": "zaya", "hidden_size": 128, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 32, "num_experts": 4, "num_experts_per_tok": 1,
        "moe_intermediate_size": 64, "router_hidden_size": 32, "vocab_size": 1024, "pad_token_id": 0,
        "max_position_embeddings": 512, "cca_time0": 2, "cca_time1": 3, "sliding_window": 8,
        "layer_types": ["hybrid", "hybrid_sliding", "hybrid"]}


pytestmark = pytest.mark.usefixtures("exact_cache")  # tests/conftest.py


def test_params_and_prefill_flops_exact():
    (params, flops), (model_params, model_flops), a = exact_and_truth(ZAYA, GPU)
    assert (params, flops) == (model_params, model_flops)
    lm = build_meta_models(config_object(ZAYA), with_base=False).lm
    longer, _ = prefill_flops(lm, 2, 100)
    assert matmul_flops(a, "prefill", 2, 100) == longer["total"]


def test_the_delayed_value_projection_by_hand():
    # v_proj_delayed (hidden -> G d / 2 = 32) runs on every token and, in a forward
    # without cache, once more on one zero row per sequence: (b t + b) rows
    a = analysis_from_hf(ZAYA, GPU)
    rows = a.operators("prefill", 2, 10, per_layer=False)
    delayed = sum(r["flops"] for r in rows if "v_proj_delayed" in r["name"])
    assert delayed == 3 * 2 * 128 * 32 * (2 * 10 + 2)
    rows = a.operators("decode", 2, 10, context_len=11, per_layer=False)
    assert sum(r["flops"] for r in rows if "v_proj_delayed" in r["name"]) == 3 * 2 * 128 * 32 * 2


def test_decode_step_and_state_match_transformers_cache():
    a = analysis_from_hf(ZAYA, GPU)
    measured, cache = decode_step(ZAYA, 2, 20)
    assert matmul_flops(a, "decode", 2, 20, context_len=21) == measured
    # conv state ((H + G) d channels x (k0 - 1 + k1 - 1) columns) and the last delayed value
    elems = sum(int(x.numel()) for layer in cache.layers for states in (layer.conv_states, layer.recurrent_states)
                for x in states.values() if x is not None)
    kv_bytes = a.dtype_config.activation_bits / 8  # the cache's dtype, as the analysis's default
    assert a.describer.mixer_state_bytes_per_seq_per_gpu(a.describer.layer_groups) == elems / 2 * kv_bytes
