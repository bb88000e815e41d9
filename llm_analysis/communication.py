"""Time of collectives between GPUs (alpha-beta model).

Ring algorithms (Patarasuk & Yuan 2009; Thakur et al. 2005): with n GPUs and a
message of B bytes per GPU,
- all-reduce:      2(n-1)/n * B / bw + 2(n-1) * alpha
- all-gather / reduce-scatter: (n-1)/n * B / bw + (n-1) * alpha
- all-to-all:      (n-1)/n * B / bw + (n-1) * alpha
- point-to-point:  B / bw + alpha
where bw is the per-direction bandwidth of the slowest link the group uses and
alpha the per-message latency. Which link: a group inside one node uses the
GPU's intra-node link (NVLink, xGMI or PCIe as its config says) when it fits in
the fast-link group, PCIe otherwise; a group that spans nodes is limited by the
inter-node network.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import GPUConfig
from .constant import GB


@dataclass(frozen=True)
class Link:
    name: str  # nvlink | xgmi | pcie | inter_node
    bytes_per_s: float
    latency_s: float


def link_for_group(gpu: GPUConfig, group_size: int, stride: int, intra_efficiency: float,
                   inter_efficiency: float, num_gpus_per_node: int | None = None) -> Link:
    """The link a group of `group_size` GPUs spaced `stride` ranks apart talks over.

    Ranks are laid out TP fastest, then PP, then DP (Megatron order), so a TP
    group has stride 1, a PP group stride tp, a DP group stride tp*pp.
    """
    per_node = num_gpus_per_node or gpu.num_gpus_per_node
    span = (group_size - 1) * stride + 1
    if span > per_node:
        return Link("inter_node", gpu.inter_node_bandwidth_in_GB_per_sec * GB * inter_efficiency,
                    gpu.inter_node_min_message_latency)
    if span > gpu.fast_link_group_size:
        return Link("pcie", gpu.pcie_bandwidth_in_GB_per_sec * GB * intra_efficiency,
                    gpu.intra_node_min_message_latency)
    return Link(gpu.intra_node_link, gpu.intra_node_bandwidth_in_GB_per_sec * GB * intra_efficiency,
                gpu.intra_node_min_message_latency)


def collective_time_s(kind: str, bytes_per_gpu: float, group_size: int, link: Link) -> float:
    n = group_size
    if n <= 1 or bytes_per_gpu <= 0:
        return 0.0
    if kind == "all_reduce":
        return 2 * (n - 1) / n * bytes_per_gpu / link.bytes_per_s + 2 * (n - 1) * link.latency_s
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n * bytes_per_gpu / link.bytes_per_s + (n - 1) * link.latency_s
    if kind == "p2p":
        return bytes_per_gpu / link.bytes_per_s + link.latency_s
    raise ValueError(f"unknown collective {kind!r}; valid: all_reduce, all_gather, reduce_scatter, all_to_all, p2p")
