"""Chart of a plan's Pareto front (matplotlib, the optional `plot` extra)."""

from __future__ import annotations

from pathlib import Path

from llm_analysis.errors import ConfigError
from llm_analysis.report.chart_common import figure, save


def plot_front(result, path: Path) -> str:
    """Writes the Pareto front (latency vs throughput per GPU) as a PNG at `path` (its folder made
    where missing, as --html does); a ConfigError naming --plot when it cannot be written."""
    fig = figure(6, 4)
    ax = fig.add_subplot()
    x_key = "time_per_output_token" if result.kind == "inference" else "total_training_latency"
    scale, label = (1e3, "time per output token (ms)") if result.kind == "inference" else \
        (1 / 86400, "training time (days)")
    pts = result.pareto
    ax.plot([p[x_key] * scale for p in pts], [p["tokens_per_sec_per_gpu"] for p in pts], "o-")
    ax.set_xlabel(label)
    ax.set_ylabel("tokens/s per GPU")
    ax.set_title(f"Pareto front ({result.kind})")
    try:
        return save(fig, Path(path))
    except OSError as err:
        raise ConfigError(f"--plot = {str(path)!r} cannot be written: {err.strerror or err}") from None
