"""The batch-sweep chart: time per output token and decode throughput against
the batch, with the batch where memory runs out and the batch where decode turns
compute-bound (both from `batch_sweep`'s result)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from llm_analysis.report.chart_common import figure, save, setup_text


def _axes(ax, sw: Dict[str, Any]):
    """The two curves on a log2 batch axis; returns their line handles."""
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
    return [l1, l2]


def _markers(ax, sw: Dict[str, Any], summary: Dict[str, Any], handles: list) -> float:
    """The memory limit and the compute-bound batch; returns the right end of the x axis."""
    bs = sw["batch"]
    max_b = sw["max_batch"]
    x_hi = max(bs or [1]) * 1.6
    if bs and max_b == bs[-1]:
        pre, dec = summary.get("prefill_max_batch_size_per_gpu"), summary.get("decode_max_batch_size_per_gpu")
        why = " (prefill activations + KV cache)" if pre is not None and dec is not None and pre < dec else \
            " (KV cache)"
        handles.append(ax.axvline(max_b, color="#c92a2a", ls="--", lw=1.5,
                                  label=f"memory full: largest batch that fits = {max_b}{why}"))
        ax.axvspan(max_b, x_hi * 64, color="#c92a2a", alpha=0.07)
    cb = sw["compute_bound_batch"]
    if cb is not None:
        where = "" if cb <= max_b else " (beyond the memory limit)"
        handles.append(ax.axvline(cb, color="#2b8a3e", ls="-.", lw=1.5,
                                  label=f"decode turns compute-bound at batch ~{cb}{where}"))
        x_hi = max(x_hi, cb * 1.6)
    return x_hi


def sweep_chart(analysis, summary: Dict[str, Any], sw: Dict[str, Any], path: Path) -> str:
    fig = figure(10, 6.2)
    ax = fig.subplots()
    handles = _axes(ax, sw)
    ax.set_xlim(0.8, _markers(ax, sw, summary, handles))
    ax.grid(True, alpha=0.3)
    ax.legend(handles=handles, loc="upper left", fontsize=9, framealpha=0.92)
    ax.set_title(f"Batch sweep: {setup_text(analysis)}\nprompt {summary.get('seq_len')} tokens, "
                 f"{summary.get('num_tokens_to_generate')} generated; below the compute-bound batch a larger batch "
                 "costs almost no time per token", fontsize=10)
    return save(fig, path)
