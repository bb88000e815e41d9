"""Time of collectives between GPUs on the roofline (alpha-beta model, a lower bound).

Ring algorithms (Patarasuk & Yuan 2009; Thakur et al. 2005): with n GPUs and a
message of B bytes per GPU,
- all-reduce:      2(n-1)/n * B / bw + 2(n-1) hops
- all-gather / reduce-scatter: (n-1)/n * B / bw + (n-1) hops
- all-to-all:      (n-1)/n * B / bw + (n-1) hops
- point-to-point:  B / bw + 1 hop
where bw is the per-direction bandwidth of the link the group uses and each hop
(ring step) costs the link's hop latency. A collective never takes less than the
link's minimum message latency (the mirrored system's floor).
Which link: a group inside one node uses the GPU's intra-node link (NVLink,
xGMI or PCIe as its config says) when it fits in the fast-link group, PCIe
otherwise. A group that fits in the GPU's `nvlink_domain_size` (NVL72 racks, TPU ICI
slices) stays on the fast link even when it spans nodes.

NVLink SHARP (NVLS: Hopper and later GPUs on an NVSwitch, NCCL 2.17+): the switch
reduces in flight, so an all-reduce moves each GPU's buffer once each way
(multimem.ld_reduce of its 1/n slice from every peer, multimem.st of the result to
all): B / bw instead of the ring's 2(n-1)/n B / bw, after two switch traversals. A
bound takes the faster of the two (NCCL picks the faster). Which fabric has it is
read from the GPU config: an NVLink switch domain of more than two GPUs whose GPUs
have FP8 tensor cores (NVLS came with the third-generation NVSwitch, alongside
Hopper's FP8; A100 systems' NVSwitch has no SHARP; Ada/L40S has no NVLink switch).

A group that spans nodes (or NVLink switch domains: a group larger than a GB200/GB300
NVL72 rack, whose 72 GPUs are one NVLink domain, crosses racks over InfiniBand) is hierarchical, as NCCL runs it (one ring per NIC, so
every GPU of a node drives its own NIC at once; NVIDIA/nccl-tests
doc/PERFORMANCE.md; Jeaugey, "Massively scale your deep learning training with
NCCL 2.4", NVIDIA blog 2019): with r of the group's ranks in each node and N
nodes, the node's r NICs carry the node's share together, so the network term is
that of N "super-ranks" of r x (one GPU's network share) bandwidth, and the
ranks inside a node exchange over NVLink at the same time. The time is the larger
of the two bandwidth terms (they overlap) plus the latency of a tree across
nodes (ceil(log2 N) network steps each way, NCCL's double binary tree). This is
a lower bound of what NCCL achieves: bus bandwidth never exceeds the NICs' line
rate, and no algorithm moves less than 2(N-1)/N of the buffer through a node's
NICs for an all-reduce (Patarasuk & Yuan's bound with nodes as processes).
All-to-all cannot pool a node's NICs (each remote slice leaves through the
sender's own NIC: NVIDIA/nccl-tests#267), so only its remote share crosses the network.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

from llm_analysis.config import GPUConfig
from llm_analysis.units import GB


@dataclass(frozen=True)
class Link:
    name: str  # nvlink | xgmi | pcie | inter_node
    bytes_per_s: float  # per GPU per direction (inter_node: one GPU's share of its node's network)
    hop_latency_s: float
    min_latency_s: float
    ranks_per_node: int = 1  # inter_node only: the group's ranks inside one node (or NVLink rack)
    local: Optional["Link"] = None  # inter_node only: the link between those ranks
    switch_reduction: bool = False  # NVLink SHARP: the switch reduces an all-reduce in flight


def switch_reduces(gpu: GPUConfig) -> bool:
    """Whether the GPU's NVLink switch reduces in flight (NVLS; see the module docstring)."""
    return gpu.intra_node_link == "nvlink" and gpu.nvlink_domain_size > 2 and bool(gpu.peak_fp8_TFLOPS)


def _fast_link(gpu: GPUConfig, intra_efficiency: float) -> Link:
    """The GPU's NVLink / xGMI / ICI link, per GPU per direction."""
    return Link(gpu.intra_node_link, gpu.intra_node_bandwidth_in_GB_per_sec * GB * intra_efficiency,
                gpu.intra_node_hop_latency, gpu.intra_node_min_message_latency,
                switch_reduction=switch_reduces(gpu))


def _intra_link(gpu: GPUConfig, span: int, intra_efficiency: float) -> Link:
    if span > gpu.fast_link_group_size:
        return Link("pcie", gpu.pcie_bandwidth_in_GB_per_sec * GB * intra_efficiency,
                    gpu.intra_node_hop_latency, gpu.intra_node_min_message_latency)
    return _fast_link(gpu, intra_efficiency)


def group_stride(par, comm_group: str) -> int:
    """Rank distance between neighbours of a `comm_group`. Ranks are laid out TP
    fastest, then CP, then PP, then DP (Megatron puts CP right after TP: its
    "tp-cp-ep-dp-pp" order keeps the K/V ring inside a node when tp * cp fits).
    "dp" is the gradient-reduction / sharding group: dp_shard x cp ranks, CP ranks
    tp apart and data-parallel ranks tp*cp*pp apart; it is timed as a ring of the
    same span (the mean stride), which keeps both its size and how many of its
    ranks share a node. "dp_replicate" links the HSDP replicas; "edp" is the
    experts' data-parallel group (every ep-th DP rank)."""
    tp, cp, pp = par.tp_size, par.cp_size, par.pp_size
    dp_stride = tp * cp * pp
    if comm_group == "dp" and cp > 1:
        n = par.dp_shard * cp
        span = (cp - 1) * tp + (par.dp_shard - 1) * dp_stride
        return max(1, round(span / (n - 1)))
    return {"tp": 1, "cp": tp, "pp": tp * cp, "dp": dp_stride, "ep": dp_stride,
            "dp_replicate": dp_stride * par.dp_shard, "edp": dp_stride * par.ep_size}.get(comm_group, 1)


def link_for_group(gpu: GPUConfig, group_size: int, stride: int, intra_efficiency: float,
                   inter_efficiency: float, num_gpus_per_node: int | None = None) -> Link:
    """The link a group of `group_size` GPUs spaced `stride` ranks apart talks over.

    Ranks are laid out TP fastest, then CP, PP and DP (`group_stride`), so a TP
    group has stride 1, a CP group stride tp, a PP group stride tp*cp.
    """
    per_node = num_gpus_per_node or gpu.num_gpus_per_node
    span = (group_size - 1) * stride + 1
    # the fast link reaches beyond the node: NVLink switch trays of a GB200/GB300 NVL72 rack
    # (72 GPUs, 4 per tray), the ICI torus of a TPU slice; 0 where it ends at the node
    rack = gpu.nvlink_domain_size if gpu.num_gpus_per_node < gpu.nvlink_domain_size else 0
    if rack and span <= rack:
        return _fast_link(gpu, intra_efficiency)
    island = rack or per_node  # what a ring joins without the network
    if span > island:
        r = max(1, min(group_size, island // stride)) if stride < island else 1
        if r == 1:
            local = None
        elif rack:  # the group's ranks inside one rack talk over the NVLink switch
            local = _fast_link(gpu, intra_efficiency)
        else:
            local = _intra_link(gpu, (r - 1) * stride + 1, intra_efficiency)
        return Link("inter_node", gpu.inter_node_bandwidth_in_GB_per_sec * GB * inter_efficiency,
                    gpu.inter_node_hop_latency, gpu.inter_node_min_message_latency, r, local)
    return _intra_link(gpu, span, intra_efficiency)


# (bandwidth factor as a function of n, number of hops as a function of n)
_ALGORITHMS = {
    "all_reduce": (lambda n: 2 * (n - 1) / n, lambda n: 2 * (n - 1)),
    "all_gather": (lambda n: (n - 1) / n, lambda n: n - 1),
    "reduce_scatter": (lambda n: (n - 1) / n, lambda n: n - 1),
    "all_to_all": (lambda n: (n - 1) / n, lambda n: n - 1),
    "p2p": (lambda n: 1.0, lambda n: 1),
}


def _hierarchical_time_s(kind: str, bytes_per_gpu: float, n: int, link: Link) -> float:
    """A group spanning nodes (see the module docstring): max(network, in-node) + tree latency."""
    bw_factor, _ = _ALGORITHMS[kind]
    r = link.ranks_per_node
    nodes = math.ceil(n / r)
    if kind == "p2p":
        return max(bytes_per_gpu / link.bytes_per_s + link.hop_latency_s, link.min_latency_s)
    if kind == "all_to_all":  # the remote slices leave through each GPU's own NIC share
        net_s = (n - r) / n * bytes_per_gpu / link.bytes_per_s
        local_s = (r - 1) / n * bytes_per_gpu / link.local.bytes_per_s if link.local else 0.0
    else:
        net_s = bw_factor(nodes) * bytes_per_gpu / (r * link.bytes_per_s)
        local_factor = bw_factor(r)
        if kind == "all_reduce" and link.local is not None and link.local.switch_reduction:
            local_factor = min(local_factor, 1.0)  # NVLS inside the node / rack (NCCL's NVLS tree)
        local_s = local_factor * bytes_per_gpu / link.local.bytes_per_s if link.local else 0.0
    ways = 2 if kind == "all_reduce" else 1
    # the tree's hops between nodes, and the ring's inside one (r - 1 hops each way: a group of r ranks in a node
    # does not reach the others in fewer; without them a tp-8 group over two nodes of 4 timed below one node of 8)
    local_hops = 1 if kind == "all_reduce" and link.local is not None and link.local.switch_reduction else r - 1
    local_hops_s = local_hops * link.local.hop_latency_s if link.local is not None else 0.0  # (NVLS: the switch)
    latency = ways * (math.ceil(math.log2(nodes)) * link.hop_latency_s + local_hops_s)
    return max(max(net_s, local_s) + latency, link.min_latency_s)


def collective_timer(kind: str, group_size: int, link: Link) -> Callable[[float], float]:
    """`collective_time_s` of this collective over `group_size` GPUs on `link` as a function of
    the bytes per GPU (what does not depend on the message worked out once: a cost model times
    the same group's collectives at many sizes)."""
    if kind not in _ALGORITHMS:
        raise ValueError(f"unknown collective {kind!r}; valid: {', '.join(_ALGORITHMS)}")
    n = group_size
    if n <= 1:
        return lambda bytes_per_gpu: 0.0
    if link.name == "inter_node":
        return lambda bytes_per_gpu: _hierarchical_time_s(kind, bytes_per_gpu, n, link) if bytes_per_gpu > 0 else 0.0
    bw_factor, hops = _ALGORITHMS[kind]
    factor, hops_s = bw_factor(n), hops(n) * link.hop_latency_s
    bytes_per_s, floor_s = link.bytes_per_s, link.min_latency_s
    if kind == "all_reduce" and link.switch_reduction and n > 2:
        nvls_s = 2 * link.hop_latency_s  # (to the switch and back)
        return lambda bytes_per_gpu: (max(min(factor * bytes_per_gpu / bytes_per_s + hops_s,
                                              bytes_per_gpu / bytes_per_s + nvls_s), floor_s)
                                      if bytes_per_gpu > 0 else 0.0)
    return lambda bytes_per_gpu: (max(factor * bytes_per_gpu / bytes_per_s + hops_s, floor_s) if bytes_per_gpu > 0
                                  else 0.0)


def collective_time_s(kind: str, bytes_per_gpu: float, group_size: int, link: Link) -> float:
    """Seconds for one collective of `bytes_per_gpu` over `group_size` GPUs on `link`."""
    return collective_timer(kind, group_size, link)(bytes_per_gpu)
