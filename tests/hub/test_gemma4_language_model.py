"""Gemma 4's language model on the family table path (issue 29): keys reused as values in the
full-attention layers (`attention_k_eq_v`), wider heads and fewer KV heads there
(`global_head_dim`, `num_global_key_value_heads`), and the MoE block beside the dense MLP
(`enable_moe_block`, the 26B-A4B).

The expected figures are derived by hand below from the fields of a tiny config, following
transformers 5.23's modelling code (models/gemma4/modeling_gemma4.py):
- Gemma4TextAttention: q_proj [hidden -> heads*d], q_norm [d], and unless the layer reuses
  another's cache k_proj [hidden -> kv*d], k_norm [d], v_norm (no weight), v_proj [hidden -> kv*d]
  only when not (attention_k_eq_v and full attention): there the values are k_proj's output;
  o_proj [heads*d -> hidden]; d and kv are head_dim / num_key_value_heads in sliding layers,
  global_head_dim / num_global_key_value_heads in full ones (Gemma4TextConfig.per_layer_config).
- Gemma4TextDecoderLayer: four [hidden] norms; with enable_moe_block three more, a router
  (Gemma4TextRouter: proj [hidden -> experts], scale [hidden], per_expert_scale [experts]) and
  experts (Gemma4TextExperts: gate_up [experts x 2f x hidden], down [experts x hidden x f]) beside
  the dense gated MLP (gate, up, down of intermediate_size).
- Gemma4TextModel: embedding [vocab x hidden], final norm [hidden]; the head is tied.
FLOPs are 2 per multiply-add of the matmuls (what FlopCounterMode counts; the norms, the
softcapping of the logits and the router's scalings are element-wise): the eager forward scores
the whole [seq x seq] matrix in every layer and computes logits at every position.
"""

from __future__ import annotations

import logging

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_gpu_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.exact.compare import engine_matmul_flops
from llm_analysis.hub.mapping import map_hf_config
from llm_analysis.schema.model import ModelConfig

GPU = get_gpu_config_by_name("a100-sxm-80gb")

HIDDEN, HEADS, VOCAB, LAYERS = 64, 4, 128, 6
SLIDING_D, SLIDING_KV = 16, 2  # head_dim, num_key_value_heads
GLOBAL_D, GLOBAL_KV = 32, 1  # global_head_dim, num_global_key_value_heads
FFN, EXPERTS, TOP_K, EXPERT_FFN = 96, 4, 2, 24
WINDOW = 8
TYPES = ["sliding_attention", "sliding_attention", "full_attention"] * 2

TINY_MOE = dict(model_type="gemma4_text", vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN,
                num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=SLIDING_KV,
                head_dim=SLIDING_D, global_head_dim=GLOBAL_D, num_global_key_value_heads=GLOBAL_KV,
                attention_k_eq_v=True, enable_moe_block=True, num_experts=EXPERTS, top_k_experts=TOP_K,
                moe_intermediate_size=EXPERT_FFN, sliding_window=WINDOW, layer_types=TYPES,
                hidden_size_per_layer_input=0, max_position_embeddings=256, tie_word_embeddings=True)
# the 31B's shape: the same attention, a dense MLP alone
TINY_DENSE = {**TINY_MOE, "enable_moe_block": False, "num_experts": None, "top_k_experts": None,
              "moe_intermediate_size": None}
# attention_k_eq_v off: every layer projects its values, and the full layers keep num_key_value_heads
TINY_NO_K_EQ_V = {**TINY_DENSE, "attention_k_eq_v": False}


def _import(raw: dict) -> ModelConfig:
    logging.disable(logging.WARNING)
    try:
        return map_hf_config(dict(raw), name="tiny-gemma4", source="test", what="tiny-gemma4",
                             trust_remote_code=False, revision=None)
    finally:
        logging.disable(logging.NOTSET)


def _layer_shapes(raw: dict, full: bool):
    """(head width, KV heads, whether v_proj exists) of a layer, from the config's fields."""
    if not full:
        return raw["head_dim"], raw["num_key_value_heads"], True
    k_eq_v = raw["attention_k_eq_v"]
    kv = raw["num_global_key_value_heads"] if k_eq_v else raw["num_key_value_heads"]
    return raw["global_head_dim"], kv, not k_eq_v


def _hand_layer_params(raw: dict, full: bool) -> int:
    h, n = raw["hidden_size"], raw["num_attention_heads"]
    d, kv, has_v = _layer_shapes(raw, full)
    attention = h * n * d + h * kv * d * (2 if has_v else 1) + n * d * h + 2 * d  # q, k, (v), o; q/k norms
    mlp = 3 * h * raw["intermediate_size"]
    norms = 4 * h
    if raw["enable_moe_block"]:
        e, f = raw["num_experts"], raw["moe_intermediate_size"]
        mlp += 3 * e * h * f + h * e + h + e  # experts; router proj, scale, per_expert_scale
        norms += 3 * h
    return attention + mlp + norms


def _hand_params(raw: dict) -> int:
    layers = sum(_hand_layer_params(raw, t == "full_attention") for t in raw["layer_types"])
    return raw["vocab_size"] * raw["hidden_size"] + layers + raw["hidden_size"]  # tied head, final norm


def _hand_matmul_flops_per_token(raw: dict) -> int:
    """Matmul FLOPs of one token outside the attention core, over all layers and the head."""
    h, n = raw["hidden_size"], raw["num_attention_heads"]
    total = 2 * h * raw["vocab_size"]  # logits
    for t in raw["layer_types"]:
        d, kv, has_v = _layer_shapes(raw, t == "full_attention")
        total += 2 * (h * n * d + h * kv * d * (2 if has_v else 1) + n * d * h)
        total += 2 * 3 * h * raw["intermediate_size"]
        if raw["enable_moe_block"]:
            total += 2 * h * raw["num_experts"] + raw["top_k_experts"] * 2 * 3 * h * raw["moe_intermediate_size"]
    return total


def _hand_prefill_flops(raw: dict, seq: int) -> int:
    """One sequence's prefill: every token's matmuls, and per layer QK^T and PV over the whole
    [seq x seq] score matrix (the eager forward masks it afterwards), 2 x seq^2 x heads x d each."""
    n = raw["num_attention_heads"]
    core = sum(2 * 2 * seq * seq * n * _layer_shapes(raw, t == "full_attention")[0] for t in raw["layer_types"])
    return seq * _hand_matmul_flops_per_token(raw) + core


def test_config_fields_describe_the_layers():
    cfg = _import(TINY_MOE)
    assert cfg.layer_head_dims == [SLIDING_D, SLIDING_D, GLOBAL_D] * 2
    assert cfg.layer_kv_heads == [SLIDING_KV, SLIDING_KV, GLOBAL_KV] * 2
    assert cfg.layer_values_from_keys == [False, False, True] * 2
    assert (cfg.moe_num_experts, cfg.moe_top_k, cfg.moe_ffn_embed_dim) == (EXPERTS, TOP_K, EXPERT_FFN)
    # the dense MLP beside the experts runs on every token: one shared expert of intermediate_size
    assert (cfg.moe_num_shared_experts, cfg.shared_expert_ffn_dim) == (1, FFN)
    assert cfg.moe_router_scales and cfg.num_norms_per_layer == 7


@pytest.mark.parametrize("raw", [TINY_MOE, TINY_DENSE, TINY_NO_K_EQ_V], ids=["moe", "dense", "no-k-eq-v"])
def test_parameters_by_hand(raw):
    assert LLMAnalysis(_import(raw), GPU).get_num_params_total() == _hand_params(raw)


@pytest.mark.parametrize("raw", [TINY_MOE, TINY_DENSE], ids=["moe", "dense"])
def test_prefill_flops_by_hand(raw):
    seq = 20  # longer than the window: the eager forward still scores every pair
    assert engine_matmul_flops(LLMAnalysis(_import(raw), GPU), 1, seq) == _hand_prefill_flops(raw, seq)


def test_decode_flops_by_hand():
    """One decode step at context c < window: each layer's query meets the c cached keys."""
    raw, context = TINY_MOE, WINDOW - 2
    rows = LLMAnalysis(_import(raw), GPU).operators("decode", 1, context - 1, context_len=context,
                                                    per_layer=False)
    engine = sum(r["flops"] for r in rows if r["kind"] in ("matmul", "attention"))
    core = sum(2 * 2 * context * HEADS * _layer_shapes(raw, t == "full_attention")[0] for t in TYPES)
    assert engine == _hand_matmul_flops_per_token(raw) + core


def test_kv_cache_holds_keys_and_values_of_every_layer():
    """The full layers cache keys (k_norm, rotary) and values (v_norm only) apart, though both come
    from k_proj; sliding layers keep the last window - 1 tokens."""
    batch, seq, dtype_bytes = 3, 50, 2
    a = LLMAnalysis(_import(TINY_MOE), GPU)
    sliding = TYPES.count("sliding_attention") * min(seq, WINDOW - 1) * 2 * SLIDING_KV * SLIDING_D
    full = TYPES.count("full_attention") * seq * 2 * GLOBAL_KV * GLOBAL_D
    assert a.get_memory_kv_cache_total(batch, seq, kv_cache_dtype_bytes=dtype_bytes) == \
        batch * (sliding + full) * dtype_bytes


@pytest.mark.parametrize("raw", [TINY_MOE, TINY_DENSE], ids=["moe", "dense"])
def test_matches_transformers_on_the_meta_device(raw):
    pytest.importorskip("torch")
    from llm_analysis.exact.compare import compare
    from llm_analysis.exact.truth import architecture_truth
    truth = architecture_truth(dict(raw))
    verdict = compare(LLMAnalysis(_import(truth["config"]), GPU), truth)
    assert verdict["params_exact"], verdict["param_differences"]
    assert verdict["flops_exact"], (verdict["engine_flops"], verdict["model_flops"])
    assert verdict["model_params"] == _hand_params(raw)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_tensor_parallel_keeps_the_parameters(tp):
    """Fewer global KV heads than tp_size: replicated on every rank (one each), the total unchanged."""
    from llm_analysis.config import ParallelismConfig
    a = LLMAnalysis(_import(TINY_MOE), GPU, parallelism_config=ParallelismConfig(tp_size=tp))
    assert a.get_num_params_total() == _hand_params(TINY_MOE)


@pytest.mark.parametrize("kw, words", [
    (dict(layer_values_from_keys=[True]), "layer_values_from_keys"),
    (dict(layer_values_from_keys=[True] * 4, v_head_dim=8), "layer_values_from_keys"),
])
def test_invalid_values_from_keys_name_the_field(kw, words):
    with pytest.raises(ConfigError, match=words):
        ModelConfig(name="t", num_layers=4, n_head=4, hidden_dim=64, vocab_size=128, **kw)


def test_moe_block_without_its_fields_is_refused():
    raw = {k: v for k, v in TINY_MOE.items() if k != "moe_intermediate_size"}
    with pytest.raises(ConfigError, match="moe_intermediate_size"):
        _import({**raw, "moe_intermediate_size": None})
