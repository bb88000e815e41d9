"""The planner's own error: no candidate meets the targets."""

from __future__ import annotations

from typing import Any, Dict, Optional

from llm_analysis.errors import ConfigError


class NoFeasiblePlanError(ConfigError):
    """No candidate setup meets every target.

    `constraint` names the target the closest candidate misses (memory, ttft,
    tpot, max_gpus, ...), `value` and `limit` are that candidate's figure and
    the target (same unit), `excess_fraction` = value / limit - 1, and `layout`
    describes that candidate.
    """

    def __init__(self, message: str, *, constraint: str, value: float, limit: float,
                 layout: Optional[Dict[str, Any]] = None):
        super().__init__(message)
        self.constraint = constraint
        self.value = value
        self.limit = limit
        self.excess_fraction = value / limit - 1 if limit else float("inf")
        self.layout = layout or {}


class ClosestMiss:
    """Tracks, over all rejected candidates, the one that misses its first
    failing target by the smallest relative amount."""

    UNITS = {"memory": ("GB", 1e-9), "ttft": ("ms", 1e3), "tpot": ("ms", 1e3), "max_gpus": ("GPUs", 1),
             "min_tokens_per_s": ("tokens/s", 1), "request_rate": ("requests/s", 1)}

    def __init__(self) -> None:
        self.best: Optional[tuple] = None

    def record(self, constraint: str, value: float, limit: float, layout: Dict[str, Any],
               higher_is_better: bool = False) -> None:
        # ratio > 1 means the target is missed; the smaller, the closer
        ratio = (limit / value if value else float("inf")) if higher_is_better else value / limit
        if self.best is None or ratio < self.best[0]:
            self.best = (ratio, constraint, value, limit, dict(layout), higher_is_better)

    def error(self, what: str) -> NoFeasiblePlanError:
        if self.best is None:
            return NoFeasiblePlanError(f"No candidate {what} was generated: widen the search (more GPU types, "
                                       "a larger max_gpus or more data types).", constraint="search_space",
                                       value=0.0, limit=0.0)
        ratio, constraint, value, limit, layout, higher = self.best
        unit, scale = self.UNITS.get(constraint, ("", 1))
        desc = ", ".join(f"{k} {v}" for k, v in layout.items())
        side = "below the minimum" if higher else "over the limit"
        return NoFeasiblePlanError(
            f"No candidate {what} meets every target. Closest miss: {constraint} = {value * scale:.4g} {unit} vs "
            f"{limit * scale:.4g} {unit} ({abs(ratio - 1) * 100:.1f}% {side}) with {desc}.",
            constraint=constraint, value=value, limit=limit, layout=layout)
