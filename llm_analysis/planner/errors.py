"""The planner's own error: no candidate meets the targets."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

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


# the gate every candidate passes first: a candidate that does not hold its weights and KV cache is
# never timed, so a miss on any other constraint comes from a candidate that fits in memory
MEMORY = "memory"

_NAMES = {"memory": "memory", "ttft": "time-to-first-token (TTFT) target", "tpot": "time-per-output-token (TPOT) "
          "target", "max_gpus": "max_gpus limit",
          "max_replicas": "planner's replica limit (the most replicas of a layout it searches, and no more than one "
          "per client; not a setting)", "min_tokens_per_s": "min_tokens_per_s target",
          "request_rate": "request_rate target"}


# the constraints that are floors (the figure must reach the target): a miss is closer the higher its figure
MINIMUMS = frozenset({"min_tokens_per_s"})


def _ratio(value: float, limit: float, higher_is_better: bool) -> float:
    """How far a miss is from its target, > 1 when missed; the smaller, the closer."""
    if higher_is_better:
        return limit / value if value else float("inf")
    return value / limit


class ClosestMiss:
    """Tracks, over all rejected candidates, the one that misses its first failing target by the
    smallest relative amount, kept apart for the candidates that fit in memory and those that do not.

    The error names the constraint that ruled out the candidates that fit in memory (with the best
    value they reached) whenever any did: a latency target missed by 3x on a layout that fits is
    the binding constraint even where another layout misses memory by only 60%, since more memory
    (more GPUs per replica) is what that layout would need and it is already in the search."""

    UNITS = {"memory": ("GB", 1e-9), "ttft": ("ms", 1e3), "tpot": ("ms", 1e3), "max_gpus": ("GPUs", 1),
             "max_replicas": ("replicas", 1), "min_tokens_per_s": ("tokens/s", 1), "request_rate": ("requests/s", 1)}

    def __init__(self) -> None:
        self.best: Optional[tuple] = None  # the closest miss of all
        self.best_fitting: Optional[tuple] = None  # the closest of the candidates that fit in memory
        self.fitting_misses = 0
        self.memory_misses = 0
        self.fitting_by_constraint: Dict[str, tuple] = {}  # the closest fitting miss of each constraint
        self.refusals: List[str] = []  # candidates the analysis refused with a reason, not a number

    def refused(self, reason: str) -> None:
        self.refusals.append(reason)

    def record(self, constraint: str, value: float, limit: float, layout: Dict[str, Any],
               higher_is_better: Optional[bool] = None) -> None:
        """`higher_is_better`: None takes the constraint's own direction (MINIMUMS: a floor, else a limit)."""
        higher = constraint in MINIMUMS if higher_is_better is None else higher_is_better
        ratio = _ratio(value, limit, higher)
        entry = (ratio, constraint, value, limit, dict(layout), higher)
        if self.best is None or ratio < self.best[0]:
            self.best = entry
        if constraint == MEMORY or constraint.startswith(MEMORY + "_"):
            self.memory_misses += 1
        else:
            self.fitting_misses += 1
            if self.best_fitting is None or ratio < self.best_fitting[0]:
                self.best_fitting = entry
            if constraint not in self.fitting_by_constraint or ratio < self.fitting_by_constraint[constraint][0]:
                self.fitting_by_constraint[constraint] = entry

    def record_all(self, misses, layout: Dict[str, Any]) -> None:
        """A candidate's every missed target, `misses` [(constraint, value, limit)]: the one it misses most
        ranks it (`record`), the others are kept per constraint, so that the refusal names every target a
        user would have to loosen (TTFT and TPOT both out of reach: both named), not only the worst."""
        # each miss by its own direction: a floor missed (min_tokens_per_s 330 of 100,000) is far, a limit
        # missed by its excess; ranking a floor by value / limit would take the farthest for the closest
        worst = max(misses, key=lambda m: _ratio(m[1], m[2], m[0] in MINIMUMS))
        self.record(*worst, layout)
        for constraint, value, limit in misses:
            if (constraint, value, limit) == worst or constraint == MEMORY:
                continue
            higher = constraint in MINIMUMS
            entry = (_ratio(value, limit, higher), constraint, value, limit, dict(layout), higher)
            if constraint not in self.fitting_by_constraint or entry[0] < self.fitting_by_constraint[constraint][0]:
                self.fitting_by_constraint[constraint] = entry

    @classmethod
    def _figure(cls, entry: tuple) -> str:
        ratio, constraint, value, limit, layout, higher = entry
        unit, scale = cls.UNITS.get(constraint.split("_p")[0] if constraint.startswith(("ttft_p", "tpot_p"))
                                    else constraint, ("", 1))
        # a floor's shortfall as a share of the floor (330 of 100,000: 99.7% below), a limit's excess of it
        off, side = (1 - value / limit, "below the minimum") if higher else (value / limit - 1, "over the limit")
        return (f"{constraint} = {value * scale:.4g} {unit} vs {limit * scale:.4g} {unit} "
                f"({abs(off) * 100:.1f}% {side})")

    def error(self, what: str) -> NoFeasiblePlanError:
        if self.best is None and self.refusals:
            return NoFeasiblePlanError(f"No candidate {what} meets every target: every candidate was refused "
                                       f"({len(self.refusals)}); the first: {self.refusals[0]}",
                                       constraint="refused", value=0.0, limit=0.0)
        if self.best is None:
            return NoFeasiblePlanError(f"No candidate {what} was generated: widen the search (more GPU types, "
                                       "a larger max_gpus or more data types).", constraint="search_space",
                                       value=0.0, limit=0.0)
        chosen = self.best_fitting or self.best
        ratio, constraint, value, limit, layout, higher = chosen
        desc = ", ".join(f"{k} {v}" for k, v in layout.items())
        if self.best_fitting is not None:
            name = _NAMES.get(constraint.split("_p")[0] if constraint.startswith(("ttft_p", "tpot_p"))
                              else constraint, constraint)
            rest = ""
            # candidates that fit miss other targets too (a GPU cap the layouts that meet the latency need):
            # each with its closest, so that the message names every target a user might loosen
            others = [e for c, e in self.fitting_by_constraint.items() if c != constraint]
            if others:
                rest += "; others miss " + "; ".join(
                    f"the {_NAMES.get(e[1], e[1])} (closest: {self._figure(e)} with "
                    f"{', '.join(f'{k} {v}' for k, v in e[4].items())})" for e in sorted(others, key=lambda e: e[0]))
            if self.best is not None and self.best is not self.best_fitting and self.memory_misses:
                rest += f"; the other candidates do not fit in memory (closest: {self._figure(self.best)})"
            every = "every" if not others else "the closest"
            message = (f"No candidate {what} meets every target. Binding constraint: {constraint}: {every} "
                       f"candidate that fits in memory misses the {name}; the best reaches "
                       f"{self._figure(chosen)} with {desc}{rest}.")
        else:
            message = (f"No candidate {what} meets every target. Binding constraint: memory: no candidate fits; "
                       f"closest miss: {self._figure(chosen)} with {desc}.")
        return NoFeasiblePlanError(message, constraint=constraint, value=value, limit=limit, layout=layout)
