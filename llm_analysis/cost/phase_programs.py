"""Roofline timing of a phase table as one generated function per phase kind
(speed of new shapes, issue 12).

`timing.table_splits` + `GroupTimes` walk a phase table operator by operator:
evaluate each figure, time it on the roofline, file it under its group. Here the
same steps are written out once per (table, roofline cost model) as straight-line
code (operators/table_code.py): coefficients, roofline rates, link constants and
group slots are constants of the generated body, so a new shape costs only its
arithmetic. The operations and their order are those of the loop (each group's
sums accumulate in operator order; a kernel's time is filed whole under its bound;
a collective is the ring time of `cost/links.py`), so the results are the same
floats; tests/test_phase_programs.py checks them against the loop.

Programs:
- `prefill(b, x)` -> (groups as `GroupTimes.finish()` gives them, model FLOPs, total
  seconds): one pass.
- `decode(b, x0, x1, n)` -> (groups of n steps from context x0 to x1, time of the first
  step, time of the last, total seconds): the closed-form sum of `add_steps_splits`.
- `train_stage(b, x)` (per recomputation mode) -> the time and FLOPs sums of a training
  micro-batch on one pipeline stage (`training/stage.py`).
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from llm_analysis.cost.affine import sum_affine, sum_max_affine
from llm_analysis.cost.links import ring_terms
from llm_analysis.cost.model import RooflineCostModel
from llm_analysis.model.phase_table import FIELDS, PhaseTable
from llm_analysis.model.table_code import compile_function, figure_expr
from llm_analysis.quantities.group_times import table_keys

FLOPS_PER_GPU, BYTES_PER_GPU, FLOPS, COMM_BYTES = (FIELDS.index(f) for f in (
    "flops_per_gpu", "bytes_per_gpu", "flops", "comm_bytes_per_gpu"))
# GroupTimes' sums, with the variable prefix each group's sum has in the generated code
SUMS = (("latency_s", "lat"), ("compute_s", "cmp"), ("memory_s", "mem"), ("communication_s", "cmm"),
        ("flops_per_gpu", "flo"), ("bytes_per_gpu", "byt"))


def _collective_expr(cm: RooflineCostModel, op, comm: str, ns: Dict) -> str:
    """`cm.collective_s` of the operator's message `comm`: a ring over one link written
    out with its constants (`links.ring_terms`), otherwise a call."""
    n = op.comm_group_size
    terms = ring_terms(op.collective, n, cm.link(op.comm_group, n))
    if terms is None:
        name = f"coll_{len(ns)}"
        ns[name] = lambda v, kind=op.collective, size=n, group=op.comm_group: cm.collective_s(kind, v, size, group)
        return f"{name}({comm})"
    factor, bytes_per_s, hop_s, floor_s = terms
    return f"(max({factor!r} * {comm} / {bytes_per_s!r} + {hop_s!r}, {floor_s!r}) if {comm} > 0 else 0.0)"


def _time_key(cm: RooflineCostModel, table: PhaseTable, i: int, x: str) -> tuple:
    """What operator i's lines of `_time_lines` at x depend on: two operators with the same
    key get the same floats, so the later one reuses the earlier one's variables."""
    op, coefs = table.ops[i], table.coefs
    figures = (coefs[FLOPS_PER_GPU][i], coefs[BYTES_PER_GPU][i])
    if op.kind == "collective":
        return (x, "collective", op.collective, op.comm_group_size, op.comm_group, coefs[COMM_BYTES][i]) + figures
    return (x, "kernel") + figures


def _time_lines(cm: RooflineCostModel, table: PhaseTable, i: int, x: str, tag: str, ns: Dict) -> List[str]:
    """Lines setting f{tag}, b{tag} (FLOPs and bytes per GPU of operator i at (b, x)), t{tag}
    (its roofline time) and, for a kernel, c{tag}, m{tag} and cb{tag} (True when compute-bound).
    An operator with the same figures as an earlier one (`_time_key`: q, k and v projections,
    say) gets no lines: `ns["_tags"]` maps it to the earlier tag, which `tag_of` returns (roofline
    only: another model's time may depend on more than the figures)."""
    if type(cm) is not RooflineCostModel:  # a model that writes its own (cost/calibrated_programs.py)
        return cm.time_lines(table, i, x, tag, ns)
    seen = ns.setdefault("_tags", {})
    key = _time_key(cm, table, i, x)
    if key in seen:
        ns.setdefault("_alias", {})[tag] = seen[key]
        return []
    seen[key] = tag
    coefs = table.coefs
    lines = [f"f{tag} = {figure_expr(coefs[FLOPS_PER_GPU][i], x=x)}",
             f"b{tag} = {figure_expr(coefs[BYTES_PER_GPU][i], x=x)}"]
    if table.ops[i].kind == "collective":
        lines += [f"k{tag} = {figure_expr(coefs[COMM_BYTES][i], x=x)}",
                  f"t{tag} = {_collective_expr(cm, table.ops[i], f'k{tag}', ns)}"]
    else:
        roof = cm.roofline
        # no FLOPs (norms, embeddings): 0.0 / F is 0.0 for the positive finite rate F
        compute = "0.0" if not any(coefs[FLOPS_PER_GPU][i]) else f"f{tag} / {roof.flops_per_s!r}"
        lines += [f"c{tag} = {compute}", f"m{tag} = b{tag} / {roof.hbm_bytes_per_s!r}",
                  f"cb{tag} = c{tag} >= m{tag}", f"t{tag} = c{tag} if cb{tag} else m{tag}"]
    return lines


def tag_of(ns: Dict, tag: str) -> str:
    """The tag whose variables hold operator `tag`'s figures (its own, or an earlier twin's)."""
    return ns.get("_alias", {}).get(tag, tag)


def times(n: int, expr: str) -> str:
    """`n * expr` as the loop computes it; n = 1 left out (1 * v is v for every number)."""
    return expr if n == 1 else f"{n} * {expr}"


def _slots(table: PhaseTable) -> Tuple[List[str], List[int]]:
    """Group keys in order of first appearance, and each operator's slot."""
    keys = table_keys(table)
    order = list(dict.fromkeys(keys))
    return order, [order.index(k) for k in keys]


def _group_return(order: List[str]) -> List[str]:
    """Lines returning the group sums as `GroupTimes.finish()` leaves them (keys in
    first-appearance order, each group's bound and arithmetic intensity), then their
    total latency as `GroupTimes.total_s` adds it up."""
    lines = []
    for g in range(len(order)):
        lines += [f"bound{g}, top = ('memory', mem{g}) if mem{g} > cmp{g} else ('compute', cmp{g})",
                  f"if cmm{g} > top: bound{g} = 'communication'"]
    groups = ", ".join(f"{k!r}: {{" + ", ".join(f"{s!r}: {v}{g}" for s, v in SUMS)
                       + f", 'bound': bound{g}, 'arithmetic_intensity': flo{g} / byt{g} if byt{g} else 0.0}}"
                       for g, k in enumerate(order))
    total = "".join(f" + lat{g}" for g in range(len(order)))
    return lines + [f"groups = {{{groups}}}", f"total_s = 0{total}"]


def _init(order: List[str]) -> str:
    return " = ".join(f"{v}{g}" for g in range(len(order)) for _, v in SUMS) + " = 0.0"


def _zero(table: PhaseTable, field: int, i: int) -> bool:
    """Operator i's figure is 0.0 at every shape: adding its n x 0.0 leaves a sum as it is
    (the sums start at +0.0 and never turn -0.0), so the line is left out."""
    return not any(table.coefs[field][i])


def _file_lines(table: PhaseTable, g: int, i: int, t: str) -> List[str]:
    """`GroupTimes.add` of operator i's time (filed whole under what bounds it), FLOPs and bytes
    (variables of tag t)."""
    n, op = table.repeats[i], table.ops[i]
    bound = ([f"cmm{g} += {times(n, f't{t}')}"] if op.kind == "collective" else
             [f"if cb{t}:", f"    cmp{g} += {times(n, f't{t}')}", "else:", f"    mem{g} += {times(n, f't{t}')}"])
    return ([f"lat{g} += {times(n, f't{t}')}"] + bound
            + ([] if _zero(table, FLOPS_PER_GPU, i) else [f"flo{g} += {times(n, f'f{t}')}"])
            + ([] if _zero(table, BYTES_PER_GPU, i) else [f"byt{g} += {times(n, f'b{t}')}"]))


def _prefill_program(cm: RooflineCostModel, table: PhaseTable):
    ns: Dict = {}
    order, slot = _slots(table)
    # a float as soon as one operator adds its FLOPs (0.0 ones included, before they were left out)
    body = [_init(order), "flops = 0.0" if table.repeats else "flops = 0"]
    for i, n in enumerate(table.repeats):
        body += _time_lines(cm, table, i, "x", str(i), ns) + _file_lines(table, slot[i], i, tag_of(ns, str(i)))
        if not _zero(table, FLOPS, i):
            body.append(f"flops += {times(n, figure_expr(table.coefs[FLOPS][i]))}")
    body += _group_return(order) + ["return groups, flops, total_s"]
    return compile_function("prefill_program", "b, x", body, _clean(ns))


def _clean(ns: Dict) -> Dict:
    """The namespace of a generated program without the generators' bookkeeping."""
    return {k: v for k, v in ns.items() if not k.startswith("_")}


X_FREE_FIELDS = (FLOPS_PER_GPU, BYTES_PER_GPU, COMM_BYTES)


def x_free(table: PhaseTable, i: int, fields=X_FREE_FIELDS) -> bool:
    """Operator i's `fields` (default: FLOPs, bytes and message) do not depend on x (in
    decode: on the context), so neither does a time computed from them."""
    return all(c[1] == c[2] == c[4] == c[5] == 0 for f in fields for c in (table.coefs[f][i],))


def _steps_lines(op, g: int, n: int, a: str, z: str) -> List[str]:
    """`GroupTimes.add_steps_splits` of an operator from step a to step z (variables of tags
    a and z) over `n` steps."""
    lines = [f"f1 = (f{z} - f{a}) / span", f"b1 = (b{z} - b{a}) / span"]
    if op.kind == "collective":
        lines += [f"k = n * t{a}", f"lat{g} += {times(n, 'k')}", f"cmm{g} += {times(n, 'k')}"]
    else:
        lines += [f"c, m = sum_max_affine(f{a} / F, f1 / F, b{a} / B, b1 / B, n)",
                  f"lat{g} += {times(n, 'c')} + {times(n, 'm')}", f"cmp{g} += {times(n, 'c')}",
                  f"mem{g} += {times(n, 'm')}"]
    return lines + [f"flo{g} += {times(n, f'sum_affine(f{a}, f1, 0, n)')}",
                    f"byt{g} += {times(n, f'sum_affine(b{a}, b1, 0, n)')}"]


def _constant_steps_lines(table: PhaseTable, g: int, i: int, a: str) -> List[str]:
    """`_steps_lines` where every step equals step a (f1 = b1 = 0.0 exactly): the sums of
    `sum_max_affine` / `sum_affine` reduce to n times step a, under step a's bound."""
    n, op = table.repeats[i], table.ops[i]
    if op.kind == "collective":
        bound = [f"k = n * t{a}", f"lat{g} += {times(n, 'k')}", f"cmm{g} += {times(n, 'k')}"]
    else:
        bound = [f"if cb{a}:", f"    c = c{a} * n", f"    lat{g} += {times(n, 'c')}", f"    cmp{g} += {times(n, 'c')}",
                 "else:", f"    m = m{a} * n", f"    lat{g} += {times(n, 'm')}", f"    mem{g} += {times(n, 'm')}"]
    return (bound + ([] if _zero(table, FLOPS_PER_GPU, i) else [f"flo{g} += {times(n, f'(f{a} * n)')}"])
            + ([] if _zero(table, BYTES_PER_GPU, i) else [f"byt{g} += {times(n, f'(b{a} * n)')}"]))


def _decode_program(cm: RooflineCostModel, table: PhaseTable):
    roof = cm.roofline
    ns: Dict = {"sum_affine": sum_affine, "sum_max_affine": sum_max_affine, "F": roof.flops_per_s,
                "B": roof.hbm_bytes_per_s}
    order, slot = _slots(table)
    body = [_init(order), "first_s = last_s = 0", "span = max(n - 1, 1)"]
    for i, (n, op) in enumerate(zip(table.repeats, table.ops)):
        body += _time_lines(cm, table, i, "x0", f"{i}a", ns)
        a = tag_of(ns, f"{i}a")
        if x_free(table, i):  # the same at every context: no second evaluation, no closed-form sum
            body += [f"first_s += {times(n, f't{a}')}", f"last_s += {times(n, f't{a}')}"]
            body += _constant_steps_lines(table, slot[i], i, a)
            continue
        body += _time_lines(cm, table, i, "x1", f"{i}z", ns)
        z = tag_of(ns, f"{i}z")
        body += [f"first_s += {times(n, f't{a}')}", f"last_s += {times(n, f't{z}')}"]
        body += _steps_lines(op, slot[i], n, a, z)
    body += _group_return(order) + ["return groups, first_s, last_s, total_s"]
    return compile_function("decode_program", "b, x0, x1, n", body, _clean(ns))


# the per-micro-batch sums of training/stage.py's `Stage`, in the order train_stage returns them
STAGE_SUMS = ("fwd_compute", "bwd_compute", "rc_compute", "rc_comm", "tp_fwd", "ep_fwd", "cp_fwd", "flops_fwd",
              "flops_bwd", "flops_rc")
_COMM_SUM = {"tp": "tp_fwd", "ep": "ep_fwd", "cp": "cp_fwd"}


def _train_stage_program(cm: RooflineCostModel, table: PhaseTable, rc):
    """train_stage(b, x) -> STAGE_SUMS of a micro-batch under recomputation `rc`, accumulated
    operator by operator as `training.stage.build_stage` does without LoRA (backward 2x)."""
    ns: Dict = {}
    body = [" = ".join(STAGE_SUMS) + " = 0.0"]
    for i, (n, op, layer) in enumerate(zip(table.repeats, table.ops, table.is_layer)):
        recomputed = layer and op.recomputed_under(rc)  # embedding and head are never recomputed
        body += _time_lines(cm, table, i, "x", str(i), ns) + [f"t = {times(n, 't' + tag_of(ns, str(i)))}"]
        if op.kind == "collective":
            if op.comm_group in _COMM_SUM:
                body.append(f"{_COMM_SUM[op.comm_group]} += t")
            body += ["rc_comm += t"] if recomputed else []
            continue
        if _zero(table, FLOPS, i):  # adding n x 0.0 FLOPs leaves the sums as they are (_zero)
            body += ["fwd_compute += t", "bwd_compute += 2.0 * t"] + (["rc_compute += t"] if recomputed else [])
            continue
        body += [f"f = {times(n, figure_expr(table.coefs[FLOPS][i]))}", "fwd_compute += t",
                 "bwd_compute += 2.0 * t", "flops_fwd += f", "flops_bwd += 2.0 * f"]
        body += ["rc_compute += t", "flops_rc += f"] if recomputed else []
    body.append(f"return {', '.join(STAGE_SUMS)}")
    return compile_function("train_stage_program", "b, x", body, _clean(ns))


_BUILDERS = {"prefill": _prefill_program, "decode": _decode_program, "train_stage": _train_stage_program}


def phase_program(cm: RooflineCostModel, table: PhaseTable, kind: str, *option):
    """The generated `kind` program of `table` under roofline cost model `cm` (None for
    another cost model) (and the
    option of its kind: train_stage's recomputation), built once per (table, option) and
    kept on the cost model; None while the table is not yet worth compiling
    (`PhaseTable.hot`: the caller then walks the table with `timing.table_splits`)."""
    # the roofline's builders, or a model's own (the calibrated one: cost/calibrated_programs.py)
    builders = _BUILDERS if type(cm) is RooflineCostModel else getattr(cm, "program_builders", None)
    if builders is None:
        return None
    # cost models are immutable once built (cost/model.py; phase times are cached by their identity too)
    key = (id(table), kind, option)
    programs = cm.__dict__.setdefault("_phase_programs", {})
    entry = programs.get(key)
    if entry is None or entry[0] is not table:  # the table is kept with its program: its id stays its own
        if not table.hot():  # not worth compiling yet: the caller evaluates by loop
            return None
        entry = programs[key] = (table, builders[kind](cm, table, *option))
    return entry[1]


def compiled_program(cm, table: PhaseTable, kind: str, *option):
    """What `phase_program` returns once it has compiled the program, else None, without
    counting a use (for a caller that keeps compiled programs at hand: inference/plan.py)."""
    entry = cm.__dict__.get("_phase_programs", {}).get((id(table), kind, option))
    return entry[1] if entry is not None and entry[0] is table else None
