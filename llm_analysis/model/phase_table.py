"""The operators of a phase as polynomials of its shape: new shapes without
building Operator objects (speed of sweeps, issue 12).

For a model without routed experts or context parallelism, every figure the hot
path reads from an operator (FLOPs, bytes moved, message size, live activation
bytes, KV-cache bytes read) is, at a fixed layer layout and on a stretch of
lengths,

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
fitted from the builders' own operators at six probe shapes and checked at two
more (structure and figures) the first time a describer is asked for a phase
kind (a stretch of lengths); when a check fails (a subclass describing something
else) there is no table and callers build operators. The Operator objects stay
the description (reports, `operators()`); the table is a view of them that gives
every figure of every operator at a new shape in one product.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

from llm_analysis.model.describer import LayerDescriber
from llm_analysis.model.records import Operator, Phase

# figures of an operator the hot path reads, in this order
FIELDS = ("flops_per_gpu", "bytes_per_gpu", "flops", "comm_bytes_per_gpu", "activation_bytes_per_gpu",
          "kv_cache_bytes_read_per_gpu",  # for the calibrated model (cost/calibrated_table.py)
          "masked_flops")  # counted but not executed (records.Operator): the executed-FLOPs figures
FLOPS_PER_GPU, BYTES_PER_GPU, FLOPS, COMM_BYTES, ACTIVATION_BYTES, KV_CACHE_BYTES, MASKED_FLOPS = range(len(FIELDS))
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


Exact = Union[int, Fraction]


def _exact(value: float) -> Exact:
    """A figure as an exact number: an int where it is whole (most are: counts of FLOPs and
    bytes), else the float's own fraction; arithmetic on ints is exact and fast."""
    return int(value) if float(value).is_integer() else Fraction(value)


def _doubled_quadratic(ys: Sequence[Exact], x0: int) -> Tuple[Exact, Exact, Exact]:
    """(2 c0, 2 c1, 2 c2) of c0 + c1 x + c2 x^2 through (x0 + i, ys[i]), i = 0, 1, 2 (doubled,
    so that whole figures keep whole coefficients)."""
    c2 = ys[2] - 2 * ys[1] + ys[0]
    c1 = 2 * (ys[1] - ys[0]) - c2 * (2 * x0 + 1)
    return 2 * ys[0] - c1 * x0 - c2 * x0 * x0, c1, c2


def _half(doubled: Exact) -> float:
    """doubled / 2, rounded once to a float (int / int is correctly rounded in Python)."""
    return doubled / 2 if isinstance(doubled, int) else float(doubled / 2)


def _coefficients(per_batch: Sequence[Sequence[float]], x0: int) -> Tuple[float, ...]:
    """(a0, a1, a2, b0, b1, b2) of a figure A(x) + b B(x) probed at b = 1 and 2 (rows of
    `per_batch`) and x = x0, x0 + 1, x0 + 2, exactly, then rounded."""
    if not any(any(row) for row in per_batch):
        return (0.0,) * 6
    u, v = (_doubled_quadratic([_exact(y) for y in row], x0) for row in per_batch)
    # figure = A + b B, probed at b = 1 (u) and 2 (v): A = 2u - v, B = v - u
    return tuple(_half(2 * p - q) for p, q in zip(u, v)) + tuple(_half(q - p) for p, q in zip(u, v))


_EXACT = 2.0 ** 52  # whole numbers below this are exact floats, and so are their sums and differences


def _whole_coefficients(figures: np.ndarray, x0: int) -> Optional[List[List[Tuple[float, ...]]]]:
    """`_coefficients` of every figure at once ([batch 1 or 2, x0 + i, field, operator]) where every
    figure and every intermediate value is a whole number below 2^52, which floats hold and add
    exactly (so the coefficients are the exact ones, halved exactly); None otherwise."""
    if not (np.all(figures == np.rint(figures)) and np.abs(figures).max(initial=0.0) < _EXACT / 64):
        return None
    y0, y1, y2 = figures[:, 0], figures[:, 1], figures[:, 2]
    c2 = y2 - 2 * y1 + y0  # the doubled quadratic's coefficients, as _doubled_quadratic
    c1 = 2 * (y1 - y0) - c2 * (2 * x0 + 1)
    c0 = 2 * y0 - c1 * x0 - c2 * x0 * x0
    doubled = np.array((c0, c1, c2))  # [coefficient, batch, field, operator]
    u, v = doubled[:, 0], doubled[:, 1]  # probed at batch 1 and 2: A = 2u - v, B = v - u
    halves = np.concatenate((2 * u - v, v - u)) / 2  # [a0, a1, a2, b0, b1, b2][field, operator]
    largest = max(np.abs(a).max(initial=0.0) for a in (c2 * (2 * x0 + 1), c1 * x0, c2 * x0 * x0, doubled, 2 * halves))
    if largest >= _EXACT:  # (a product or sum past 2^52 may have been rounded)
        return None
    return [list(map(tuple, per_field.T.tolist())) for per_field in halves.transpose(1, 0, 2)]


class PhaseTable:
    """Repeat counts, roles and figure coefficients of every operator of one phase
    kind (model or pipeline stage), in the order of `LayerDescriber.weighted_ops`."""

    __slots__ = ("repeats", "repeat_array", "kernel_repeats", "is_layer", "ops", "is_collective", "collectives",
                 "collective_repeats",
                 "collective_counts", "collectives_work", "growing", "coefs", "memo", "_by_term", "_by_field",
                 "_totals", "_last_figures")

    def __init__(self, repeats: List[int], is_layer: List[bool], ops: List[Operator],
                 coefs: List[List[Tuple[float, ...]]]):
        n = len(ops)
        self.repeats = repeats
        self.repeat_array = np.array(repeats, dtype=float)
        self.is_layer = is_layer  # a transformer layer's operator (not the embedding or head)
        # the operators at a probe shape: roles and weights only (kind, group, collective,
        # recompute class, parameters: the same at every shape, checked by the fit)
        self.ops = ops
        self.is_collective = np.array([op.kind == "collective" for op in ops], dtype=bool)
        # the repeat counts of the kernels (a collective runs no kernel: 0), for sums over kernels alone
        self.kernel_repeats = self.repeat_array * ~self.is_collective
        # the distinct collectives (kind, group and message size at every shape): (index of the first,
        # operator); the same message over the same group takes the same time (the attention and
        # MLP reductions of a layer, say), so each is timed once
        distinct, spread = {}, []
        for i, op in enumerate(ops):
            if op.kind == "collective":
                key = (op.collective, op.comm_group_size, op.comm_group, coefs[COMM_BYTES][i])
                spread.append((distinct.setdefault(key, (len(distinct), i, op))[0], i))
        self.collectives = [(i, op) for _, i, op in distinct.values()]
        # ... and every collective operator's repeat count, per distinct one
        self.collective_repeats = [[] for _ in self.collectives]
        for d, i in spread:
            self.collective_repeats[d].append((i, repeats[i]))
        self.collective_counts = [sum(r for _, r in per) for per in self.collective_repeats]  # in all, per distinct one
        # whether a collective carries FLOPs or bytes of its own (summed with its group's, never timed)
        self.collectives_work = any(any(coefs[f][i]) for _, i in spread for f in (FLOPS_PER_GPU, BYTES_PER_GPU))
        # the kernels whose FLOPs or bytes grow with x (in decode: with the context; the others are
        # the same at every step)
        self.growing = [i for i, op in enumerate(ops) if op.kind != "collective" and any(
            c[1] or c[2] or c[4] or c[5] for c in (coefs[FLOPS_PER_GPU][i], coefs[BYTES_PER_GPU][i]))]
        self.coefs = coefs  # coefs[field][op] = (a0, a1, a2, b0, b1, b2)
        self.memo = {}  # what users derive from the roles once per table (group keys, kernel shapes)
        # the coefficient of each term (1, x, x^2, b, b x, b x^2) of every (field, operator), so that
        # every figure of every operator at one shape is one product (`figures`)
        self._by_term = np.array([[c[k] for per_op in coefs for c in per_op] for k in range(6)],
                                 dtype=float).reshape(6, len(FIELDS) * n)
        self._by_field = self._by_term.reshape(6, len(FIELDS), n)  # [term, field, operator]
        # ... and of each field summed over the phase (repeat counts applied): `total`
        self._totals = self._by_field @ self.repeat_array
        self._last_figures = (None, None, None)  # (batch, x, figure_array): the shape last evaluated

    @staticmethod
    def _terms(batch: float, x: float) -> Tuple[float, ...]:
        b, x = float(batch), float(x)  # (floats: an int length squared may not fit numpy's integers)
        bx = b * x
        return 1.0, x, x * x, b, bx, bx * x

    def figure_array(self, batch: int, x: float) -> np.ndarray:
        """Every figure of every operator at (batch, x): array[field, operator], fields as FIELDS (read
        only: the shape last evaluated is kept, a calibrated call's lower bound times the same shapes)."""
        last_batch, last_x, figures = self._last_figures
        if batch != last_batch or x != last_x:
            figures = np.dot(self._terms(batch, x), self._by_term).reshape(len(FIELDS), len(self.ops))
            figures.flags.writeable = False
            self._last_figures = (batch, x, figures)
        return figures

    def figures(self, batch: int, x: float) -> List[List[float]]:
        """`figure_array` as lists: figures[field][operator]."""
        return self.figure_array(batch, x).tolist()

    def operator_figures(self, i: int, batch: int, x: float) -> List[float]:
        """Every figure of operator i at (batch, x) [field] (for a few operators: no array)."""
        return [(a0 + x * (a1 + x * a2)) + batch * (b0 + x * (b1 + x * b2))
                for a0, a1, a2, b0, b1, b2 in (per_op[i] for per_op in self.coefs)]

    def evaluate(self, batch: int, x: float, field: int) -> List[float]:
        """Figure FIELDS[field] of every operator at (batch, x)."""
        return np.dot(self._terms(batch, x), self._by_field[:, field]).tolist()

    def total(self, batch: int, x: float, field: int) -> float:
        """Figure FIELDS[field] summed over the phase (each operator times its repeat count)."""
        return float(np.dot(self._terms(batch, x), self._totals[:, field]))

    def largest(self, batch: int, x: float, field: int) -> float:
        """The largest figure FIELDS[field] of one operator (0.0 for none)."""
        return max(self.evaluate(batch, x, field), default=0.0)


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
    # figures[batch, x, field, operator] of the probes
    figures = np.array([[[[getattr(o, f) for _, o in probes[(b, x)][0]] for f in FIELDS] for x in xs]
                        for b in _PROBE_BATCHES], dtype=float).reshape(len(_PROBE_BATCHES), len(xs), len(FIELDS),
                                                                       len(weighted))
    coefs = _whole_coefficients(figures, xs[0])
    if coefs is None:  # a figure not a whole number (or too large for exact float sums): exact fractions
        coefs = [[_coefficients(figures[:, :, f, i].tolist(), xs[0]) for i in range(len(weighted))]
                 for f in range(len(FIELDS))]
    table = PhaseTable([n for n, _ in weighted], [layer for _, layer, _ in shape], [o for _, o in weighted], coefs)
    for b, x in checks:
        w, s = probe(b, x)
        if s != shape:
            return None
        got = table.figures(b, x)
        for i, (_, o) in enumerate(w):
            for f, want in enumerate(_figures(o)):
                if abs(got[f][i] - want) > _REL_TOL * abs(want):
                    return None
    return table


MAX_LENGTH = 2**62  # beyond any accepted length

# Lengths this close to a sliding window are built operator by operator: there the
# attended and cached lengths (min(x, window), min(x, window - 1)) switch pieces.
_WINDOW_BAND = 4


class _Stretch:
    """Lengths lo..hi over which a phase kind's figures are one polynomial; its table is
    fitted the first time a length in it is asked for (None where the fit fails)."""

    __slots__ = ("lo", "hi", "_fit", "_table")

    def __init__(self, lo: int, hi: int, fit: Callable[[], Optional[PhaseTable]]):
        self.lo, self.hi, self._fit, self._table = lo, hi, fit, None

    @property
    def table(self) -> Optional[PhaseTable]:
        if self._fit is not None:
            self._table, self._fit = self._fit(), None
        return self._table


def _stretches(d: LayerDescriber, name: str, stage: Optional[int]) -> List[_Stretch]:
    """Each stretch of lengths where the figures are one polynomial: all lengths, or with a
    sliding window those below and above it."""
    w = d.model.sliding_window
    if not w:
        return [_Stretch(1, MAX_LENGTH, lambda: _fit(d, name, stage))]
    stretches = []
    low_hi = w - _WINDOW_BAND
    if low_hi >= _PROBE_XS[-1] + 2:  # below the window every layer attends to all x keys
        stretches.append(_Stretch(1, low_hi, lambda: _fit(d, name, stage,
                                                          checks=((3, min(1000, low_hi)), (7, low_hi)))))
    high_lo = w + _WINDOW_BAND  # above it, sliding layers attend to a window that no longer grows
    stretches.append(_Stretch(high_lo, MAX_LENGTH, lambda: _fit(
        d, name, stage, xs=(high_lo, high_lo + 1, high_lo + 2), checks=((3, high_lo + 1000), (7, high_lo + 4099)))))
    return stretches


def _same_stage(d: LayerDescriber, stage: Optional[int]) -> Optional[int]:
    """The first pipeline stage with the same operators as `stage`: a stage's operators depend only on
    its layer kinds and counts and on whether it holds the embedding (first) or the head (last)
    (`LayerDescriber.build_model_parts`; tables are fitted for LayerDescriber itself only)."""
    if stage is None:
        return None
    last = len(d.stage_groups) - 1
    signature = lambda s: (s == 0, s == last, tuple(d.stage_groups[s].items()))  # noqa: E731
    mine = signature(stage)
    return next(s for s in range(stage + 1) if signature(s) == mine)


def _has_table(d: LayerDescriber) -> bool:
    m = d.model
    # chunked local attention (sliding_window_chunked): the executed keys restart at every chunk, so
    # the figures are not one polynomial above the window; such a model is described per length
    return type(d) is LayerDescriber and not (m.is_moe or d.par.cp_size > 1 or m.sliding_window_chunked)


def phase_table(d: LayerDescriber, name: str, stage: Optional[int] = None,
                x: Optional[int] = None) -> Optional[PhaseTable]:
    """The describer's table for phase kind `name` ("prefill", "decode", "train") that holds
    at length x (prompt length, or decode context; None: a table for every length), or
    None where the figures are not polynomials of the shape (see the module docstring).
    Kept per describer and phase kind (its configuration never changes)."""
    key = ("phase_tables", name, stage)
    stretches = d.kept(key)
    if stretches is None:
        same = _same_stage(d, stage)
        if same != stage:  # a pipeline stage with the operators of an earlier one: its tables
            phase_table(d, name, same)
            stretches = d.keep(key, d.kept(("phase_tables", name, same)))
        else:
            stretches = d.keep(key, _stretches(d, name, stage) if _has_table(d) else [])
    if x is None:
        return stretches[0].table if len(stretches) == 1 else None
    for stretch in stretches:
        if stretch.lo <= x <= stretch.hi:
            return stretch.table
    return None
