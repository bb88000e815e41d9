"""The calibrated cost model on a phase table as generated straight-line code
(speed of new shapes under perf_model="calibrated", issue 10).

`calibrated_table.calibrated_table_splits` walks a table operator by operator and
calls `CalibratedCostModel.op_kernel_split_s` for each. Here the same arithmetic is
written out once per (table, cost model), as `phase_programs.py` does for the
roofline: per operator, its figures (coefficients as constants), its kernel shape
(M from the FLOPs, N and K constants), the GEMM efficiency of that shape (a
`gemm.GemmShape` per weight shape: the tile that wins M's bucket, cost/gemm_buckets.py,
written out with the search's own operations, else the shape's memo by M), the
streaming and attention rates as constants. The operations and their order are those of `op_kernel_split_s` and of
the loops that file the splits (`GroupTimes.add_splits`, `add_simpson_splits`,
training/stage.py), so the programs return the same floats as the loops;
tests/test_calibrated_programs.py checks them against the operators.

`time_lines` gives an operator's lines (the hook `phase_programs._time_lines` calls
for a cost model that is not the roofline), so the roofline's training program serves
this model too. Prefill and decode have their own (`prefill_program`, `decode_program`:
Simpson's rule over the steps instead of the roofline's closed form), which, for a model
with a `bound_model` (the analysis' roofline), also compute the call's lower bound from
the figures at hand, as cost/calibrated_bound.py's functions do, into `bound_out`
(facade_perf reads it: no second timing pass). Collectives inside one NVLink island are
written out as NCCL's ring (`nccl.ring_code`). A decode program keeps what depends on
the batch and step count only (operators whose figures do not grow with the context, and
the sums of groups made only of them) per (b, n): cost/calibrated_steady.py. A prefill program
computes the tokens b x once (`bx`, `_tokens_once`). Every program's lines then pass through
cost/program_reuse.py: a value twin operators share is computed once, unread names are left
out, and a run of additions to one sum is one line (the same operations: the same floats).
"""

from __future__ import annotations

import re
from typing import Dict, List, Tuple

from llm_analysis.model.phase_table import FIELDS, PhaseTable
from llm_analysis.model.table_code import compile_function, figure_expr
from llm_analysis.cost.phase_programs import (SUMS, X_FREE_FIELDS, _collective_expr, _group_return, _init, _slots,
                              _train_stage_program, _zero, x_free)
from llm_analysis.cost.affine import sum_max_affine
from llm_analysis.cost.calibrated_table import kernel_plan
from llm_analysis.cost.links import ring_terms
from llm_analysis.cost.calibrated_steady import group_lines, steady_call
from llm_analysis.cost.program_reuse import reuse_lines

FLOPS_PER_GPU, BYTES_PER_GPU, FLOPS, COMM_BYTES, KV_BYTES = (FIELDS.index(f) for f in (
    "flops_per_gpu", "bytes_per_gpu", "flops", "comm_bytes_per_gpu", "kv_cache_bytes_read_per_gpu"))


def _positive(coefs) -> bool:
    """A figure with no negative coefficient and some positive one: > 0 at every shape (batch
    and length are >= 1), so the generated code can leave out its `<= 0` tests."""
    return min(coefs) >= 0 and max(coefs) > 0


def _stream_expr(nbytes: str, half: float, rate: float, positive: bool = False) -> str:
    """`CalibratedCostModel._stream_s(nbytes, eff)` with rate = HBM spec x eff."""
    stream = f"({nbytes} + {half!r}) / {rate!r}"
    return stream if positive else f"({stream} if {nbytes} > 0 else 0.0)"


def _m_lines(how, flops_coefs, x: str, tag: str) -> List[str]:
    """mm{tag}: the matmul's M, round(FLOPs / FLOPs per M), at least 1. FLOPs of the form
    b x C (or b C) with C the FLOPs per M give M = b x (or b) as they are: f = fl(M C), and
    fl(f / C) is within 2 ulps of the integer M, which round() gives back (M < 2**50)."""
    a0, a1, a2, b0, b1, b2 = flops_coefs
    if a0 == a1 == a2 == b2 == 0 and how[3] == (b1 if b0 == 0 else b0) and 0 in (b0, b1):
        if b0 == 0 and x in ("x", "x0", "x1"):  # (an integer length: xh, a decode step's mean, is not)
            return [f"mm{tag} = b*{x}"]
        if b1 == 0:
            return [f"mm{tag} = b"]
    return [f"mm{tag} = round(f{tag} / {how[3]!r})", f"if mm{tag} < 1: mm{tag} = 1"]


def _gemm_lines(cm, how, tag: str, ns: Dict, flops_coefs, x: str) -> List[str]:
    """e{tag}: the GEMM efficiency of a matmul whose plan is ("m", N, K, FLOPs per M): from the
    winning tile of M's bucket (gemm_buckets.py, kept in the shape's `winners`), written out as
    `GemmShape.bucket_efficiency` computes it (the same float); where the bucket is new (the shape
    then keeps its winner) or has no single winner (small M, ties), the shape's memo by M
    (efficiencies are > 0: `or` falls through on a miss only) or its `miss`."""
    gemm = cm.gemm_shape(how[1], how[2])
    name = f"gemm_{len(ns)}"
    ns[name], ns[name + "_win"], ns[name + "_memo"] = gemm.miss, gemm.winners, gemm.memo
    g, w = gemm.rows_m, f"w{tag}"
    best = f"({w}[0] * (mm{tag} * {gemm.n!r} / {w}[1] * {w}[2]))"  # (bracketed: plateau x best)
    return _m_lines(how, flops_coefs, x, tag) + [
        f"{w} = {name}_win.get((mm{tag} + {g - 1}) // {g})",  # (ceil(M / g) for M >= 1)
        f"e{tag} = {gemm.plateau!r} * {best} * {gemm.k!r} / {gemm.k_total!r} if {w} else "
        f"({name}_memo.get(mm{tag}) or {name}(mm{tag}))"]


def _attention_lines(cm, coefs, how, x: str, tag: str) -> List[str]:
    """c{tag} / m{tag} of the attention core: a decode step over a KV cache (paged attention
    streams the cache) or a prefill / training pass (flash attention at its query length)."""
    hbm, half, kv = cm._hbm, cm._hbm_half, coefs[KV_BYTES]
    q = "1" if how is None or how[1] else x  # a decode step's single query, else the phase's length
    decode = [f"m{tag} = {_stream_expr(f'kv{tag}', half, hbm * cm._decode_eff)} + "
              f"{_stream_expr(f'(b{tag} - kv{tag})', half, hbm * cm._hbm_eff)}",
              f"c{tag} = f{tag} / ({cm._attn_peak!r} * {cm._attn_eff!r})"]
    prefill = [f"c{tag} = f{tag} / ({cm._attn_peak!r} * ({cm._attn_eff!r} * {q} / ({q} + {cm._attn_half!r})))",
               f"m{tag} = {_stream_expr(f'b{tag}', half, hbm * cm._hbm_eff, _positive(coefs[BYTES_PER_GPU]))}"]
    if not any(kv):  # reads no cache
        return prefill
    lines = [f"kv{tag} = {figure_expr(kv, x=x)}"]
    if _positive(kv):
        return lines + decode
    return lines + [f"if kv{tag} > 0:"] + [f"    {line}" for line in decode] + \
        ["else:"] + [f"    {line}" for line in prefill]


def _kernel_lines(cm, op, how, coefs, x: str, tag: str, ns: Dict) -> List[str]:
    """c{tag} / m{tag} (compute and memory seconds) and t{tag} / cb{tag} of `op_kernel_split_s`
    for a kernel whose plan (`calibrated_table.kernel_plan`) is `how`."""
    hbm, half, floor = cm._hbm, cm._hbm_half, repr(cm._floor)
    bytes_positive = _positive(coefs[BYTES_PER_GPU])
    if op.kind == "matmul":
        if how is not None:
            eff_lines, eff = _gemm_lines(cm, how, tag, ns, coefs[FLOPS_PER_GPU], x), f"e{tag}"
        else:  # the probe operator's fixed shape, or none: the plateau
            eff_lines, eff = [], repr(cm._matmul_eff(op.kernel_dims) if op.kernel_dims else cm._plateau)
        lines = eff_lines + [f"c{tag} = f{tag} / ({cm._peak!r} * {eff})",
                             f"m{tag} = {_stream_expr(f'b{tag}', half, hbm * cm._matmul_hbm_eff, bytes_positive)}"]
    elif op.kind == "attention":
        lines = _attention_lines(cm, coefs, how, x, tag)
    else:  # streaming only: no compute time
        m = _stream_expr(f"b{tag}", half, hbm * cm._hbm_eff, bytes_positive)
        if bytes_positive:  # max(0.0, m, floor) is max(m, floor) for m > 0, filed under memory
            ns.setdefault("_memory_bound", set()).add(tag)
            return [f"m{tag} = {m}", f"cb{tag} = False", f"t{tag} = m{tag} if m{tag} >= {floor} else {floor}"]
        lines = [f"c{tag} = 0.0", f"m{tag} = {m}"]
    # max(c, m, floor) as conditionals (no call; the same float: none of them is negative or NaN)
    return lines + [f"cb{tag} = c{tag} >= m{tag}", f"t{tag} = c{tag} if cb{tag} else m{tag}",
                    f"if t{tag} < {floor}: t{tag} = {floor}"]


def _op_key(table: PhaseTable, i: int, x: str) -> tuple:
    """What operator i's time at x depends on: operators with the same key (the q, k and v
    projections, say) get the same floats, so a later one reuses an earlier one's."""
    op = table.ops[i]
    figures = tuple(table.coefs[f][i] for f in (FLOPS_PER_GPU, BYTES_PER_GPU, COMM_BYTES, KV_BYTES))
    if op.kind == "collective":
        return (x, op.kind, op.collective, op.comm_group_size, op.comm_group) + figures
    return (x, op.kind, kernel_plan(table)[i], tuple(op.kernel_dims)) + figures


def _own_lines(cm, table: PhaseTable, i: int, x: str, tag: str, ns: Dict) -> List[str]:
    coefs, op = [c[i] for c in table.coefs], table.ops[i]
    lines = [f"f{tag} = {figure_expr(coefs[FLOPS_PER_GPU], x=x)}", f"b{tag} = {figure_expr(coefs[BYTES_PER_GPU], x=x)}"]
    if op.kind == "collective":  # (a table holds no overlapped collective: phase_table checks it)
        code = cm.collective_code(op.collective, op.comm_group_size, op.comm_group, f"k{tag}")
        if code is None:  # `cm.collective_s` without its memo (the same pure function of the bytes)
            code = f"coll_{len(ns)}(k{tag})"
            ns[f"coll_{len(ns)}"] = cm.collective_timer(op.collective, op.comm_group_size, op.comm_group)
        return lines + [f"k{tag} = {figure_expr(coefs[COMM_BYTES], x=x)}", f"t{tag} = {code}"]
    body = _kernel_lines(cm, op, kernel_plan(table)[i], coefs, x, tag, ns)
    if _positive(coefs[FLOPS_PER_GPU]) or _positive(coefs[BYTES_PER_GPU]):
        return lines + body
    # a kernel that does no work (a skipped block holding weights) has no time
    return lines + [f"if f{tag} <= 0 and b{tag} <= 0:", f"    t{tag} = 0.0", f"    cb{tag} = True", "else:"] + \
        [f"    {line}" for line in body]


def operator_lines(cm, table: PhaseTable, i: int, x: str, tag: str, ns: Dict) -> Tuple[List[str], str]:
    """(lines, the tag holding operator i's f, b, t (and cb) at x): its own tag, or that of an
    earlier operator with the same figures (then no lines)."""
    seen = ns.setdefault("_calibrated_tags", {})
    key = _op_key(table, i, x)
    if key in seen:
        return [], seen[key]
    seen[key] = tag
    return _own_lines(cm, table, i, x, tag, ns), tag


def time_lines(cm, table: PhaseTable, i: int, x: str, tag: str, ns: Dict) -> List[str]:
    """Lines setting f{tag}, b{tag} (FLOPs and bytes per GPU of operator i at (b, x)),
    t{tag} (its calibrated time) and, for a kernel, cb{tag} (True when filed under compute),
    as `calibrated_table_splits` + `op_kernel_split_s` compute them."""
    lines, own = operator_lines(cm, table, i, x, tag, ns)
    if own == tag:
        return lines
    names = ("f", "b", "t") + (() if table.ops[i].kind == "collective" else ("cb",))
    return [f"{v}{tag} = {v}{own}" for v in names]


def _times(n: int, expr: str) -> str:
    """`n * expr`; n = 1 left out (1 * v is v for every number)."""
    return expr if n == 1 else f"{n} * {expr}"


def _once(ns: Dict, lines: List[str], name: str, expr: str) -> str:
    """`name`, set to `expr` by a line added to `lines` the first time it is asked for (an
    expression several operators share: the same float, computed once)."""
    done = ns.setdefault("_once", set())
    if name not in done:
        done.add(name)
        lines.append(f"{name} = {expr}")
    return name


def _flops_lines(table: PhaseTable, g: int, i: int, a: str, z: str, ns: Dict, values: List[str]) -> List[str]:
    """`flo{g}` / `byt{g}` of `add_simpson_splits` (r x n x the mean of the first and last step's
    figures); a figure that is 0.0 at every shape adds +0.0 and is left out (`_zero`). The
    shared terms' lines go to `values`."""
    r, out = table.repeats[i], []
    for field, sum_, v in ((FLOPS_PER_GPU, "flo", "f"), (BYTES_PER_GPU, "byt", "b")):
        if not _zero(table, field, i):
            out.append(f"{sum_}{g} += {_once(ns, values, f'{v}s{r}_{a}_{z}', f'{r} * n * ({v}{a} + {v}{z}) / 2')}")
    return out


def _simpson_lines(table: PhaseTable, i: int, g: int, tags: Tuple[str, str, str], memory_bound: bool,
                   ns: Dict, values: List[str]) -> List[str]:
    """`GroupTimes.add_simpson_splits` of operator i (repeat r, group slot g) from its figures and
    times at the first, middle and last of n steps (variables of tags a, h, z); the lines of
    terms shared with other operators go to `values`. An operator that takes the same time at
    every step (a = h = z) is filed whole under its bound: the other part is n x 0.0 / 6 = +0.0,
    which leaves every sum as it is."""
    op, r, (a, h, z) = table.ops[i], table.repeats[i], tags
    if op.kind == "collective":
        lines = ["k = n * t" + a, f"lat{g} += {_times(r, 'k')}", f"cmm{g} += {_times(r, 'k')}"]
    elif memory_bound or a == h == z:
        w = _times(r, _once(ns, values, f"s{a}{h}{z}", f"n * (t{a} + 4 * t{h} + t{z}) / 6"))
        mem = [f"lat{g} += {w}", f"mem{g} += {w}"]
        lines = mem if memory_bound else [f"if cb{a}:", f"    lat{g} += {w}", f"    cmp{g} += {w}", "else:"] + \
            [f"    {line}" for line in mem]
    else:
        c = {s: f"(t{s} if cb{s} else 0.0)" for s in (a, h, z)}
        m = {s: f"(0.0 if cb{s} else t{s})" for s in (a, h, z)}
        lines = [f"c = n * ({c[a]} + 4 * {c[h]} + {c[z]}) / 6", f"m = n * ({m[a]} + 4 * {m[h]} + {m[z]}) / 6",
                 f"lat{g} += {_times(r, 'c')} + {_times(r, 'm')}", f"cmp{g} += {_times(r, 'c')}",
                 f"mem{g} += {_times(r, 'm')}"]
    return lines + _flops_lines(table, g, i, a, z, ns, values)


def _bound_lines(cm, table: PhaseTable, i: int, own: str, ns: Dict) -> List[str]:
    """rt{own}: operator i's time under the lower bound's roofline (`cm.bound_model`), as
    cost/calibrated_bound.py's `_lines` computes it (a kernel: rc / rm, FLOPs / F and bytes / B,
    the larger; a collective: its ring time), once per tag."""
    done = ns.setdefault("_bound_tags", set())
    if own in done:
        return []
    done.add(own)
    roof, op = cm.bound_model, table.ops[i]
    if op.kind == "collective":
        return _bound_collective_lines(roof, op, own, ns)
    F, B = roof.roofline.flops_per_s, roof.roofline.hbm_bytes_per_s
    if not any(table.coefs[FLOPS_PER_GPU][i]) and _positive(table.coefs[BYTES_PER_GPU][i]):
        # no FLOPs, bytes > 0: max(0.0, bytes / B) is bytes / B (`_decode_bound_lines` reads rt only)
        ns.setdefault("_bound_memory", set()).add(own)
        return [f"rt{own} = b{own} / {B!r}"]
    rc = f"f{own} / {F!r}" if any(table.coefs[FLOPS_PER_GPU][i]) else "0.0"  # (0.0 / F is 0.0)
    return [f"rc{own} = {rc}", f"rm{own} = b{own} / {B!r}", f"rt{own} = rc{own} if rc{own} >= rm{own} else rm{own}"]


def _bound_collective_lines(roof, op, own: str, ns: Dict) -> List[str]:
    """rt{own}: `phase_programs._collective_expr` of the message k{own}, its ring's
    max(ring time, floor) written as a conditional (max(v, floor) is v unless floor > v: the
    same float, without a call)."""
    n = op.comm_group_size
    terms = ring_terms(op.collective, n, roof.link(op.comm_group, n))
    if terms is None:
        return [f"rt{own} = {_collective_expr(roof, op, f'k{own}', ns)}"]
    factor, bytes_per_s, hop_s, floor_s = terms
    return [f"rv{own} = {factor!r} * k{own} / {bytes_per_s!r} + {hop_s!r}",
            f"rt{own} = (rv{own} if rv{own} >= {floor_s!r} else {floor_s!r}) if k{own} > 0 else 0.0"]


def _decode_bound_lines(cm, table: PhaseTable, i: int, g: int, a: str, z: str, ns: Dict,
                        values: List[str]) -> List[str]:
    """The lower bound's steps' sum (`calibrated_bound._decode_function`) of operator i, from the
    figures of the calibrated lines (tags a and z); its times' lines go to `values`."""
    op, r = table.ops[i], table.repeats[i]
    values += _bound_lines(cm, table, i, a, ns)
    if op.kind == "collective":
        return [f"rl{g} += {r} * (n * rt{a})"]
    if x_free(table, i):
        steps = f"rt{a} * n" if a in ns.get("_bound_memory", ()) else f"(rc{a} * n) if rc{a} >= rm{a} else (rm{a} * n)"
        return [f"rl{g} += {r} * {_once(ns, values, f'rs{a}', steps)}"]
    F, B = cm.bound_model.roofline.flops_per_s, cm.bound_model.roofline.hbm_bytes_per_s
    return [f"uc, um = sum_max_affine(f{a} / {F!r}, (f{z} - f{a}) / span / {F!r}, b{a} / {B!r}, "
            f"(b{z} - b{a}) / span / {B!r}, n)", f"rl{g} += {r} * uc + {r} * um"]


def _compile(name: str, args: str, body: List[str], ns: Dict, bound_out):
    """The program, its repeated values computed once and its unread names left out
    (cost/program_reuse.py: the same floats)."""
    fn = compile_function(name, args, reuse_lines(body), {k: v for k, v in ns.items() if not k.startswith("_")})
    fn.bound_out = bound_out  # [the last call's groups and lower-bound totals] (None: no bound)
    return fn


def _product(ns: Dict, values: List[str], n: int, var: str, shared: bool) -> str:
    """n x `var`: the variable itself for n = 1 (1 * v is v), a variable set once (line into
    `values`) for a product several operators use, else the product inline."""
    if n == 1:
        return var
    return _once(ns, values, f"p{n}_{var}", f"{n} * {var}") if shared else f"{n} * {var}"


def _prefill_file_lines(table: PhaseTable, g: int, i: int, own: str, ns: Dict, values: List[str],
                        shared: bool) -> List[str]:
    """`phase_programs._file_lines` of operator i from the variables of tag `own` (`shared`:
    other operators file the same products); a kernel always filed under memory
    (`_memory_bound`) without its test."""
    n, op = table.repeats[i], table.ops[i]
    w = _product(ns, values, n, f"t{own}", True)  # (the time's product is used twice here)
    lines = [f"lat{g} += {w}"]
    if op.kind == "collective":
        lines.append(f"cmm{g} += {w}")
    elif own in ns.get("_memory_bound", ()):
        lines.append(f"mem{g} += {w}")
    else:
        lines += [f"if cb{own}:", f"    cmp{g} += {w}", "else:", f"    mem{g} += {w}"]
    for field, sum_, v in ((FLOPS_PER_GPU, "flo", "f"), (BYTES_PER_GPU, "byt", "b")):
        if not _zero(table, field, i):
            lines.append(f"{sum_}{g} += {_product(ns, values, n, f'{v}{own}', shared)}")
    return lines


def prefill_program(cm, table: PhaseTable):
    """prefill(b, x) -> (groups, model FLOPs, total seconds), as `phase_programs._prefill_program`
    (each operator filed from the tag holding its figures: an earlier twin's), and, under a
    `bound_model`, the lower bound's `roofline_total` (its operators' times added in operator
    order from 0) left in `bound_out[0]` as (groups, total): the groups dict this call returns
    tells a reader which call the total is of (facade_perf `_fused_bounds`)."""
    ns: Dict = {}
    order, slot = _slots(table)
    bound = cm.bound_model is not None
    body = [_init(order), "flops = 0.0" if table.repeats else "flops = 0"]
    bound_terms = []  # the bound's terms, added in operator order in one expression (as += by +=)
    keys = [(n, _op_key(table, i, "x")) for i, n in enumerate(table.repeats)]
    flops_keys = [(n, tuple(table.coefs[FLOPS][i])) for i, n in enumerate(table.repeats)]
    for i, n in enumerate(table.repeats):
        lines, own = operator_lines(cm, table, i, "x", str(i), ns)
        shared = keys.count(keys[i]) > 1  # (twins: their products are computed once)
        body += lines
        body += _prefill_file_lines(table, slot[i], i, own, ns, body, shared)
        if not _zero(table, FLOPS, i):
            expr = _times(n, figure_expr(table.coefs[FLOPS][i]))
            if flops_keys.count(flops_keys[i]) > 1:  # per (repeat, model FLOPs coefficients)
                expr = _once(ns, body, ns.setdefault("_flops_names", {}).setdefault(flops_keys[i], f"fl{i}"), expr)
            body.append(f"flops += {expr}")
        if bound:
            body += _bound_lines(cm, table, i, own, ns)
            # n x rt set once (the same float; an operator whose figures are a twin's reads the twin's)
            bound_terms.append(_product(ns, body, n, f"rt{own}", True))
    body += _group_return(order) + ([f"bound_out[0] = (groups, 0{''.join(' + ' + t for t in bound_terms)})"]
                                    if bound else [])
    ns["bound_out"] = [None] if bound else None
    return _compile("calibrated_prefill_program", "b, x", _tokens_once(body) + ["return groups, flops, total_s"], ns,
                    ns["bound_out"])


# `b*x` where it is the first product of its chain (not `n * b*x`, which is (n*b)*x)
_TOKENS = re.compile(r"(?<![\w*/%.])(?<![*/%] )b\*x(?!\w)")


def _tokens_once(body: List[str]) -> List[str]:
    """The prefill body with the number of tokens b x computed once, `bx = b*x` (a first line), and read
    where a figure's chain of products starts with it: `b*x*C` is (b*x)*C, so `bx*C` is the same float."""
    if not any(_TOKENS.search(line) for line in body):
        return body
    return ["bx = b*x"] + [_TOKENS.sub("bx", line) for line in body]


def _steady_op(cm, table: PhaseTable, i: int, g: int, in_pre: bool, pre: List[str], main: List[str],
               ns: Dict, steps: List[str]) -> None:
    """Operator i, which takes the same time at every step: its figures, times and shared terms
    into `pre` (they depend on b and n only), its group sums too if its whole group is steady
    (`in_pre`), else into `main`; its first- and last-step terms into `steps` (they are added in
    operator order with the growing operators': `pre` before the first of those, else `main`)."""
    r, bound = table.repeats[i], cm.bound_model is not None
    lines, a = operator_lines(cm, table, i, "x0", f"{i}a", ns)
    pre += lines
    sums = _simpson_lines(table, i, g, (a, a, a), a in ns.get("_memory_bound", set()), ns, pre)
    w = _once(ns, pre, f"w{r}_{a}", _times(r, "t" + a))
    steps += [f"first_s += {w}", f"last_s += {w}"]
    if bound:
        sums += _decode_bound_lines(cm, table, i, g, a, a, ns, pre)
        steps.append(f"first_r += {_once(ns, pre, f'wr{r}_{a}', f'{r} * rt{a}')}")
    (pre if in_pre else main).extend(sums)


def _growing_op(cm, table: PhaseTable, i: int, g: int, ns: Dict) -> List[str]:
    """Lines of operator i, whose figures grow with the context: at the first, middle and last step."""
    r, op = table.repeats[i], table.ops[i]
    lines, a = operator_lines(cm, table, i, "x0", f"{i}a", ns)
    more, z = operator_lines(cm, table, i, "x1", f"{i}z", ns)
    lines += more
    h = a
    if op.kind != "collective":  # (a collective is charged n x its first step)
        more, h = operator_lines(cm, table, i, "xh", f"{i}h", ns)
        lines += more
    memory_bound = {a, h, z} <= ns.get("_memory_bound", set())
    lines += [f"first_s += {_times(r, 't' + a)}", f"last_s += {_times(r, 't' + z)}"]
    lines += _simpson_lines(table, i, g, (a, h, z), memory_bound, ns, lines)
    if cm.bound_model is not None:
        values: List[str] = []
        sums = _decode_bound_lines(cm, table, i, g, a, z, ns, values)
        lines += values + [f"first_r += {r} * rt{a}"] + sums
    return lines


def decode_program(cm, table: PhaseTable):
    """decode(b, x0, x1, n) -> (groups of n steps from context x0 to x1, time of the first step,
    time of the last, total seconds), as `inference/timing.py` walks the table for this model:
    `table_splits` at the first, middle and last context, `add_simpson_splits`; under a
    `bound_model`, the lower bound's `roofline_steps` (first step, steps' total) left in
    `bound_out[0]` as (groups, first, total, b, x0, n) (the groups dict it returns and the
    arguments: which call they are of). What depends on b and n only (operators
    whose figures do not grow with the context, and the sums of groups made of them) is
    computed once per (b, n) (cost/calibrated_steady.py); each sum still adds its terms in operator order."""
    ns: Dict = {"sum_max_affine": sum_max_affine}
    order, slot = _slots(table)
    bound = cm.bound_model is not None
    steady = [x_free(table, i, X_FREE_FIELDS + (KV_BYTES,)) for i in range(len(table.ops))]
    steady_groups = [g for g in range(len(order)) if all(steady[i] for i in range(len(slot)) if slot[i] == g)]
    names = [f"{v}{g}" for g in steady_groups for _, v in SUMS] + ([f"rl{g}" for g in steady_groups] if bound else [])
    pre = [" = ".join(names) + " = 0.0"] if names else []
    main = ["xh = x0 - 1 + (1 + n) / 2"] + (["span = max(n - 1, 1)"] if bound else [])
    # the step sums start where the steady operators before the first growing one are added
    first = ["first_s = last_s = 0"] + (["first_r = 0"] if bound else [])
    steps = pre if table.ops and steady[0] else main
    steps += first
    for i in range(len(table.ops)):
        if steady[i]:
            _steady_op(cm, table, i, slot[i], slot[i] in steady_groups, pre, main, ns, steps)
        else:
            main += _growing_op(cm, table, i, slot[i], ns)
            steps = main
    finish_pre, finish = group_lines(order, steady_groups)
    pre += finish_pre
    main += finish
    if bound:
        main.append("bound_out[0] = (groups, first_r, 0" + "".join(f" + rl{g}" for g in range(len(order))) + ", b, x0, n)")
    main.append("return groups, first_s, last_s, total_s")
    ns["bound_out"] = [None] if bound else None
    call, kept = steady_call(pre, main, ns)
    # the sums the steady part does not return start at 0.0
    sums = [f"{v}{g}" for g in range(len(order)) for _, v in SUMS] + ([f"rl{g}" for g in range(len(order))] if bound else [])
    head = [" = ".join(v for v in sums if v not in kept) + " = 0.0"] if set(sums) - set(kept) else []
    return _compile("calibrated_decode_program", "b, x0, x1, n", head + call + main, ns, ns["bound_out"])


def program_builders() -> Dict:
    """`phase_programs.phase_program`'s builders for this model: the roofline's prefill and
    training programs (written with `time_lines`) and the Simpson decode program."""
    return {"prefill": prefill_program, "decode": decode_program, "train_stage": _train_stage_program}
