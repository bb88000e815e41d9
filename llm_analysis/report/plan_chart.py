"""Chart of a plan's Pareto front (matplotlib, the optional `plot` extra)."""

from __future__ import annotations

from llm_analysis.errors import ConfigError


def plot_front(result, path: str) -> str:
    """Writes the Pareto front (latency vs throughput per GPU) as a PNG at `path`."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError('plot needs matplotlib: pip install "llm-analysis[plot]"') from None
    x_key = "time_per_output_token" if result.kind == "inference" else "total_training_latency"
    scale, label = (1e3, "time per output token (ms)") if result.kind == "inference" else \
        (1 / 86400, "training time (days)")
    pts = result.pareto
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([p[x_key] * scale for p in pts], [p["tokens_per_sec_per_gpu"] for p in pts], "o-")
    ax.set_xlabel(label)
    ax.set_ylabel("tokens/s per GPU")
    ax.set_title(f"Pareto front ({result.kind})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
