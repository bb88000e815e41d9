"""Llama 4's text decoder on the family table (hub/families/moe.py "llama4_text"), hand-derived on a
tiny config: parameters, one prefill's FLOPs under both conventions, decode keys and the KV cache
of its chunked layers.

transformers 5.23 (models/llama4/modeling_llama4.py), read for the rules below:
- Llama4TextDecoderLayer: MoE on `moe_layers` (default every interleave_moe_layer_step-th layer from
  step - 1), else Llama4TextMLP(intermediate_size_mlp); two RMSNorms per layer, a final norm.
- Llama4TextMoe: Llama4Router = Linear(hidden, experts, bias=False); Llama4TextExperts holds
  gate_up_proj [E, hidden, 2 * intermediate_size] and down_proj [E, intermediate_size, hidden]; one
  shared expert Llama4TextMLP(intermediate_size). Its forward repeats every token once per expert
  (scaled by the router score, 0 outside the top-k) and runs all E copies through two bmm's.
- Llama4TextAttention: bias-free q/k/v/o; qk_norm is Llama4TextL2Norm (no weights).
- layer_types: "chunked_attention" on RoPE layers (no_rope_layers[i] = 1, default unless
  (i + 1) % no_rope_layer_interval == 0), "full_attention" on NoPE layers.
Conventions (model/records.py Conventions): "transformers" counts what FlopCounterMode measures
(every expert on every token, the whole masked score matrix, logits at every position);
"serving" what vLLM / SGLang execute (top-k experts, the causal chunk pairs, last logits).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import get_gpu_config_by_name, get_model_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.hub.entry import model_config_from_hf_dict

GPU = get_gpu_config_by_name("a100-sxm-80gb")

V, H, HEADS, KV_HEADS, HD = 128, 64, 4, 2, 16
EXPERT_W, DENSE_W, E, LAYERS, CHUNK = 32, 96, 4, 4, 8
TINY = {
    "model_type": "llama4_text", "vocab_size": V, "hidden_size": H, "num_attention_heads": HEADS,
    "num_key_value_heads": KV_HEADS, "head_dim": HD, "intermediate_size": EXPERT_W,
    "intermediate_size_mlp": DENSE_W, "num_hidden_layers": LAYERS, "num_local_experts": E,
    "num_experts_per_tok": 1, "interleave_moe_layer_step": 2, "no_rope_layer_interval": 4,
    "attention_chunk_size": CHUNK, "use_qk_norm": True, "tie_word_embeddings": False,
    "max_position_embeddings": 4096, "hidden_act": "silu",
}
# layers 0 and 2 dense, 1 and 3 MoE (interleave step 2); layers 0-2 chunked (RoPE), layer 3 full (NoPE)
DENSE_LAYERS, MOE_LAYERS, CHUNKED_LAYERS, FULL_LAYERS = 2, 2, 3, 1

# parameters of one part, by hand
ATTENTION = H * HEADS * HD + 2 * H * KV_HEADS * HD + HEADS * HD * H  # q, k, v, o; the L2 qk norm has none
DENSE_MLP = 3 * H * DENSE_W  # gate, up, down
ONE_EXPERT = 3 * H * EXPERT_W
ROUTER = H * E
MOE = ROUTER + E * ONE_EXPERT + ONE_EXPERT  # router, experts, one shared expert as wide as an expert
NORMS = 2 * H
PARAMS = (2 * V * H + LAYERS * (ATTENTION + NORMS) + H
          + DENSE_LAYERS * DENSE_MLP + MOE_LAYERS * MOE)  # untied embedding and head, final norm
PER_PAIR = 2 * HEADS * (HD + HD)  # q.k and p.v per (query, key) pair


def _config(**changes):
    return model_config_from_hf_dict({**TINY, **changes}, name="tiny-llama4")


def _prefill_flops(conventions: str, seq_len: int) -> int:
    analysis = LLMAnalysis(_config(), GPU, conventions=conventions)
    rows = analysis.operators("prefill", 1, seq_len, per_layer=False)
    return int(sum(r["flops"] for r in rows if r["kind"] in ("matmul", "attention")))


def _chunk_pairs(n: int) -> int:
    """Pairs of a chunked layer over positions 0..n-1: position p sees p mod CHUNK + 1 keys."""
    return sum(p % CHUNK + 1 for p in range(n))


def test_mapping_reads_the_layer_pattern_and_widths():
    cfg = _config()
    assert [cfg.is_moe_layer(i) for i in range(LAYERS)] == [False, True, False, True]
    assert [cfg.layer_attention_type(i) for i in range(LAYERS)] == ["sliding_attention"] * 3 + ["full_attention"]
    assert (cfg.sliding_window, cfg.sliding_window_chunked, cfg.moe_eager_all_experts) == (CHUNK, True, True)
    assert (cfg.ffn_embed_dim, cfg.expert_ffn_dim, cfg.shared_expert_ffn_dim) == (DENSE_W, EXPERT_W, EXPERT_W)


def test_parameters_by_hand_and_as_transformers_builds_them():
    assert LLMAnalysis(_config(), GPU).get_num_params_total() == PARAMS
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoConfig.for_model(**TINY)
    with torch.device("meta"):
        model = transformers.Llama4ForCausalLM._from_config(hf)
    assert sum(p.numel() for p in model.parameters()) == PARAMS


@pytest.mark.parametrize("seq_len", [5, 20])
def test_prefill_flops_transformers_convention_every_expert_on_every_token(seq_len):
    """The eager forward: every token through all E experts, the whole S x S score matrix on every
    layer (chunked ones masked afterwards), logits at every position."""
    s = seq_len
    matmuls = 2 * s * (LAYERS * ATTENTION + DENSE_LAYERS * DENSE_MLP
                       + MOE_LAYERS * (ROUTER + E * ONE_EXPERT + ONE_EXPERT) + V * H)
    expected = matmuls + LAYERS * PER_PAIR * s * s
    assert _prefill_flops("transformers", s) == expected


def test_prefill_flops_transformers_convention_match_flop_counter():
    """The same count, from FlopCounterMode over the tiny model on the meta device (20 tokens, so the
    chunked layers' masks cut: the eager count does not see them)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from llm_analysis.exact.flops import prefill_flops
    hf = transformers.AutoConfig.for_model(**TINY)
    with torch.device("meta"):
        model = transformers.Llama4ForCausalLM._from_config(hf)
    flops, error = prefill_flops(model, 1, 20)
    assert error is None, error
    assert _prefill_flops("transformers", 20) == flops["total"]


@pytest.mark.parametrize("seq_len", [5, 20])
def test_prefill_flops_serving_convention_top_k_experts_and_chunk_pairs(seq_len):
    """What vLLM / SGLang execute: top-1 routed expert plus the shared one per token, causal pairs
    (a chunked layer's within its chunk), logits of the last position only."""
    s = seq_len
    matmuls = (2 * s * (LAYERS * ATTENTION + DENSE_LAYERS * DENSE_MLP
                        + MOE_LAYERS * (ROUTER + 1 * ONE_EXPERT + ONE_EXPERT)) + 2 * V * H)
    pairs = CHUNKED_LAYERS * _chunk_pairs(s) + FULL_LAYERS * s * (s + 1) // 2
    assert _prefill_flops("serving", s) == matmuls + PER_PAIR * pairs


def test_eager_expert_work_is_counted_but_not_executed():
    """Under the transformers convention the extra E - k experts' work is counted, not executed:
    the executed FLOPs (flops - masked) of the experts are the top-k ones."""
    rows = LLMAnalysis(_config(), GPU).operators("prefill", 1, 20, per_layer=False)
    experts = [r for r in rows if r["group"] == "experts" and r["kind"] == "matmul" and "shared" not in r["name"]]
    assert sum(r["flops"] for r in experts) == MOE_LAYERS * 2 * 20 * E * ONE_EXPERT
    assert sum(r["flops_per_gpu"] for r in experts) == MOE_LAYERS * 2 * 20 * 1 * ONE_EXPERT  # one GPU: all of it
    # the whole prefill: counted as the eager forward, executed as the routed kernels
    summary = LLMAnalysis(_config(), GPU, conventions="transformers").inference(
        batch_size_per_gpu=1, seq_len=20, num_tokens_to_generate=1)
    eager_extra = MOE_LAYERS * 2 * 20 * (E - 1) * ONE_EXPERT
    masked_attention = LAYERS * PER_PAIR * (20 * 20) - PER_PAIR * (CHUNKED_LAYERS * _chunk_pairs(20)
                                                                    + FULL_LAYERS * 20 * 21 // 2)
    assert summary["prefill_num_flops_fwd_total"] - summary["prefill_num_flops_executed_total"] == (
        eager_extra + masked_attention)


@pytest.mark.parametrize("context", [3, 8, 9, 17, 100])
def test_decode_keys_of_a_chunked_layer(context):
    """A decode step at context c: the serving kernel reads the (c - 1) mod C + 1 keys of the query's
    chunk; transformers' sliding cache of C - 1 tokens plus the new one, min(c, C)."""
    def core_flops(conventions):
        rows = LLMAnalysis(_config(), GPU, conventions=conventions).operators(
            "decode", 1, context - 1, context_len=context, per_layer=False)
        return sum(r["flops"] for r in rows if r["kind"] == "attention")
    serving = PER_PAIR * (CHUNKED_LAYERS * ((context - 1) % CHUNK + 1) + FULL_LAYERS * context)
    eager = PER_PAIR * (CHUNKED_LAYERS * min(context, CHUNK) + FULL_LAYERS * context)
    assert core_flops("serving") == serving
    assert core_flops("transformers") == eager


@pytest.mark.parametrize("context", [5, 100])
def test_kv_cache_of_chunked_layers_is_at_most_the_chunk(context):
    """Cached tokens: every token on the full (NoPE) layer, at most C - 1 on a chunked layer (the
    next query's chunk holds at most C - 1 earlier tokens; transformers keeps the last C - 1)."""
    elems_per_token = KV_HEADS * (HD + HD)
    expected = (CHUNKED_LAYERS * min(context, CHUNK - 1) + FULL_LAYERS * context) * elems_per_token * 2
    assert LLMAnalysis(_config(), GPU).get_memory_kv_cache_per_gpu(1, context, 2) == expected


def test_unknown_layer_kind_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match="layer_types.*'chunked_attention' or 'full_attention'"):
        _config(layer_types=["sliding_attention"] * LAYERS)


def test_chunked_layers_without_a_chunk_length_are_refused():
    with pytest.raises(ConfigError, match="attention_chunk_size"):
        _config(attention_chunk_size=None)


def test_one_expert_is_refused_naming_it():
    """Llama4TextMoe with one expert still holds a router and a shared expert: not a dense layer."""
    with pytest.raises(ConfigError, match="num_local_experts=1"):
        _config(num_local_experts=1)


def test_model_config_fields_need_what_they_describe():
    base = _config().model_dump()
    with pytest.raises(ConfigError, match="sliding_window_chunked"):
        type(_config())(**{**base, "sliding_window": None, "layer_types": None})
    with pytest.raises(ConfigError, match="moe_eager_all_experts"):
        type(_config())(**{**base, "moe_num_experts": 1, "moe_top_k": 1, "moe_num_shared_experts": 0})


@pytest.mark.parametrize("seq_len", [8, 4992])
def test_dense_chunked_model_decodes_each_step_at_its_chunk(seq_len):
    """A dense model with chunked layers (no experts: the per-length tables of model/phase_table.py
    would otherwise apply) sums its decode steps as the chunk restarts: under the serving convention
    the 12 steps from context seq_len + 1 (a chunk's first position) read 1..8 and then 1..4 keys on
    each chunked layer; the summed decode time is that of the steps one by one."""
    base = _config()
    dense = type(base)(**{**base.model_dump(), "moe_num_experts": 1, "moe_top_k": 1, "moe_num_shared_experts": 0,
                          "moe_eager_all_experts": False})
    assert not dense.is_moe and dense.sliding_window_chunked
    analysis = LLMAnalysis(dense, GPU, conventions="serving")
    contexts = range(seq_len + 1, seq_len + 13)
    steps = [analysis.operators("decode", 1, c - 1, context_len=c, per_layer=False) for c in contexts]
    core = sum(r["flops"] for rows in steps for r in rows if r["kind"] == "attention")
    assert core == PER_PAIR * (CHUNKED_LAYERS * (sum(range(1, 9)) + sum(range(1, 5))) + FULL_LAYERS * sum(contexts))
    # n tokens: the prefill and n - 1 steps, at contexts seq_len + 1 .. seq_len + n - 1 (inference/run.py);
    # one token: the summary's decode_latency is the step at context seq_len + 1
    summed = analysis.inference(batch_size_per_gpu=1, seq_len=seq_len, num_tokens_to_generate=13)
    one_by_one = sum(analysis.inference(batch_size_per_gpu=1, seq_len=c - 1, num_tokens_to_generate=1)
                     ["decode_latency"] for c in contexts)
    assert summed["total_decode_latency"] == pytest.approx(one_by_one, rel=1e-9)


REAL = Path(__file__).resolve().parents[2] / "tests" / "data" / "hf_configs_aiconfigurator"


@pytest.mark.parametrize("stem, total_b", [("meta-llama_Llama-4-Scout-17B-16E-Instruct", 109),
                                           ("meta-llama_Llama-4-Maverick-17B-128E-Instruct", 400)])
def test_real_configs_against_the_model_card(stem, total_b):
    """Meta's model card (https://github.com/meta-llama/llama-models/blob/main/models/llama4/MODEL_CARD.md):
    Scout 17B active of 109B total parameters, Maverick 17B active of 400B, rounded figures (a regression
    anchor, 1% on the totals and 5% on the active count; the exact counts are checked against
    transformers in tests/hub/test_aiconfigurator_configs.py). Active: one routed and the shared expert."""
    analysis = LLMAnalysis(get_model_config_by_name(str(REAL / f"{stem}.json")), GPU)
    assert analysis.get_num_params_total() == pytest.approx(total_b * 1e9, rel=0.01)
    assert analysis.get_num_active_params_total() == pytest.approx(17e9, rel=0.05)
