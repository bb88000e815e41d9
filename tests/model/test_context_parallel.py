"""Context parallelism (issue 11, item 5) and the training memory terms (item 6),
against hand derivations.

Korthikanti et al. 2022 (arXiv 2205.05198) Table 2 per-layer activations of a GPT
layer, sbh(34 + 5as/h) (t-way TP + SP: sbh(34 + 5as/h)/t), hold s/cp of every
sequence on a CP rank and score the local queries against all s keys, so every
term divides by cp. Ring attention passes the rank's K + V block (b x s/cp tokens x
2 x kv_heads x head_dim x 2 bytes) to the next rank cp - 1 times per layer forward.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from llm_analysis.analysis import ActivationRecomputation as R
from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import DtypeConfig, ModelConfig, ParallelismConfig, get_gpu_config_by_name
from llm_analysis.cost.links import collective_time_s
from llm_analysis.errors import ConfigError
from llm_analysis.model import Phase
from llm_analysis.planner.training import cp_options

A, H, S, B, T = 64, 6144, 2048, 4, 8  # Korthikanti's GPT 22B layer
H100 = get_gpu_config_by_name("h100-sxm-80gb")
FP16 = DtypeConfig(name="w16a16e16", weight_bits=16, activation_bits=16, embedding_bits=16)


def _gpt(layers: int = 2, kv_heads=None) -> ModelConfig:
    return ModelConfig(name="gpt-22b", num_layers=layers, n_head=A, hidden_dim=H, vocab_size=51200,
                       max_seq_len=1 << 17, qkv_bias=True, attn_out_bias=True, mlp_bias=True, activation="gelu",
                       num_key_value_heads=kv_heads)


def _an(cp=1, tp=1, dp=1, comm="ring", kv_heads=None, **par) -> LLMAnalysis:
    return LLMAnalysis(_gpt(kv_heads=kv_heads), H100, FP16, ParallelismConfig(
        tp_size=tp, sp_size=tp, cp_size=cp, cp_comm=comm, dp_size=dp, **par))


@pytest.mark.parametrize("cp", [1, 2, 4, 8])
@pytest.mark.parametrize("tp", [1, T])
def test_korthikanti_activations_divided_by_cp(cp, tp):
    sbh = S * B * H
    closed_form = sbh * (34 + 5 * A * S / H) / tp / cp
    got = _an(cp, tp).get_activation_memory_per_layer(B, S, is_inference=False, activation_recomputation=R.NONE,
                                                      layernorm_dtype_bytes=2, flash_attn=False, softmax_dropout=True)
    assert got == pytest.approx(closed_form, rel=1e-12)


def test_ring_exchange_bytes_are_kv_of_the_local_block_times_cp_minus_1():
    cp, kv = 4, 8
    d = _an(cp, kv_heads=kv).describer
    ops = d.layer_ops(Phase("train", B, S, S), next(iter(d.layer_groups)))
    (ring,) = [o for o in ops if o.comm_group == "cp"]
    block = B * (S // cp) * 2 * kv * (H // A) * 2  # K + V, 2 bytes each
    # cp - 1 point-to-point steps of one block each (TransformerEngine's ring: batched isend / irecv)
    assert ring.collective == "p2p"
    assert ring.comm_bytes_per_gpu == pytest.approx((cp - 1) * block, rel=1e-12)
    assert ring.comm_group_size == cp


def test_attention_flops_per_rank_are_one_cp_th():
    full = _an(1).describer.layer_ops(Phase("train", 1, S, S), next(iter(_an(1).describer.layer_groups)))
    d = _an(4).describer
    local = d.layer_ops(Phase("train", 1, S, S), next(iter(d.layer_groups)))
    core1 = next(o for o in full if o.kind == "attention")
    core4 = next(o for o in local if o.kind == "attention")
    assert core4.flops == core1.flops  # the whole-model count is unchanged
    assert core4.flops_per_gpu == pytest.approx(core1.flops_per_gpu / 4, rel=1e-12)
    # each matmul: 2 x (s/cp tokens) x d_in x d_out on the rank; weights stay whole
    q1, q4 = (next(o for o in ops if o.name == "q_proj") for ops in (full, local))
    assert q4.flops_per_gpu == pytest.approx(2 * (S / 4) * H * H, rel=1e-12)
    assert q4.weight_bytes_per_gpu == q1.weight_bytes_per_gpu == (H * H + H) * 2


def test_ring_exchange_hidden_behind_block_attention_only_up_to_its_time():
    a = _an(2)
    d = a.describer
    ops = d.layer_ops(Phase("train", 1, S, S), next(iter(d.layer_groups)))
    ring = next(o for o in ops if o.comm_group == "cp")
    core = next(o for o in ops if o.kind == "attention")
    link = a.cost_model.link("cp", 2)
    coll = collective_time_s("p2p", ring.comm_bytes_per_gpu, 2, link)
    attn_hidden = a.cost_model.op_time_s(core) * (2 - 1) / 2  # the one received block's attention
    assert a.cost_model.op_time_s(ring) == pytest.approx(max(0.0, coll - attn_hidden), rel=1e-9)


def test_ulysses_exposes_four_all_to_alls_forward_and_backward():
    cp, layers = 4, 2
    a = _an(cp, comm="all_to_all")
    r = a.training(batch_size_per_gpu=1, gradient_accumulation_steps=1, seq_len=S, flash_attn=True)
    link = a.cost_model.link("cp", cp)
    local = S // cp
    widths = (H, H, H, H)  # q, k, v, out of MHA on one TP rank
    per_layer = sum(collective_time_s("all_to_all", local * w * 2, cp, link) for w in widths)
    assert r["latency_per_iter_cp_comm"] == pytest.approx(2 * layers * per_layer, rel=1e-9)
    assert r["cp_size"] == cp and r["total_num_gpus"] == cp


def test_training_memory_and_gpus_with_cp():
    base = dict(batch_size_per_gpu=1, gradient_accumulation_steps=1, seq_len=8192, ds_zero=1)
    r1 = _an(1, dp=2).training(**base)
    r4 = _an(4, dp=2).training(**base)
    assert r4["total_num_gpus"] == 8 and r4["global_batch_size"] == 2  # cp ranks share a sequence
    assert r4["activation_memory_per_gpu"] == pytest.approx(r1["activation_memory_per_gpu"] / 4, rel=1e-12)
    # ZeRO-1 shards optimizer states over dp x cp = 8 ranks: 12 bytes x params / 8
    params = r1["num_params_total"]
    assert r4["optimizer_state_memory_per_gpu"] == pytest.approx(12 * params / 8, rel=1e-9)
    assert r1["optimizer_state_memory_per_gpu"] == pytest.approx(12 * params / 2, rel=1e-9)
    assert r4["weight_memory_per_gpu"] == r1["weight_memory_per_gpu"]


def test_hsdp_shards_inside_dp_shard():
    a = LLMAnalysis(_gpt(), H100, FP16, ParallelismConfig(dp_shard=4, dp_replicate=2))
    assert a.parallelism_config.dp_size == 8
    r = a.training(batch_size_per_gpu=1, gradient_accumulation_steps=1, seq_len=S, ds_zero=3)
    params = r["num_params_total"]
    assert r["weight_memory_per_gpu"] == pytest.approx(2 * params / 4, rel=1e-9)
    assert r["optimizer_state_memory_per_gpu"] == pytest.approx(12 * params / 4, rel=1e-9)
    assert r["dp_shard"] == 4 and r["dp_replicate"] == 2


def test_framework_memory_terms():
    a = _an(1, dp=4)
    base = dict(batch_size_per_gpu=1, gradient_accumulation_steps=1, seq_len=S)
    r0 = a.training(**base)
    r = a.training(**base, distributed_optimizer=True, grad_reduce_in_fp32=True, cuda_context_bytes=1e9,
                   memory_fragmentation=0.05, grad_bucket_params=1e6)
    params = r0["num_params_total"]
    assert r["optimizer_state_memory_per_gpu"] == pytest.approx(12 * params / 4, rel=1e-9)  # ZeRO-1 over dp
    assert r["gradient_memory_per_gpu"] == pytest.approx(4 * params, rel=1e-9)  # fp32 main grads, whole
    assert r["gradient_bucket_memory_per_gpu"] == pytest.approx(4 * 1e6)
    allocated = (r["weight_memory_per_gpu"] + r["gradient_memory_per_gpu"] + r["optimizer_state_memory_per_gpu"]
                 + r["activation_memory_per_gpu"] + r["gradient_bucket_memory_per_gpu"])
    assert r["fragmentation_memory_per_gpu"] == pytest.approx(0.05 * allocated, rel=1e-9)
    assert r["estimated_peak_memory_per_gpu"] == pytest.approx(1.05 * allocated + 1e9, rel=1e-9)
    assert "cuda_context_memory_per_gpu" not in r0  # off by default: the summary keeps its keys


@pytest.mark.parametrize("make,match", [
    (lambda: _an(4).training(batch_size_per_gpu=1, seq_len=2052), "cp_size = 4 needs 2 x cp_size to divide seq_len"),
    (lambda: _an(4).inference(seq_len=2048, num_tokens_to_generate=8), "prefill only"),
    (lambda: _an(3, comm="all_to_all"), "cp_comm='all_to_all' must divide"),
    (lambda: ParallelismConfig(dp_size=8, dp_shard=3), "dp_shard = 3"),
    (lambda: _an(1).training(seq_len=S, memory_fragmentation=2), "memory_fragmentation"),
])
def test_bad_input_is_one_config_error(make, match):
    with pytest.raises(ConfigError, match=match):
        make()


def test_prefill_kv_cache_per_rank():
    r1 = _an(1).inference(batch_size_per_gpu=1, seq_len=S, num_tokens_to_generate=1)
    r2 = _an(2).inference(batch_size_per_gpu=1, seq_len=S, num_tokens_to_generate=1)
    # K + V per token per layer: 2 x h x 2 bytes, 2 layers, context s + 1
    assert r1["kv_cache_memory_per_gpu"] == pytest.approx(2 * 2 * H * 2 * (S + 1), rel=1e-12)
    assert r2["kv_cache_memory_per_gpu"] == pytest.approx(r1["kv_cache_memory_per_gpu"] / 2, rel=1e-12)
    assert r2["prefill_latency"] < r1["prefill_latency"]


def test_planner_searches_cp_for_long_sequences():
    assert cp_options(4096) == [1]
    assert 16 in cp_options(131072)  # Llama 3 405B trained 128K sequences with cp = 16
    assert all(8192 % (2 * c) == 0 and 8192 // c >= 2048 for c in cp_options(8192))


def test_cli_cp_flags_and_gpu_count_error():
    cmd = [sys.executable, "-m", "llm_analysis", "train", "--model_name", "meta-llama_Llama-2-7b-hf",
           "--gpu_name", "h100-sxm-80gb", "--tp_size", "2", "--cp_size", "3", "--total_num_gpus", "16",
           "--seq_len", "4096", "--output_format", "none"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 2
    assert "tp_size * cp_size * pp_size" in p.stderr and p.stderr.count("\n") == 1
    ok = subprocess.run(cmd[:11] + ["4", "--total_num_gpus", "16", "--seq_len", "4096", "--batch_size_per_gpu", "1",
                                    "--output_format", "json", "--distributed_optimizer"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert '"cp_size": 4' in ok.stdout and '"total_num_gpus": 16' in ok.stdout


def test_latency_views_follow_context_parallelism():
    """The mirrored per-layer views under CP: a dense model has no expert all-to-all (0,
    not the layer's CP exchange minus a TP estimate), and a CP rank all-reduces only its
    own 1/cp of the sequence over TP (the same message as cp=1 with half the tokens)."""
    from llm_analysis.config import ParallelismConfig, get_gpu_config_by_name, get_model_config_by_name
    from llm_analysis.facade import LLMAnalysis
    model, gpu = get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("a100-sxm-80gb")
    cp2 = LLMAnalysis(model, gpu, parallelism_config=ParallelismConfig(tp_size=2, cp_size=2))
    cp1 = LLMAnalysis(model, gpu, parallelism_config=ParallelismConfig(tp_size=2))
    assert cp2.get_latency_fwd_per_layer_mlp_moe_alltoall(4, 1024) == 0.0
    assert cp2.get_latency_fwd_per_tp_comm(4, 1024, 2) == cp1.get_latency_fwd_per_tp_comm(4, 512, 2)


def test_a_context_parallel_replica_counts_its_gpus_in_throughput_and_cost():
    """cp_size 2 or 4 split one request over 2 or 4 GPUs: the summary counted 1 GPU per replica, so tokens/s per
    GPU and the cost per 1k tokens were cp times too good (19,854 -> 76,707 tokens/s per GPU). By hand: a replica
    is tp x pp x cp GPUs; per GPU = batch x seq_len / prefill / GPUs; cost = price x GPUs x prefill / tokens."""
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
        get_model_config_by_name
    for cp in (1, 2, 4):
        a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
                        get_dtype_config_by_name("w16a16e16"), ParallelismConfig(cp_size=cp), perf_model="calibrated")
        s = a.inference(batch_size_per_gpu=1, seq_len=65536, num_tokens_to_generate=1, cost_per_gpu_hour=2.0)
        assert s["gpus_per_replica"] == cp
        assert s["prefill_tokens_per_sec_per_gpu"] == pytest.approx(65536 / s["prefill_latency"] / cp, rel=1e-12)
        assert s["prefill_cost_per_1k_tokens"] == pytest.approx(2.0 / 3600 * cp * s["prefill_latency"] / 65536 * 1000,
                                                                rel=1e-12)


@pytest.mark.parametrize("perf_model", ["roofline", "calibrated"])
def test_a_ring_over_nodes_is_paced_by_the_one_nic_a_step_crosses(perf_model):
    """cp 16 at tp 1 over two 8-GPU H100 nodes: every ring step sends one K/V block to the next rank, and one of
    those sends crosses the network on one rank's NIC, so the exchange takes at least (cp - 1) x block / the
    GPU's inter-node bandwidth (by hand; the catalogue's H100 SXM: 25 GB/s per GPU, one 400 Gb/s NIC at about
    half its line rate). As an all-gather, whose rings use the node's eight NICs at once, it had come out 8x
    faster and hidden under the attention."""
    cp = 16
    a = LLMAnalysis(_gpt(kv_heads=8), H100, FP16, ParallelismConfig(cp_size=cp), perf_model=perf_model)
    d = a.describer
    ops = d.layer_ops(Phase("train", 1, S, S), next(iter(d.layer_groups)))
    ring = next(o for o in ops if o.comm_group == "cp")
    block = (S // cp) * 2 * 8 * (H // A) * 2
    by_hand = (cp - 1) * block / (H100.inter_node_bandwidth_in_GB_per_sec * 1e9)
    assert a.cost_model.collective_s("p2p", ring.comm_bytes_per_gpu, cp, "cp") >= by_hand * 0.999
