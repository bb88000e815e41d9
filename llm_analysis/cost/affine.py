"""Closed-form sums over decode steps.

Between sliding-window boundaries every operator's FLOPs and bytes grow
linearly with the context length c, so a roofline time max(FLOPs/F, bytes/B)
summed over n steps is a sum of the maximum of two affine sequences; it is
taken in O(1) instead of step by step.
"""

from __future__ import annotations

import math
from typing import Tuple


def sum_affine(c0: float, c1: float, k_lo: int, k_hi: int) -> float:
    """sum_{k=k_lo}^{k_hi-1} (c0 + c1 k)."""
    n = k_hi - k_lo
    if n <= 0:
        return 0.0
    return c0 * n + c1 * (k_lo + k_hi - 1) * n / 2.0


def sum_max_affine(a0: float, a1: float, b0: float, b1: float, n: int) -> Tuple[float, float]:
    """sum_{k=0}^{n-1} max(a0 + a1 k, b0 + b1 k), split into (the part where a
    is the max, the part where b is). Exact, O(1)."""
    if n <= 0:
        return 0.0, 0.0
    d0, d1 = a0 - b0, a1 - b1
    if d1 == 0:
        return (sum_affine(a0, a1, 0, n), 0.0) if d0 >= 0 else (0.0, sum_affine(b0, b1, 0, n))
    x = -d0 / d1  # where the two lines cross
    if d1 > 0:  # a wins from ceil(x) on
        kc = min(max(math.ceil(x), 0), n)
        return sum_affine(a0, a1, kc, n), sum_affine(b0, b1, 0, kc)
    kc = min(max(math.floor(x) + 1, 0), n)  # a wins up to floor(x)
    return sum_affine(a0, a1, 0, kc), sum_affine(b0, b1, kc, n)
