"""Rack-scale and TPU accelerators (issue 11, item 4): node size and fast-link
domain kept apart, and the link a parallel group uses.

Expected values are hand-derived from the vendor figures cited in each GPU file.
"""

from __future__ import annotations

import pytest

from llm_analysis.config import get_gpu_config_by_name
from llm_analysis.cost.links import collective_time_s, link_for_group
from llm_analysis.cost.nccl import fabric_from_gpu_config

GB = 1e9


@pytest.mark.parametrize("name,per_node,domain", [
    # GB200/GB300 NVL72: 18 compute trays of 4 GPUs (2 superchips), one 72-GPU NVLink domain
    ("gb200-nvl72-186gb", 4, 72), ("gb300-nvl72-279gb", 4, 72),
    # HGX: 8 GPUs per baseboard, NVLink inside it only
    ("b300-270gb", 8, 8), ("h20-96gb", 8, 8), ("mi355x-288gb", 8, 8),
    # Cloud TPU docs: v4 and v5p hosts have 4 chips, v5e/v6e hosts 8; ICI slice sizes
    ("tpu-v4-32gb", 4, 4096), ("tpu-v5p-95gb", 4, 6144), ("tpu-v5e-16gb", 8, 256),
    ("tpu-v6e-32gb", 8, 256),
])
def test_node_and_fast_domain_are_separate(name, per_node, domain):
    g = get_gpu_config_by_name(name)
    assert (g.num_gpus_per_node, g.nvlink_domain_size) == (per_node, domain)


def test_default_domain_is_the_fast_group():
    assert get_gpu_config_by_name("h100-sxm-80gb").nvlink_domain_size == 8
    assert get_gpu_config_by_name("a40-48gb").nvlink_domain_size == 2  # NVLink bridge pairs


def test_tp8_on_nvl72_stays_on_nvlink():
    g = get_gpu_config_by_name("gb200-nvl72-186gb")
    link = link_for_group(g, group_size=8, stride=1, intra_efficiency=1.0, inter_efficiency=1.0)
    assert link.name == "nvlink" and link.bytes_per_s == 900 * GB  # 1.8 TB/s bidirectional / 2
    # all-reduce of 64 MiB over 8 GPUs: the ring's 2 * 7/8 * B / 900 GB/s + 14 hops x 1 us, or NVLink
    # SHARP's B / 900 GB/s + 2 hops (to the switch and back; GB200's NVSwitch reduces in flight, NCCL >= 2.17
    # picks the faster): the bound takes NVLS here
    b = 64 * 2**20
    ring = 2 * 7 / 8 * b / (900 * GB) + 14 * 1e-6
    nvls = b / (900 * GB) + 2 * 1e-6
    assert collective_time_s("all_reduce", b, 8, link) == pytest.approx(min(ring, nvls)) == pytest.approx(nvls)
    # beyond the rack (stride 72: a DP group of racks) the InfiniBand NIC limits it: 400 Gb/s per GPU
    far = link_for_group(g, group_size=2, stride=72, intra_efficiency=1.0, inter_efficiency=1.0)
    assert far.name == "inter_node" and far.bytes_per_s == 50 * GB


def test_tp8_on_hgx_h100_unchanged_and_tp16_crosses_nodes():
    g = get_gpu_config_by_name("h100-sxm-80gb")
    assert link_for_group(g, 8, 1, 1.0, 1.0).name == "nvlink"
    assert link_for_group(g, 16, 1, 1.0, 1.0).name == "inter_node"


def test_tpu_ici_spans_hosts():
    g = get_gpu_config_by_name("tpu-v5p-95gb")
    link = link_for_group(g, group_size=64, stride=1, intra_efficiency=1.0, inter_efficiency=1.0)
    # ICI 4800 Gb/s = 1200 GB/s bidirectional per chip -> 600 per direction (Cloud TPU v5p)
    assert link.name == "ici" and link.bytes_per_s == 600 * GB


def test_nccl_fabric_reads_the_rack_fields():
    f = fabric_from_gpu_config(get_gpu_config_by_name("gb200-nvl72-186gb"))
    assert f.gpus_per_node == 4 and f.nvlink_domain_gpus == 72
    # one ConnectX-7 400 Gb/s per GPU, 4 per tray
    assert f.nics_per_node == 4 and f.nic_bytes_per_s == pytest.approx(400e9 / 8)
    f = fabric_from_gpu_config(get_gpu_config_by_name("tpu-v5e-16gb"))
    # Cloud TPU v5e: 2 x 100 Gb/s NICs per 8-chip host
    assert f.nics_per_node == 2 and f.nic_bytes_per_s == pytest.approx(100e9 / 8)
    assert f.nvlink_domain_gpus == 256
