"""Charts of a summary (PNG, matplotlib — an optional extra: `pip install llm-analysis[plot]`).

Inference: a roofline placing every operator of prefill and decode; the time of
each layer part in prefill and in one decode step; memory per GPU; a batch sweep
(time per output token and throughput against batch, with the batch where decode
turns compute-bound and the batch where memory runs out).
Training: the time of one iteration by part; memory per GPU by term; the
roofline of a micro-batch's forward pass.

The charts themselves live in `presentation/` (chart_common, roofline_chart,
breakdown_charts, sweep_chart); the sweep's figures come from `batch_sweep.py`.
matplotlib is imported only when a chart is drawn, through
`matplotlib.figure.Figure` (no pyplot, no global backend change).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from llm_analysis.inference.batch_sweep import batch_sweep
from llm_analysis.report.breakdown_charts import (inference_memory_chart, latency_chart, training_memory_chart,
                                            training_time_chart)
from llm_analysis.report.chart_common import require_matplotlib, setup_text
from llm_analysis.report.files import output_directory, output_file_stem
from llm_analysis.report.roofline_chart import rates, roofline_chart
from llm_analysis.report.sweep_chart import sweep_chart



def _inference_charts(analysis, summary: Dict[str, Any], out: Path, stem: str,
                      sweep_kwargs: Optional[Dict[str, Any]]) -> List[Optional[str]]:
    b, s = summary["batch_size_per_gpu"], summary["seq_len"]
    n = summary.get("num_tokens_to_generate", 1)
    ctx = s + max(n // 2, 1)  # decode is drawn in the middle of the generation
    phases = [(f"prefill: batch {b} x {s} tokens", "o", analysis.operators("prefill", b, s))]
    if n > 1:
        phases.append((f"decode: batch {b} at context {ctx}", "^", analysis.operators("decode", b, s, ctx)))
    return [roofline_chart(rates(analysis, summary), phases, f"Roofline: {setup_text(analysis)}",
                           out / f"{stem}-roofline.png"),
            latency_chart(analysis, summary, out / f"{stem}-latency.png"),
            inference_memory_chart(analysis, summary, out / f"{stem}-memory.png"),
            sweep_chart(analysis, summary, batch_sweep(analysis, summary, sweep_kwargs),
                        out / f"{stem}-batch_sweep.png")]


def _training_charts(analysis, summary: Dict[str, Any], out: Path, stem: str) -> List[Optional[str]]:
    paths = [training_time_chart(analysis, summary, out / f"{stem}-time.png"),
             training_memory_chart(analysis, summary, out / f"{stem}-memory.png")]
    b, s = summary.get("batch_size_per_gpu"), summary.get("seq_len")
    if b and s:
        phases = [(f"forward of a micro-batch: {b} x {s} tokens", "o", analysis.operators("train", b, s))]
        paths.append(roofline_chart(rates(analysis, summary), phases,
                                    f"Roofline (training forward): {setup_text(analysis)}",
                                    out / f"{stem}-roofline.png"))
    return paths


def write_charts(analysis, summary: Dict[str, Any], output_dir: str, kind: str = "inference", suffix: str = "",
                 sweep_kwargs: Optional[Dict[str, Any]] = None) -> List[str]:
    """Write the charts of one summary as PNG files into output_dir; returns their
    paths. Names: `<stem>-<chart>.png` with the stem of the summary files.
    `sweep_kwargs` (inference) are passed to analysis.inference in the batch
    sweep (seq_len, num_tokens_to_generate, use_kv_cache, kv_cache_dtype_bytes, ...);
    by default they are read from the summary."""
    require_matplotlib()
    out = output_directory(output_dir)
    stem = output_file_stem(analysis, kind, suffix, summary)
    if kind == "inference":
        paths = _inference_charts(analysis, summary, out, stem, sweep_kwargs)
    else:
        paths = _training_charts(analysis, summary, out, stem)
    return [p for p in paths if p]


__all__ = ["write_charts", "batch_sweep", "require_matplotlib"]
