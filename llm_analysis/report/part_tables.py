"""Tables per layer part: parameters and weights, the roofline of a phase
(FLOPs, bytes moved, intensity, bound, time), any breakdown dict the summary
carries, and the values no section showed."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

from llm_analysis.model.vision_tower import PROJECTOR_GROUP, VISION_GROUP
from llm_analysis.quantities.group_times import GroupTimes
from llm_analysis.report.console import RichReport
from llm_analysis.report.labels import part_label, part_sort_key
from llm_analysis.report.units import fmt, format_bytes, format_count, format_number, format_seconds


# -------------------------------------------------------------- parameters
def _params_by_part(analysis) -> Dict[str, Dict[str, float]]:
    """Parameters of the model and of one layer, and weight bytes per TP rank, per
    operator group (sums of the operator records)."""
    out: Dict[str, Dict[str, float]] = {}
    layers = analysis.model_config.num_layers
    for r in analysis.operators("prefill", 1, 1):
        if r["kind"] == "collective" or not r["params"]:
            continue
        g = out.setdefault(r["group"], {"params": 0.0, "per_layer": 0.0, "weight_bytes": 0.0})
        g["params"] += r["params"] * r["repeat"]
        g["weight_bytes"] += r["weight_bytes_per_gpu"] * r["repeat"]
        if r["layer_group"] not in ("embedding", "head") and r["group"] not in (VISION_GROUP, PROJECTOR_GROUP):
            g["per_layer"] += r["params"] * r["repeat"] / layers
    return out


def params_table(rep: RichReport, analysis) -> None:
    parts = _params_by_part(analysis)
    total = sum(g["params"] for g in parts.values()) or 1
    p = analysis.parallelism_config
    where = "per GPU" if p.pp_size == 1 else f"per TP rank, all {p.pp_size} stages"
    rows = []
    for key in sorted(parts, key=part_sort_key):
        g = parts[key]
        rows.append([part_label(key), format_count(g["params"]),
                     format_count(g["per_layer"]) if g["per_layer"] else "-",
                     f"{g['params'] / total:.1%}", format_bytes(g["weight_bytes"])])
    footer = ["total", format_count(sum(g["params"] for g in parts.values())),
              format_count(sum(g["per_layer"] for g in parts.values())), "100%",
              format_bytes(sum(g["weight_bytes"] for g in parts.values()))]
    rep.table("Parameters and weights by layer part",
              [("part", "left"), ("params", "right"), ("per layer", "right"), ("share", "right"),
               (f"weights {where}", "right")], rows, footer=footer)


# ------------------------------------------------------------------ phases
def _intensity(ai: float) -> str:
    return f"{ai:,.0f}" if ai >= 100 else f"{ai:.3g}"


def _phase_row(rep: RichReport, key: str, g: Dict[str, Any], total_s: float) -> List[Any]:
    comm = g.get("bound") == "communication"
    flops = g.get("flops_per_gpu", 0.0)
    bytes_ = g.get("bytes_per_gpu", 0.0)
    return [part_label(key),
            "-" if comm else format_number(flops, "FLOPs"),
            "-" if comm else format_bytes(bytes_),
            "-" if comm or not flops else _intensity(g.get("arithmetic_intensity", 0.0)),
            rep.bound_cell(g.get("bound", "")),
            format_seconds(g.get("latency_s", 0.0)),
            f"{g.get('latency_s', 0.0) / total_s:.1%}"]


def phase_table(rep: RichReport, title: str, groups: Dict[str, Dict[str, float]],
                caption: Optional[str] = None) -> None:
    """One row per part of a latency breakdown ({part: {latency_s, bound, ...}})."""
    total = sum(g.get("latency_s", 0.0) for g in groups.values()) or 1.0
    rows = [_phase_row(rep, key, groups[key], total) for key in sorted(groups, key=part_sort_key)]
    footer = ["total", format_number(sum(g.get("flops_per_gpu", 0.0) for g in groups.values()), "FLOPs"),
              format_bytes(sum(g.get("bytes_per_gpu", 0.0) for g in groups.values())), "", "",
              format_seconds(sum(g.get("latency_s", 0.0) for g in groups.values())), "100%"]
    rep.table(title, [("part", "left"), ("FLOPs/GPU", "right"), ("bytes moved/GPU", "right"),
                      ("FLOPs/byte", "right"), ("bound", "left"), ("time", "right"), ("share", "right")],
              rows, caption, footer=footer)


def _comm_key(r: Dict[str, Any]) -> str:
    """The part a collective's record is filed under: its communication group
    (the record's `comm_group` when it carries one; else read from its name)."""
    grp = r.get("comm_group")
    if grp:
        return f"{grp}_communication"
    name = r.get("name", "")
    for grp in ("tp", "pp", "ep", "dp"):
        if name.startswith(grp + "_") or f"_{grp}_" in name:
            return f"{grp}_communication"
    return "communication"


def groups_from_operators(rows: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Operator records (each with its latency_s and bound) filed per layer part
    with timing.GroupTimes, the accumulator of the summaries' breakdowns."""
    acc = GroupTimes()
    for r in rows:
        key = r.get("collective") and r["group"] == "communication" and _comm_key(r) or r["group"]
        t = r.get("repeat", 1) * r["latency_s"]
        acc.add(key, t if r["bound"] == "compute" else 0.0, t if r["bound"] == "memory" else 0.0,
                t if r["bound"] == "communication" else 0.0, r.get("repeat", 1) * r["flops_per_gpu"],
                r.get("repeat", 1) * r["bytes_per_gpu"])
    return acc.finish()


# -------------------------------------------------------------- breakdowns
_PHASE_FIELDS = ("latency_s", "compute_s", "memory_s", "communication_s", "flops_per_gpu", "bytes_per_gpu",
                 "bound", "arithmetic_intensity")


def _nested_table(rep: RichReport, key: str, title: str, d: Dict[str, Dict[str, Any]]) -> None:
    cols: List[str] = []
    for v in d.values():
        cols.extend(c for c in v if c not in cols)
    rows = [[part_label(name)] + [fmt(c, v.get(c), key) if c in v else "" for c in cols] for name, v in d.items()]
    rep.table(title, [("", "left")] + [(c.replace("_", " "), "right") for c in cols], rows)


def breakdown_table(rep: RichReport, key: str, d: Dict[str, Any]) -> None:
    """A breakdown dict of the summary as a table: a latency breakdown as a phase
    table, a dict of dicts with one column per field, else value and share."""
    title = key.replace("_", " ")
    if not d:
        return
    if all(isinstance(v, dict) for v in d.values()):
        if all("latency_s" in v for v in d.values()) and all(k in _PHASE_FIELDS for v in d.values() for k in v):
            phase_table(rep, title, d)
        else:
            _nested_table(rep, key, title, d)
        return
    numeric = {k: v for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    total = sum(v for v in numeric.values() if v > 0)
    rows = []
    for name, v in d.items():
        share = f"{v / total:.1%}" if name in numeric and total and v >= 0 else ""
        rows.append([part_label(name), fmt(name, v, key) if not isinstance(v, dict) else str(v), share])
    rep.table(title, [("", "left"), ("value", "right"), ("share", "right")], rows)
    rep.console.print()


# ----------------------------------------------------------------- the rest
def other_values(rep: RichReport, s: Dict[str, Any], used: Set[str]) -> None:
    """Every summary value no section showed: scalars in two columns, then breakdowns and lists."""
    rest = [(k, v) for k, v in s.items() if k not in used and k not in ("notes", "setup") and v is not None]
    scalars = [(k, v) for k, v in rest if not isinstance(v, (dict, list, tuple))]
    if scalars:
        rep.heading("Other values")
        half = (len(scalars) + 1) // 2
        left, right = scalars[:half], scalars[half:]
        rows = []
        for i in range(half):
            row = [left[i][0], fmt(*left[i])]
            row += [right[i][0], fmt(*right[i])] if i < len(right) else ["", ""]
            rows.append(row)
        rep.grid(rows, ("left", "right", "left", "right"))
    for k, v in rest:
        if isinstance(v, dict):
            breakdown_table(rep, k, v)
        elif isinstance(v, (list, tuple)):
            rep.key_values([(k.replace("_", " "), ", ".join(map(str, v)))])
