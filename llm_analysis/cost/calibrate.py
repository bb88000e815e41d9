"""Fit a few profile parameters to a user's own measurements.

Measurement record (a `Measurement`, or a dict with the same keys)::

    {"id": "llama8b-tp1-b1-prefill128",          # any unique label
     "setup": {...},                              # whatever the predictor understands
     "value": 7.1, "unit": "ms"}                  # one measured quantity

Units: times in "s", "ms" or "us" (converted to seconds), or throughputs in
"tokens/s" (converted to seconds with setup["tokens"], the tokens the rate is
over). All records of one fit must be times, or all throughputs: mixing them
is refused as inconsistent units (a throughput hides a batch/concurrency
choice the time does not). Setups the model cannot express (CPU or NVMe
offload) are refused, naming the record and the field.

`calibrate(measurements, predict, profile, parameters)` minimises
sum_i log(predicted_i / measured_i)^2 (relative error, so a 10 ms and a 10 s
record weigh alike) over the named parameters with a damped Gauss-Newton
(Levenberg-Marquardt) iteration in log-parameter space, and returns a new
`Profile` whose fitted values carry the source "calibrate(): ...". The
predictor is any callable `predict(setup, profile) -> seconds`; it receives a
`Profile` holding the trial values, so it does not depend on the core's
operator model. Any refusal is one line and fits nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from llm_analysis.errors import ConfigError
from llm_analysis.cost.profiles import KINDS, PARAMETERS, Profile

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
RATE_UNITS = ("tokens/s",)
# setup fields whose truthy value means work the GPU time model does not contain
UNSUPPORTED_SETUP = ("activation_cpu_offload", "cpu_offload", "optimizer_cpu_offload", "nvme_offload")


class CalibrationError(ConfigError):
    """calibrate() refused its input; nothing was fitted."""


@dataclass(frozen=True)
class Measurement:
    id: str
    setup: Mapping[str, Any]
    value: float
    unit: str


def _as_measurement(rec: Measurement | Mapping) -> Measurement:
    if isinstance(rec, Measurement):
        return rec
    missing = [k for k in ("id", "setup", "value", "unit") if k not in rec]
    if missing:
        raise CalibrationError(f"measurement {rec.get('id', '?')!r} lacks field(s) {', '.join(missing)}")
    extra = set(rec) - {"id", "setup", "value", "unit"}
    if extra:
        raise CalibrationError(f"measurement {rec['id']!r} has unknown field {sorted(extra)[0]!r}")
    return Measurement(str(rec["id"]), rec["setup"], rec["value"], rec["unit"])


def measured_seconds(m: Measurement) -> float:
    """The record's time in seconds (throughputs through setup['tokens'])."""
    if isinstance(m.value, bool) or not isinstance(m.value, (int, float)) or not m.value > 0:
        raise CalibrationError(f"measurement {m.id!r}: value = {m.value!r} must be a positive number")
    if m.unit in TIME_UNITS:
        return m.value * TIME_UNITS[m.unit]
    if m.unit in RATE_UNITS:
        tokens = m.setup.get("tokens")
        if not isinstance(tokens, (int, float)) or tokens <= 0:
            raise CalibrationError(f"measurement {m.id!r}: unit 'tokens/s' needs setup['tokens'] > 0")
        return tokens / m.value
    raise CalibrationError(f"measurement {m.id!r}: unit {m.unit!r} unknown; valid: "
                           f"{', '.join([*TIME_UNITS, *RATE_UNITS])}")


def check_measurements(measurements: Iterable, parameters: Sequence[str]) -> list[Measurement]:
    recs = [_as_measurement(r) for r in measurements]
    for p in parameters:
        if p not in PARAMETERS or PARAMETERS[p][0] == "tiles":
            raise CalibrationError(f"parameter {p!r} cannot be fitted; valid: "
                                   f"{', '.join(k for k, v in PARAMETERS.items() if v[0] != 'tiles')}")
    if len(recs) < len(parameters):
        raise CalibrationError(f"{len(recs)} measurement(s) for {len(parameters)} parameter(s) "
                               f"({', '.join(parameters)}): need at least as many points as parameters")
    for r in recs:
        if r.unit not in TIME_UNITS and r.unit not in RATE_UNITS:
            raise CalibrationError(f"measurement {r.id!r}: unit {r.unit!r} unknown; valid: "
                                   f"{', '.join([*TIME_UNITS, *RATE_UNITS])}")
    kinds = {"time" if r.unit in TIME_UNITS else "rate" for r in recs}
    if len(kinds) > 1:
        raise CalibrationError("inconsistent units: the measurements mix times (s/ms/us) and throughputs "
                               "(tokens/s); give all as one or the other")
    for r in recs:
        for field in UNSUPPORTED_SETUP:
            if r.setup.get(field):
                raise CalibrationError(f"measurement {r.id!r}: setup[{field!r}] = {r.setup[field]!r} "
                                       "(offloaded work) is not expressible by the GPU time model")
        measured_seconds(r)
    return recs


def _residuals(x: np.ndarray, names, recs, targets, predict, base: Profile) -> np.ndarray:
    trial = base.with_values(dict(zip(names, np.exp(x).tolist())), "trial")
    pred = np.array([predict(r.setup, trial) for r in recs], dtype=float)
    if not np.all(np.isfinite(pred)) or np.any(pred <= 0):
        raise CalibrationError("the predictor returned a non-positive or non-finite time")
    return np.log(pred) - targets


def _lm_fit(x0: np.ndarray, fun: Callable[[np.ndarray], np.ndarray], lo: np.ndarray, hi: np.ndarray,
            iterations: int = 50) -> np.ndarray:
    """Levenberg-Marquardt with forward-difference Jacobian, box-clipped."""
    x, damping = x0.copy(), 1e-3
    r = fun(x)
    for _ in range(iterations):
        jac = np.empty((r.size, x.size))
        for j in range(x.size):
            # forward difference, backward at the upper edge of the box (a forward step clipped back
            # onto the edge would read a zero slope and hold the parameter there for good)
            h = -1e-6 if x[j] + 1e-6 > hi[j] else 1e-6
            step = np.zeros_like(x)
            step[j] = h
            jac[:, j] = (fun(x + step) - r) / h
        a, g = jac.T @ jac, jac.T @ r
        while True:
            x_new = np.clip(x - np.linalg.solve(a + damping * np.diag(np.diag(a) + 1e-12), g), lo, hi)
            r_new = fun(x_new)
            if r_new @ r_new < r @ r:
                converged = r @ r - r_new @ r_new < 1e-10 * (r @ r)  # (no measurable gain left)
                x, r, damping = x_new, r_new, damping / 3
                if converged:
                    return x
                break
            damping *= 10
            if damping > 1e8:
                return x
    return x


def _box(names: Sequence[str], bounds: Mapping[str, tuple] | None) -> tuple[np.ndarray, np.ndarray]:
    """log-space (lower, upper) per parameter: its kind's range, narrowed by `bounds`
    (name -> (low, high), e.g. a physically plausible band with its source)."""
    lo, hi = [1e-9] * len(names), [KINDS[PARAMETERS[n][0]][2] for n in names]  # (a kind's most)
    for name, band in (bounds or {}).items():
        if name not in names:
            raise CalibrationError(f"bounds name {name!r}, which is not fitted; fitted: {', '.join(names)}")
        low, high = band
        if not 0 < low <= high:
            raise CalibrationError(f"bounds[{name!r}] = {band!r}: need 0 < low <= high")
        i = names.index(name)
        lo[i], hi[i] = max(lo[i], low), min(hi[i], high)
    return np.log(lo), np.log(hi)


def calibrate(measurements: Iterable, predict: Callable[[Mapping, Profile], float], profile: Profile,
              parameters: Sequence[str] = ("gemm_plateau_efficiency", "hbm_efficiency"),
              bounds: Mapping[str, tuple] | None = None, iterations: int = 50) -> Profile:
    """Least-squares fit of `parameters` to `measurements`; returns the fitted Profile.
    `bounds` (optional, name -> (low, high)) keeps a parameter inside a plausible band;
    `iterations` caps the Levenberg-Marquardt steps (a fit started near its optimum, as a
    leave-one-source-out fold started from the shipped values, needs few)."""
    recs = check_measurements(measurements, parameters)
    names = list(parameters)
    targets = np.log([measured_seconds(r) for r in recs])
    lo, hi = _box(names, bounds)
    x0 = np.clip(np.log([max(profile.values[n], 1e-9) for n in names]), lo, hi)
    x = _lm_fit(x0, lambda v: _residuals(v, names, recs, targets, predict, profile), lo, hi, iterations)
    fitted = dict(zip(names, np.exp(x).tolist()))
    rms = float(np.sqrt(np.mean(_residuals(x, names, recs, targets, predict, profile) ** 2)))
    ids = ", ".join(r.id for r in recs[:5]) + (" ..." if len(recs) > 5 else "")
    source = (f"calibrate(): least-squares fit on {len(recs)} measurement(s) [{ids}], "
              f"rms log error {rms:.3f} ({math.expm1(rms) * 100:.1f}%)")
    return profile.with_values(fitted, source)
