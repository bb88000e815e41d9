"""The calibrated cost model on a phase table as generated straight-line code
(speed of new shapes under perf_model="calibrated", issue 10).

`calibrated_table.calibrated_table_splits` walks a table operator by operator and
calls `CalibratedCostModel.op_kernel_split_s` for each. Here the same arithmetic is
written out once per (table, cost model), as `phase_programs.py` does for the
roofline: per operator, its figures (coefficients as constants), its kernel shape
(M from the FLOPs, N and K constants), the GEMM efficiency of that shape (a
`gemm.GemmShape` per weight shape, memoised by M: decode steps and training
passes at the same tokens find it there), the streaming and attention rates as
constants. The operations and their order are those of `op_kernel_split_s` and of
the loops that file the splits (`GroupTimes.add_splits`, `add_simpson_splits`,
training/stage.py), so the programs return the same floats as the loops;
tests/test_calibrated_programs.py checks them against the operators.

`time_lines` gives an operator's lines (the hook `phase_programs._time_lines` calls
for a cost model that is not the roofline), so the roofline's prefill and training
programs serve this model too; decode differs (Simpson's rule over the steps instead
of the roofline's closed form): `decode_program`.
"""

from __future__ import annotations

from typing import Dict, List

from ..operators.phase_table import FIELDS, PhaseTable
from ..operators.table_code import compile_function, figure_expr
from ..phase_programs import _group_return, _init, _prefill_program, _slots, _train_stage_program
from .calibrated_table import kernel_plan

FLOPS_PER_GPU, BYTES_PER_GPU, COMM_BYTES, KV_BYTES = (FIELDS.index(f) for f in (
    "flops_per_gpu", "bytes_per_gpu", "comm_bytes_per_gpu", "kv_cache_bytes_read_per_gpu"))


def _stream_expr(nbytes: str, half: float, rate: float) -> str:
    """`CalibratedCostModel._stream_s(nbytes, eff)` with rate = HBM spec x eff."""
    return f"(({nbytes} + {half!r}) / {rate!r} if {nbytes} > 0 else 0.0)"


def _gemm_lines(cm, how, tag: str, ns: Dict) -> List[str]:
    """e{tag}: the GEMM efficiency of a matmul whose plan is ("m", N, K, FLOPs per M)."""
    gemm = cm.gemm_shape(how[1], how[2])
    name = f"gemm_{len(ns)}"
    ns[name], ns[name + "_memo"] = gemm, gemm.memo
    return [f"mm{tag} = round(f{tag} / {how[3]!r})",
            f"if mm{tag} < 1: mm{tag} = 1",
            f"e{tag} = {name}_memo.get(mm{tag})",
            f"if e{tag} is None: e{tag} = {name}(mm{tag})"]


def _kernel_lines(cm, op, how, kv: str, x: str, tag: str, ns: Dict) -> List[str]:
    """c{tag} / m{tag}: compute and memory seconds of `op_kernel_split_s` for a kernel whose
    plan (`calibrated_table.kernel_plan`) is `how` and KV-cache read is the expression `kv`."""
    hbm, half = cm._hbm, cm._hbm_half
    if op.kind == "matmul":
        if how is not None:
            eff_lines, eff = _gemm_lines(cm, how, tag, ns), f"e{tag}"
        else:  # the probe operator's fixed shape, or none: the plateau
            eff_lines, eff = [], repr(cm._matmul_eff(op.kernel_dims) if op.kernel_dims else cm._plateau)
        return eff_lines + [f"c{tag} = f{tag} / ({cm._peak!r} * {eff})",
                            f"m{tag} = {_stream_expr(f'b{tag}', half, hbm * cm._matmul_hbm_eff)}"]
    if op.kind == "attention":
        q = "1" if how is None or how[1] else x  # a decode step's single query, else the phase's length
        return [f"kv{tag} = {kv}",
                f"if kv{tag} > 0:",  # decode over a KV cache: paged attention streams the cache
                f"    m{tag} = {_stream_expr(f'kv{tag}', half, hbm * cm._decode_eff)} + "
                f"{_stream_expr(f'(b{tag} - kv{tag})', half, hbm * cm._hbm_eff)}",
                f"    c{tag} = f{tag} / ({cm._attn_peak!r} * {cm._attn_eff!r})",
                "else:",
                f"    c{tag} = f{tag} / ({cm._attn_peak!r} * ({cm._attn_eff!r} * {q} / ({q} + {cm._attn_half!r})))",
                f"    m{tag} = {_stream_expr(f'b{tag}', half, hbm * cm._hbm_eff)}"]
    return [f"c{tag} = 0.0", f"m{tag} = {_stream_expr(f'b{tag}', half, hbm * cm._hbm_eff)}"]


def time_lines(cm, table: PhaseTable, i: int, x: str, tag: str, ns: Dict) -> List[str]:
    """Lines setting f{tag}, b{tag} (FLOPs and bytes per GPU of operator i at (b, x)),
    t{tag} (its calibrated time) and, for a kernel, cb{tag} (True when filed under compute),
    as `calibrated_table_splits` + `op_kernel_split_s` compute them."""
    coefs, op = table.coefs, table.ops[i]
    lines = [f"f{tag} = {figure_expr(coefs[FLOPS_PER_GPU][i], x=x)}",
             f"b{tag} = {figure_expr(coefs[BYTES_PER_GPU][i], x=x)}"]
    if op.kind == "collective":  # (a table holds no overlapped collective: phase_table checks it)
        name = f"coll_{len(ns)}"  # `cm.collective_s` without its memo (the same pure function of the bytes)
        ns[name] = cm.collective_timer(op.collective, op.comm_group_size, op.comm_group)
        return lines + [f"t{tag} = {name}({figure_expr(coefs[COMM_BYTES][i], x=x)})"]
    body = _kernel_lines(cm, op, kernel_plan(table)[i], figure_expr(coefs[KV_BYTES][i], x=x), x, tag, ns)
    # a kernel that does no work (a skipped block holding weights) has no time
    return lines + [f"if f{tag} <= 0 and b{tag} <= 0:", f"    t{tag} = 0.0", f"    cb{tag} = True", "else:"] + \
        [f"    {line}" for line in body] + \
        [f"    cb{tag} = c{tag} >= m{tag}", f"    t{tag} = max(c{tag}, m{tag}, {cm._floor!r})"]


def _x_free(table: PhaseTable, i: int) -> bool:
    """Operator i's figures do not depend on x (in decode: the context), so neither does its time."""
    return all(c[1] == c[2] == c[4] == c[5] == 0 for f in (FLOPS_PER_GPU, BYTES_PER_GPU, COMM_BYTES, KV_BYTES)
               for c in (table.coefs[f][i],))


def _simpson_lines(op, g: int, r: int, i: int) -> List[str]:
    """`GroupTimes.add_simpson_splits` of operator i (repeat r, group slot g) from its times at
    the first (a), middle (h) and last (z) step of n."""
    if op.kind == "collective":
        lines = [f"k = n * t{i}a", f"lat{g} += {r} * k", f"cmm{g} += {r} * k"]
    else:
        parts = {s: (f"(t{i}{s} if cb{i}{s} else 0.0)", f"(0.0 if cb{i}{s} else t{i}{s})") for s in "ahz"}
        lines = [f"c = n * ({parts['a'][0]} + 4 * {parts['h'][0]} + {parts['z'][0]}) / 6",
                 f"m = n * ({parts['a'][1]} + 4 * {parts['h'][1]} + {parts['z'][1]}) / 6",
                 f"lat{g} += {r} * c + {r} * m", f"cmp{g} += {r} * c", f"mem{g} += {r} * m"]
    return lines + [f"flo{g} += {r} * n * (f{i}a + f{i}z) / 2", f"byt{g} += {r} * n * (b{i}a + b{i}z) / 2"]


def _alias_lines(i: int, kernel: bool, tags: str) -> List[str]:
    """The figures and time of step a under the tags of the other steps (an x-free operator)."""
    names = ("f", "b", "t") + (("cb",) if kernel else ())
    return [f"{v}{i}{s} = {v}{i}a" for s in tags for v in names]


def decode_program(cm, table: PhaseTable):
    """decode(b, x0, x1, n) -> (groups of n steps from context x0 to x1, time of the first step,
    time of the last, total seconds), as `inference/timing.py` walks the table for this model:
    `table_splits` at the first, middle and last context, `add_simpson_splits`."""
    ns: Dict = {}
    order, slot = _slots(table)
    body = [_init(order), "first_s = last_s = 0", "xh = x0 - 1 + (1 + n) / 2"]
    for i, (r, op) in enumerate(zip(table.repeats, table.ops)):
        kernel = op.kind != "collective"
        body += time_lines(cm, table, i, "x0", f"{i}a", ns)
        if _x_free(table, i):
            body += _alias_lines(i, kernel, "hz" if kernel else "z")
        else:
            body += time_lines(cm, table, i, "x1", f"{i}z", ns)
            body += time_lines(cm, table, i, "xh", f"{i}h", ns) if kernel else []
        body += [f"first_s += {r} * t{i}a", f"last_s += {r} * t{i}z"] + _simpson_lines(op, slot[i], r, i)
    body += _group_return(order) + ["return groups, first_s, last_s, total_s"]
    return compile_function("calibrated_decode_program", "b, x0, x1, n", body, ns)


def program_builders() -> Dict:
    """`phase_programs.phase_program`'s builders for this model: the roofline's prefill and
    training programs (written with `time_lines`) and the Simpson decode program."""
    return {"prefill": _prefill_program, "decode": decode_program, "train_stage": _train_stage_program}
