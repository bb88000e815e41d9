"""Bar charts of the summary's breakdowns: time per layer part in prefill and
one decode step, inference memory per GPU, training time per iteration and
training memory per GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from llm_analysis.report.chart_common import BOUND_COLORS, bars, figure, legend_patches, save, setup_text, stacked_memory, time_unit
from llm_analysis.report.labels import (INFERENCE_MEMORY_LABELS, TRAIN_MEMORY_TERMS, TRAIN_TIME_KINDS, gpu_memory_bytes, part_label,
                     part_sort_key, train_time_label, train_time_parts)
from llm_analysis.report.units import format_bytes, format_seconds


def latency_chart(analysis, summary: Dict[str, Any], path: Path) -> str:
    steps = max(summary.get("num_tokens_to_generate", 1) - 1, 0)
    panels = [("prefill_latency_breakdown",
               f"Prefill (time to first token {format_seconds(summary.get('prefill_latency', 0))}): "
               f"batch {summary.get('batch_size_per_gpu')} x {summary.get('seq_len')} tokens")]
    if steps and summary.get("decode_latency_breakdown"):
        panels.append(("decode_latency_breakdown",
                       f"Decode, one step (mean of {steps}): {format_seconds(summary.get('decode_latency', 0))}"))
    fig = figure(10, 3.0 + 2.4 * len(panels))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    bounds = set()
    for ax, (key, title) in zip(axes, panels):
        groups = summary.get(key) or {}
        keys = sorted(groups, key=part_sort_key)
        values = [groups[k]["latency_s"] for k in keys]
        scale, unit = time_unit(max(values) if values else 1.0)
        cols = [BOUND_COLORS.get(groups[k].get("bound"), "grey") for k in keys]
        bounds.update(groups[k].get("bound") for k in keys)
        bars(ax, [part_label(k) for k in keys], values, cols, title, scale, unit)
    fig.suptitle(f"Where the time goes: {setup_text(analysis)}", fontsize=11)
    legend_patches(fig, {f"{b}-bound": c for b, c in BOUND_COLORS.items() if b in bounds})
    return save(fig, path)


def inference_memory_parts(summary: Dict[str, Any]) -> List[Tuple[str, str, float]]:
    """(label, colour key, bytes) of the inference summary's memory per GPU, free memory last."""
    brk = summary.get("memory_breakdown_per_gpu") or {}
    return [(INFERENCE_MEMORY_LABELS.get(k, k.replace("_", " ")), k, v) for k, v in brk.items()]


def inference_memory_chart(analysis, summary: Dict[str, Any], path: Path) -> str:
    parts = inference_memory_parts(summary)
    fig = figure(10, 3.6)
    ax = fig.subplots()
    stacked_memory(ax, parts, gpu_memory_bytes(analysis, summary),
                   f"Memory per GPU: batch {summary.get('batch_size_per_gpu')}, context "
                   f"{summary.get('seq_len', 0) + summary.get('num_tokens_to_generate', 0)} tokens; largest batch "
                   f"prefill {summary.get('prefill_max_batch_size_per_gpu')}, "
                   f"decode {summary.get('decode_max_batch_size_per_gpu')}")
    fig.suptitle(setup_text(analysis), fontsize=11)
    return save(fig, path)


_TIME_COLORS = {"compute": BOUND_COLORS["compute"], "communication": BOUND_COLORS["communication"],
                "memory": "#868e96", "other": "#adb5bd"}
TRAIN_TIME_LEGEND = {"compute": _TIME_COLORS["compute"], "communication": _TIME_COLORS["communication"],
                     "idle / memory-bound": _TIME_COLORS["memory"]}


def train_time_color(part: str) -> str:
    """The colour of a part of the training iteration: what it is spent on (labels.TRAIN_TIME_KINDS)."""
    return _TIME_COLORS[TRAIN_TIME_KINDS.get(part, "other")]


def training_time_chart(analysis, summary: Dict[str, Any], path: Path) -> Optional[str]:
    parts = [(k, v) for k, v in train_time_parts(summary).items() if v > 0]
    if not parts:
        return None
    values = [v for _, v in parts]
    total = summary.get("latency_per_iter") or sum(values)
    fig = figure(10, 1.6 + 0.45 * len(parts) + 1.0)
    ax = fig.subplots()
    scale, unit = time_unit(max(values))
    bars(ax, [train_time_label(k) for k, _ in parts], values, [train_time_color(k) for k, _ in parts],
         f"One iteration: {format_seconds(total)} (global batch {summary.get('global_batch_size')} x "
         f"{summary.get('seq_len')} tokens, {summary.get('gradient_accumulation_steps')} micro-batches per GPU)",
         scale, unit, total=total)
    legend_patches(fig, TRAIN_TIME_LEGEND)
    days = summary.get("total_training_latency")
    sub = f"; whole run {days / 86400:.3g} days" if days else ""
    fig.suptitle(f"Training time per iteration{sub}: {setup_text(analysis)}", fontsize=11)
    return save(fig, path)


def training_memory_parts(analysis, summary: Dict[str, Any]) -> List[Tuple[str, str, float]]:
    """(label, colour key, bytes) of the training summary's memory terms per GPU, and the
    free memory left when they fit; empty when the summary has none."""
    parts = [(label, key, summary[k]) for k, _, label, key in TRAIN_MEMORY_TERMS
             if isinstance(summary.get(k), (int, float))]
    used = sum(v for _, _, v in parts)
    capacity = gpu_memory_bytes(analysis, summary)
    if parts and used < capacity:
        parts.append(("free", "free", capacity - used))
    return parts


def training_memory_chart(analysis, summary: Dict[str, Any], path: Path) -> Optional[str]:
    parts = training_memory_parts(analysis, summary)
    if not parts:
        return None
    capacity = gpu_memory_bytes(analysis, summary)
    used = sum(v for _, key, v in parts if key != "free")
    fig = figure(10, 3.8)
    ax = fig.subplots()
    peak = summary.get("estimated_peak_memory_per_gpu", used)
    stacked_memory(ax, parts, capacity,
                   f"Memory per GPU at peak: {format_bytes(peak)} (micro-batch {summary.get('batch_size_per_gpu')}"
                   f", largest that fits {summary.get('max_batch_size_per_gpu')})")
    fig.suptitle(f"Training memory: {setup_text(analysis)}", fontsize=11)
    return save(fig, path)
