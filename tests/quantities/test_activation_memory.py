"""Activation memory per layer against the closed forms of Korthikanti et al.
2022, "Reducing Activation Recomputation in Large Transformer Models"
(arXiv 2205.05198), Table 2, derived by hand below.

Their assumptions, which the test reproduces: a GPT layer (MHA, 4h GeLU MLP,
two LayerNorms), 16-bit activations and norm inputs, 1-byte dropout masks,
dropout after softmax, after the attention output projection and after the MLP,
the s x s score matrices materialised (no flash attention). Per layer (§4.1):
  attention 11sbh + 5as^2b: QKV input 2sbh, Q and K 4sbh, V 2sbh, softmax output
      2as^2b, its dropout mask as^2b and output 2as^2b, out-projection input 2sbh,
      output dropout mask sbh;
  MLP 19sbh: first-linear input 2sbh, GeLU input 8sbh, second-linear input 8sbh,
      dropout mask sbh;
  two LayerNorm inputs 4sbh.
Tensor parallelism t splits the tensors inside attention and MLP (Q, K, V,
scores, out-projection input, GeLU input, second-linear input: 24sbh + 5as^2b);
sequence parallelism also splits the rest (norm inputs, QKV and first-linear
inputs, dropout masks: 10sbh). Selective recomputation drops the 5as^2b terms;
full recomputation keeps only the layer input, 2sbh.
"""

from __future__ import annotations

import pytest

from llm_analysis.analysis import ActivationRecomputation as R
from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (DtypeConfig, ModelConfig, ParallelismConfig, get_gpu_config_by_name,
                                 get_model_config_by_name)

# GPT 22B of Korthikanti Table 3: a = 64 heads, h = 6144, s = 2048, micro-batch 4, t = 8
A, H, S, B, T = 64, 6144, 2048, 4, 8


def _analysis(tp: int, sp: bool) -> LLMAnalysis:
    model = ModelConfig(name="gpt-22b", num_layers=2, n_head=A, hidden_dim=H, vocab_size=51200, max_seq_len=S,
                        qkv_bias=True, attn_out_bias=True, mlp_bias=True, activation="gelu")
    par = ParallelismConfig(tp_size=tp, sp_size=tp if sp else 1)
    return LLMAnalysis(model, get_gpu_config_by_name("a100-sxm-80gb"),
                       DtypeConfig(name="w16a16e16", weight_bits=16, activation_bits=16, embedding_bits=16), par)


def _per_layer(tp: int, sp: bool, rc: R, flash_attn: bool = False) -> float:
    return _analysis(tp, sp).get_activation_memory_per_layer(
        B, S, is_inference=False, activation_recomputation=rc, layernorm_dtype_bytes=2,
        flash_attn=flash_attn, softmax_dropout=True)


sbh = S * B * H
score = A * S / H  # as/h


@pytest.mark.parametrize("tp,sp,rc,closed_form", [
    # Table 2 rows
    (1, False, R.NONE, sbh * (34 + 5 * score)),  # no parallelism
    (T, False, R.NONE, sbh * (10 + 24 / T + 5 * score / T)),  # tensor parallel (baseline)
    (T, True, R.NONE, sbh * (34 / T + 5 * score / T)),  # tensor + sequence parallel
    (T, False, R.ATTN_COMPUTE, sbh * (10 + 24 / T)),  # tensor parallel + selective recompute
    (T, True, R.ATTN_COMPUTE, sbh * (34 / T)),  # tensor + sequence parallel + selective recompute
    (1, False, R.FULL, 2 * sbh),  # full recompute
    (T, False, R.FULL, 2 * sbh),
    (1, False, R.ATTN_COMPUTE, sbh * 34),  # selective without parallelism: the 5as^2b terms go
], ids=["none", "tp", "tp+sp", "tp+selective", "tp+sp+selective", "full", "tp+full", "selective"])
def test_korthikanti_table2(tp, sp, rc, closed_form):
    assert _per_layer(tp, sp, rc) == pytest.approx(closed_form, rel=1e-12)


def test_full_recompute_with_sequence_parallel_keeps_the_sharded_input():
    # Megatron checkpoints the sequence-parallel shard of the layer input: 2sbh/t
    assert _per_layer(T, True, R.FULL) == pytest.approx(2 * sbh / T, rel=1e-12)


def test_breakdown_attention_mlp_norms():
    total, attn, mlp, norms = _analysis(1, False).get_activation_memory_per_layer(
        B, S, is_inference=False, activation_recomputation=R.NONE, layernorm_dtype_bytes=2, flash_attn=False,
        softmax_dropout=True, return_breakdown=True)
    assert attn == pytest.approx(11 * sbh + 5 * A * S * S * B, rel=1e-12)
    assert mlp == pytest.approx(19 * sbh, rel=1e-12)
    assert norms == pytest.approx(4 * sbh, rel=1e-12)
    assert total == pytest.approx(attn + mlp + norms, rel=1e-12)


def test_flash_attention_removes_the_score_terms():
    # Flash attention (Dao et al. 2022) never stores the s x s matrices: same as selective recompute
    assert _per_layer(T, True, R.NONE, flash_attn=True) == pytest.approx(sbh * 34 / T, rel=1e-12)
    assert _per_layer(1, False, R.NONE, flash_attn=True) == pytest.approx(sbh * 34, rel=1e-12)


def test_attention_block_recompute_keeps_its_input():
    # ATTN checkpoints the input of norm_1 + attention and recomputes both: the
    # attention block's 11sbh + 5as^2b and norm_1's 2sbh become one 2sbh input
    assert _per_layer(1, False, R.ATTN) == pytest.approx(sbh * (2 + 19 + 2), rel=1e-12)


def test_recomputation_order_never_needs_more_memory():
    for tp, sp in ((1, False), (T, False), (T, True)):
        values = [_per_layer(tp, sp, rc) for rc in (R.NONE, R.ATTN_COMPUTE, R.ATTN, R.NORM_ATTN_NORM, R.FULL)]
        assert values == sorted(values, reverse=True), (tp, sp, values)


def test_norm_attn_norm_keeps_only_the_block_input_and_the_mlp_inner_tensors():
    """Hand derivation (GPT layer, 16-bit, no SP/TP, masks 1 byte): NORM_ATTN_NORM stores
    the block input 2sbh; the MLP input (the 2nd norm's output) is recomputed, so the MLP
    keeps GeLU input 8sbh + second-linear input 8sbh + dropout mask sbh = 17sbh: 19sbh."""
    from llm_analysis.analysis import ActivationRecomputation as R, LLMAnalysis
    from llm_analysis.config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig
    s, b, h, a = 2048, 2, 4096, 32
    m = ModelConfig(name="gpt", num_layers=2, n_head=a, hidden_dim=h, vocab_size=51200)
    gpu = GPUConfig(name="g", mem_per_GPU_in_GB=80, hbm_bandwidth_in_GB_per_sec=2000,
                    intra_node_bandwidth_in_GB_per_sec=300, intra_node_min_message_latency=8e-6, peak_fp16_TFLOPS=312)
    an = LLMAnalysis(m, gpu, DtypeConfig(), ParallelismConfig())
    got = an.get_activation_memory_per_layer(b, s, is_inference=False, activation_recomputation=R.NORM_ATTN_NORM,
                                             layernorm_dtype_bytes=2, flash_attn=False, softmax_dropout=True)
    assert got == 19 * s * b * h


@pytest.mark.parametrize("seq_len", [4096, 8192])
def test_context_parallel_prefill_holds_its_share_of_the_tokens(seq_len):
    """Context parallelism splits the prompt: each of cp ranks holds the residual stream and the layer
    activations of its seq_len / cp tokens. Llama-3.1-8B (hidden 4096, MLP 14336, 16-bit) at one sequence:
    the prefill's peak is the residual stream, s x 4096 x 2 bytes, beside the largest layer buffer, the
    gated MLP's gate and up outputs and their product, s x 3 x 14336 x 2 bytes; both are per token, so the
    whole peak is (s / cp) x (4096 + 3 x 14336) x 2 bytes."""
    for cp in (1, 2, 4):
        a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
                        parallelism_config=ParallelismConfig(cp_size=cp))
        r = a.inference(batch_size_per_gpu=1, seq_len=seq_len, num_tokens_to_generate=1)
        assert r["prefill_activation_memory_per_gpu"] == pytest.approx(
            seq_len / cp * (4096 + 3 * 14336) * 2, rel=1e-12), cp


@pytest.mark.parametrize("tp, batch", [(1, 1), (2, 2)])
def test_inference_attention_without_flash_holds_the_score_matrix_and_its_softmax(tp, batch):
    """Seed 004: get_activation_memory_per_layer_attn(..., is_inference, flash_attn); flash_attn=False had been
    ignored in inference. Eager attention holds the scores and their softmax at once: by hand, 2 x local heads x
    batch x seq^2 x 2 bytes (OPT-1.3B: 32 heads, fp16 activations) more than with flash attention."""
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name, get_model_config_by_name
    a = LLMAnalysis(get_model_config_by_name("facebook_opt-1.3b"), get_gpu_config_by_name("a100-sxm-80gb"),
                    parallelism_config=ParallelismConfig(tp_size=tp))
    flash = a.get_activation_memory_per_layer_attn(batch, 512, True, True)
    eager = a.get_activation_memory_per_layer_attn(batch, 512, True, False)
    assert eager - flash == 2 * (32 // tp) * batch * 512 * 512 * 2
