"""A tied LM head reads the input embedding's matrix: that read is weight traffic,
never activation memory (issue 11, item 1).

Reproduction from the issue: a GPT with 44 layers, 48 heads, hidden 6144, vocabulary
51200 (the shape of GPT-NeoX-20B / FasterTransformer's "20B" rows) on A100-SXM-80GB,
batch 1, prompt 20, 8 generated tokens reported 629 MB of decode activations (= the
51200 x 6144 x 2-byte head weight) and refused batch 64, which FasterTransformer ran
in 452 ms (github:NVIDIA/FasterTransformer docs/gpt_guide.md, record
ft-20b-tp1-b64-i20-o8 of the shared validation set).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_analysis.config import ModelConfig, ParallelismConfig, get_gpu_config_by_name
from llm_analysis.errors import DoesNotFitError
from llm_analysis.facade import LLMAnalysis

L, NH, H, V, S = 44, 48, 6144, 51200, 2048
A100 = get_gpu_config_by_name("a100-sxm-80gb")
VALIDATION = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "validation"


def _model(**kw) -> ModelConfig:
    # GPT-2 family flags (biases everywhere, tanh GELU), as the transformers GPT2 model builds it
    return ModelConfig(name="gpt-44l-6144", num_layers=L, n_head=NH, hidden_dim=H, vocab_size=V,
                       max_seq_len=S, qkv_bias=True, attn_out_bias=True, mlp_bias=True,
                       activation="gelu_tanh", **kw)


def test_decode_activation_is_not_the_head_weight():
    s = LLMAnalysis(_model(), A100).inference(batch_size_per_gpu=1, seq_len=20, num_tokens_to_generate=8,
                                              conventions="transformers")
    # hand derivation (2-byte activations): the largest live set of one decode operator is the
    # LM head, input h and output V logits of one token, plus the residual stream h:
    # (6144 + 51200 + 6144) x 2 = 126,976 bytes; the head weight (V x h x 2 = 629,145,600) is not in it
    assert s["decode_activation_memory_per_gpu"] == (H + V + H) * 2 == 126_976
    # prefill, logits at all 20 positions (transformers conventions): 20 x (h + V + h) x 2
    assert s["prefill_activation_memory_per_gpu"] == 20 * (H + V + H) * 2


def test_weights_count_the_tied_matrix_once_as_transformers_does():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=L, n_head=NH, n_embd=H, vocab_size=V, n_positions=S,
                                  tie_word_embeddings=True)
    with torch.device("meta"):
        hf = transformers.GPT2LMHeadModel(cfg)
    assert hf.lm_head.weight is hf.transformer.wte.weight
    unique = sum(p.numel() for p in hf.parameters())  # a tied weight appears once
    a = LLMAnalysis(_model(), A100)
    assert a.get_num_params_total() == unique
    assert a.get_weight_memory_per_gpu() == pytest.approx(2 * unique)
    s = a.inference(batch_size_per_gpu=1, seq_len=20, num_tokens_to_generate=8)
    assert s["decode_activation_memory_per_gpu"] < V * H * 2 / 1000


def test_untied_head_is_weight_memory_not_activation():
    tied, untied = LLMAnalysis(_model(), A100), LLMAnalysis(_model(tie_word_embeddings=False), A100)
    # the untied head adds its V x h matrix (2 bytes) to the weights and nothing to the activations
    assert untied.get_weight_memory_per_gpu() - tied.get_weight_memory_per_gpu() == pytest.approx(V * H * 2)
    kw = dict(batch_size_per_gpu=1, seq_len=20, num_tokens_to_generate=8)
    assert untied.inference(**kw)["decode_activation_memory_per_gpu"] == \
        tied.inference(**kw)["decode_activation_memory_per_gpu"]


def test_batch_64_fits_as_fastertransformer_ran_it():
    s = LLMAnalysis(_model(), A100).inference(batch_size_per_gpu=64, seq_len=20, num_tokens_to_generate=8)
    assert s["decode_max_batch_size_per_gpu"] >= 64
    assert s["total_latency"] <= 0.452  # a lower bound never exceeds the measured 452 ms


def _ft20b_records():
    recs = []
    for f in ("measured_dev.json", "published_measurements.json"):
        p = VALIDATION / f
        if p.is_file():
            recs += [r for r in json.loads(p.read_text()) if r["kind"] == "inference"
                     and r["setup"].get("layers") == L and r["setup"].get("hidden") == H]
    return recs


@pytest.mark.parametrize("record", _ft20b_records(), ids=lambda r: r["id"])
@pytest.mark.parametrize("conventions", ["serving", "transformers"])
def test_fastertransformer_20b_rows_fit_exactly_when_they_ran(record, conventions):
    s = record["setup"]
    a = LLMAnalysis(_model(), A100, parallelism_config=ParallelismConfig(tp_size=s["tp"]))
    kw = dict(batch_size_per_gpu=s["batch"], seq_len=s["input_len"], num_tokens_to_generate=s["output_len"],
              conventions=conventions)
    if record["measured"].get("oom"):  # out of memory in FasterTransformer: refused, or flagged as too full
        try:
            summary = a.inference(**kw)
        except DoesNotFitError:
            return
        assert summary["memory_used_per_gpu"] > 0.9 * summary["gpu_memory_per_gpu"]
        assert any("may not fit in practice" in n for n in summary["notes"])
    else:
        a.inference(**kw)
