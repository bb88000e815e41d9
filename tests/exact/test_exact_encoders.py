"""Masked-LM encoders the exact path derives beyond plain attention (llm_analysis/exact,
issue 14): ConvBERT's span-based dynamic convolution, ...

Small configs keep CI time low. Expected values come from the transformers model of the
same config built here on the meta device: its parameters (named_parameters, tied weights
once) and FlopCounterMode's count of one prefill at batch 1 and two lengths the derivation
does not probe (it probes batch 2 x 16 tokens and 1 x min(1024, max positions)).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_analysis.config import get_gpu_config_by_name  # noqa: E402
from llm_analysis.errors import UnsupportedArchitectureError  # noqa: E402
from llm_analysis.exact import analysis_from_hf  # noqa: E402
from llm_analysis.exact.compare import engine_matmul_flops  # noqa: E402
from llm_analysis.exact.meta_model import build_meta_models  # noqa: E402
from llm_analysis.exact.probe import run_probe  # noqa: E402

GPU = get_gpu_config_by_name("h100-sxm-80gb")
LENGTHS = (16, 40)

CONVBERT = {"model_type": "convbert", "hidden_size": 128, "embedding_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 1024, "conv_kernel_size": 5,
            "head_ratio": 2, "num_groups": 2}


pytestmark = pytest.mark.usefixtures("exact_cache")  # tests/conftest.py


def _model_figures(cfg, lengths=LENGTHS):
    """(parameters, {seq_len: prefill FLOPs}) of the transformers masked LM itself."""
    lm = build_meta_models(cfg, with_base=False, dtype="float32").lm
    params = sum(int(p.numel()) for p in lm.parameters())
    flops = {}
    for n in lengths:
        counted, why = run_probe(lm, 1, n)  # FlopCounterMode over one forward
        assert counted is not None, why
        flops[n] = counted.total_flops
    return params, flops


def _derived_figures(cfg, lengths=LENGTHS):
    a = analysis_from_hf(cfg, GPU)
    return (int(a.get_num_params_total()), {n: engine_matmul_flops(a, 1, n) for n in lengths}), a


def _specs(a):
    d = a.describer.description
    return [s for k in d["kinds"] for s in k] + d["embedding"] + d["head"]


def test_convbert_dynamic_convolution_is_counted_per_token():
    derived, a = _derived_figures(CONVBERT)
    assert derived == _model_figures(CONVBERT)
    # by hand: the span-based dynamic convolution multiplies, per token and head, the
    # unfolded span (head_dim x kernel) by its kernel (kernel x 1): 2 x (heads/head_ratio)
    # x head_dim x kernel FLOPs per token, next to the attention core
    extra = next(s for s in _specs(a) if s["op"] == "row_flops" and s["group"] == "attention")
    assert extra["flops_per_row"] == 2 * (4 // 2) * (128 // 4) * 5
    # num_groups 2: the FFN's grouped linear layers are kernel-1 convolutions with 2 groups
    grouped = [s for s in _specs(a) if s["op"] == "conv" and s["conv_groups"] == 2]
    assert {s["module"] for s in grouped} == {"intermediate.dense", "output.dense"}
    # an encoder trains with forward + 2x backward of the same matmuls
    t = a.training(batch_size_per_gpu=1, seq_len=16, total_num_tokens=16, gradient_accumulation_steps=1)
    assert t["num_flops_total_per_micro_batch"] == pytest.approx(3 * derived[1][16], rel=0.02)


SQUEEZEBERT = {"model_type": "squeezebert", "hidden_size": 128, "embedding_size": 128, "num_hidden_layers": 2,
               "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 1024, "q_groups": 4,
               "k_groups": 2, "v_groups": 4, "post_attention_groups": 1, "intermediate_groups": 4,
               "output_groups": 2}


def test_squeezebert_grouped_convolutions_and_matmul_wrappers():
    derived, a = _derived_figures(SQUEEZEBERT)
    assert derived == _model_figures(SQUEEZEBERT)
    kind = a.describer.description["kinds"][0]
    # by hand: a kernel-1 convolution with G groups is G blocks of [C/G x C/G]
    groups = {s["module"]: s["conv_groups"] for s in kind if s["op"] == "conv"}
    assert groups == {"attention.query": 4, "attention.key": 2, "attention.value": 4, "post_attention.conv1d": 1,
                      "intermediate.conv1d": 4, "output.conv1d": 2}
    q = next(s for s in kind if s["module"] == "attention.query")
    assert q["params"] == 128 * 128 // 4 + 128
    # q.k^T and scores.v run in two parameter-free wrapper modules: one core on the attention
    core = [s for s in kind if s["op"] == "attention"]
    assert [(s["module"], s["heads"], s["d_qk"], s["d_v"]) for s in core] == [("attention", 4, 32, 32)]


FNET = {"model_type": "fnet", "hidden_size": 128, "num_hidden_layers": 2, "intermediate_size": 256,
        "vocab_size": 1024}


def test_fnet_fourier_mixing_counts_what_flop_counter_counts():
    # the token mixing is torch.fft.fftn, which FlopCounterMode counts as 0 FLOPs: the
    # description has projections and norms only, and the model's own figures agree
    derived, a = _derived_figures(FNET)
    assert derived == _model_figures(FNET)
    assert not any(s["op"] == "attention" for s in _specs(a))
    t = a.training(batch_size_per_gpu=1, seq_len=16, total_num_tokens=16, gradient_accumulation_steps=1)
    assert t["num_flops_total_per_micro_batch"] == pytest.approx(3 * derived[1][16], rel=0.02)


def test_mra_attention_in_missing_kernels_is_refused():
    # MRA's attention runs in CUDA kernels; without them transformers returns zeros, so
    # FlopCounterMode sees projections but no attention core: refused, not counted as 0
    cfg = {"model_type": "mra", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 256, "vocab_size": 1024}
    with pytest.raises(UnsupportedArchitectureError, match="no attention core"):
        analysis_from_hf(cfg, GPU)


BIGBIRD = {"model_type": "big_bird", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 256, "vocab_size": 1024, "max_position_embeddings": 512, "block_size": 16,
           "num_random_blocks": 2, "attention_type": "block_sparse"}


def test_big_bird_is_described_where_transformers_runs_full_attention_and_refused_above():
    # by hand: transformers runs block-sparse attention only above
    # (5 + 2 x num_random_blocks) x block_size = (5 + 4) x 16 = 144 tokens
    limit = 144
    derived, a = _derived_figures(BIGBIRD, (16, 40, limit))
    assert derived == _model_figures(BIGBIRD, (16, 40, limit))  # the model switches to full attention itself
    assert a.describer.description["max_input_len"] == limit
    a.inference(batch_size_per_gpu=1, seq_len=limit, num_tokens_to_generate=8)
    with pytest.raises(UnsupportedArchitectureError, match="block-sparse"):
        a.inference(batch_size_per_gpu=1, seq_len=limit + 1, num_tokens_to_generate=8)
    with pytest.raises(UnsupportedArchitectureError, match="block-sparse"):
        a.training(batch_size_per_gpu=1, seq_len=256, total_num_tokens=256, gradient_accumulation_steps=1)


XLNET = {"model_type": "xlnet", "d_model": 128, "n_layer": 2, "n_head": 4, "d_inner": 256, "vocab_size": 1024}


def test_xlnet_relative_attention_prefill_and_training_exact_decode_refused():
    derived, a = _derived_figures(XLNET)
    assert derived == _model_figures(XLNET)
    core = next(s for s in _specs(a) if s["op"] == "attention")
    # by hand (arXiv 1906.08237 / transformers' rel_attn_core): q.k^T over T keys plus
    # q.r^T over klen + qlen = 2T relative positions: a score width of 32 + 2 x 32 per pair
    assert (core["d_qk"], core["score_width"], core["d_v"]) == (32, 96, 32)
    # per token: q, k, v, o (4 x 128 x 128) plus the relative positions' key projection,
    # two rows per token: 2 x (4 + 2) x 128 x 128 FLOPs
    extra = next(s for s in _specs(a) if s["op"] == "row_flops" and s["group"] == "attention")
    assert extra["flops_per_row"] == 2 * 6 * 128 * 128
    t = a.training(batch_size_per_gpu=1, seq_len=16, total_num_tokens=16, gradient_accumulation_steps=1)
    assert t["num_flops_total_per_micro_batch"] == pytest.approx(3 * derived[1][16], rel=0.02)
    with pytest.raises(UnsupportedArchitectureError, match="decode step"):
        a.inference(batch_size_per_gpu=1, seq_len=16, num_tokens_to_generate=4)
