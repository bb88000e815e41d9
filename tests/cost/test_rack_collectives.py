"""Roofline collectives on NVLink switch fabrics (issue 27, item 2), by hand from bytes and
bandwidths: a group inside a GB200 NVL72 rack runs on NVLink; a group larger than the rack
crosses racks over InfiniBand with every rank's NIC carrying the rack's share, while the ranks
inside a rack exchange over NVLink at the same time; NVLink SHARP (NVLS) all-reduces move each
GPU's buffer once on Hopper and later NVSwitch systems, not on A100's.

Figures of the GPU files (llm_analysis/gpu_configs): GB200 NVL72 900 GB/s NVLink per GPU per
direction, 72 GPUs in the NVLink domain, 4 per compute tray, one 400 Gb/s NIC per GPU = 50 GB/s;
H100 SXM 450 GB/s NVLink, A100 SXM 300 GB/s (NVSwitch without SHARP); hop latencies 1 us
(NVLink) and 5 us (network), the schema's defaults.
"""

from __future__ import annotations

import pytest

from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name, \
    get_model_config_by_name

MB = 1e9  # one message of 1 GB per GPU
NVLINK_GB200, NIC = 900e9, 50e9
HOP, NET_HOP = 1e-6, 5e-6


def _cost(gpu: str, **par):
    a = LLMAnalysis(get_model_config_by_name("meta-llama_Llama-3.1-8B"), get_gpu_config_by_name(gpu),
                    get_dtype_config_by_name("w16a16e16"), ParallelismConfig(**par))
    return a.cost_model


def test_all_gather_inside_an_nvl72_rack_is_an_nvlink_ring():
    # 32 data-parallel ranks 2 apart (tp 2) span 63 GPUs: one rack
    t = _cost("gb200-nvl72-186gb", tp_size=2, dp_size=32).collective_s("all_gather", MB, 32, "dp")
    assert t == pytest.approx(31 / 32 * MB / NVLINK_GB200 + 31 * HOP, rel=1e-12)


def test_all_gather_across_nvl72_racks_pools_the_racks_nics():
    # 64 ranks 2 apart span 127 GPUs: two racks, 72 // 2 = 36 of the group's ranks in one rack.
    # Network: 2 racks exchange (2-1)/2 of the buffer through 36 NICs of 50 GB/s each; inside the
    # rack 35/36 of it over NVLink at the same time; one network step of latency and the in-rack
    # ring's 35 hops (a group of 36 ranks reaches the others in no fewer).
    t = _cost("gb200-nvl72-186gb", tp_size=2, dp_size=64).collective_s("all_gather", MB, 64, "dp")
    network_s = 1 / 2 * MB / (36 * NIC)
    nvlink_s = 35 / 36 * MB / NVLINK_GB200
    assert t == pytest.approx(max(network_s, nvlink_s) + NET_HOP + 35 * HOP, rel=1e-12)
    # (charging every hop at one GPU's NIC share, as if each 4-GPU tray were its own island, gives
    # (31/32) MB / (2 x 50 GB/s) = 9.7 ms: nine times the time)
    assert t < 31 / 32 * MB / (2 * NIC) / 8


def test_all_reduce_across_racks_uses_nvls_inside_each_rack():
    t = _cost("gb200-nvl72-186gb", tp_size=2, dp_size=64).collective_s("all_reduce", MB, 64, "dp")
    network_s = 2 * 1 / 2 * MB / (36 * NIC)
    nvlink_s = 1.0 * MB / NVLINK_GB200  # NVLS: the buffer once each way, not 2 x 35/36 of it
    # one tree step across the racks each way, and inside each rack to the NVLink switch and back
    assert t == pytest.approx(max(network_s, nvlink_s) + 2 * NET_HOP + 2 * HOP, rel=1e-12)


def test_nvls_all_reduce_on_an_h100_node():
    t = _cost("h100-sxm-80gb", tp_size=8).collective_s("all_reduce", MB, 8, "tp")
    ring = 2 * 7 / 8 * MB / 450e9 + 14 * HOP
    nvls = MB / 450e9 + 2 * HOP  # to the switch and back
    assert nvls < ring
    assert t == pytest.approx(nvls, rel=1e-12)


def test_a100_nvswitch_has_no_nvls():
    t = _cost("a100-sxm-80gb", tp_size=8).collective_s("all_reduce", MB, 8, "tp")
    assert t == pytest.approx(2 * 7 / 8 * MB / 300e9 + 14 * HOP, rel=1e-12)


def test_fewer_gpus_per_node_put_a_tensor_parallel_group_across_the_network():
    """An H100's NVLink domain is its node's NVSwitch (8 GPUs): with num_gpus_per_node = 4, 2 or 1 a tensor-
    parallel group of 8 crosses the network (400 Gb/s per GPU against 900 GB/s of NVLink), so a training step
    can only get slower, and the calibrated time never falls below the roofline reported beside it. Before,
    the calibrated model kept an 8-GPU NVLink island whatever the node: 1 GPU per node gave 0.091 s per
    iteration against a lower bound of 0.197 s."""
    args = (get_model_config_by_name("meta-llama/Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
            get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=8))
    times = []
    for per_node in (8, 4, 2, 1):
        s = LLMAnalysis(*args, perf_model="calibrated", num_gpus_per_node=per_node).training(
            batch_size_per_gpu=1, seq_len=4096, gradient_accumulation_steps=1)
        assert s["latency_per_iter"] >= s["latency_per_iter_lower_bound"], per_node
        times.append(s["latency_per_iter"])
    assert all(b > a for a, b in zip(times, times[1:])), times
    # a node's domain ends with the node; a rack's spans its 4-GPU trays (GB200 NVL72: 72 GPUs on NVLink)
    from llm_analysis.cost.nccl import fabric_from_gpu_config
    assert fabric_from_gpu_config(get_gpu_config_by_name("h100-sxm-80gb"), 4).nvlink_domain_gpus == 4
    assert fabric_from_gpu_config(get_gpu_config_by_name("h100-sxm-80gb")).nvlink_domain_gpus == 8
    assert fabric_from_gpu_config(get_gpu_config_by_name("gb200-nvl72-186gb"), 4).nvlink_domain_gpus == 72


def test_a_group_over_two_nodes_is_never_faster_than_over_one():
    """A tp-8 reduce-scatter of 2 MB over two nodes of 4 H100s crosses the network besides NVLink: it cannot
    take less than the same group inside one node of 8 (it had: 10.2 us against 11.1 us, the in-node ring's
    hops left out of the hierarchy's latency)."""
    def cost(per_node):
        return LLMAnalysis(get_model_config_by_name("meta-llama_Llama-3.1-8B"), get_gpu_config_by_name("h100-sxm-80gb"),
                           get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=8),
                           num_gpus_per_node=per_node).cost_model
    one = cost(8).collective_s("reduce_scatter", 2 * MB, 8, "tp")
    two = cost(4).collective_s("reduce_scatter", 2 * MB, 8, "tp")
    assert two > one, (two, one)
