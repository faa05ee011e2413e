"""Roots of non-increasing functions of the noise scale, landed on the safe side.

Calibration (the smallest scale whose leakage is at most epsilon) and DPM's fixed point both
solve f(scale) = 0 for a non-increasing f and must return a scale where f <= 0 holds, not one a
rounding error short of it: brentq to RTOL, then small steps up until it does.
"""

from __future__ import annotations

from collections.abc import Callable

from scipy.optimize import brentq

RTOL = 1e-10


def safe_root(f: Callable[[float], float], lo: float, hi: float, slack: float) -> float:
    """x in [lo, hi] with f(x) <= slack, within about RTOL of the root of f (f(lo) > 0 >= f(hi))."""
    x = brentq(f, lo, hi, xtol=RTOL * lo, rtol=RTOL)
    for k in range(40):
        if f(x) <= slack:
            break
        x = min(hi, x * (1 + RTOL * 2**k))
    return float(x)
