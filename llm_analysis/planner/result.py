"""What a plan returns: ranked rows, the Pareto front, the assumptions and
how much of the search space was evaluated and how (plain data; printing is
`table()` / `to_dict()`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Sequence, Tuple


BINDING_LEGEND = "the constraint that stops a larger batch, fewer GPUs or a faster layout"


@dataclass
class SearchStats:
    """How each candidate of the space was decided.

    considered: every candidate setup of the space (layout x dtype x batch ...);
    evaluated_full: candidates the full analysis (`inference()`/`training()`) ran on;
    ruled_out_by_bound: candidates a cheap lower bound (weights vs memory, ideal
        time vs the incumbent) proved infeasible or worse without the full analysis;
    decided_by_monotonicity: batches a binary search placed without evaluating them
        (memory, TTFT and TPOT never decrease with the batch);
    invalid: layouts the analysis rejects (e.g. heads not divisible by tp).
    """

    considered: int = 0
    evaluated_full: int = 0
    ruled_out_by_bound: int = 0
    decided_by_monotonicity: int = 0
    invalid: int = 0
    wall_s: float = 0.0

    def to_dict(self) -> Dict[str, Any]:
        d = dict(self.__dict__)
        d["candidates_per_s"] = self.considered / self.wall_s if self.wall_s else float("inf")
        d["full_evaluations_per_s"] = self.evaluated_full / self.wall_s if self.wall_s else float("inf")
        return d

    def line(self) -> str:
        d = self.to_dict()
        return (f"{self.considered} candidates in {self.wall_s:.2f} s ({d['candidates_per_s']:.0f}/s): "
                f"{self.evaluated_full} by the full analysis, {self.ruled_out_by_bound} ruled out by bounds, "
                f"{self.decided_by_monotonicity} placed by monotonicity, {self.invalid} invalid layouts")


def pareto_front(points: Sequence[Dict[str, Any]], latency_key: str, throughput_key: str) -> List[Dict[str, Any]]:
    """Points no other point beats on both lower latency and higher throughput,
    sorted by latency."""
    front: List[Dict[str, Any]] = []
    best_tp = -1.0
    for p in sorted(points, key=lambda q: (q[latency_key], -q[throughput_key])):
        if p[throughput_key] > best_tp:
            front.append(p)
            best_tp = p[throughput_key]
    return front


@dataclass
class PlanResult:
    """Ranked rows (best first), the Pareto front and the plan's assumptions.

    Each row: `layout` (what to run), `figures` (what it achieves, base units),
    `binding` (which constraint stops a larger batch or a cheaper layout),
    `why` (one line), and `reproduce` (the LLMAnalysis arguments and the
    inference()/training() keyword arguments that give the same figures); `caution`
    where the row relies on a part of the model checked less than the rest.
    """

    kind: str
    objective: str
    rows: List[Dict[str, Any]]
    pareto: List[Dict[str, Any]]
    assumptions: Dict[str, Any]
    stats: SearchStats
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def best(self) -> Dict[str, Any]:
        return self.rows[0]

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "objective": self.objective, "rows": self.rows, "pareto_front": self.pareto,
                "assumptions": self.assumptions, "search": self.stats.to_dict(), **self.extra}

    def table(self, top: int = 10) -> str:
        """The top rows as aligned plain text."""
        cols = self.extra.get("columns", [])
        header = ["#"] + [c[0] for c in cols] + ["binding", "why"]
        body = [[str(i + 1)] + [fmt(r) for _, fmt in cols]
                + [",".join(r["binding"]), r["why"] + ("; caution: see below" if "caution" in r else "")]
                for i, r in enumerate(self.rows[:top])]
        widths = [max(len(x) for x in col) for col in zip(header, *body)]
        lines = ["  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() for row in [header] + body]
        if not self.rows and "no_colocated_plan" in self.extra:  # only separate pools meet the targets (below)
            lines = [f"no co-located fleet: {self.extra['no_colocated_plan']}"]
        cautions = sorted({f"caution: {r['caution']}" for r in self.rows[:top] if "caution" in r})
        fp4 = [f"dtypes: {self.assumptions[k]}" for k in ("fp4", "checkpoint_dtype", "checkpoint") if k in self.assumptions]
        workload = [f"workload: {self.assumptions['workload']}"] if "workload" in self.assumptions else []
        refused = [f"not searched: {gpu}: {why}" for gpu, why in self.assumptions.get("refused_gpus", {}).items()]
        return "\n".join(lines + cautions + fp4 + workload + refused + self.times_line() + self.legend_lines()
                         + ["", self.stats.line()])

    def times_line(self) -> List[str]:
        """What the table's times are: expected times, or lower bounds nobody should read as a forecast."""
        model = str(self.assumptions.get("perf_model", ""))
        if not model:
            return []
        if model.startswith("calibrated"):
            margin = self.assumptions.get("calibrated_measured_error")
            return ["", "times: expected (the calibrated model: what a tuned framework measures); "
                        "--perf_model roofline gives lower bounds"] + ([margin] if margin else [])
        return ["", "times: lower bounds (the roofline at the efficiencies given: a real run is slower, and "
                    "at efficiency 1 its MFU is above what any run reaches); --perf_model calibrated gives "
                    "expected times"]

    def legend_lines(self) -> List[str]:
        """What the table's columns hold, one line each (`extra["legend"]`: column name -> meaning),
        for the columns shown, in their order; then what `binding` names."""
        legend = self.extra.get("legend", {})
        names = [c[0] for c in self.extra.get("columns", []) if c[0] in legend]
        if not names:
            return []
        width = max(len(n) for n in names + ["binding"])
        out = ["", "legend:"] + [f"  {n.ljust(width)}  {legend[n]}" for n in names]
        out.append(f"  {'binding'.ljust(width)}  {legend.get('binding', BINDING_LEGEND)}")
        return out


def rank(rows: List[Dict[str, Any]], key: Callable[[Dict[str, Any]], Tuple], label: str,
         value: Callable[[Dict[str, Any]], float], unit: str, tie_order: str = "") -> List[Dict[str, Any]]:
    """Sort rows best first and write each row's `why` against its neighbour; `tie_order` says what orders
    rows equal on `value` (the key's later terms), for the best row when the next one ties it."""
    rows.sort(key=key)
    for i, r in enumerate(rows):
        v = value(r)
        if i == 0:
            nxt = value(rows[1]) if len(rows) > 1 else None
            gap = "" if nxt is None or not v else f"; next best {nxt:.4g} {unit} ({(nxt / v - 1) * 100:+.1f}%)"
            if tie_order and nxt is not None and v and abs(nxt - v) <= 1e-9 * abs(v):
                gap += f", a tie: {tie_order}"
            r["why"] = f"best {label}: {v:.4g} {unit}{gap}"
        else:
            b = value(rows[0])
            r["why"] = f"{label} {v:.4g} {unit} ({(v / b - 1) * 100:+.1f}% vs best)" if b else f"{label} {v:.4g}"
    return rows
