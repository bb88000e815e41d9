"""Training's communication per iteration, counted by hand: how many times each collective runs and how
many bytes it moves (the collectives' own times are the NCCL model's, tests/cost/test_nccl_model.py)."""

from __future__ import annotations

import pytest

from llm_analysis.errors import ConfigError


def test_expert_all_to_alls_run_in_the_forward_and_again_in_the_backward(analysis_builder):
    """Expert parallelism dispatches each token to its experts and combines their outputs in the forward;
    the backward sends the gradients the same two ways back (the gradient of an all-to-all is the reverse
    all-to-all: GShard, Lepikhin et al. 2020). So an iteration of m micro-batches runs 2 m times the forward pass's all-to-alls,
    which a prefill of the same micro-batch (same layout) shows as its ep_communication group."""
    a = analysis_builder("mistralai/Mixtral-8x7B-v0.1", gpu="h100-sxm-80gb", tp_size=4, dp_size=4, ep_size=4)
    forward = a.inference(batch_size_per_gpu=1, seq_len=2048, num_tokens_to_generate=2)
    forward_s = forward["prefill_latency_breakdown"]["ep_communication"]["latency_s"]
    assert forward_s > 0
    t = a.training(batch_size_per_gpu=1, seq_len=2048, global_batch_size=16, ds_zero=1)
    m = t["gradient_accumulation_steps"]
    assert m == 16 // 4
    assert t["latency_per_iter_ep_comm"] == pytest.approx(2 * m * forward_s, rel=1e-12)


def test_fp32_gradient_reduction_doubles_the_data_parallel_message(analysis_builder):
    """Without ZeRO the gradients are all-reduced once per iteration over the dp ranks: 2 bytes per
    parameter in the 16-bit training dtype, 4 with Megatron's grad_reduce_in_fp32 (an fp32 main_grad buffer
    reduced as it is). OPT-1.3B on 8 x A100 (dp 8, one GPU holds every parameter)."""
    a = analysis_builder("facebook/opt-1.3b", gpu="a100-sxm-80gb", dp_size=8)
    params = a.get_num_params_total()
    for fp32, grad_bytes in ((False, 2), (True, 4)):
        t = a.training(batch_size_per_gpu=4, seq_len=2048, global_batch_size=32, grad_reduce_in_fp32=fp32,
                       overlap_dp_comm=False)
        expected = a.cost_model.collective_s("all_reduce", grad_bytes * params, 8, "dp")
        assert t["latency_per_iter_dp_comm_total"] == pytest.approx(expected, rel=1e-12), fp32


def test_hsdp_all_reduces_each_ranks_shard_across_the_replicas(analysis_builder):
    """HSDP (PyTorch FSDP2 / torchtitan): each of dp_replicate copies of the model state is sharded over
    dp_shard ranks; after the reduce-scatter inside a copy, each rank all-reduces the shard it holds,
    1 / dp_shard of the gradients, with its peers in the other copies. So two copies of 8 shards add,
    over plain FSDP on 8 ranks, one all-reduce over 2 ranks of 2 bytes x params / 8."""
    kw = dict(batch_size_per_gpu=4, seq_len=2048, ds_zero=3, overlap_dp_comm=False)
    fsdp = analysis_builder("facebook/opt-1.3b", gpu="a100-sxm-80gb", dp_size=8)
    hsdp = analysis_builder("facebook/opt-1.3b", gpu="a100-sxm-80gb", dp_shard=8, dp_replicate=2)
    params = fsdp.get_num_params_total()
    one = fsdp.training(global_batch_size=32, **kw)["latency_per_iter_dp_comm_total"]
    two = hsdp.training(global_batch_size=64, **kw)["latency_per_iter_dp_comm_total"]
    across = hsdp.cost_model.collective_s("all_reduce", 2 * params / 8, 2, "dp_replicate")
    assert across > 0
    assert two == pytest.approx(one + across, rel=1e-9)


def test_pipeline_stages_send_activations_forward_and_gradients_back(analysis_builder):
    """Under pipeline parallelism each micro-batch's activations cross every stage boundary in the forward
    and their gradients cross it back in the backward (Narayanan et al. 2021, arXiv 2104.04473): two hand-offs
    of the boundary's activations per micro-batch, m of them an iteration (v = 1, two stages: one boundary)."""
    a = analysis_builder("facebook/opt-1.3b", gpu="a100-sxm-80gb", pp_size=2)
    t = a.training(batch_size_per_gpu=1, seq_len=2048, global_batch_size=8)
    m = t["gradient_accumulation_steps"]
    assert m == 8
    one_way = a.pipeline_handoff_time_s(1, 2048, scatter_gather=True)
    assert one_way > 0
    assert t["latency_per_iter_pp_comm"] == pytest.approx(m * 2 * one_way, rel=1e-12)


def test_framework_flags_read_booleans_as_every_other_flag_does():
    """grad_reduce_in_fp32 and distributed_optimizer refused 1, 0 and "false" where flash_attn takes them: the
    same spellings now mean the same (the fp32 buffer's 4 bytes a parameter, or the 16-bit 2), others refused."""
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
        get_model_config_by_name
    a = LLMAnalysis(get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
                    get_dtype_config_by_name("bf16"), ParallelismConfig(tp_size=8))
    peak = {v: a.training(batch_size_per_gpu=1, seq_len=2048, gradient_accumulation_steps=1, grad_reduce_in_fp32=v)
            ["estimated_peak_memory_per_gpu"] for v in (True, 1, "true", False, 0, "false")}
    assert peak[True] == peak[1] == peak["true"] > peak[False] == peak[0] == peak["false"]
    for flag in ("grad_reduce_in_fp32", "distributed_optimizer"):
        with pytest.raises(ConfigError, match=f"{flag} = 'maybe' must be True or False"):
            a.training(batch_size_per_gpu=1, seq_len=2048, gradient_accumulation_steps=1, **{flag: "maybe"})
