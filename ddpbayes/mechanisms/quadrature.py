"""Deterministic 1-D integrals for the joint output laws (report-noisy-max, sparse vector; issue #28).

`log_integral` computes log ∫ exp(log_f(v)) dv over the real line (or over [first breakpoint, ∞)),
for many integrands at once and a different set of breakpoints per row, in log space (a probability of
1e-300 keeps its relative accuracy). The line is cut at the breakpoints, where the integrands have
kinks (Laplace densities and CDFs centred there); each finite piece gets n-point Gauss–Legendre, and
each tail is mapped by u = exp(∓(v − v_end)/s) onto (0, 1], where integrands that are sums of
exponentials exp(±m v/s) with integer m become polynomials in u, so Gauss–Legendre is exact on them
once n exceeds half their degree. n is doubled from `start` until no log-integral changes by more
than `tol` (relative change of the integral), or two successive changes stay within LAW_ERROR / 2 (the
round-off floor of sums over thousands of nodes); the last change is returned as the error estimate.
The nodes' cells are checked against --max-states before each doubling, and a non-convergence at `most`
nodes per piece is refused in one line that says which feature of the integrand is not resolved.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np
from scipy.special import logsumexp

from ddpbayes.errors import InputError
from ddpbayes.limits import check_states

TOL = 1e-13  # the change between successive doublings at which the integral is taken as converged
LAW_ERROR = 1e-12  # the absolute error in log-probability the mechanisms state (a margin over TOL)


@lru_cache(maxsize=None)
def gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of n-point Gauss–Legendre on [-1, 1]."""
    x, w = np.polynomial.legendre.leggauss(n)
    x.flags.writeable = False
    w.flags.writeable = False
    return x, w


def nodes(breaks: np.ndarray, scale: float, n: int, *, left: bool = True,
          right: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Abscissae v (R, N) and log-weights (R, N) for n points per piece: between consecutive `breaks`
    (R, B) (sorted per row), on (-∞, breaks[:, 0]] with `left` and [breaks[:, -1], ∞) with `right`, the
    tails mapped by u = exp(∓(v − end)/scale) (dv = scale du / u)."""
    x, w = gauss_legendre(n)
    b = np.asarray(breaks, dtype=float)
    vs, lws = [], []
    if b.shape[1] > 1:
        lo, hi = b[:, :-1, None], b[:, 1:, None]
        half = (hi - lo) / 2
        vs.append(((lo + hi) / 2 + half * x).reshape(len(b), -1))
        with np.errstate(divide="ignore"):
            lws.append(np.broadcast_to(np.log(half) + np.log(w), half.shape[:2] + (n,)).reshape(len(b), -1))
    u = (x + 1) / 2
    tail_lw = np.log(w / 2) + np.log(scale) - np.log(u)
    if left:
        vs.append(b[:, :1] + scale * np.log(u))
        lws.append(np.broadcast_to(tail_lw, (len(b), n)))
    if right:
        vs.append(b[:, -1:] - scale * np.log(u))
        lws.append(np.broadcast_to(tail_lw, (len(b), n)))
    return np.concatenate(vs, axis=1), np.concatenate(lws, axis=1)


def log_integral(log_f: Callable[[np.ndarray], np.ndarray], breaks: np.ndarray, scale: float, *,
                 left: bool = True, right: bool = True, tol: float = TOL, start: int = 8,
                 most: int = 4096, width: int = 1, narrow: float | None = None) -> tuple[np.ndarray, float]:
    """log ∫ exp(log_f(v)) dv for every row r of `breaks` (R, B) and integrand m: (R, M), and the last
    change between doublings (the error estimate). `log_f` maps v (R, N) to log-integrands (R, N, M);
    `width` is the most cells it builds per node (M, or the answers K if more), `narrow` the integrand's
    smallest noise scale (default `scale`), named when it is what does not converge."""
    breaks = np.sort(np.asarray(breaks, dtype=float), axis=1)
    narrow = scale if narrow is None else narrow
    hopeless = _unresolved(breaks, scale, narrow, 2 * most)
    if hopeless:
        raise InputError(f"the output law's integral cannot be computed with {most} Gauss-Legendre nodes per piece: "
                         f"{hopeless}")
    previous, last = None, np.inf
    n = start
    while n <= most:
        pieces = (breaks.shape[1] - 1) + left + right
        check_states(len(breaks) * pieces * n * max(1, width), f"the output law's quadrature ({n} nodes per piece)",
                     "cells")
        v, lw = nodes(breaks, scale, n, left=left, right=right)
        with np.errstate(invalid="ignore"):
            values = logsumexp(log_f(v) + lw[:, :, None], axis=1)
        if previous is not None and not np.isnan(values).any():
            change = _change(values, previous)
            if change <= tol or max(change, last) <= LAW_ERROR / 2:
                return values, max(change, last) if change > tol else change
            last = change
        previous = values
        n *= 2
    why = _unresolved(breaks, scale, narrow, 64) or "the integrand is not smooth between the answers"
    raise InputError(f"the output law's integral did not converge to {tol:g} with {most} Gauss-Legendre nodes per "
                     f"piece: {why}")


def _unresolved(breaks: np.ndarray, scale: float, narrow: float, ratio: float) -> str:
    """What keeps the quadrature from converging, with the numbers, or "": a noise scale below the spacing of the
    answers' doubles, two noise scales more than `ratio` apart (the tails' polynomials have their ratio as
    degree), or answers more than `ratio` noise scales apart."""
    finite = breaks[np.isfinite(breaks)]
    top = float(np.abs(finite).max()) if finite.size else 0.0
    if top > 0 and top + narrow == top:
        return (f"the noise scale {narrow:g} is below the spacing of doubles at the answers (up to {top:g}), so no "
                "node falls between them")
    if scale / narrow > ratio:
        return (f"the integrand mixes noise scales {narrow:g} and {scale:g}, {scale / narrow:,.4g} times apart (its "
                "tails are polynomials of that degree)")
    spread = float(np.max(np.ptp(np.where(np.isfinite(breaks), breaks, 0.0), axis=1))) if breaks.shape[1] > 1 else 0.0
    if spread / narrow > ratio:
        return (f"the answers are {spread / narrow:,.4g} noise scales apart (scale {narrow:g}): a kernel that narrow "
                "is not resolved between them")
    return ""


def _change(a: np.ndarray, b: np.ndarray) -> float:
    """The largest change between two arrays of log-integrals (0 where both are -inf)."""
    both = np.isneginf(a) & np.isneginf(b)
    if np.any(np.isneginf(a) != np.isneginf(b)):
        return np.inf
    d = np.abs(np.where(both, 0.0, a - np.where(both, 0.0, b)))
    return float(d.max()) if d.size else 0.0


def laplace_log_cdf(x: np.ndarray, b: float) -> np.ndarray:
    """log P(Lap(b) ≤ x), accurate in both tails."""
    x = np.asarray(x, dtype=float)
    neg = np.minimum(x, 0.0) / b - np.log(2)
    pos = np.log1p(-0.5 * np.exp(-np.maximum(x, 0.0) / b))
    return np.where(x < 0, neg, pos)


def laplace_log_sf(x: np.ndarray, b: float) -> np.ndarray:
    """log P(Lap(b) > x) = log P(Lap(b) ≤ −x)."""
    return laplace_log_cdf(-np.asarray(x, dtype=float), b)


def laplace_log_pdf(x: np.ndarray, b: float) -> np.ndarray:
    return -np.abs(x) / b - np.log(2 * b)
