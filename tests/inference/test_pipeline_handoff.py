"""Megatron's scatter/gather pipeline hand-off in training (Narayanan et al. 2021, arXiv
2104.04473 §4.1): without sequence parallelism each of the t TP ranks sends only 1/t of the
hidden states to its peer of the next stage, over its own NIC, and the receivers all-gather
the slices over NVLink. Expected values derived by hand from the roofline's link model
(tests/test_training.py `_ring`): p2p = bytes / NIC + hop, all-gather over 8 GPUs of a node
= 7/8 bytes / NVLink + 7 hops."""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import DtypeConfig, ModelConfig, ParallelismConfig, get_gpu_config_by_name

A100 = get_gpu_config_by_name("a100-sxm-80gb")
BF16 = DtypeConfig(name="w16a16e16", weight_bits=16, activation_bits=16, embedding_bits=16)
H, S, L = 12288, 2048, 16
GPT = ModelConfig(name="gpt-12288", num_layers=L, n_head=96, hidden_dim=H, vocab_size=51200, max_seq_len=S)


def _iteration(sp: int, m: int = 4):
    par = ParallelismConfig(tp_size=8, pp_size=2, sp_size=sp)  # the two stages sit on two nodes
    a = LLMAnalysis(GPT, A100, BF16, par)
    return a.training(batch_size_per_gpu=1, gradient_accumulation_steps=m, seq_len=S)


def _p2p_s(nbytes: float) -> float:
    g = A100
    return max(nbytes / (g.inter_node_bandwidth_in_GB_per_sec * 1e9) + g.inter_node_hop_latency,
               g.inter_node_min_message_latency)


def _all_gather_8_s(nbytes: float) -> float:
    g = A100
    return max(7 / 8 * nbytes / (g.intra_node_bandwidth_in_GB_per_sec * 1e9) + 7 * g.intra_node_hop_latency,
               g.intra_node_min_message_latency)


def test_without_sequence_parallelism_each_rank_sends_a_slice_and_the_next_stage_gathers():
    m, tensor = 4, S * H * 2  # one micro-batch's hidden states, bytes
    r = _iteration(sp=1, m=m)
    # 2 hand-offs per micro-batch (activations forward, gradients back) over the one stage boundary
    expected = m * 2 * (_p2p_s(tensor / 8) + _all_gather_8_s(tensor))
    assert r["latency_per_iter_pp_comm"] == pytest.approx(expected, rel=1e-12)
    # the scatter/gather gain of §4.1: far below every rank sending the whole tensor
    assert r["latency_per_iter_pp_comm"] < m * 2 * _p2p_s(tensor) / 4


def test_with_sequence_parallelism_the_slice_is_already_scattered():
    m, tensor = 4, S * H * 2
    r = _iteration(sp=8, m=m)
    assert r["latency_per_iter_pp_comm"] == pytest.approx(m * 2 * _p2p_s(tensor / 8), rel=1e-12)


def test_serving_still_sends_the_whole_tensor():
    """TensorRT-LLM / vLLM pipeline stages hand the full hidden states on from every rank."""
    a = LLMAnalysis(GPT, A100, BF16, ParallelismConfig(tp_size=8, pp_size=2, sp_size=1))
    assert a.pipeline_handoff_time_s(1, S) == pytest.approx(_p2p_s(S * H * 2), rel=1e-12)
