"""The roofline chart: every operator of one or more phases placed by its
arithmetic intensity and attained FLOP/s (read from the operator records,
which carry FLOPs, bytes and time), under the roof of the achieved rates."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from llm_analysis.report.chart_common import figure, save
from llm_analysis.report.labels import part_label

_GROUP_COLORS = {"attention": "#1c7ed6", "attention_core": "#74c0fc", "mlp": "#2b8a3e", "experts": "#2b8a3e",
                 "router": "#f59f00", "lm_head": "#c2255c", "embedding": "#868e96", "norm": "#868e96"}
Phase = Tuple[str, str, List[Dict[str, Any]]]  # (label, marker, operator records)


class Rates(NamedTuple):
    """The roof: achieved TFLOP/s and GB/s, ridge point; the hardware peaks."""
    tflops: float
    bw_gbs: float
    ridge: float
    peak_tflops: float
    peak_bw_gbs: float


def rates(analysis, summary: Dict[str, Any]) -> Rates:
    """The roof from the analysis's hardware views; the dtype's hardware peak from
    the summary's `peak_tflops_per_gpu` when it carries one."""
    peak = summary.get("peak_tflops_per_gpu")
    if peak is None:  # the summaries do not carry the dtype's peak yet: the rule that picks it
        from llm_analysis.cost.roofline import peak_tflops_for_dtype
        peak = peak_tflops_for_dtype(analysis.gpu_config, analysis.dtype_config)
    return Rates(analysis.get_TFLOPS_per_gpu(), analysis.get_gpu_hbm_bandwidth(),
                 summary.get("ridge_point_flops_per_byte") or analysis.get_ridge_point(), peak,
                 analysis.gpu_config.hbm_bandwidth_in_GB_per_sec)


def point_group(record: Dict[str, Any]) -> str:
    """The colour group of an operator's point: the attention core apart from the projections."""
    return "attention_core" if record["kind"] == "attention" else record["group"]


def group_color(group: str) -> str:
    return _GROUP_COLORS.get(group, "#adb5bd")


def roofline_point(record: Dict[str, Any]) -> Optional[Tuple[float, float]]:
    """(FLOPs/byte, attained TFLOP/s) of an operator record on the roofline; None for
    a collective or an operator without FLOPs or time (no place on log axes)."""
    if record["kind"] == "collective" or record["flops_per_gpu"] <= 0 or record["latency_s"] <= 0:
        return None
    return record["arithmetic_intensity"], record["flops_per_gpu"] / record["latency_s"] / 1e12


def _points(phases: List[Phase]) -> List[Tuple[str, str, str, str, float, float]]:
    """(phase, marker, group, name, FLOPs/byte, attained TFLOP/s) of every timed non-collective operator."""
    points = []
    for label, marker, rows in phases:
        for r in rows:
            xy = roofline_point(r)
            if xy is not None:
                points.append((label, marker, point_group(r), r["name"], *xy))
    return points


def _clusters(points, tol: float = 1.35) -> List[Dict[str, Any]]:
    """Group points of one phase lying within a factor `tol` of each other (they
    would overlap on a log-log chart): one label per cluster."""
    clusters: List[Dict[str, Any]] = []
    for phase, marker, group, name, x, y in points:
        for c in clusters:
            if c["phase"] == phase and max(x / c["x"], c["x"] / x) < tol and max(y / c["y"], c["y"] / y) < tol:
                if name not in c["names"]:
                    c["names"].append(name)
                break
        else:
            clusters.append({"phase": phase, "marker": marker, "x": x, "y": y, "names": [name]})
    return clusters


def _roofs(ax, r: Rates, lo: float, hi: float) -> None:
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(r.tflops, r.bw_gbs * x / 1e3) for x in grid], color="black", lw=2.2,
            label=f"roof: {r.tflops:.4g} TFLOP/s, {r.bw_gbs:.4g} GB/s HBM", zorder=2)
    if abs(r.peak_tflops - r.tflops) > 1e-9 or abs(r.peak_bw_gbs - r.bw_gbs) > 1e-9:
        ax.plot(grid, [min(r.peak_tflops, r.peak_bw_gbs * x / 1e3) for x in grid], color="grey", lw=1.2,
                ls="--", label=f"hardware peak: {r.peak_tflops:.4g} TFLOP/s, {r.peak_bw_gbs:g} GB/s", zorder=1)
    ax.axvline(r.ridge, color="grey", ls=":", lw=1.2, zorder=1)
    ax.annotate(f"ridge point {r.ridge:.0f} FLOPs/byte:\nmemory-bound left, compute-bound right",
                xy=(r.ridge, r.tflops), xytext=(-8, 10), textcoords="offset points", fontsize=8.5,
                color="dimgrey", ha="right", va="bottom")


def _label_points(ax, points, tflops: float) -> None:
    for phase, marker, group, name, x, y in points:
        ax.scatter([x], [y], marker=marker, s=80, color=group_color(group),
                   edgecolor="black", linewidth=0.6, zorder=3, alpha=0.9)
    clusters = _clusters(points)
    roof = sorted((c for c in clusters if c["y"] > tflops * 0.8), key=lambda c: c["x"])
    for i, c in enumerate(roof):  # labels under the compute roof, staggered so that they do not collide
        text = "\n".join(textwrap.wrap(", ".join(c["names"]), 34))
        level = i % 3
        ax.annotate(text, xy=(c["x"], c["y"]), xytext=(0, -12 - 40 * level), textcoords="offset points",
                    fontsize=7.5, ha="center", va="top", color="#343a40",
                    arrowprops=dict(arrowstyle="-", color="#adb5bd", lw=0.6, shrinkA=0) if level else None)
    for c in clusters:
        if c["y"] > tflops * 0.8:
            continue
        text = "\n".join(textwrap.wrap(", ".join(c["names"]), 36))
        ax.annotate(text, xy=(c["x"], c["y"]), xytext=(9, -6), textcoords="offset points",
                    fontsize=7.5, ha="left", va="top", color="#343a40")


def _legend(ax, phases: List[Phase], groups: List[str]) -> None:
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], ls="", marker=m, markersize=8, color="white", markeredgecolor="black", label=lab)
               for lab, m, _ in phases]
    handles += [Line2D([], [], ls="", marker="s", markersize=8, color=group_color(gr),
                       label=part_label(gr)) for gr in groups]
    handles += [h for h in ax.get_lines() if not h.get_label().startswith("_")]
    ax.legend(handles=handles, loc="lower right", fontsize=8.5, framealpha=0.92)


def roofline_chart(r: Rates, phases: List[Phase], title: str, path: Path) -> str:
    fig = figure(10, 6.6)
    ax = fig.subplots()
    points = _points(phases)
    xs = [p[4] for p in points] or [1.0]
    lo = 10 ** math.floor(math.log10(max(min(xs + [r.ridge]) / 4, 1e-3)))
    hi = 10 ** math.ceil(math.log10(max(xs + [r.ridge]) * 4))
    _roofs(ax, r, lo, hi)
    _label_points(ax, points, r.tflops)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ys = [p[5] for p in points] or [r.tflops]
    ax.set_ylim(10 ** math.floor(math.log10(max(min(ys) / 3, 1e-6))), r.tflops * 3)
    ax.set_xlabel("arithmetic intensity (FLOPs per byte moved)")
    ax.set_ylabel("attained performance (TFLOP/s per GPU)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    _legend(ax, phases, list(dict.fromkeys(p[2] for p in points)))
    return save(fig, path)
