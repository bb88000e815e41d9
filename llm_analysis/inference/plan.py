"""What every new shape of a sweep's inference calls runs, looked up once per phase.

Past their tiers (operators/phase_table.py: FIT_AFTER, COMPILE_AFTER) the prefill and decode
phases of a describer have fitted tables and generated programs that every later shape runs:
the roofline's (phase_programs.py) or the calibrated model's (cost/calibrated_programs.py,
which also leave the call's lower bound in their `bound_out`: facade_perf reads it here).
The general path finds them anew for each phase of each call (use counts, length pieces,
program caches: a dozen calls); here they are kept together once all exist, for the plain
case: one table for every length (no sliding window, whose lengths pick a piece) and, for the
programs, one pipeline stage (no hand-off to add). Elsewhere, or before the tiers, callers
take the general path; both compute the same floats (the programs are the tables' own
arithmetic)."""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

from llm_analysis.cost.model import RooflineCostModel
from llm_analysis.model.phase_table import PhaseTable, fitted_pieces
from llm_analysis.cost.phase_programs import compiled_program

_NONE = ()  # kept for a describer whose phase kinds are fitted without one table for every length


class PhaseTables(NamedTuple):
    prefill: PhaseTable
    decode: PhaseTable


class InferencePlan(NamedTuple):
    cost_model: object  # the cost model the programs were generated for (compared by identity)
    tables: PhaseTables
    prefill: Callable  # (b, x) -> (groups, model FLOPs, total seconds): phase_programs._prefill_program
    decode: Callable  # (b, x0, x1, n) -> (groups, first step s, last step s, total s): _decode_program
    # the programs' `bound_out` lists ([lower-bound totals of their last call]: cost/calibrated_programs.py)
    # under a model with a bound model; None on the roofline
    prefill_bound: Optional[list]
    decode_bound: Optional[list]


def phase_tables(d) -> Optional[PhaseTables]:
    """The describer's prefill and decode tables once both kinds are past FIT_AFTER and each has one
    table for every length; None otherwise. Kept once both are fitted (fitted tables never change)."""
    tables = d.kept("inference_phase_tables")
    if tables is None:
        pieces = [fitted_pieces(d, name) for name in ("prefill", "decode")]
        if None in pieces:  # a kind not fitted yet: ask again next call
            return None
        single = all(len(p) == 1 and p[0][2] is not None for p in pieces)
        tables = d.keep("inference_phase_tables", PhaseTables(pieces[0][0][2], pieces[1][0][2]) if single else _NONE)
    return tables or None


def _timed_from(cm, tables: PhaseTables) -> bool:
    """Whether the general path times both tables under `cm` (`timing.roofline_table`): the roofline
    always, another model where it accepts them (the calibrated one: every kernel's shape known)."""
    if type(cm) is RooflineCostModel:
        return True
    accepts = getattr(cm, "accepts_table", None)
    return accepts is not None and accepts(tables.prefill) and accepts(tables.decode)


def inference_plan(analysis, d) -> Optional[InferencePlan]:
    """The tables and the programs of the analysis' cost model, once compiled, for one pipeline
    stage (None otherwise: the general path). One plan kept per describer, for the cost model
    that last asked (an analysis times with one)."""
    cm = analysis.cost_model
    plan = d.kept("inference_plan")
    if plan is not None and plan.cost_model is cm:
        return plan
    if analysis.parallelism_config.pp_size > 1:
        return None
    tables = phase_tables(d)
    if tables is None or not _timed_from(cm, tables):
        return None
    # (a model without programs of its own has none compiled: phase_programs.phase_program)
    prefill, decode = compiled_program(cm, tables.prefill, "prefill"), compiled_program(cm, tables.decode, "decode")
    if prefill is None or decode is None:  # not compiled yet: the general path compiles them when hot
        return None
    return d.keep("inference_plan", InferencePlan(cm, tables, prefill, decode, getattr(prefill, "bound_out", None),
                                                  getattr(decode, "bound_out", None)))
