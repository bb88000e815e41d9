"""Collectives as NCCL runs them: pure functions of bytes and seconds.

Conventions (those of nccl-tests, doc/PERFORMANCE.md): `size_bytes` is the
buffer each GPU holds at the end (all-reduce: the buffer; all-gather: the
gathered output; reduce-scatter: the input; all-to-all: the buffer each GPU
sends, its own slice included; p2p: the message). Bus bytes per GPU are
2(n-1)/n x size for all-reduce and (n-1)/n x size for all-gather,
reduce-scatter and all-to-all; bus bandwidth = bus bytes / time.

The model (each term's parameter lives in the profile, with its source):
- ring (Patarasuk & Yuan 2009): time = base + steps x hop latency
  + bus bytes / (plateau bus bandwidth x eff(size)), where eff(size) =
  size / (size + half_saturation) rises with the message (NCCL uses few
  channels and the LL protocol for small messages);
- hierarchy: GPUs joined by NVLink/xGMI form an island (one node, two bridged
  A40s, or a 72-GPU GB200 NVL72 rack). A group that leaves its island runs one
  ring per NIC in parallel (NCCL rings are built NIC by NIC), so only the
  island-crossing hops use the network and an island's network share is
  (its ranks in the group) x (each GPU's NIC share): per-node network
  bandwidth = NICs x NIC speed, never one GPU's share on every hop;
- tree (double binary tree, Sanders et al. 2009, as NCCL 2.4+): latency
  2 x ((ranks per island - 1) local steps + log2(islands) network steps),
  bandwidth = tree_bw_factor x ring; NCCL picks the faster of ring and tree;
- NVLink SHARP (Hopper+): all-reduce inside one NVLink switch domain at
  nvls_busbw_factor x line rate after a larger fixed latency;
- PCIe without NVLink: the ring runs at the PCIe rate and PCIe hop latency.
Latency constants follow NCCL's own tuning model (src/graph/tuning.cc).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from llm_analysis.units import GB
from llm_analysis.errors import ConfigError
from llm_analysis.cost.profiles import Profile

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")


@dataclass(frozen=True)
class Fabric:
    """The links around one GPU. Bandwidths are bytes/s per GPU (or per NIC) per direction."""

    gpus_per_node: int
    nvlink_domain_gpus: int  # GPUs joined all-to-all by NVLink/xGMI; 1 = none (PCIe only)
    nvlink_bytes_per_s: float  # per GPU per direction inside the domain (0 when none)
    pcie_bytes_per_s: float  # per GPU per direction between GPUs of a node outside the domain
    nics_per_node: int
    nic_bytes_per_s: float  # one NIC, one direction
    nvlink_switched: bool = True  # an NVSwitch (NVLink SHARP possible) rather than point-to-point links

    @property
    def island_gpus(self) -> int:
        """GPUs one ring can join without the network: the NVLink domain or the node, whichever is larger."""
        return max(self.nvlink_domain_gpus, self.gpus_per_node)

    @property
    def nic_share_bytes_per_s(self) -> float:
        """Each GPU's share of its node's network (all groups of a layout communicate at once)."""
        return self.nics_per_node * self.nic_bytes_per_s / self.gpus_per_node


def fabric_from_gpu_config(gpu_config, num_gpus_per_node: int | None = None, *,
                           nvlink_domain_gpus: int | None = None, nics_per_node: int | None = None,
                           nic_gbit_per_s: float | None = None) -> Fabric:
    """Derive the fabric from the existing GPUConfig fields.

    Defaults where a field is missing: one NIC per GPU (rail-optimised DGX/HGX
    layout) at the GPU's `inter_node_bandwidth_in_GB_per_sec` share, i.e.
    DGX A100 = 8 x 200 Gb/s HDR (NVIDIA DGX A100 User Guide, 'Network ports'),
    DGX H100/B200 = 8 x 400 Gb/s NDR ConnectX-7 (NVIDIA DGX H100 datasheet);
    the NVLink domain is `fast_link_group_size` (the whole node unless the
    file says otherwise: A40 bridges pairs). A GB200 NVL72 rack is
    `nvlink_domain_gpus=72` with 4 GPUs per compute tray (NVIDIA GB200 NVL72
    datasheet: 72 GPUs in one NVLink domain, 1.8 TB/s bidirectional per GPU).
    The GPU file's `nvlink_domain_size`, `nics_per_node` and
    `nic_bandwidth_in_GB_per_sec` (the gb200/gb300 NVL72 and TPU files set them)
    are used when the arguments are not given; a TPU's ICI counts as the fast link.
    """
    per_node = num_gpus_per_node or gpu_config.num_gpus_per_node
    fast = gpu_config.intra_node_link in ("nvlink", "xgmi", "ici")
    domain = nvlink_domain_gpus or (gpu_config.nvlink_domain_size if fast else 1)
    if nvlink_domain_gpus is None and domain <= gpu_config.num_gpus_per_node:
        # a domain inside one node (HGX, DGX: the node's NVSwitch) ends with the node: with fewer GPUs per node
        # than the catalogue's, the rest of a group is across the network (a rack's domain spans its nodes)
        domain = min(domain, per_node)
    nics = nics_per_node or gpu_config.nics_per_node or per_node
    if nic_gbit_per_s is not None:
        nic_bps = nic_gbit_per_s * 1e9 / 8
    elif gpu_config.nic_bandwidth_in_GB_per_sec and not nics_per_node:
        nic_bps = gpu_config.nic_bandwidth_in_GB_per_sec * GB
    else:  # the config's per-GPU share of the network times GPUs per NIC
        nic_bps = gpu_config.inter_node_bandwidth_in_GB_per_sec * GB * per_node / nics
    for name, v in (("num_gpus_per_node", per_node), ("nvlink_domain_gpus", domain), ("nics_per_node", nics)):
        if not isinstance(v, int) or v < 1:
            raise ConfigError(f"fabric field {name!r} = {v!r} must be a positive integer")
    return Fabric(gpus_per_node=per_node, nvlink_domain_gpus=domain,
                  nvlink_bytes_per_s=gpu_config.intra_node_bandwidth_in_GB_per_sec * GB if fast else 0.0,
                  pcie_bytes_per_s=gpu_config.pcie_bandwidth_in_GB_per_sec * GB if fast
                  else gpu_config.intra_node_bandwidth_in_GB_per_sec * GB,
                  nics_per_node=nics, nic_bytes_per_s=nic_bps,
                  nvlink_switched=gpu_config.intra_node_link == "nvlink" and domain > 2)


def _saturation(size_bytes: float, half_bytes: float) -> float:
    return size_bytes / (size_bytes + half_bytes)


@dataclass(frozen=True)
class _Level:
    """The links a group uses: its island-local ring and (if it leaves the island) the network."""

    local_bw: float  # plateau bus bandwidth of the local ring, bytes/s
    local_hop_s: float
    local_half: float
    ranks_per_island: int
    islands: int


def _level(n: int, fabric: Fabric, p: Profile, ranks_per_island: int | None, stride: int = 1) -> _Level:
    r = min(n, ranks_per_island or min(n, fabric.island_gpus))
    if r > fabric.island_gpus or n % r:
        raise ConfigError(f"ranks_per_island = {r} must divide the group size {n} and fit in an island "
                          f"of {fabric.island_gpus} GPUs")
    # NVLink carries the ring where the island's ranks, `stride` apart, all sit in one NVLink domain: they span
    # (r - 1) x stride + 1 GPUs (PCIe cards bridged in pairs, an A100 PCIe's: ranks 0 and 2 sit on two bridges,
    # their ring crosses PCIe; the roofline's links.link_for_group reads the same span)
    if fabric.nvlink_domain_gpus > 1 and (r - 1) * stride + 1 <= fabric.nvlink_domain_gpus:
        bw, hop, half = fabric.nvlink_bytes_per_s * p.intra_bus_efficiency, p.intra_hop_latency_s, \
            p.nvlink_half_saturation_bytes
    else:  # some hop of the ring crosses PCIe: the ring runs at the PCIe rate
        bw, hop, half = fabric.pcie_bytes_per_s * p.pcie_bus_efficiency, p.pcie_hop_latency_s, \
            p.pcie_half_saturation_bytes
    return _Level(bw, hop, half, r, n // r)


def bus_factor(kind: str, n: int) -> float:
    """Bus bytes over buffer bytes of a ring collective on n GPUs (nccl-tests' convention)."""
    return 2 * (n - 1) / n if kind == "all_reduce" else (n - 1) / n


def _ring_latency_s(kind: str, n: int, lv: _Level, p: Profile) -> float:
    steps = 2 * (n - 1) if kind == "all_reduce" else n - 1
    inter_steps = (2 * (lv.islands - 1) if kind == "all_reduce" else lv.islands - 1) if lv.islands > 1 else 0
    return p.base_latency_s + (steps - inter_steps) * lv.local_hop_s + inter_steps * p.net_hop_latency_s


def _ring_time_s(size: float, factor: float, latency_s: float, lv: _Level, fabric: Fabric, p: Profile) -> float:
    """A ring collective of `size` bytes whose bus factor and latency (`bus_factor`, `_ring_latency_s`:
    the group's, no size changes them) are given."""
    bus_bytes = factor * size
    bw = lv.local_bw * _saturation(size, lv.local_half)
    if lv.islands > 1:  # one ring per NIC: the island's NICs carry every crossing in parallel
        net_bw = lv.ranks_per_island * fabric.nic_share_bytes_per_s * p.net_efficiency
        bw = min(bw, net_bw * _saturation(size, p.net_half_saturation_bytes))
    return latency_s + bus_bytes / bw


def _tree_time_s(size: float, n: int, lv: _Level, fabric: Fabric, p: Profile) -> float:
    """Double binary tree all-reduce across islands, chains inside them."""
    latency = p.base_latency_s + 2 * ((lv.ranks_per_island - 1) * lv.local_hop_s
                                      + math.ceil(math.log2(lv.islands)) * p.net_hop_latency_s)
    ring_bw = min(lv.local_bw * _saturation(size, lv.local_half),
                  lv.ranks_per_island * fabric.nic_share_bytes_per_s * p.net_efficiency
                  * _saturation(size, p.net_half_saturation_bytes))
    return latency + bus_factor("all_reduce", n) * size / (ring_bw * p.tree_bw_factor)


def _nvls_time_s(size: float, n: int, fabric: Fabric, p: Profile) -> float:
    bw = fabric.nvlink_bytes_per_s * p.nvls_busbw_factor * _saturation(size, p.nvlink_half_saturation_bytes)
    return p.nvls_latency_s + bus_factor("all_reduce", n) * size / bw


def _all_to_all_time_s(size: float, n: int, lv: _Level, fabric: Fabric, p: Profile) -> float:
    """Every GPU exchanges size/n with each peer; remote slices go through its own NIC share
    (all-to-all cannot pool a node's NICs: NVIDIA/nccl-tests#267)."""
    local_s = (lv.ranks_per_island - 1) / n * size / (lv.local_bw * _saturation(size, lv.local_half))
    latency = p.base_latency_s + lv.local_hop_s * (lv.ranks_per_island - 1)
    if lv.islands == 1:
        return latency + local_s
    remote = n - lv.ranks_per_island
    net_s = remote / n * size / (fabric.nic_share_bytes_per_s * p.net_efficiency
                                 * _saturation(size, p.net_half_saturation_bytes))
    return latency + p.net_hop_latency_s + remote * p.alltoall_net_per_peer_latency_s + max(local_s, net_s)


def _p2p_time_s(size: float, cross_island: bool, fabric: Fabric, p: Profile, stride: int = 1) -> float:
    if cross_island:
        bw = fabric.nic_share_bytes_per_s * p.net_efficiency * _saturation(size, p.net_half_saturation_bytes)
        return p.base_latency_s + p.net_hop_latency_s + size / bw
    lv = _level(2, fabric, p, None, stride)
    return p.base_latency_s + lv.local_hop_s + size / (lv.local_bw * _saturation(size, lv.local_half))


def collective_time_s(kind: str, size_bytes: float, group_size: int, fabric: Fabric, profile: Profile, *,
                      ranks_per_island: int | None = None, stride: int = 1) -> float:
    """Seconds for one NCCL collective; NCCL's choice of the fastest algorithm is taken.

    `ranks_per_island`: how many of the group's ranks share one NVLink island
    (default: ranks placed contiguously, min(group, island)); a data-parallel
    group strided over nodes has 1. For `p2p`, group_size 2 and
    ranks_per_island 1 mean the two stages sit on different islands. `stride`: the ranks' spacing (1:
    neighbours), which decides whether an island's ranks share one NVLink domain (`_level`).
    """
    if kind not in KINDS:
        raise ConfigError(f"unknown collective {kind!r}; valid: {', '.join(KINDS)}")
    if group_size <= 1 or size_bytes <= 0:
        return 0.0
    return collective_timer(kind, group_size, fabric, profile, ranks_per_island=ranks_per_island,
                            stride=stride)(size_bytes)


def collective_timer(kind: str, group_size: int, fabric: Fabric, profile: Profile, *,
                     ranks_per_island: int | None = None, stride: int = 1) -> Callable[[float], float]:
    """`collective_time_s` of this collective and group as a function of the message size: the
    group's links and NCCL's candidate algorithms worked out once (a cost model times the
    same group's collectives at many sizes)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown collective {kind!r}; valid: {', '.join(KINDS)}")
    n, p = group_size, profile
    if n <= 1:
        return lambda size: 0.0
    if kind == "p2p":
        cross = ranks_per_island == 1
        return lambda size: _p2p_time_s(size, cross, fabric, p, stride) if size > 0 else 0.0
    lv = _level(n, fabric, p, ranks_per_island, stride)
    if kind == "all_to_all":
        return lambda size: _all_to_all_time_s(size, n, lv, fabric, p) if size > 0 else 0.0
    tree = kind == "all_reduce" and lv.islands > 1
    nvls = _nvls_candidate(kind, lv, fabric, p)
    factor, latency_s = bus_factor(kind, n), _ring_latency_s(kind, n, lv, p)

    def time_s(size: float) -> float:
        if size <= 0:
            return 0.0
        t = _ring_time_s(size, factor, latency_s, lv, fabric, p)
        if tree:
            t = min(t, _tree_time_s(size, n, lv, fabric, p))
        elif nvls:
            t = min(t, _nvls_time_s(size, n, fabric, p))
        return t
    return time_s


def _nvls_candidate(kind: str, lv: _Level, fabric: Fabric, p: Profile) -> bool:
    """NVLink SHARP all-reduce is a candidate: one island on an NVSwitch fabric that has it."""
    return (kind == "all_reduce" and lv.islands == 1 and fabric.nvlink_switched and p.nvls_busbw_factor > 0
            and lv.ranks_per_island <= fabric.nvlink_domain_gpus)
