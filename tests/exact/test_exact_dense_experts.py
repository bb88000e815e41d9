"""Llama 4's experts, which transformers runs densely, described as routed (issue 14;
llm_analysis/exact/dense_experts.py).

transformers' `Llama4TextMoe` repeats every token for all E experts and scales each
copy by its router score (0 outside the top-k), so FlopCounterMode counts E/k times
the routed expert matmuls. The analysis reports the routed FLOPs (what the model card's
active parameters and a serving engine compute). Expected values: the transformers
model of each config on the meta device (parameters, FlopCounterMode), and the extra
dense work written out here by hand from the config, per MoE layer
2 x tokens x (E - k) x (hidden x 2 x intermediate + intermediate x hidden).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_analysis.config import get_gpu_config_by_name  # noqa: E402
from llm_analysis.exact import analysis_from_hf  # noqa: E402
from llm_analysis.exact.dense_experts import eager_extra_flops  # noqa: E402
from llm_analysis.exact.flops import prefill_flops  # noqa: E402
from llm_analysis.exact.meta_model import build_meta_models, config_object  # noqa: E402
from llm_analysis.exact.truth import architecture_truth  # noqa: E402
from exact_pairs import exact_and_truth  # noqa: E402
from exact_steps import decode_step, matmul_flops  # noqa: E402

GPU = get_gpu_config_by_name("h100-sxm-80gb")

# 4 layers, MoE every 2nd (layers 1 and 3), 4 experts top-1; layers 0 and 2 a dense MLP
LLAMA4 = {"model_type": "llama4_text", "hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 64, "intermediate_size_mlp": 256,
          "num_local_experts": 4, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2, "vocab_size": 1024,
          "pad_token_id": 0, "max_position_embeddings": 512}


pytestmark = pytest.mark.usefixtures("exact_cache")  # tests/conftest.py


def _dense_extra(cfg, tokens):
    """By hand: the expert matmuls transformers runs beyond the routed top-k, per MoE layer
    gate_up [hidden x 2 I] and down [I x hidden] for (E - k) more copies of every token."""
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    e, k = cfg["num_local_experts"], cfg["num_experts_per_tok"]
    moe_layers = cfg["num_hidden_layers"] // cfg.get("interleave_moe_layer_step", 1)
    return moe_layers * 2 * tokens * (e - k) * (h * 2 * i + i * h)


@pytest.mark.parametrize("top_k", [1, 2])
def test_params_exact_and_flops_routed_plus_the_dense_remainder(top_k):
    cfg = dict(LLAMA4, num_experts_per_tok=top_k)
    (params, flops), (model_params, model_flops), a = exact_and_truth(cfg, GPU)
    assert params == model_params
    assert flops == model_flops - _dense_extra(cfg, 16)  # the analysis: routed only
    # the reconciliation the coverage reports use, from the description's expert shapes
    assert eager_extra_flops(a.describer.description, 1, 16) == _dense_extra(cfg, 16)
    # and at another length and batch, where per-token work scales differently
    lm = build_meta_models(config_object(cfg), with_base=False).lm
    longer, _ = prefill_flops(lm, 2, 100)
    assert matmul_flops(a, "prefill", 2, 100) == longer["total"] - _dense_extra(cfg, 200)
    assert "routed experts counted as top-" in a.model_config.source


def test_decode_step_is_routed_too():
    cfg = LLAMA4
    a = analysis_from_hf(cfg, GPU)
    measured, _cache = decode_step(cfg, 2, 12)
    assert matmul_flops(a, "decode", 2, 12, context_len=13) == measured - _dense_extra(cfg, 2)


def test_active_parameters_count_top_k_of_the_experts():
    # what the model card's "active parameters" means: the routed expert's weights
    # (top-1 of 4) plus everything else, per token
    a = analysis_from_hf(LLAMA4, GPU)
    h, i, e = LLAMA4["hidden_size"], LLAMA4["intermediate_size"], LLAMA4["num_local_experts"]
    per_expert = 3 * h * i
    assert a.get_num_params_total() - a.get_num_active_params_total() == 2 * (e - 1) * per_expert


def test_the_coverage_outcome_is_exact_only_through_the_reconciliation():
    from exact_coverage import exact_outcome
    truth = architecture_truth(LLAMA4)
    assert exact_outcome(truth)["outcome"] == "exact"
    off_by_one = dict(truth, flops=dict(truth["flops"], total=truth["flops"]["total"] - 1))
    assert exact_outcome(off_by_one)["outcome"] == "silently wrong"



# chunked attention in layers 0-2 (layer 3 is a NoPE full-attention layer), chunks of 8
CHUNKED = dict(LLAMA4, attention_chunk_size=8)


def test_chunked_layers_decode_like_transformers_cache():
    # transformers keeps the last C - 1 tokens of a chunked layer: a decode step at
    # context 21 multiplies against 8 keys there, 21 in the full layer
    a = analysis_from_hf(CHUNKED, GPU)
    measured, cache = decode_step(CHUNKED, 2, 20)
    assert matmul_flops(a, "decode", 2, 20, context_len=21) == measured - _dense_extra(CHUNKED, 2)
    lm = build_meta_models(config_object(CHUNKED), with_base=False).lm
    longer, _ = prefill_flops(lm, 1, 40)  # eager: the whole masked score matrix
    assert matmul_flops(a, "prefill", 1, 40) == longer["total"] - _dense_extra(CHUNKED, 40)


def test_chunked_pairs_under_the_causal_convention_by_hand():
    # a kernel computes p mod 8 + 1 keys per query in a chunked layer, p + 1 in the full
    # one: 20 tokens = chunks of 8, 8, 4 -> 36 + 36 + 10 = 82 pairs; full: 210
    a = analysis_from_hf(CHUNKED, GPU, attention_flops="causal")
    rows = [r for r in a.operators("prefill", 1, 20, per_layer=False) if r["kind"] == "attention"]
    per_pair = 2 * 4 * (32 + 32)  # heads x (d_qk + d_v), 2 FLOPs per multiply-add
    assert sum(r["flops"] for r in rows) == per_pair * (3 * 82 + 210)
