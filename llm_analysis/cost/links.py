"""Time of collectives between GPUs (alpha-beta model).

Ring algorithms (Patarasuk & Yuan 2009; Thakur et al. 2005): with n GPUs and a
message of B bytes per GPU,
- all-reduce:      2(n-1)/n * B / bw + 2(n-1) hops
- all-gather / reduce-scatter: (n-1)/n * B / bw + (n-1) hops
- all-to-all:      (n-1)/n * B / bw + (n-1) hops
- point-to-point:  B / bw + 1 hop
where bw is the per-direction bandwidth of the slowest link the group uses and
each hop (ring step) costs the link's hop latency. A collective never takes less
than the link's minimum message latency (the mirrored system's floor).
Which link: a group inside one node uses the GPU's intra-node link (NVLink,
xGMI or PCIe as its config says) when it fits in the fast-link group, PCIe
otherwise; a group that spans nodes is limited by the inter-node network, unless
it fits in the GPU's `nvlink_domain_size` (NVL72 racks, TPU ICI slices), where
the fast link joins GPUs of different nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import GPUConfig
from ..constant import GB


@dataclass(frozen=True)
class Link:
    name: str  # nvlink | xgmi | pcie | inter_node
    bytes_per_s: float
    hop_latency_s: float
    min_latency_s: float


def link_for_group(gpu: GPUConfig, group_size: int, stride: int, intra_efficiency: float,
                   inter_efficiency: float, num_gpus_per_node: int | None = None) -> Link:
    """The link a group of `group_size` GPUs spaced `stride` ranks apart talks over.

    Ranks are laid out TP fastest, then PP, then DP (Megatron order), so a TP
    group has stride 1, a PP group stride tp, a DP group stride tp*pp.
    """
    per_node = num_gpus_per_node or gpu.num_gpus_per_node
    span = (group_size - 1) * stride + 1
    if gpu.num_gpus_per_node < gpu.nvlink_domain_size and span <= gpu.nvlink_domain_size:
        # the fast link reaches beyond the node: NVLink switch trays of a GB200/GB300
        # NVL72 rack (72 GPUs, 4 per tray), the ICI torus of a TPU slice
        return Link(gpu.intra_node_link, gpu.intra_node_bandwidth_in_GB_per_sec * GB * intra_efficiency,
                    gpu.intra_node_hop_latency, gpu.intra_node_min_message_latency)
    if span > per_node:
        return Link("inter_node", gpu.inter_node_bandwidth_in_GB_per_sec * GB * inter_efficiency,
                    gpu.inter_node_hop_latency, gpu.inter_node_min_message_latency)
    if span > gpu.fast_link_group_size:
        return Link("pcie", gpu.pcie_bandwidth_in_GB_per_sec * GB * intra_efficiency,
                    gpu.intra_node_hop_latency, gpu.intra_node_min_message_latency)
    return Link(gpu.intra_node_link, gpu.intra_node_bandwidth_in_GB_per_sec * GB * intra_efficiency,
                gpu.intra_node_hop_latency, gpu.intra_node_min_message_latency)


# (bandwidth factor as a function of n, number of hops as a function of n)
_ALGORITHMS = {
    "all_reduce": (lambda n: 2 * (n - 1) / n, lambda n: 2 * (n - 1)),
    "all_gather": (lambda n: (n - 1) / n, lambda n: n - 1),
    "reduce_scatter": (lambda n: (n - 1) / n, lambda n: n - 1),
    "all_to_all": (lambda n: (n - 1) / n, lambda n: n - 1),
    "p2p": (lambda n: 1.0, lambda n: 1),
}


def collective_time_s(kind: str, bytes_per_gpu: float, group_size: int, link: Link) -> float:
    """Seconds for one collective of `bytes_per_gpu` over `group_size` GPUs on `link`."""
    if kind not in _ALGORITHMS:
        raise ValueError(f"unknown collective {kind!r}; valid: {', '.join(_ALGORITHMS)}")
    n = group_size
    if n <= 1 or bytes_per_gpu <= 0:
        return 0.0
    bw_factor, hops = _ALGORITHMS[kind]
    t = bw_factor(n) * bytes_per_gpu / link.bytes_per_s + hops(n) * link.hop_latency_s
    return max(t, link.min_latency_s)
