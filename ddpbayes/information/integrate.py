"""I(X_i; Y) and sup_y D(X_i ‖ X_i | Y = y) of one mixture group, per noise mechanism (004 Eqs. 26, 28).

A group is the law of (X_i, q) given what is fixed: log P(X_i = t, q = q_s) as `log_w` (T, S)
over distinct query levels `q` (S,), every row t of positive mass, summing to one. With
g_t(y) = Σ_s P(t, q_s) p(y | q_s), f = Σ_t g_t and p_t = Σ_s P(t, q_s):

    I(X_i; Y) = Σ_t ∫ g_t log(g_t / (p_t f)) dy,     D(y) = Σ_t p_t log(p_t f(y) / g_t(y)).

Laplace(b): between consecutive levels every g_t is A e^{-u/b} + B e^{u/b}; each piece is
integrated by Gauss–Legendre on subintervals widening geometrically from both ends (b, 2b, 4b, …),
doubling the nodes until two passes agree to 1e-13 + 1e-12·|value| ("quadrature to 1e-10"); the
tails, where every g_t ∝ e^{∓y/b}, in closed form. sup_y D: a scan of every subinterval refined by
bounded Brent (xatol 1e-12·b); D is constant on the tails. Geometric: exact sums over the integers
between the extreme levels, geometric series beyond. Randomized response: exact sums over the
finite output space. Everything in log space.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

from ddpbayes.limits import check_states
from ddpbayes.mechanisms import laplace_sums

TOL_ABS, TOL_REL, MAX_NODES = 1e-13, 1e-12, 1024


class NotAvailable(Exception):
    """The measures cannot be computed exactly for this group; the message says why."""


def _terms(log_g: np.ndarray, log_p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per output (columns of log_g (T, N)): Σ_t g_t log(g_t/(p_t f)) and D = Σ_t p_t log(p_t f/g_t)."""
    peak = log_g.max(axis=0)  # finite: every output has positive density under some t
    log_f = np.log(np.exp(log_g - peak).sum(axis=0)) + peak  # scipy's logsumexp costs ~50 us a call here
    log_ratio = log_g - log_p[:, None] - log_f[None, :]
    mi = np.sum(np.exp(log_g) * log_ratio, axis=0)
    kl = -np.sum(np.exp(log_p)[:, None] * log_ratio, axis=0)
    return mi, kl


def laplace(q: np.ndarray, log_w: np.ndarray, b: float) -> tuple[float, float, float]:
    """(I(X_i; Y), sup_y D, quadrature error estimate) for y = q + Lap(b), q sorted and distinct."""
    log_p = logsumexp(log_w, axis=1)
    m = len(q)
    check_states(m * m * len(log_w), f"the information integrals ({m:,} query levels)", "cells")
    # below q0, g_t(y) e^{-(y - q0)/b} 2b = e^{minus}; above q_max, g_t(y) e^{(y - q_max)/b} 2b = e^{plus}
    below, above, plus, minus = laplace_sums(log_w, q, b)
    mi, error = 0.0, 0.0
    kl = -math.inf
    for log_tail in (minus, plus):
        tail_mi, tail_kl = _terms(log_tail[:, None] - math.log(2), log_p)  # each tail holds mass e^{log_tail}/2
        mi += float(tail_mi[0])
        kl = max(kl, float(tail_kl[0]))
    for k in range(m - 1):
        h = q[k + 1] - q[k]
        lo, hi = below[:, k], above[:, k] + h / b  # the levels at or below q_k, seen from q_k; the rest from q_{k+1}

        def log_g(u: np.ndarray, lo=lo, hi=hi, h=h) -> np.ndarray:
            return np.logaddexp(lo[:, None] - u[None, :] / b, hi[:, None] + (u[None, :] - h) / b) - math.log(2 * b)

        for a, c in _subintervals(h, b):
            value, err = _gauss_legendre(lambda u: _terms(log_g(u), log_p)[0], a, c)
            mi += value
            error += err
            kl = max(kl, _max_on(lambda u: _terms(log_g(u), log_p)[1], a, c, b))
    return mi, kl, error


def _subintervals(h: float, b: float) -> list[tuple[float, float]]:
    """[0, h] cut at b, 2b, 4b, … from each end: the integrand decays like e^{-u/b} from both."""
    cuts, step = [0.0], b
    while step < h / 2:
        cuts.append(step)
        step *= 2
    ends = sorted({*cuts, *(h - c for c in cuts), h / 2} if h > 2 * b else {0.0, h})
    return list(itertools.pairwise(ends))


def _gauss_legendre(fn, a: float, c: float) -> tuple[float, float]:
    """∫_a^c fn with Gauss–Legendre, doubling the nodes from 16 until two passes agree."""
    previous, n = None, 16
    while True:
        x, w = _nodes(n)
        value = float(np.dot(w, fn((c - a) / 2 * x + (c + a) / 2)) * (c - a) / 2)
        if previous is not None and abs(value - previous) <= TOL_ABS + TOL_REL * abs(value):
            return value, abs(value - previous)
        if n >= MAX_NODES:
            return value, abs(value - previous)
        previous, n = value, 2 * n


@functools.cache
def _nodes(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.polynomial.legendre.leggauss(n)


def _max_on(fn, a: float, c: float, b: float) -> float:
    """max of fn on [a, c]: a 33-point scan, refined by bounded Brent around the best point."""
    u = np.linspace(a, c, 33)
    values = fn(u)
    j = int(np.argmax(values))
    lo, hi = u[max(j - 1, 0)], u[min(j + 1, len(u) - 1)]
    best = float(values[j])
    if hi > lo:
        res = optimize.minimize_scalar(lambda v: -float(fn(np.array([v]))[0]), bounds=(lo, hi), method="bounded",
                                       options={"xatol": 1e-12 * b})
        best = max(best, -float(res.fun))
    return best


def geometric(q: np.ndarray, log_w: np.ndarray, b: float, limit: int | None = None) -> tuple[float, float, float]:
    """(I(X_i; Y), sup_y D, 0) for y = q + two-sided geometric noise, P(y | q) ∝ α^{|y - q|}, α = e^{-1/b}."""
    q = np.rint(q).astype(np.int64)
    log_p = logsumexp(log_w, axis=1)
    span = int(q[-1] - q[0]) + 1
    check_states(span * len(q) * len(log_w), f"the information sums ({span:,} integer outputs)", "cells", limit)
    alpha = math.exp(-1 / b)
    log_c = math.log1p(-alpha) - math.log1p(alpha)
    y = np.arange(q[0], q[-1] + 1)
    log_k = log_c - np.abs(y[None, :] - q[:, None]) / b  # (S, N)
    log_g = logsumexp(log_w[:, :, None] + log_k[None], axis=1)  # (T, N)
    mi, kl = _terms(log_g, log_p)
    tail = alpha / (1 - alpha)  # Σ_{j >= 1} α^j: g_t(q0 - j) = g_t(q0) α^j, the ratios stay those at q0
    return float(mi.sum() + tail * (mi[0] + mi[-1])), float(kl.max()), 0.0


def randomized_response(levels: np.ndarray, log_w: np.ndarray, epsilon: np.ndarray,
                        limit: int | None = None) -> tuple[float, float, float]:
    """(I(X_i; Y), max_y D, 0) for randomized response on the bits `levels` (S, d), coordinate c
    kept with probability 1 / (1 + e^{-ε_c}): exact sums over the 2^d outputs."""
    d = levels.shape[1]
    check_states((2 ** d) * len(levels) * len(log_w), f"the information sums (2^{d} outputs)", "cells", limit)
    log_p = logsumexp(log_w, axis=1)
    log_keep = -np.log1p(np.exp(-epsilon))
    outputs = (np.arange(2 ** d)[:, None] >> np.arange(d)[None, :]) & 1  # (N, d)
    flips = outputs[:, None, :] != levels[None, :, :]  # (N, S, d)
    log_k = log_keep.sum() - (flips * epsilon).sum(axis=2)  # (N, S)
    log_g = logsumexp(log_w[:, None, :] + log_k[None], axis=2)  # (T, N)
    mi, kl = _terms(log_g, log_p)
    return float(mi.sum()), float(kl.max()), 0.0
