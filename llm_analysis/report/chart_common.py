"""What every chart shares: matplotlib on demand (no pyplot, no global backend:
figures render through the Agg canvas), the atomic PNG write, colours, the
setup line, horizontal bars and a stacked memory bar."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

from llm_analysis.errors import ConfigError
from llm_analysis.report.files import atomic_write
from llm_analysis.report.units import format_bytes, format_seconds

DPI = 150
BOUND_COLORS = {"compute": "#2b8a3e", "memory": "#e8590c", "communication": "#7048e8"}
_MEMORY_COLORS = {"weights": "#1c7ed6", "kv_cache": "#f59f00", "activations": "#37b24d", "free": "#dee2e6",
                  "gradients": "#ae3ec9", "optimizer_states": "#f03e3e", "recompute_buffer": "#20c997",
                  "zero_buffers": "#868e96"}


def memory_color(key: str) -> str:
    """The colour of a memory term (weights, kv_cache, activations, ..., free) in every chart."""
    return _MEMORY_COLORS.get(key, "#adb5bd")


def require_matplotlib() -> None:
    """Raise ConfigError (exit code 2 on the command line) when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError("charts need matplotlib, which is not installed: pip install 'llm-analysis[plot]' "
                          "(or pip install matplotlib)") from None


def figure(width: float, height: float):
    require_matplotlib()
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def save(fig, path: Path) -> str:
    """The figure as a PNG at `path`, written atomically."""
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=DPI))


def setup_text(analysis) -> str:
    p = analysis.parallelism_config
    par = f"tp={p.tp_size}, pp={p.pp_size}" + (f", ep={p.ep_size}" if p.ep_size > 1 else "") + \
        (f", dp={p.dp_size}" if p.dp_size > 1 else "")
    return f"{analysis.model_config.name} on {analysis.gpu_config.name} ({analysis.dtype_config.name}, {par})"


def time_unit(seconds: float) -> Tuple[float, str]:
    """(scale, unit) to show times of this size in s, ms or µs."""
    if seconds >= 1:
        return 1.0, "s"
    if seconds >= 1e-3:
        return 1e3, "ms"
    return 1e6, "µs"


def bars(ax, labels: List[str], values: List[float], colors: List[str], title: str, unit_scale: float,
         unit: str, total: Optional[float] = None) -> None:
    """Horizontal bars of times (or bytes, unit='bytes'), each with its value and share."""
    total = total if total is not None else (sum(values) or 1.0)
    ypos = list(range(len(labels)))[::-1]
    ax.barh(ypos, [v * unit_scale for v in values], color=colors, edgecolor="black", linewidth=0.5)
    ax.set_yticks(ypos, labels)
    vmax = max(values) * unit_scale if values else 1.0
    for y, v in zip(ypos, values):
        ax.text(v * unit_scale + vmax * 0.01, y, f"{format_seconds(v) if unit != 'bytes' else format_bytes(v)}"
                f"  ({v / total:.0%})", va="center", fontsize=8.5)
    ax.set_xlim(0, vmax * 1.32)
    ax.set_xlabel(f"time ({unit})" if unit != "bytes" else "GB")
    ax.set_title(title, fontsize=10.5, loc="left")
    ax.grid(True, axis="x", alpha=0.3)


def legend_patches(fig, colors: Dict[str, str]) -> None:
    """A legend of coloured patches ({label: colour}) under the figure."""
    from matplotlib.patches import Patch
    handles = [Patch(color=c, label=label) for label, c in colors.items()]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=9, frameon=False)


def stacked_memory(ax, parts: List[Tuple[str, str, float]], capacity: float, title: str) -> None:
    """One horizontal bar of memory terms (label, colour key, bytes) against the GPU's capacity."""
    left = 0.0
    cap_gb = capacity / 1e9
    for label, key, v in parts:
        if v <= 0:
            continue
        ax.barh([0], [v / 1e9], left=[left / 1e9], color=memory_color(key), edgecolor="black",
                linewidth=0.5, label=f"{label}: {format_bytes(v)} ({v / capacity:.1%})")
        if v / capacity > 0.06:
            ax.text((left + v / 2) / 1e9, 0, label, ha="center", va="center", fontsize=9)
        left += v
    ax.axvline(cap_gb, color="black", ls="--", lw=1.2)
    ax.text(cap_gb, 0.47, f" GPU memory {cap_gb:g} GB", ha="right" if left <= capacity else "left",
            va="bottom", fontsize=8.5)
    ax.set_xlim(0, max(cap_gb, left / 1e9) * 1.05)
    ax.set_ylim(-0.6, 0.75)
    ax.set_yticks([])
    ax.set_xlabel("memory per GPU (GB, 10^9 bytes)")
    ax.set_title(title, fontsize=10.5, loc="left")
    ax.figure.legend(loc="outside lower center", ncols=3, fontsize=8.5, frameon=False)
