"""The attention core is timed as flash kernels execute it (issue 27, item 1): causal
attention computes only the unmasked triangle, a sliding window only the window, a
context-parallel rank its share of the triangle; the FLOP count of the conventions
(`flops`: FlopCounterMode's whole score matrix under "transformers") is kept apart.

Expected values are counted by hand: a query at position i (0-based) of a causal prompt
scores i + 1 keys, so a prompt of s tokens has s(s+1)/2 (query, key) pairs per head; each
pair costs head_dim multiply-adds in QK^T and head_dim in PV, 2 FLOPs each:
pairs x head_dim x heads x 2 x 2 per sequence (forward). The eager count is s^2 pairs.
"""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ModelConfig, ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name

A100 = get_gpu_config_by_name("a100-sxm-80gb")  # dense bf16 peak 312 TFLOP/s (its JSON's peak_fp16_TFLOPS)
BF16 = get_dtype_config_by_name("w16a16e16")
PEAK = 312e12
HEADS, HEAD_DIM, S, B = 8, 128, 4096, 2


def _model(**kw) -> ModelConfig:
    return ModelConfig(name="tiny-causal", num_layers=1, n_head=HEADS, hidden_dim=HEADS * HEAD_DIM,
                       num_key_value_heads=HEADS, vocab_size=1000, ffn_embed_dim=4 * HEADS * HEAD_DIM,
                       max_seq_len=2 * S, position_embedding_type="rotary", **kw)


def _analysis(model: ModelConfig, **par) -> LLMAnalysis:
    return LLMAnalysis(model, A100, BF16, ParallelismConfig(**par), flops_efficiency=1.0, hbm_memory_efficiency=1.0)


def _core(a: LLMAnalysis, phase: str = "train") -> dict:
    return next(r for r in a.operators(phase, B, S) if r["name"] == "attention_core")


def _score_flops(pairs: float) -> float:
    return B * pairs * HEAD_DIM * HEADS * 2 * 2  # QK^T and PV, 2 FLOPs per multiply-add


def test_causal_core_is_timed_on_the_unmasked_triangle():
    row = _core(_analysis(_model()))
    executed = _score_flops(S * (S + 1) / 2)
    assert row["flops"] == _score_flops(S * S)  # the count FlopCounterMode makes (eager, whole matrix)
    assert row["flops_per_gpu"] == executed
    # compute-bound (~900 FLOPs per byte of q, k, v and output against A100's ridge of ~150):
    # at efficiency 1 the time is the executed FLOPs at the dense peak
    assert row["latency_s"] == pytest.approx(executed / PEAK, rel=1e-12)


def test_training_summary_keeps_counted_and_executed_flops_apart():
    r = _analysis(_model()).training(batch_size_per_gpu=B, gradient_accumulation_steps=1, seq_len=S)
    executed_core_fwd = _score_flops(S * (S + 1) / 2)
    masked_fwd = _score_flops(S * S) - executed_core_fwd
    # counted: forward + backward (2x forward, the conventions' rule) of the whole matrix; executed: the
    # triangle, its backward at 2.5x its forward (FlashAttention-2, Dao 2023 Sec. 4.1: five matmuls in the
    # backward against two in the forward). Counted - executed = 3 x masked - 0.5 x executed forward.
    assert r["num_flops_total_per_micro_batch"] - r["num_executed_flops_per_micro_batch"] == \
        pytest.approx(3 * masked_fwd - 0.5 * executed_core_fwd, rel=1e-12)
    assert r["num_executed_flops_per_iter"] == r["num_executed_flops_per_micro_batch"]  # one micro-batch, dp 1
    assert r["achieved_flops_per_s"] <= PEAK * (1 + 1e-12)  # executed FLOPs: never above the peak
    assert any("num_executed_flops_per_iter" in note for note in r["notes"])


@pytest.mark.parametrize("window", [512, 1000])
def test_sliding_window_core_is_timed_on_the_window(window):
    row = _core(_analysis(_model(sliding_window=window)))
    # query i sees min(i + 1, window) keys: 1 + 2 + ... + window, then window for each later query
    pairs = window * (window + 1) / 2 + (S - window) * window
    assert row["flops_per_gpu"] == _score_flops(pairs)
    assert row["flops"] == _score_flops(S * S)
    assert row["latency_s"] == pytest.approx(_score_flops(pairs) / PEAK, rel=1e-12)


def test_serving_prefill_is_timed_on_the_triangle_under_either_convention():
    a = _analysis(_model())
    for conventions in ("serving", "transformers"):
        row = next(r for r in a.with_conventions(a.conventions_named(conventions)).operators("prefill", B, S)
                   if r["name"] == "attention_core")
        assert row["flops_per_gpu"] == _score_flops(S * (S + 1) / 2)


@pytest.mark.parametrize("cp", [2, 4])
def test_context_parallel_rank_times_its_share_of_the_triangle(cp):
    # causal load balancing (2 x cp chunks, rank i holds chunks i and 2cp-1-i): every rank computes
    # the same number of pairs, (s^2/2)/cp up to the diagonal: with chunk c = s/(2 cp), a rank's own
    # two chunks give 2 c^2 pairs (c^2/2 + c^2 + c^2/2 with the diagonal halves) and each of the
    # other cp - 1 ranks' K/V blocks 2 c^2 more: 2 c^2 cp = s^2 / (2 cp); with the diagonal's own
    # s/2 pairs shared evenly this is s(s+1)/2 / cp
    rows = _analysis(_model(), cp_size=cp).operators("train", B, S)
    row = next(r for r in rows if r["name"] == "attention_core")
    assert row["flops_per_gpu"] == pytest.approx(_score_flops(S * (S + 1) / 2) / cp, rel=1e-12)
    c = S // (2 * cp)
    assert row["flops_per_gpu"] == pytest.approx(_score_flops(2 * c * c * cp + S / 2 / cp), rel=1e-12)


def test_encoder_attention_executes_the_whole_matrix():
    row = _core(_analysis(_model(encoder_only=True)), "prefill")
    assert row["flops_per_gpu"] == row["flops"] == _score_flops(S * S)
