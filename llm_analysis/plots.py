"""Charts of a summary (PNG, matplotlib — an optional extra: `pip install llm-analysis[plot]`).

Inference: a roofline placing every operator of prefill and decode; the time of
each layer part in prefill and in one decode step; memory per GPU; a batch sweep
(time per output token and throughput against batch, with the batch where decode
turns compute-bound and the batch where memory runs out).
Training: the time of one iteration by part; memory per GPU by term; the
roofline of a micro-batch's forward pass.

matplotlib is imported only here, through `matplotlib.figure.Figure` (no pyplot,
no global backend change): the PNGs are rendered by the Agg canvas.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .errors import ConfigError, DoesNotFitError

logger = logging.getLogger(__name__)

DPI = 150
_BOUND_COLORS = {"compute": "#2b8a3e", "memory": "#e8590c", "communication": "#7048e8"}
_MEMORY_COLORS = {"weights": "#1c7ed6", "kv_cache": "#f59f00", "activations": "#37b24d", "free": "#dee2e6",
                  "gradients": "#ae3ec9", "optimizer_states": "#f03e3e", "recompute_buffer": "#20c997",
                  "zero_buffers": "#868e96"}


def require_matplotlib() -> None:
    """Raise ConfigError (exit code 2 on the command line) when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError("charts need matplotlib, which is not installed: pip install 'llm-analysis[plot]' "
                          "(or pip install matplotlib)") from None


def _figure(width: float, height: float):
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    return fig


def _save(fig, path: Path) -> str:
    """Render to a temporary file next to `path`, then rename (atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        fig.savefig(tmp, format="png", dpi=DPI)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a chart is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return str(path)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _setup_text(analysis) -> str:
    p = analysis.parallelism_config
    par = f"tp={p.tp_size}, pp={p.pp_size}" + (f", ep={p.ep_size}" if p.ep_size > 1 else "") + \
        (f", dp={p.dp_size}" if p.dp_size > 1 else "")
    return f"{analysis.model_config.name} on {analysis.gpu_config.name} ({analysis.dtype_config.name}, {par})"


def _fmt_s(seconds: float) -> str:
    from .report import format_seconds
    return format_seconds(seconds)


def _fmt_bytes(b: float) -> str:
    from .report import format_bytes
    return format_bytes(b)


def _part_label(key: str) -> str:
    from .report_tables import part_label
    try:
        return part_label(key)
    except Exception:  # noqa: BLE001 - report_tables needs rich only to render, not for labels
        return key.replace("_", " ")


def _time_unit(seconds: float) -> Tuple[float, str]:
    if seconds >= 1:
        return 1.0, "s"
    if seconds >= 1e-3:
        return 1e3, "ms"
    return 1e6, "µs"


# ------------------------------------------------------------------ roofline
_GROUP_COLORS = {"attention": "#1c7ed6", "attention_core": "#74c0fc", "mlp": "#2b8a3e", "experts": "#2b8a3e",
                 "router": "#f59f00", "lm_head": "#c2255c", "embedding": "#868e96", "norm": "#868e96"}


def _clusters(points: List[Tuple[str, str, str, str, float, float]], tol: float = 1.35):
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


def _roofline(analysis, phases: List[Tuple[str, str, List[Dict[str, Any]]]], title: str, path: Path) -> str:
    """phases: (label, marker, operator records)."""
    fig = _figure(10, 6.6)
    ax = fig.subplots()
    tflops = analysis.get_TFLOPS_per_gpu()
    bw = analysis.get_gpu_hbm_bandwidth()  # GB/s
    ridge = analysis.get_ridge_point()
    points = []
    for label, marker, rows in phases:
        for r in rows:
            if r["kind"] == "collective" or r["flops_per_gpu"] <= 0 or r["latency_s"] <= 0:
                continue
            group = "attention_core" if r["kind"] == "attention" else r["group"]
            points.append((label, marker, group, r["name"], r["arithmetic_intensity"],
                           r["flops_per_gpu"] / r["latency_s"] / 1e12))
    xs = [p[4] for p in points] or [1.0]
    lo = 10 ** math.floor(math.log10(max(min(xs + [ridge]) / 4, 1e-3)))
    hi = 10 ** math.ceil(math.log10(max(xs + [ridge]) * 4))
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(tflops, bw * x / 1e3) for x in grid], color="black", lw=2.2,
            label=f"roof: {tflops:.4g} TFLOP/s, {bw:.4g} GB/s HBM", zorder=2)
    g = analysis.gpu_config
    from .roofline import peak_tflops_for_dtype
    peak = peak_tflops_for_dtype(g, analysis.dtype_config)
    if abs(peak - tflops) > 1e-9 or abs(g.hbm_bandwidth_in_GB_per_sec - bw) > 1e-9:
        ax.plot(grid, [min(peak, g.hbm_bandwidth_in_GB_per_sec * x / 1e3) for x in grid], color="grey", lw=1.2,
                ls="--", label=f"hardware peak: {peak:.4g} TFLOP/s, {g.hbm_bandwidth_in_GB_per_sec:g} GB/s",
                zorder=1)
    ax.axvline(ridge, color="grey", ls=":", lw=1.2, zorder=1)
    ax.annotate(f"ridge point {ridge:.0f} FLOPs/byte:\nmemory-bound left, compute-bound right",
                xy=(ridge, tflops), xytext=(-8, 10), textcoords="offset points", fontsize=8.5,
                color="dimgrey", ha="right", va="bottom")
    groups = list(dict.fromkeys(p[2] for p in points))
    for phase, marker, group, name, x, y in points:
        ax.scatter([x], [y], marker=marker, s=80, color=_GROUP_COLORS.get(group, "#adb5bd"),
                   edgecolor="black", linewidth=0.6, zorder=3, alpha=0.9)
    import textwrap
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
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ys = [p[5] for p in points] or [tflops]
    ax.set_ylim(10 ** math.floor(math.log10(max(min(ys) / 3, 1e-6))), tflops * 3)
    ax.set_xlabel("arithmetic intensity (FLOPs per byte moved)")
    ax.set_ylabel("attained performance (TFLOP/s per GPU)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], ls="", marker=m, markersize=8, color="white", markeredgecolor="black", label=lab)
               for lab, m, _ in phases]
    handles += [Line2D([], [], ls="", marker="s", markersize=8, color=_GROUP_COLORS.get(gr, "#adb5bd"),
                       label=_part_label(gr)) for gr in groups]
    handles += [h for h in ax.get_lines() if not h.get_label().startswith("_")]
    ax.legend(handles=handles, loc="lower right", fontsize=8.5, framealpha=0.92)
    return _save(fig, path)


# ------------------------------------------------------------------ breakdowns
def _bars(ax, labels: List[str], values: List[float], colors: List[str], title: str, unit_scale: float,
          unit: str, total: Optional[float] = None) -> None:
    total = total if total is not None else (sum(values) or 1.0)
    ypos = list(range(len(labels)))[::-1]
    ax.barh(ypos, [v * unit_scale for v in values], color=colors, edgecolor="black", linewidth=0.5)
    ax.set_yticks(ypos, labels)
    vmax = max(values) * unit_scale if values else 1.0
    for y, v in zip(ypos, values):
        ax.text(v * unit_scale + vmax * 0.01, y, f"{_fmt_s(v) if unit != 'bytes' else _fmt_bytes(v)}"
                f"  ({v / total:.0%})", va="center", fontsize=8.5)
    ax.set_xlim(0, vmax * 1.32)
    ax.set_xlabel(f"time ({unit})" if unit != "bytes" else "GB")
    ax.set_title(title, fontsize=10.5, loc="left")
    ax.grid(True, axis="x", alpha=0.3)


def _bound_legend(fig, bounds) -> None:
    from matplotlib.patches import Patch
    handles = [Patch(color=_BOUND_COLORS[b], label=f"{b}-bound") for b in ("compute", "memory", "communication")
               if b in bounds]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=9, frameon=False)


def _latency_chart(analysis, summary: Dict[str, Any], path: Path) -> str:
    from .report_tables import _part_sort_key
    steps = max(summary.get("num_tokens_to_generate", 1) - 1, 0)
    panels = [("prefill_latency_breakdown", 1.0,
               f"Prefill (time to first token {_fmt_s(summary.get('prefill_latency', 0))}): "
               f"batch {summary.get('batch_size_per_gpu')} x {summary.get('seq_len')} tokens")]
    if steps and summary.get("decode_latency_breakdown"):
        panels.append(("decode_latency_breakdown", float(steps),
                       f"Decode, one step (mean of {steps}): {_fmt_s(summary.get('decode_latency', 0))}"))
    fig = _figure(10, 3.0 + 2.4 * len(panels))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    bounds = set()
    for ax, (key, divide, title) in zip(axes, panels):
        groups = summary.get(key) or {}
        keys = sorted(groups, key=_part_sort_key)
        values = [groups[k]["latency_s"] / divide for k in keys]
        scale, unit = _time_unit(max(values) if values else 1.0)
        cols = [_BOUND_COLORS.get(groups[k].get("bound"), "grey") for k in keys]
        bounds.update(groups[k].get("bound") for k in keys)
        _bars(ax, [_part_label(k) for k in keys], values, cols, title, scale, unit)
    fig.suptitle(f"Where the time goes: {_setup_text(analysis)}", fontsize=11)
    _bound_legend(fig, bounds)
    return _save(fig, path)


def _stacked_memory(ax, parts: List[Tuple[str, str, float]], capacity: float, title: str) -> None:
    """One horizontal bar of memory terms (label, colour key, bytes) against the GPU's capacity."""
    left = 0.0
    cap_gb = capacity / 1e9
    for label, key, v in parts:
        if v <= 0:
            continue
        ax.barh([0], [v / 1e9], left=[left / 1e9], color=_MEMORY_COLORS.get(key, "#adb5bd"), edgecolor="black",
                linewidth=0.5, label=f"{label}: {_fmt_bytes(v)} ({v / capacity:.1%})")
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


def _memory_chart_inference(analysis, summary: Dict[str, Any], path: Path) -> str:
    brk = summary.get("memory_breakdown_per_gpu") or {}
    capacity = summary.get("gpu_memory_per_gpu") or analysis.gpu_config.mem_per_GPU_in_GB * 1e9
    labels = {"weights": "weights", "kv_cache": "KV cache", "activations": "activations", "free": "free"}
    parts = [(labels.get(k, k.replace("_", " ")), k, v) for k, v in brk.items()]
    fig = _figure(10, 3.6)
    ax = fig.subplots()
    _stacked_memory(ax, parts, capacity,
                    f"Memory per GPU: batch {summary.get('batch_size_per_gpu')}, context "
                    f"{summary.get('seq_len', 0) + summary.get('num_tokens_to_generate', 0)} tokens; largest batch "
                    f"prefill {summary.get('prefill_max_batch_size_per_gpu')}, "
                    f"decode {summary.get('decode_max_batch_size_per_gpu')}")
    fig.suptitle(_setup_text(analysis), fontsize=11)
    return _save(fig, path)


# ------------------------------------------------------------------ batch sweep
def _decode_compute_bound_batch(analysis, seq_len: int, context_len: int, limit: int = 1 << 22) -> Optional[int]:
    """Smallest batch at which the decode step's MLP (or experts) matmuls reach the
    ridge point (read from the operator records; memory is not checked)."""
    ridge = analysis.get_ridge_point()

    def compute_bound(b: int) -> bool:
        rows = [r for r in analysis.operators("decode", b, seq_len, context_len, per_layer=False)
                if r["group"] in ("mlp", "experts") and r["kind"] == "matmul"]
        f = sum(r["flops_per_gpu"] for r in rows)
        by = sum(r["bytes_per_gpu"] for r in rows)
        return by > 0 and f / by >= ridge

    if compute_bound(1):
        return 1
    hi = 2
    while not compute_bound(hi):
        hi *= 2
        if hi > limit:
            return None
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if compute_bound(mid) else (mid, hi)
    return hi


def batch_sweep(analysis, summary: Dict[str, Any], sweep_kwargs: Optional[Dict[str, Any]] = None,
                max_points: int = 40) -> Dict[str, Any]:
    """analysis.inference over batch sizes 1, 2, 4, ... up to the largest that fits.

    Returns {'batch': [...], 'tpot_s': [...], 'ttft_s': [...], 'decode_tokens_per_sec': [...],
    'max_batch': int, 'compute_bound_batch': int or None}."""
    kw = dict(seq_len=summary.get("seq_len", 512), num_tokens_to_generate=summary.get("num_tokens_to_generate", 32),
              use_kv_cache=summary.get("use_kv_cache", True))
    kw.update(sweep_kwargs or {})
    max_b = min(summary.get("decode_max_batch_size_per_gpu") or 1, summary.get("prefill_max_batch_size_per_gpu")
                or 1)
    batches = []
    b = 1
    while b < max_b and len(batches) < max_points - 1:
        batches.append(b)
        b *= 2
    batches.append(max(max_b, 1))
    out = {"batch": [], "tpot_s": [], "ttft_s": [], "decode_tokens_per_sec": [], "max_batch": max_b}
    for b in batches:
        try:
            s = analysis.inference(batch_size_per_gpu=b, **kw)
        except DoesNotFitError:
            break
        out["batch"].append(b)
        out["tpot_s"].append(s["decode_latency"])
        out["ttft_s"].append(s["prefill_latency"])
        out["decode_tokens_per_sec"].append(s["decode_tokens_per_sec"])
    seq = kw["seq_len"]
    ctx = seq + max(kw["num_tokens_to_generate"] // 2, 1)  # the middle of the generation
    out["compute_bound_batch"] = _decode_compute_bound_batch(analysis, seq, ctx)
    return out


def _sweep_chart(analysis, summary: Dict[str, Any], path: Path, sweep_kwargs: Optional[Dict[str, Any]]) -> str:
    sw = batch_sweep(analysis, summary, sweep_kwargs)
    fig = _figure(10, 6.2)
    ax = fig.subplots()
    bs = sw["batch"]
    tpot_ms = [t * 1e3 for t in sw["tpot_s"]]
    l1, = ax.plot(bs, tpot_ms, "o-", color="#1c7ed6", lw=2, label="time per output token (ms)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size per GPU (concurrent sequences)")
    ax.set_ylabel("time per output token (ms)", color="#1c7ed6")
    ax.tick_params(axis="y", colors="#1c7ed6")
    ax.set_ylim(0, max(tpot_ms or [1]) * 1.25)
    ax2 = ax.twinx()
    l2, = ax2.plot(bs, sw["decode_tokens_per_sec"], "s-", color="#e8590c", lw=2,
                   label="decode throughput (tokens/s per replica)")
    ax2.set_ylabel("decode throughput (tokens/s per model replica)", color="#e8590c")
    ax2.tick_params(axis="y", colors="#e8590c")
    ax2.set_ylim(0, max(sw["decode_tokens_per_sec"] or [1]) * 1.25)
    from matplotlib.ticker import FuncFormatter, LogLocator
    ax.xaxis.set_major_locator(LogLocator(base=2))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    handles = [l1, l2]
    max_b = sw["max_batch"]
    x_hi = max(bs or [1]) * 1.6
    if sw["batch"] and max_b == sw["batch"][-1]:
        pre, dec = summary.get("prefill_max_batch_size_per_gpu"), summary.get("decode_max_batch_size_per_gpu")
        why = " (prefill activations + KV cache)" if pre is not None and dec is not None and pre < dec else \
            " (KV cache)"
        h = ax.axvline(max_b, color="#c92a2a", ls="--", lw=1.5,
                       label=f"memory full: largest batch that fits = {max_b}{why}")
        handles.append(h)
        ax.axvspan(max_b, x_hi * 64, color="#c92a2a", alpha=0.07)
    cb = sw["compute_bound_batch"]
    if cb is not None:
        where = "" if cb <= max_b else " (beyond the memory limit)"
        h = ax.axvline(cb, color="#2b8a3e", ls="-.", lw=1.5,
                       label=f"decode turns compute-bound at batch ~{cb}{where}")
        handles.append(h)
        x_hi = max(x_hi, cb * 1.6)
    ax.set_xlim(0.8, x_hi)
    ax.grid(True, alpha=0.3)
    ax.legend(handles=handles, loc="upper left", fontsize=9, framealpha=0.92)
    ax.set_title(f"Batch sweep: {_setup_text(analysis)}\nprompt {summary.get('seq_len')} tokens, "
                 f"{summary.get('num_tokens_to_generate')} generated; below the compute-bound batch a larger batch "
                 "costs almost no time per token", fontsize=10)
    return _save(fig, path)


# ------------------------------------------------------------------ training
_TRAIN_TIME = [("fwd_compute", "forward compute", "compute"), ("bwd_compute", "backward compute", "compute"),
               ("recompute", "recomputation", "compute"), ("tp_comm", "TP communication", "communication"),
               ("ep_comm", "EP all-to-all", "communication"), ("pp_comm", "PP hand-off", "communication"),
               ("pipeline_bubble", "pipeline bubble", "memory"),
               ("dp_comm", "DP communication (exposed)", "communication"),
               ("optimizer_step", "optimizer step", "memory")]


def _training_time_chart(analysis, summary: Dict[str, Any], path: Path) -> Optional[str]:
    prefix = "latency_per_iter_"
    known = {k: (label, kind) for k, label, kind in _TRAIN_TIME}
    parts = [(k[len(prefix):], v) for k, v in summary.items()
             if k.startswith(prefix) and isinstance(v, (int, float)) and v > 0
             and not k.endswith(("using_flops", "dp_comm_total", "dp_comm_hidden"))]
    if not parts:
        return None
    labels = [known.get(k, (k.replace("_", " "), ""))[0] for k, _ in parts]
    kinds = [known.get(k, ("", "other"))[1] for k, _ in parts]
    colors = {"compute": _BOUND_COLORS["compute"], "communication": _BOUND_COLORS["communication"],
              "memory": "#868e96", "other": "#adb5bd"}
    values = [v for _, v in parts]
    total = summary.get("latency_per_iter") or sum(values)
    fig = _figure(10, 1.6 + 0.45 * len(parts) + 1.0)
    ax = fig.subplots()
    scale, unit = _time_unit(max(values))
    _bars(ax, labels, values, [colors[k] for k in kinds],
          f"One iteration: {_fmt_s(total)} (global batch {summary.get('global_batch_size')} x "
          f"{summary.get('seq_len')} tokens, {summary.get('gradient_accumulation_steps')} micro-batches per GPU)",
          scale, unit, total=total)
    from matplotlib.patches import Patch
    fig.legend(handles=[Patch(color=colors["compute"], label="compute"),
                        Patch(color=colors["communication"], label="communication"),
                        Patch(color=colors["memory"], label="idle / memory-bound")],
               loc="outside lower center", ncols=3, fontsize=9, frameon=False)
    days = summary.get("total_training_latency")
    sub = f"; whole run {days / 86400:.3g} days" if days else ""
    fig.suptitle(f"Training time per iteration{sub}: {_setup_text(analysis)}", fontsize=11)
    return _save(fig, path)


def _training_memory_chart(analysis, summary: Dict[str, Any], path: Path) -> Optional[str]:
    terms = [("weight_memory_per_gpu", "weights", "weights"), ("gradient_memory_per_gpu", "gradients", "gradients"),
             ("optimizer_state_memory_per_gpu", "optimizer states", "optimizer_states"),
             ("activation_memory_per_gpu", "activations", "activations"),
             ("activation_memory_recompute_buffer_per_gpu", "recompute buffer", "recompute_buffer"),
             ("zero_buffer_memory_per_gpu", "ZeRO buffers", "zero_buffers")]
    parts = [(label, key, summary[k]) for k, label, key in terms if isinstance(summary.get(k), (int, float))]
    if not parts:
        return None
    capacity = summary.get("gpu_memory_per_gpu") or analysis.gpu_config.mem_per_GPU_in_GB * 1e9
    used = sum(v for _, _, v in parts)
    if used < capacity:
        parts.append(("free", "free", capacity - used))
    fig = _figure(10, 3.8)
    ax = fig.subplots()
    peak = summary.get("estimated_peak_memory_per_gpu", used)
    _stacked_memory(ax, parts, capacity,
                    f"Memory per GPU at peak: {_fmt_bytes(peak)} (micro-batch {summary.get('batch_size_per_gpu')}"
                    f", largest that fits {summary.get('max_batch_size_per_gpu')})")
    fig.suptitle(f"Training memory: {_setup_text(analysis)}", fontsize=11)
    return _save(fig, path)


# ------------------------------------------------------------------ entry point
def write_charts(analysis, summary: Dict[str, Any], output_dir: str, kind: str = "inference", suffix: str = "",
                 sweep_kwargs: Optional[Dict[str, Any]] = None) -> List[str]:
    """Write the charts of one summary as PNG files into output_dir; returns their
    paths. Names: `<stem>-<chart>.png` with the stem of the summary files.
    `sweep_kwargs` (inference) are passed to analysis.inference in the batch
    sweep (seq_len, num_tokens_to_generate, use_kv_cache, kv_cache_dtype_bytes, ...);
    by default they are read from the summary."""
    require_matplotlib()
    from .report import output_file_stem

    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"output_dir = {output_dir!r} exists and is not a directory")
    stem = output_file_stem(analysis, kind, suffix, summary)
    paths: List[Optional[str]] = []
    setup = _setup_text(analysis)
    if kind == "inference":
        b, s = summary["batch_size_per_gpu"], summary["seq_len"]
        n = summary.get("num_tokens_to_generate", 1)
        ctx = s + max(n // 2, 1)
        phases = [(f"prefill: batch {b} x {s} tokens", "o", analysis.operators("prefill", b, s))]
        if n > 1:
            phases.append((f"decode: batch {b} at context {ctx}", "^", analysis.operators("decode", b, s, ctx)))
        paths.append(_roofline(analysis, phases, f"Roofline: {setup}", out / f"{stem}-roofline.png"))
        paths.append(_latency_chart(analysis, summary, out / f"{stem}-latency.png"))
        paths.append(_memory_chart_inference(analysis, summary, out / f"{stem}-memory.png"))
        paths.append(_sweep_chart(analysis, summary, out / f"{stem}-batch_sweep.png", sweep_kwargs))
    else:
        paths.append(_training_time_chart(analysis, summary, out / f"{stem}-time.png"))
        paths.append(_training_memory_chart(analysis, summary, out / f"{stem}-memory.png"))
        b, s = summary.get("batch_size_per_gpu"), summary.get("seq_len")
        if b and s:
            phases = [(f"forward of a micro-batch: {b} x {s} tokens", "o", analysis.operators("train", b, s))]
            paths.append(_roofline(analysis, phases, f"Roofline (training forward): {setup}",
                                   out / f"{stem}-roofline.png"))
    return [p for p in paths if p]
