"""I(X_i; Y) and sup_y D(X_i ‖ X_i | Y = y) of one mixture group under Laplace and geometric noise
(004 Eqs. 26, 28; the group and the integrands: `mechanisms.information`).

Laplace(b), in units of b from a level (exact at every scale down to the smallest double):
between consecutive levels every g_t is A e^{-s} + B e^{s - gap}; each piece is integrated from both
ends by Gauss–Legendre on subintervals widening geometrically (1, 2, 4, … scales) up to REACH
scales (the rest, bounded by 2e^{-REACH} log(1/min p_t), joins the error), doubling the nodes until
two passes agree to 1e-13 + 1e-12·|value| ("quadrature to 1e-10"); the tails, where every
g_t ∝ e^{∓y/b}, in closed form. sup_y D: affine between the windows around its bends, so the
piece's ends and a scan of each window refined by bounded Brent (`_sup_divergence`); D is
constant on the tails. Geometric: exact sums over the integers
between the extreme levels, geometric series beyond. Everything in log space.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

from ddpbayes.limits import check_states
from ddpbayes.mechanisms.information import terms

TOL_ABS, TOL_REL, MAX_NODES = 1e-13, 1e-12, 1024
REACH = 40.0  # units of b from a level beyond which the MI integrand is dropped (bounded, added to the error)
WINDOW = 40.0  # half-width (in w = 2s - gap) of the window around a bend of D
LOG2 = math.log(2)


def laplace_information(q: np.ndarray, log_w: np.ndarray, b: float) -> tuple[float, float, float]:
    """(I(X_i; Y), sup_y D, quadrature error estimate) for y = q + Lap(b), q sorted and distinct.

    Everything is measured in units of b from a level, so every scale down to the smallest
    double keeps the integrals exact (DESIGN §3.4)."""
    log_p = logsumexp(log_w, axis=1)
    m = len(q)
    check_states(m * m * len(log_w), f"the information integrals ({m:,} query levels)", "cells")
    gaps = np.diff(q) / b  # finite: Laplace._check_span
    near_below, near_above = _near_sums(log_w, gaps)
    reach = REACH + math.log(max(1.0, -float(log_p.min())))  # MI integrand beyond: below 2e^{-REACH} in all
    mi, error = 0.0, 0.0
    kl = -math.inf
    # below q_0 every g_t(y) ∝ e^{near_above[:, 0] + (y - q_0)/b};
    # above q_max ∝ e^{near_below[:, -1] - (y - q_max)/b}
    for log_tail in (near_above[:, 0], near_below[:, -1]):
        tail_mi, tail_kl = terms(log_tail[:, None] - LOG2, log_p)  # each tail holds mass e^{log_tail}/2
        mi += float(tail_mi[0])
        kl = max(kl, float(tail_kl[0]))
    for k, gap in enumerate(gaps):
        # the levels at or below q_k seen from q_k; the rest from q_{k+1}
        lo, hi = near_below[:, k], near_above[:, k + 1]
        ends = ((lo, hi), (hi, lo)) if gap > 2 else ((lo, hi),)
        extent = min(gap / 2, reach) if gap > 2 else gap
        for near, far in ends:  # s: the distance in units of b from the near end, up to `extent`

            def mi_at(s: np.ndarray, near=near, far=far) -> np.ndarray:
                log_g = np.logaddexp(near[:, None] - s[None, :], far[:, None] - (gap - s)[None, :]) - LOG2
                return terms(log_g, log_p)[0]

            for a, c in _subintervals(extent):
                value, err = _gauss_legendre(mi_at, a, c)
                mi += value
                error += err
        if gap > 2 and gap / 2 > reach:
            error += 2 * math.exp(-reach) * -float(log_p.min())
        kl = max(kl, _sup_divergence(lo, hi, gap, log_p))
    return mi, kl, error


def _near_sums(log_w: np.ndarray, gaps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """below[:, k] = log Σ_{s ≤ k} w_s e^{-(q_k - q_s)/b} and above[:, k] = log Σ_{s ≥ k} w_s e^{-(q_s - q_k)/b},
    by recursion from level to level (every term relative to its own level: no cancellation)."""
    below, above = log_w.copy(), log_w.copy()
    for k, gap in enumerate(gaps):
        below[:, k + 1] = np.logaddexp(below[:, k] - gap, log_w[:, k + 1])
    for k in range(len(gaps) - 1, -1, -1):
        above[:, k] = np.logaddexp(above[:, k + 1] - gaps[k], log_w[:, k])
    return below, above


def _subintervals(extent: float) -> list[tuple[float, float]]:
    """[0, extent] cut at 1, 2, 4, …: the integrand decays like e^{-s} from its near end."""
    cuts, step = [0.0], 1.0
    while step < extent:
        cuts.append(step)
        step *= 2
    return list(itertools.pairwise([*cuts, extent]))


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


def _sup_divergence(lo: np.ndarray, hi: np.ndarray, gap: float, log_p: np.ndarray) -> float:
    """sup of D over one piece. With w = 2s - gap ∈ [-gap, gap] (s: distance from q_k in units of
    b), g_t ∝ e^{-s} e^{ℓ_t(w)}, ℓ_t(w) = logaddexp(lo_t, hi_t + w), and D depends on the ℓ_t alone:

        D(w) = Σ_t p_t (log p_t + logaddexp(Lo, Hi + w) - ℓ_t(w)),   Lo, Hi = logsumexp of lo, hi.

    Each ℓ_t bends only within a few units of c_t = lo_t - hi_t (and log f of Lo - Hi); farther off
    D is affine to within 2e^{-WINDOW}. So the sup is at an end of the piece or in a window around
    a bend: each window is scanned (spacing 1/8) and its best points refined by bounded Brent."""
    weights = np.exp(log_p)
    big_lo, big_hi = logsumexp(lo), logsumexp(hi)

    def divergence(w: np.ndarray) -> np.ndarray:
        log_f = np.logaddexp(big_lo, big_hi + w)
        ell = np.logaddexp(lo[:, None], hi[:, None] + w[None, :])
        return weights @ (log_p[:, None] + log_f[None, :] - ell)

    bends = [c for c in [*(lo - hi), big_lo - big_hi] if math.isfinite(c) and -gap - WINDOW < c < gap + WINDOW]
    best = float(divergence(np.array([-gap, gap])).max())
    for a, c in _merged((max(x - WINDOW, -gap), min(x + WINDOW, gap)) for x in bends):
        w = np.linspace(a, c, max(2, math.ceil((c - a) * 8) + 1))
        values = divergence(w)
        best = max(best, float(values.max()))
        peaks = [j for j in range(len(w)) if (j == 0 or values[j] >= values[j - 1])
                 and (j == len(w) - 1 or values[j] > values[j + 1])]
        for j in sorted(peaks, key=lambda j: -values[j])[:4]:
            left, right = w[max(j - 1, 0)], w[min(j + 1, len(w) - 1)]
            if right > left:
                res = optimize.minimize_scalar(lambda v: -float(divergence(np.array([v]))[0]), bounds=(left, right),
                                               method="bounded", options={"xatol": 1e-9})
                best = max(best, -float(res.fun))
    return best


def _merged(intervals) -> list[tuple[float, float]]:
    """Overlapping intervals joined."""
    out: list[list[float]] = []
    for a, c in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], c)
        else:
            out.append([a, c])
    return [(a, c) for a, c in out]


def geometric_information(q: np.ndarray, log_w: np.ndarray, b: float, limit: int | None = None) -> tuple[float, float, float]:
    """(I(X_i; Y), sup_y D, 0) for y = q + two-sided geometric noise, P(y | q) ∝ α^{|y - q|}, α = e^{-1/b}."""
    q = np.rint(q).astype(np.int64)
    log_p = logsumexp(log_w, axis=1)
    span = int(q[-1] - q[0]) + 1
    check_states(span * len(q) * len(log_w), f"the information sums ({span:,} integer outputs)", "cells", limit)
    alpha = math.exp(-1 / b)
    log_c = math.log(-math.expm1(-1 / b)) - math.log1p(alpha)  # log((1 - α)/(1 + α)), also when α rounds to 1
    y = np.arange(q[0], q[-1] + 1)
    log_k = log_c - np.abs(y[None, :] - q[:, None]) / b  # (S, N)
    log_g = logsumexp(log_w[:, :, None] + log_k[None], axis=1)  # (T, N)
    mi, kl = terms(log_g, log_p)
    # Σ_{j >= 1} α^j = α/(1 - α): g_t(q0 - j) = g_t(q0) α^j, the ratios stay those at q0
    tail = 1 / math.expm1(1 / b)
    return float(mi.sum() + tail * (mi[0] + mi[-1])), float(kl.max()), 0.0
