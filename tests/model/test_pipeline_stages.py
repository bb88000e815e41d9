"""Uneven pipeline stages (ParallelismConfig.num_layers_in_first/last_pipeline_stage,
operators/pipeline_layout.py): each stage's parameters, FLOPs, time, activations
and KV cache are its layer count times the per-layer figure, plus the embedding on
the first stage and the head on the last. The per-layer figures are derived by
hand below for a GPT-style model (biases everywhere, learned positions, untied
head), or, for times, taken from an even layout with one layer per stage."""

from __future__ import annotations

import pytest

from llm_analysis.config import ModelConfig, ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name
from llm_analysis.errors import ConfigError
from llm_analysis.facade import LLMAnalysis
from llm_analysis.model import Phase
from llm_analysis.schema.options import ActivationRecomputation, DSZeRO
from llm_analysis.training.memory import stage_memory
from llm_analysis.training.stage import build_stage

H, A, V, P, L = 256, 4, 1000, 512, 10  # hidden, heads, vocab, positions (= max_seq_len), layers
B, S = 2, 128  # micro-batch, sequence
T = B * S
MODEL = ModelConfig(name="gpt-uneven", num_layers=L, n_head=A, hidden_dim=H, vocab_size=V, max_seq_len=P,
                    qkv_bias=True, attn_out_bias=True, mlp_bias=True, position_embedding_type="learned",
                    tie_word_embeddings=False)
LAYERS = [1, 4, 3, 2]  # first 1, last 2; the 7 others over 2 stages, the earlier taking the remainder

# one layer: QKV 3h^2 + 3h, output h^2 + h, MLP h x 4h + 4h and 4h x h + h, two LayerNorms 2h each
LAYER_PARAMS = 12 * H * H + 13 * H
EMBEDDING_PARAMS = V * H + P * H  # word and position tables
HEAD_PARAMS = 2 * H + H * V  # final LayerNorm and the untied output projection (no bias)
# forward FLOPs (2 per multiply-accumulate): 24 T h^2 in the four matmuls, and the whole s x s score
# matrix (attention_flops="full") for QK^T and for scores x V: 2 x 2 b s^2 h
LAYER_FLOPS = 24 * T * H * H + 4 * B * S * S * H
HEAD_FLOPS = 2 * T * H * V  # logits at every position in training


def _analysis(**par) -> LLMAnalysis:
    return LLMAnalysis(MODEL, get_gpu_config_by_name("a100-sxm-80gb"), get_dtype_config_by_name("w16a16e16"),
                       ParallelismConfig(**par), attention_flops="full")


def _uneven() -> LLMAnalysis:
    return _analysis(pp_size=4, num_layers_in_first_pipeline_stage=1, num_layers_in_last_pipeline_stage=2)


def _stages(a: LLMAnalysis):
    ph = Phase("train", B, S, S)
    return [build_stage(a, ph, s, ActivationRecomputation.NONE, None, False)
            for s in range(a.parallelism_config.pp_size)]


def _ends(s: int, pp: int):
    return s == 0, s == pp - 1


def test_layer_counts_follow_the_options():
    assert [sum(g.values()) for g in _uneven().describer.stage_groups] == LAYERS
    assert [sum(g.values()) for g in _analysis(pp_size=4, num_layers_in_first_pipeline_stage=1)
            .describer.stage_groups] == [1, 3, 3, 3]
    assert [sum(g.values()) for g in _analysis(pp_size=4).describer.stage_groups] == [3, 3, 2, 2]  # as before


def test_stage_params_and_flops_are_layer_counts_times_the_layer():
    stages = _stages(_uneven())
    for st, n in zip(stages, LAYERS):
        first, last = _ends(st.index, 4)
        params = n * LAYER_PARAMS + first * EMBEDDING_PARAMS + last * HEAD_PARAMS
        assert st.num_layers == n
        assert st.dense_params_gpu == params
        assert st.weight_bytes_gpu == 2 * params  # 16-bit weights and embeddings
        assert st.flops_fwd == pytest.approx(n * LAYER_FLOPS + last * HEAD_FLOPS, rel=1e-12)
        assert st.flops_bwd == pytest.approx(2 * st.flops_fwd, rel=1e-12)


def test_stage_times_are_layer_counts_times_the_layer_time():
    """Per-layer, embedding and head times from an even layout with one layer per
    stage (pp = 10): its middle stage is one layer; its first adds the embedding,
    its last the head."""
    one = _stages(_analysis(pp_size=L))
    t_layer = one[1].fwd_compute
    t_emb, t_head = one[0].fwd_compute - t_layer, one[-1].fwd_compute - t_layer
    # one layer's flash-attention core in the forward (the operator record of the train phase)
    t_core = next(r["latency_s"] for r in _uneven().operators("train", B, S) if r["name"] == "attention_core")
    for st, n in zip(_stages(_uneven()), LAYERS):
        first, last = _ends(st.index, 4)
        assert st.fwd_compute == pytest.approx(n * t_layer + first * t_emb + last * t_head, rel=1e-9)
        # backward: 2x the forward, the flash core 2.5x its forward (FlashAttention-2, Dao 2023 Sec. 4.1)
        assert st.bwd_compute == pytest.approx(2 * st.fwd_compute + 0.5 * n * t_core, rel=1e-9)


def test_stage_activations_are_layers_times_micro_batches_in_flight():
    """1F1B: stage s holds pp - s micro-batches (m >= pp) of its layers' activations;
    the first also their embedding outputs, the last one micro-batch's logits."""
    a = _uneven()
    kw = dict(layernorm_dtype_bytes=2)
    per_layer = a.get_activation_memory_per_layer(B, S, False, ActivationRecomputation.NONE, **kw)
    emb = a.get_activation_memory_input_embedding(B, S)
    logits = a.get_activation_memory_output_embedding(B, S)
    mem = stage_memory(a, _stages(a), B, S, 8, 1, DSZeRO.NONE, ActivationRecomputation.NONE, kw, 4, None, None)
    for s, (d, n) in enumerate(zip(mem, LAYERS)):
        first, last = _ends(s, 4)
        in_flight = 4 - s
        assert d["activations"] == pytest.approx(
            n * per_layer * in_flight + first * emb * in_flight + last * logits, rel=1e-12)
        # weights 2 B, fp16 gradients 2 B, Adam fp32 master + two moments 12 B per parameter
        params = n * LAYER_PARAMS + first * EMBEDDING_PARAMS + last * HEAD_PARAMS
        assert d["weights"] + d["gradients"] + d["optimizer_states"] == pytest.approx(16 * params, rel=1e-12)


def test_stage_kv_cache_is_layers_times_the_layer():
    a = _uneven()
    per_layer = 2 * B * S * H * 2  # K and V, every head, 2 bytes
    assert [a.get_memory_kv_cache_total(B, S, stage=s) for s in range(4)] == [n * per_layer for n in LAYERS]
    assert a.get_memory_kv_cache_per_gpu(B, S) == 4 * per_layer


@pytest.mark.parametrize("par,words", [
    (dict(pp_size=1, num_layers_in_first_pipeline_stage=3), ["num_layers_in_first_pipeline_stage", "pp_size > 1"]),
    (dict(pp_size=4, num_layers_in_last_pipeline_stage=0), ["num_layers_in_last_pipeline_stage = 0", "1..7"]),
    (dict(pp_size=4, num_layers_in_first_pipeline_stage=8), ["num_layers_in_first_pipeline_stage = 8", "1..7"]),
    (dict(pp_size=4, num_layers_in_first_pipeline_stage=5, num_layers_in_last_pipeline_stage=4),
     ["leave 1 of the 10 layers", "at least one"]),
    (dict(pp_size=2, num_layers_in_first_pipeline_stage=4, num_layers_in_last_pipeline_stage=5),
     ["must equal num_layers = 10", "num_layers_in_last_pipeline_stage = 6"]),
])
def test_invalid_stage_layers_are_one_line_errors(par, words):
    with pytest.raises(ConfigError) as e:
        _analysis(**par)
    assert "\n" not in str(e.value)
    for w in words:
        assert w in str(e.value)


def test_interleaving_needs_a_layer_per_virtual_stage():
    with pytest.raises(ConfigError, match="pipeline_interleave = 2 needs at least 2 layers on every pipeline stage"):
        _uneven().training(batch_size_per_gpu=1, global_batch_size=8, seq_len=S, pipeline_interleave=2)


def test_training_peak_is_on_the_heaviest_stage():
    """Stage 1 holds 4 layers x 3 micro-batches in flight, more than stage 0's 1 x 4."""
    s = _uneven().training(batch_size_per_gpu=B, global_batch_size=8 * B, seq_len=S)
    assert s["peak_memory_pipeline_stage"] == 1


@pytest.mark.parametrize("v", [2, 4])
def test_interleaved_stages_hold_megatrons_warm_up_chunks(v):
    """Megatron's interleaved 1F1B (m >= p): stage s runs (p - s - 1) x 2 + (v - 1) x p model chunks of
    warm-up and one more in the steady state, each chunk 1/v of the stage's layers, so it holds
    ((p - s - 1) x 2 + (v - 1) x p + 1) / v micro-batches' worth of its layers' activations (the first
    stage's p + (p - 1)/v of Korthikanti et al. 2022, section 4.2.3), over the stages' own layers."""
    a = _analysis(pp_size=4)
    kw = dict(layernorm_dtype_bytes=2)
    per_layer = a.get_activation_memory_per_layer(B, S, False, ActivationRecomputation.NONE, **kw)
    emb = a.get_activation_memory_input_embedding(B, S)
    logits = a.get_activation_memory_output_embedding(B, S)
    stages = _stages(a)
    mem = stage_memory(a, stages, B, S, 8, v, DSZeRO.NONE, ActivationRecomputation.NONE, kw, 4, None, None)
    p = 4
    for s, (d, st) in enumerate(zip(mem, stages)):
        first, last = _ends(s, p)
        chunks = (p - s - 1) * 2 + (v - 1) * p + 1
        assert d["activations"] == pytest.approx(
            st.num_layers * per_layer * chunks / v + first * emb * chunks / v + last * logits, rel=1e-12)
