"""The roofline lower bound reported beside a calibrated inference() (`<key>_lower_bound`),
from generated code: its phase totals are the other half of a calibrated call's cost.

`inference/lower_bound.py` needs, per call, a prefill's roofline time summed operator by
operator (`timing.table_time_s(table_splits(...))`) and the decode steps' first-step and
total time (`table_splits` + `GroupTimes.add_steps_splits(...).total_s`). Here each is one
generated function per (roofline, table) that computes only those totals: the same
operations in the same order as the loops (a kernel's time is the larger of FLOPs / F and
bytes / B; the steps' closed form `sum_max_affine`, which for an operator that does not
grow with the context is n x its first step under its first step's bound; a collective is
n x its first step; each group's latency summed in operator order, the groups in order of
first appearance), so they return the floats the loops return. Until a table is worth
compiling (`PhaseTable.hot`) the loops run.

Once the calibrated programs are compiled they compute these totals themselves, from the
FLOPs and bytes they evaluate anyway (cost/calibrated_programs.py, `bound_out`), and
facade_perf `_fused_bounds` reads them; the functions here serve the other calls (a phase whose
calibrated times came from the cache, tables not yet compiled).
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from llm_analysis.model.phase_table import FIELDS, PhaseTable
from llm_analysis.model.table_code import compile_function, figure_expr
from llm_analysis.cost.phase_programs import _collective_expr, _slots, x_free
from llm_analysis.quantities.group_times import GroupTimes, table_splits, table_time_s
from llm_analysis.cost.affine import sum_max_affine

FLOPS_PER_GPU, BYTES_PER_GPU, COMM_BYTES = (FIELDS.index(f) for f in (
    "flops_per_gpu", "bytes_per_gpu", "comm_bytes_per_gpu"))


def _lines(roof, table: PhaseTable, i: int, x: str, tag: str, ns: Dict) -> Tuple[List[str], str]:
    """(lines setting f{tag}, b{tag} and t{tag} (the roofline time of operator i at x; c{tag}, m{tag}
    for a kernel), the tag holding them: an earlier operator's with the same figures)."""
    op, coefs = table.ops[i], [c[i] for c in table.coefs]
    key = (x, op.kind, op.collective, op.comm_group_size, op.comm_group, coefs[FLOPS_PER_GPU], coefs[BYTES_PER_GPU],
           coefs[COMM_BYTES] if op.kind == "collective" else None)
    seen = ns.setdefault("_tags", {})
    if key in seen:
        return [], seen[key]
    seen[key] = tag
    lines = [f"f{tag} = {figure_expr(coefs[FLOPS_PER_GPU], x=x)}", f"b{tag} = {figure_expr(coefs[BYTES_PER_GPU], x=x)}"]
    if op.kind == "collective":
        return lines + [f"t{tag} = {_collective_expr(roof, op, figure_expr(coefs[COMM_BYTES], x=x), ns)}"], tag
    F, B = roof.roofline.flops_per_s, roof.roofline.hbm_bytes_per_s
    return lines + [f"c{tag} = f{tag} / {F!r}", f"m{tag} = b{tag} / {B!r}",
                    f"t{tag} = c{tag} if c{tag} >= m{tag} else m{tag}"], tag


def _compile(name: str, args: str, body: List[str], ns: Dict):
    return compile_function(name, args, body, {k: v for k, v in ns.items() if not k.startswith("_")})


def _total_function(roof, table: PhaseTable):
    """total(b, x) -> sum over operators of repeat x roofline time, added in operator order
    from 0 as `table_time_s` adds it."""
    ns: Dict = {}
    body, tags = [], []
    for i in range(len(table.ops)):
        lines, tag = _lines(roof, table, i, "x", str(i), ns)
        body += lines
        tags.append(tag)
    body.append("return 0" + "".join(f" + {n} * t{t}" for n, t in zip(table.repeats, tags)))
    return _compile("roofline_total", "b, x", body, ns)


def _decode_function(roof, table: PhaseTable):
    """steps(b, x0, x1, n) -> (first step's time, n steps' total from context x0 to x1)."""
    ns: Dict = {"sum_max_affine": sum_max_affine}
    order, slot = _slots(table)
    F, B = roof.roofline.flops_per_s, roof.roofline.hbm_bytes_per_s
    body = [" = ".join(f"lat{g}" for g in range(len(order))) + " = 0.0", "first_s = 0", "span = max(n - 1, 1)"]
    for i, (r, op) in enumerate(zip(table.repeats, table.ops)):
        lines, a = _lines(roof, table, i, "x0", f"{i}a", ns)
        body += lines + [f"first_s += {r} * t{a}"]
        g = slot[i]
        if op.kind == "collective":
            body.append(f"lat{g} += {r} * (n * t{a})")
        elif x_free(table, i):
            body.append(f"lat{g} += {r} * (c{a} * n) if c{a} >= m{a} else {r} * (m{a} * n)")
        else:
            lines, z = _lines(roof, table, i, "x1", f"{i}z", ns)
            body += lines + [f"c, m = sum_max_affine(f{a} / {F!r}, (f{z} - f{a}) / span / {F!r}, b{a} / {B!r}, "
                             f"(b{z} - b{a}) / span / {B!r}, n)", f"lat{g} += {r} * c + {r} * m"]
    body.append("return first_s, 0" + "".join(f" + lat{g}" for g in range(len(order))))
    return _compile("roofline_steps", "b, x0, x1, n", body, ns)


def _compiled(roof, table: PhaseTable, kind: str, build):
    """The generated function `kind` of a table under roofline `roof`, built once the table is hot
    (None before); kept on the cost model (immutable once built) with its table."""
    functions = roof.__dict__.setdefault("_bound_functions", {})
    entry = functions.get((id(table), kind))
    if entry is None or entry[0] is not table:  # the table is kept with its function: its id stays its own
        if not table.hot():
            return None
        entry = functions[(id(table), kind)] = (table, build(roof, table))
    return entry[1]


def roofline_phase_s(roof, table: PhaseTable, batch: int, x: int) -> float:
    """`table_time_s(table_splits(roof, table, batch, x))`."""
    fn = _compiled(roof, table, "total", _total_function)
    return table_time_s(table_splits(roof, table, batch, x)) if fn is None else fn(batch, x)


def roofline_decode_s(roof, table: PhaseTable, batch: int, x0: int, steps: int):
    """(first step, sum over `steps` >= 1 steps from context x0) on the roofline, as
    `table_splits` + `GroupTimes.add_steps_splits` give them (one step: both the first)."""
    fn = _compiled(roof, table, "steps", _decode_function)
    if fn is not None:
        return fn(batch, x0, x0 + steps - 1, steps)
    first = table_splits(roof, table, batch, x0)
    last = first if steps == 1 else table_splits(roof, table, batch, x0 + steps - 1)
    return table_time_s(first), GroupTimes().add_steps_splits(roof.roofline, first, last, steps).total_s
