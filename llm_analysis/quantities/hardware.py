"""Achieved hardware rates the configuration implies, outside the cost model: link
bandwidths (the mirrored `get_intra_node_bandwidth` / `get_inter_node_bandwidth`).
The rates operators are timed at (FLOP/s, HBM) are the cost model's (cost/model.py)."""

from __future__ import annotations


def achieved_link_GB_per_s(spec_GB_per_s: float, efficiency: float) -> float:
    """A link's achieved bandwidth in GB/s: its spec times the fraction of it reached."""
    return spec_GB_per_s * efficiency
