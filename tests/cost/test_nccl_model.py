"""The NCCL collective model against published nccl-tests figures (within 20%).

Sources (all public; figures copied here by hand):
[NDMV4] github:microsoft/mscclpp docs "NDmv4 Performance" (Azure NDmv4 = 8x A100-80GB on
        NVSwitch + 8x 200 Gb/s HDR InfiniBand per node, the DGX A100 topology), NCCL 2.17.1,
        in-place: 1 node x 8 GPUs all-reduce 1 KiB 16.96 us, 1 GiB busbw 231.45 GB/s;
        all-gather 1 GiB 253.59 GB/s; 2 nodes x 8 GPUs all-reduce 1 KiB 35.85 us,
        1 GiB busbw 183.82 GB/s, 4 GiB busbw 188.18 GB/s.
[NCCL812] github:NVIDIA/nccl issue #812, NVIDIA maintainer: "On an Nvidia DGX-A100 system we
        have 8x200Gbit/s IB cards and we measure 192GB/s AllReduce BusBW" (multi-node).
[NT119] github:NVIDIA/nccl-tests issue #119: 3 nodes x 8 A100-SXM4-40GB with 4x HDR 200 Gb/s
        per node, all_reduce_perf up to 128 MiB: peak busbw ~96 GB/s.
[NT212] github:NVIDIA/nccl-tests issue #212, NVIDIA maintainer: on 8 H100 (450 GB/s NVLink line
        rate) NCCL reaches ~370 GB/s busbw with NCCL_ALGO=RING or non-allreduce collectives, and
        a peak all-reduce busbw of ~480 GB/s with NVLink SHARP; "256M is too small to reach peak".
[UCCL205] github:uccl-project/uccl issue #205: NCCL all-reduce on 8 nodes x 8 H100 with
        ConnectX-7 400 Gb/s NICs: total bus bandwidth 350 GB/s.
[NT267] github:NVIDIA/nccl-tests issue #267, NVIDIA maintainer: "CX-7 NICs at NDR rate
        (400Gbps) should achieve up to 48-49GB/s per NIC" -> a DGX H100 ring over 8 NICs:
        8 x 48.5 = 388 GB/s, capped by the 370 GB/s NVLink ring of [NT212] -> 370 GB/s.
[SEED003] LightLLM static performance analysis (seeds/003): LLaMA-7B, batch 64, 2 x A40.
        NVLink-bridged pair vs PCIe (PXB) pair: prefill all-reduce time PCIe / NVLink = 2.0;
        decode all-reduce time PCIe / NVLink = 1.2.
"""

import dataclasses

import pytest

from llm_analysis.config import get_gpu_config_by_name
from llm_analysis.cost.nccl import bus_factor, collective_time_s, fabric_from_gpu_config
from llm_analysis.cost.profiles import load_profile
from llm_analysis.errors import ConfigError

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
AMPERE, HOPPER = load_profile("ampere"), load_profile("hopper")
DGX_A100 = fabric_from_gpu_config(get_gpu_config_by_name("a100-sxm-80gb"))
DGX_H100 = fabric_from_gpu_config(get_gpu_config_by_name("h100-sxm-80gb"))


def busbw_gbs(kind, size, n, fabric, profile, **kw):
    """nccl-tests' busbw of the predicted collective, GB/s: bus bytes (a p2p moves its buffer once) / time."""
    factor = 1.0 if kind == "p2p" else bus_factor(kind, n)
    return factor * size / collective_time_s(kind, size, n, fabric, profile, **kw) / 1e9


def within(pred, ref, tol=0.20):
    return abs(pred / ref - 1) <= tol


def test_fabric_defaults_are_the_dgx_nics():
    # DGX A100: 8 x 200 Gb/s = 200 GB/s per node; DGX H100: 8 x 400 Gb/s = 400 GB/s per node
    assert DGX_A100.nics_per_node * DGX_A100.nic_bytes_per_s == pytest.approx(200e9)
    assert DGX_H100.nics_per_node * DGX_H100.nic_bytes_per_s == pytest.approx(400e9)
    assert DGX_H100.nvlink_domain_gpus == 8 and DGX_H100.nvlink_bytes_per_s == pytest.approx(450e9)


@pytest.mark.parametrize("kind,size,n,ref_gbs", [
    ("all_reduce", GIB, 8, 231.45),     # [NDMV4] 1 node
    ("all_gather", GIB, 8, 253.59),     # [NDMV4] 1 node
    ("all_reduce", GIB, 16, 183.82),    # [NDMV4] 2 nodes
    ("all_reduce", 4 * GIB, 16, 188.18),  # [NDMV4] 2 nodes
    ("all_reduce", 4 * GIB, 32, 192.0),  # [NCCL812] multi-node DGX A100
    ("all_reduce", 4 * GIB, 128, 192.0),  # [NCCL812] 16 nodes: a ring's busbw does not fall with nodes
])
def test_dgx_a100_all_reduce_bus_bandwidth(kind, size, n, ref_gbs):
    assert within(busbw_gbs(kind, size, n, DGX_A100, AMPERE), ref_gbs)


@pytest.mark.parametrize("n,ref_us", [(8, 16.96), (16, 35.85)])  # [NDMV4] 1 KiB all-reduce
def test_dgx_a100_small_message_latency(n, ref_us):
    assert within(collective_time_s("all_reduce", KIB, n, DGX_A100, AMPERE) * 1e6, ref_us)


def test_per_node_network_is_nics_times_nic_speed():
    # [NT119] 4 NICs x 25 GB/s per node -> ~96 GB/s at 128 MiB on 3 nodes; with one GPU's
    # share on every hop (the old model) it would be 12.5 GB/s.
    four_nics = fabric_from_gpu_config(get_gpu_config_by_name("a100-sxm-40gb"), nics_per_node=4,
                                       nic_gbit_per_s=200)
    assert within(busbw_gbs("all_reduce", 128 * MIB, 24, four_nics, AMPERE), 96.0)


def test_dgx_h100_intra_node():
    # [NT212] NVLS peak ~480 at large sizes; ring collectives (all-gather) ~370
    assert within(busbw_gbs("all_reduce", 8 * GIB, 8, DGX_H100, HOPPER), 480.0)
    assert within(busbw_gbs("all_gather", 8 * GIB, 8, DGX_H100, HOPPER), 370.0)
    # "256M is too small to reach peak"
    assert busbw_gbs("all_reduce", 256 * MIB, 8, DGX_H100, HOPPER) < busbw_gbs("all_reduce", 8 * GIB, 8,
                                                                                DGX_H100, HOPPER)


@pytest.mark.parametrize("nodes,ref_gbs", [(2, 370.0), (4, 370.0), (8, 350.0), (16, 370.0)])
def test_dgx_h100_multi_node(nodes, ref_gbs):
    # 8 nodes: [UCCL205]; 2/4/16 nodes: the ring plateau derived in [NT267]+[NT212]
    assert within(busbw_gbs("all_reduce", 8 * GIB, 8 * nodes, DGX_H100, HOPPER), ref_gbs)


def test_bus_bandwidth_rises_with_message_size():
    for n in (8, 16, 128):
        bws = [busbw_gbs("all_reduce", s, n, DGX_A100, AMPERE) for s in (KIB, 64 * KIB, MIB, 16 * MIB, GIB)]
        assert bws == sorted(bws)


def test_tree_beats_ring_for_small_messages_across_nodes():
    # NCCL picks the faster algorithm: at 1 KiB on 16 nodes a double binary tree needs
    # 2 log2(16) = 8 network steps, a ring 2 (16-1) = 30.
    t = collective_time_s("all_reduce", KIB, 128, DGX_A100, AMPERE)
    ring_latency = AMPERE.base_latency_s + 30 * AMPERE.net_hop_latency_s + (254 - 30) * AMPERE.intra_hop_latency_s
    assert t < ring_latency


def test_a40_nvlink_pair_vs_pcie_pair():
    a40 = fabric_from_gpu_config(get_gpu_config_by_name("a40-48gb"))
    pcie = dataclasses.replace(a40, nvlink_domain_gpus=1)  # GPU0-GPU3: no bridge, PCIe (PXB)
    hidden, tokens = 4096, 64 * 1024  # LLaMA-7B, batch 64 x 1024 prompt tokens, fp16
    prefill, decode = tokens * hidden * 2, 64 * hidden * 2
    ratio = [collective_time_s("all_reduce", s, 2, pcie, AMPERE) / collective_time_s("all_reduce", s, 2, a40, AMPERE)
             for s in (prefill, decode)]
    assert within(ratio[0], 2.0) and within(ratio[1], 1.2)


def test_a40_pair_two_apart_is_a_pcie_pair():
    """Ranks 0 and 2 of bridged PCIe cards (A40, A100 PCIe: NVLink bridges join pairs 0-1, 2-3) sit on two
    bridges: their ring is the PCIe pair's, at SEED003's measured PCIe / NVLink ratios against the bridged pair
    (2.0 prefill, 1.2 decode). The calibrated model had taken any two ranks for a bridged pair: a data-parallel
    all-reduce of 1.7 GB over an A100 PCIe's tp 2 x dp 2 at 210 GB/s, against its 32 GB/s PCIe."""
    a40 = fabric_from_gpu_config(get_gpu_config_by_name("a40-48gb"))
    hidden, tokens = 4096, 64 * 1024
    prefill, decode = tokens * hidden * 2, 64 * hidden * 2
    ratio = [collective_time_s("all_reduce", s, 2, a40, AMPERE, stride=2) / collective_time_s("all_reduce", s, 2, a40, AMPERE)
             for s in (prefill, decode)]
    assert within(ratio[0], 2.0) and within(ratio[1], 1.2)
    # a ring all-reduce moves 2 (n - 1) / n of the message over its slowest link: at least size / 32 GB/s here
    a100 = fabric_from_gpu_config(get_gpu_config_by_name("a100-pcie-40gb"))
    assert collective_time_s("all_reduce", GIB, 2, a100, AMPERE, stride=2) >= GIB / 32e9
    assert collective_time_s("all_to_all", 256 * MIB, 2, a100, AMPERE, stride=2) >= 0.5 * 256 * MIB / 32e9
    assert collective_time_s("p2p", 256 * MIB, 2, a100, AMPERE, stride=2) >= 256 * MIB / 32e9


@pytest.mark.parametrize("layout,call", [
    (dict(tp_size=4, dp_size=2, ep_size=2), "inference"), (dict(tp_size=2, dp_size=2), "training")])
def test_calibrated_pcie_groups_stay_above_the_lower_bound(layout, call):
    """The calibrated time of a call never falls below the roofline's lower bound reported beside it (the bound
    runs every link at its full rate); on an A100 PCIe the expert and data-parallel groups two ranks apart had
    been timed on the bridge: a time to first token of 0.43 s against a bound of 0.62 s."""
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import ParallelismConfig
    model = "Qwen/Qwen3-30B-A3B" if "ep_size" in layout else "Qwen/Qwen3-1.7B"
    a = LLMAnalysis(model, "a100-pcie-40gb", "bf16", ParallelismConfig(**layout), perf_model="calibrated")
    if call == "inference":
        s = a.inference(batch_size_per_gpu=16, seq_len=512, num_tokens_to_generate=16)
        assert s["time_to_first_token"] >= s["time_to_first_token_lower_bound"]
        assert s["total_latency"] >= s["total_latency_lower_bound"]
    else:
        s = a.training(batch_size_per_gpu=4, seq_len=2048, total_num_tokens=1e9)
        assert s["latency_per_iter"] >= s["latency_per_iter_lower_bound"]
        # the gradients' ring all-reduce over the two data-parallel ranks (2 apart: two bridges) moves
        # 2 (n - 1) / n = 1 x their bytes over the 32 GB/s PCIe link (the catalogue's A100 PCIe)
        assert s["latency_per_iter_dp_comm_total"] >= s["gradient_memory_per_gpu"] / 32e9


def test_nvl72_domain_keeps_tp16_on_nvlink():
    # GB200 NVL72: 72 GPUs on one NVLink domain, 4 GPUs per compute tray. A 16-GPU group
    # spans 4 trays but never touches the network, unlike 2 HGX B200 nodes.
    b200 = get_gpu_config_by_name("b200-180gb")
    nvl72 = fabric_from_gpu_config(b200, 4, nvlink_domain_gpus=72)
    hgx = fabric_from_gpu_config(b200)
    bw = load_profile("blackwell")
    assert busbw_gbs("all_reduce", GIB, 16, nvl72, bw) > 1.5 * busbw_gbs("all_reduce", GIB, 16, hgx, bw)


def test_strided_data_parallel_group_uses_one_nic_per_rank():
    # a DP group with one rank per node: each rank's share of the node's NICs (25 GB/s)
    bw = busbw_gbs("all_reduce", 4 * GIB, 16, DGX_A100, AMPERE, ranks_per_island=1)
    assert within(bw, 25.0 * AMPERE.net_efficiency, 0.05)


def test_bad_input_is_named():
    with pytest.raises(ConfigError, match="unknown collective"):
        collective_time_s("broadcast", 1, 8, DGX_A100, AMPERE)
    with pytest.raises(ConfigError, match="ranks_per_island"):
        collective_time_s("all_reduce", 1, 12, DGX_A100, AMPERE, ranks_per_island=8)
    assert collective_time_s("all_reduce", 1 << 20, 1, DGX_A100, AMPERE) == 0.0


def test_ring_all_reduce_is_a_reduce_scatter_then_an_all_gather():
    """NCCL's ring all-reduce is a reduce-scatter followed by an all-gather over the same ring (NCCL
    user guide, "Collective Operations"; nccl-tests PERFORMANCE.md: bus bytes 2(n-1)/n of the buffer
    against (n-1)/n for either half): 2(n-1) steps of size/n each, the halves' (n-1) steps apiece.
    With one NVLink island and no NVLink SHARP (A100: a ring is NCCL's only all-reduce there), the
    all-reduce's time is the two halves' times with the launch latency counted once, at every size."""
    assert AMPERE.nvls_busbw_factor == 0  # no NVLS candidate on Ampere: the ring decides
    base = AMPERE.base_latency_s
    for n in (2, 4, 8):
        for size in (KIB, MIB, 64 * MIB, GIB):
            rs = collective_time_s("reduce_scatter", size, n, DGX_A100, AMPERE)
            ag = collective_time_s("all_gather", size, n, DGX_A100, AMPERE)
            ar = collective_time_s("all_reduce", size, n, DGX_A100, AMPERE)
            assert ar == pytest.approx(rs + ag - base, rel=1e-12), (n, size)
