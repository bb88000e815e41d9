"""Straight-line Python for the phase tables (speed of new shapes, issue 12).

A phase table (phase_table.py) holds, per operator and figure, six coefficients
of A(x) + batch * B(x) with A and B quadratics. Looping over operators and
unpacking coefficients costs more than the arithmetic itself, so each table
figure (and each timing program built on it, `phase_programs.py`) is turned
into one function whose body evaluates every operator with its coefficients
written in as constants, the way `collections.namedtuple` and `dataclasses`
generate their methods.

The expressions keep the evaluation order of `PhaseTable.evaluate`
((a0 + x (a1 + x a2)) + batch (b0 + x (b1 + x b2))) and drop only terms whose
coefficient is zero: adding or multiplying by an exact 0.0 changes no finite
float, so the generated functions return bit for bit what the loop returns.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional, Sequence


def _plus(const: float, term: Optional[str]) -> Optional[str]:
    """`const + term`, None for an exact zero."""
    if term is None:
        return None if const == 0 else repr(float(const))
    return term if const == 0 else f"({float(const)!r} + {term})"


def _times(var: str, term: Optional[str]) -> Optional[str]:
    return None if term is None else f"{var}*{term}"


def quadratic_expr(c0: float, c1: float, c2: float, var: str) -> Optional[str]:
    """c0 + var (c1 + var c2), Horner form; None when every coefficient is zero."""
    return _plus(c0, _times(var, _plus(c1, _times(var, _plus(c2, None)))))


def figure_expr(coefs: Sequence[float], batch: str = "b", x: str = "x") -> str:
    """A(x) + batch B(x) of one operator's figure, coefficients (a0, a1, a2, b0, b1, b2)."""
    a = quadratic_expr(*coefs[:3], x)
    per_seq = _times(batch, quadratic_expr(*coefs[3:], x))
    if a is None:
        return per_seq or "0.0"
    return a if per_seq is None else f"({a} + {per_seq})"


def compile_function(name: str, args: str, body: Iterable[str], namespace: Optional[Dict[str, Any]] = None):
    """A function `name(args)` with the given body lines (indented here)."""
    source = f"def {name}({args}):\n" + "".join(f"    {line}\n" for line in body)
    scope: Dict[str, Any] = dict(namespace or {})
    exec(compile(source, f"<{name}>", "exec"), scope)  # noqa: S102 - our own generated arithmetic
    fn = scope[name]
    fn.source = source  # for reading and debugging
    return fn


def list_function(name: str, rows: Sequence[Sequence[float]]):
    """f(b, x) -> [figure of each row at (b, x)], rows of six coefficients."""
    items = ", ".join(figure_expr(r) for r in rows)
    return compile_function(name, "b, x", [f"return [{items}]"])


def total_function(name: str, repeats: Sequence[int], rows: Sequence[Sequence[float]]):
    """f(b, x) -> sum of repeat x figure over the rows, added in row order from 0 as sum() does."""
    terms = "".join(f" + {n} * {figure_expr(r)}" for n, r in zip(repeats, rows))
    return compile_function(name, "b, x", [f"return 0{terms}"])


def largest_function(name: str, rows: Sequence[Sequence[float]]):
    """f(b, x) -> max of the rows' figures (0.0 for none), as max(list, default=0.0) gives it;
    repeated constant zeros are kept once (they cannot change a maximum)."""
    exprs = [figure_expr(r) for r in rows]
    kept = [e for i, e in enumerate(exprs) if e != "0.0" or "0.0" not in exprs[:i]]
    return compile_function(name, "b, x", [f"return max(({', '.join(kept)},), default=0.0)"])
