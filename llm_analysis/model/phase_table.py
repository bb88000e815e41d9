"""The operators of a phase as polynomials of its shape: new shapes without
building Operator objects (speed of sweeps, issue 12).

For a model without routed experts or context parallelism, every figure the hot
path reads from an operator (FLOPs, bytes moved, message size, live activation
bytes) is, at a fixed layer layout and on a stretch of lengths,

    A(x) + batch * B(x),   A and B quadratics in x,

where x is the prompt length of a prefill or training pass (q_len = kv_len = x)
and the context of a decode step (q_len = 1, kv_len = x): weights do not grow,
matmuls, norms, embeddings and collectives grow with the tokens (batch * x), the
attention scores with batch * x^2 (full or causal) and the KV-cache reads with
batch * x. (Routed experts are not: the expected number of distinct experts hit
is a power of the token count.) A sliding window makes the figures piecewise:
one table holds below the window and another above it (`phase_table(..., x)`
picks the one for a length; lengths at the window's edge get none).

A `PhaseTable` holds the six coefficients of each figure of each operator,
fitted once per describer and phase kind from the builders' own operators at six
probe shapes and checked at two more (structure and figures); when a check fails
(a subclass describing something else) there is no table and callers build
operators as before. The Operator objects stay the description (reports,
`operators()`, the calibrated cost model); the table is a compiled view of them.
"""

from __future__ import annotations

from fractions import Fraction
from typing import List, Optional, Tuple

from llm_analysis.model.describer import LayerDescriber
from llm_analysis.model.records import Operator, Phase
from llm_analysis.model.table_code import largest_function, list_function, total_function

# figures of an operator the hot path reads, in this order
FIELDS = ("flops_per_gpu", "bytes_per_gpu", "flops", "comm_bytes_per_gpu", "activation_bytes_per_gpu",
          "kv_cache_bytes_read_per_gpu")  # the last for the calibrated model (cost/calibrated_table.py)
_PROBE_BATCHES = (1, 2)
_PROBE_XS = (16, 17, 18)  # consecutive: exact finite differences
_CHECKS = ((3, 1000), (7, 4099))  # (batch, x) away from the probes
_REL_TOL = 1e-12


def phase_of(name: str, batch: int, x: int) -> Phase:
    return Phase(name, batch, 1, x) if name == "decode" else Phase(name, batch, x, x)


def _structure(op: Operator) -> tuple:
    """What a table takes from its probe operators as fixed: roles and weights."""
    return (op.name, op.kind, op.group, op.collective, op.comm_group, op.comm_group_size,
            op.kv_cache_bytes_read_per_gpu > 0, op.recompute_class, op.expert_role, op.params, op.params_per_gpu,
            op.weight_bytes_per_gpu, op.overlap_flops_per_gpu == op.overlap_bytes_per_gpu == 0)


def _figures(op: Operator) -> Tuple[float, ...]:
    return tuple(getattr(op, f) for f in FIELDS)


def _quadratic(ys: List[Fraction], x0: int) -> Tuple[Fraction, Fraction, Fraction]:
    """(c0, c1, c2) of c0 + c1 x + c2 x^2 through (x0 + i, ys[i]), i = 0, 1, 2."""
    c2 = (ys[2] - 2 * ys[1] + ys[0]) / 2
    c1 = (ys[1] - ys[0]) - c2 * (2 * x0 + 1)
    return ys[0] - c1 * x0 - c2 * x0 * x0, c1, c2


# Compiling a table's functions costs about as much as a hundred evaluations by loop, so
# a table is evaluated by loop until it has served this many figures (a planner probing a
# layout a few times never pays for compiling; a sweep over shapes soon does).
COMPILE_AFTER = 64


class PhaseTable:
    """Repeat counts, roles and figure coefficients of every operator of one phase
    kind (model or pipeline stage), in the order of `LayerDescriber.weighted_ops`."""

    __slots__ = ("repeats", "is_layer", "ops", "coefs", "memo", "uses", "_field_fns", "_total_fns", "_max_fns")

    def __init__(self, repeats: List[int], is_layer: List[bool], ops: List[Operator],
                 coefs: List[List[Tuple[float, ...]]]):
        self.repeats = repeats
        self.is_layer = is_layer  # a transformer layer's operator (not the embedding or head)
        # the operators at a probe shape: roles and weights only (kind, group, collective,
        # recompute class, parameters: the same at every shape, checked by the fit)
        self.ops = ops
        self.coefs = coefs  # coefs[field][op] = (a0, a1, a2, b0, b1, b2)
        self.memo = {}  # what users derive from the roles once (e.g. group keys)
        self.uses = 0  # figures served so far (COMPILE_AFTER)
        self._field_fns = [None] * len(FIELDS)
        self._total_fns = [None] * len(FIELDS)
        self._max_fns = [None] * len(FIELDS)

    def hot(self) -> bool:
        """Count one use; True once the table is worth compiling (COMPILE_AFTER)."""
        self.uses += 1
        return self.uses > COMPILE_AFTER

    def evaluate(self, batch: int, x: int, field: int) -> List[float]:
        """Figure FIELDS[field] of every operator at (batch, x)."""
        fn = self._field_fns[field]
        if fn is None:  # compiled once hot (table_code.py): the same floats as `evaluate_loop`
            if not self.hot():
                return self.evaluate_loop(batch, x, field)
            fn = self._field_fns[field] = list_function(f"table_{FIELDS[field]}", self.coefs[field])
        return fn(batch, x)

    def total(self, batch: int, x: int, field: int) -> float:
        """Figure FIELDS[field] summed over the phase (each operator times its repeat count)."""
        fn = self._total_fns[field]
        if fn is None:  # the same floats as the sum of the loop
            if not self.hot():
                return sum(n * f for n, f in zip(self.repeats, self.evaluate_loop(batch, x, field)))
            fn = self._total_fns[field] = total_function(f"table_total_{FIELDS[field]}", self.repeats,
                                                         self.coefs[field])
        return fn(batch, x)

    def largest(self, batch: int, x: int, field: int) -> float:
        """The largest figure FIELDS[field] of one operator (0.0 for none)."""
        fn = self._max_fns[field]
        if fn is None:  # the same float as the maximum of the loop
            if not self.hot():
                return max(self.evaluate_loop(batch, x, field), default=0.0)
            fn = self._max_fns[field] = largest_function(f"table_max_{FIELDS[field]}", self.coefs[field])
        return fn(batch, x)

    def evaluate_loop(self, batch: int, x: int, field: int) -> List[float]:
        """`evaluate` by a loop over the coefficients (the reference the compiled form is tested against)."""
        return [(a0 + x * (a1 + x * a2)) + batch * (b0 + x * (b1 + x * b2))
                for a0, a1, a2, b0, b1, b2 in self.coefs[field]]


def _fit(d: LayerDescriber, name: str, stage: Optional[int], xs: Tuple[int, ...] = _PROBE_XS,
         checks: Tuple[Tuple[int, int], ...] = _CHECKS) -> Optional[PhaseTable]:
    """The table through probes at lengths `xs` (three consecutive), checked at `checks`."""
    def probe(b, x):
        parts = d.build_model_parts(phase_of(name, b, x), stage)
        weighted = [(p.repeat, op) for p in parts for op in p.ops]
        layers = [p.is_layer for p in parts for _ in p.ops]
        return weighted, [(n, layer, _structure(o)) for (n, o), layer in zip(weighted, layers)]

    probes = {(b, x): probe(b, x) for b in _PROBE_BATCHES for x in xs}
    weighted, shape = probes[(1, xs[0])]
    if any(s != shape for _, s in probes.values()) or not all(s[-1] for _, _, s in shape):
        return None
    coefs: List[List[Tuple[float, ...]]] = [[] for _ in FIELDS]
    for i in range(len(weighted)):
        for f in range(len(FIELDS)):
            per_b = [_quadratic([Fraction(_figures(probes[(b, x)][0][i][1])[f]) for x in xs], xs[0])
                     for b in _PROBE_BATCHES]
            # figure = A + b B, probed at b = 1 and 2
            a = [2 * u - v for u, v in zip(*per_b)]
            b_ = [v - u for u, v in zip(*per_b)]
            coefs[f].append(tuple(float(c) for c in a + b_))
    table = PhaseTable([n for n, _ in weighted], [layer for _, layer, _ in shape], [o for _, o in weighted], coefs)
    for b, x in checks:
        w, s = probe(b, x)
        if s != shape:
            return None
        for f in range(len(FIELDS)):
            for got, (_, o) in zip(table.evaluate_loop(b, x, f), w):
                want = _figures(o)[f]
                if abs(got - want) > _REL_TOL * abs(want):
                    return None
    return table


MAX_LENGTH = 2**62  # beyond any accepted length

# Lengths this close to a sliding window are built operator by operator: there the
# attended and cached lengths (min(x, window), min(x, window - 1)) switch pieces.
_WINDOW_BAND = 4


def _pieces(d: LayerDescriber, name: str, stage: Optional[int]) -> List[Tuple[int, int, Optional[PhaseTable]]]:
    """(first length, last length, table) of each stretch of lengths where the figures are
    one polynomial: all lengths, or with a sliding window those below and above it."""
    w = d.model.sliding_window
    if not w:
        return [(1, MAX_LENGTH, _fit(d, name, stage))]
    pieces = []
    low_hi = w - _WINDOW_BAND
    if low_hi >= _PROBE_XS[-1] + 2:  # below the window every layer attends to all x keys
        pieces.append((1, low_hi, _fit(d, name, stage, checks=((3, min(1000, low_hi)), (7, low_hi)))))
    high_lo = w + _WINDOW_BAND  # above it, sliding layers attend to a window that no longer grows
    pieces.append((high_lo, MAX_LENGTH, _fit(d, name, stage, xs=(high_lo, high_lo + 1, high_lo + 2),
                                             checks=((3, high_lo + 1000), (7, high_lo + 4099)))))
    return pieces




def phase_table(d: LayerDescriber, name: str, stage: Optional[int] = None,
                x: Optional[int] = None) -> Optional[PhaseTable]:
    """The describer's table for phase kind `name` ("prefill", "decode", "train") that holds
    at length x (prompt length, or decode context; None: a table for every length), or
    None where the figures are not polynomials of the shape (see the module docstring)."""
    return _table_at(_fitted_pieces(d, name, stage), x)


def _fitted_pieces(d: LayerDescriber, name: str, stage: Optional[int]) -> List[Tuple[int, int, Optional[PhaseTable]]]:
    return d.memoized(("phase_tables", name, stage), lambda: _pieces(d, name, stage) if _has_table(d) else [])


def _table_at(pieces: List[Tuple[int, int, Optional[PhaseTable]]], x: Optional[int]) -> Optional[PhaseTable]:
    if x is None:
        return pieces[0][2] if len(pieces) == 1 else None
    for lo, hi, table in pieces:
        if lo <= x <= hi:
            return table
    return None


def _has_table(d: LayerDescriber) -> bool:
    m = d.model
    return type(d) is LayerDescriber and not (m.is_moe or d.par.cp_size > 1)


# Fitting a table builds its operators at eight probe shapes (~10 ms): the analysis path
# asks for tables through `used_phase_table`, which builds operators per call until a
# phase kind has been asked for this often (a planner or sweep probing an analysis a
# few times never pays for fitting; a long sweep over shapes soon does).
FIT_AFTER = 64


def used_phase_table(d: LayerDescriber, name: str, stage: Optional[int] = None,
                     x: Optional[int] = None) -> Optional[PhaseTable]:
    """`phase_table`, once the phase kind has been asked for FIT_AFTER times (None before)."""
    # per (name, stage): the number of uses so far, or once past FIT_AFTER the fitted pieces
    # (the hot path of every new shape: one dict probe, no count kept after that)
    uses = d.memoized(("phase_table_uses",), dict)
    key = (name, stage)
    state = uses.get(key, 0)
    if type(state) is list:
        return _table_at(state, x)
    if state + 1 <= FIT_AFTER:
        uses[key] = state + 1
        return None
    pieces = uses[key] = _fitted_pieces(d, name, stage)
    return _table_at(pieces, x)


def fitted_phase_table(d: LayerDescriber, name: str, stage: Optional[int] = None,
                       x: Optional[int] = None) -> Optional[PhaseTable]:
    """What `used_phase_table` returns once the phase kind is past FIT_AFTER, else None,
    without counting a use (for a caller that falls back on a view that counts it)."""
    pieces = fitted_pieces(d, name, stage)
    return None if pieces is None else _table_at(pieces, x)


def fitted_pieces(d: LayerDescriber, name: str,
                  stage: Optional[int] = None) -> Optional[List[Tuple[int, int, Optional[PhaseTable]]]]:
    """The (first length, last length, table) pieces of a phase kind once past FIT_AFTER (an empty
    list where it has none), else None; no use counted."""
    state = d.memoized(("phase_table_uses",), dict).get((name, stage))
    return state if type(state) is list else None
