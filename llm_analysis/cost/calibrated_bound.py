"""The roofline lower bound reported beside a calibrated inference() (`<key>_lower_bound`),
from generated code: its phase total is the other half of a calibrated call's cost.

`inference/lower_bound.py` needs, per call, a prefill's roofline time summed operator by
operator (`timing.table_time_s(table_splits(...))`) and the decode steps' first-step and
total time (`GroupTimes.add_steps_splits`). The decode figures are those of the roofline's
generated decode program (phase_programs.py: the same operations in the same order); the
prefill sum here is one generated function per (roofline, table) in operator order, with
the roofline's own kernel and collective lines (`phase_programs._time_lines`), so both
give the floats the loops give. Until a table is worth compiling (`PhaseTable.hot`) the
loops run.
"""

from __future__ import annotations

from typing import Dict

from ..operators.phase_table import PhaseTable
from ..operators.table_code import compile_function
from ..phase_programs import _time_lines, phase_program
from ..timing import GroupTimes, table_splits, table_time_s


def _total_function(roof, table: PhaseTable):
    """total(b, x) -> sum over operators of repeat x roofline time, added in operator order
    from 0 as `table_time_s` adds it."""
    ns: Dict = {}
    body = []
    for i in range(len(table.ops)):
        body += _time_lines(roof, table, i, "x", str(i), ns)
    body.append("return 0" + "".join(f" + {n} * t{i}" for i, n in enumerate(table.repeats)))
    return compile_function("roofline_total", "b, x", body, ns)


def roofline_phase_s(roof, table: PhaseTable, batch: int, x: int) -> float:
    """`table_time_s(table_splits(roof, table, batch, x))` (generated once the table is hot)."""
    functions = roof.__dict__.setdefault("_total_functions", {})
    entry = functions.get(id(table))
    if entry is None or entry[0] is not table:  # the table is kept with its function: its id stays its own
        if not table.hot():
            return table_time_s(table_splits(roof, table, batch, x))
        entry = functions[id(table)] = (table, _total_function(roof, table))
    return entry[1](batch, x)


def roofline_decode_s(roof, table: PhaseTable, batch: int, x0: int, steps: int):
    """(first step, sum over `steps` >= 1 steps from context x0) on the roofline, as
    `table_splits` + `GroupTimes.add_steps_splits` give them (one step: both the first)."""
    program = phase_program(roof, table, "decode")
    if program is not None:
        _, first_s, _, total_s = program(batch, x0, x0 + steps - 1, steps)
        return first_s, total_s
    first = table_splits(roof, table, batch, x0)
    last = first if steps == 1 else table_splits(roof, table, batch, x0 + steps - 1)
    return table_time_s(first), GroupTimes().add_steps_splits(roof.roofline, first, last, steps).total_s
