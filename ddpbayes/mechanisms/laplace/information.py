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
BOUND_SLACK = 1e-9  # relative margin by which a bracket's bound must miss the best value before Brent is skipped
SCAN_CELLS = 2**20  # (value, point) cells of D evaluated at once


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
    if len(gaps):
        kl = max(kl, _sup_divergence(near_below[:, :-1], near_above[:, 1:], gaps, log_p))
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


def _sup_divergence(lo: np.ndarray, hi: np.ndarray, gaps: np.ndarray, log_p: np.ndarray) -> float:
    """sup of D over every piece; piece k lies between levels k and k + 1, lo = lo[:, k], hi = hi[:, k].
    With w = 2s - gap ∈ [-gap, gap] (s: distance from q_k in units of b), g_t ∝ e^{-s} e^{ℓ_t(w)},
    ℓ_t(w) = logaddexp(lo_t, hi_t + w), and D depends on the ℓ_t alone:

        D(w) = Σ_t p_t (log p_t + logaddexp(Lo, Hi + w) - ℓ_t(w)),   Lo, Hi = logsumexp of lo, hi.

    Each ℓ_t bends only within a few units of c_t = lo_t - hi_t (and log f of Lo - Hi); farther off
    D is affine to within 2e^{-WINDOW}. So the sup is at an end of a piece or in a window around
    a bend: every window is scanned (spacing 1/8, all pieces at once) and its best peaks refined by
    bounded Brent, skipping a peak whose bracket [l, r] cannot beat the best value found: log f and
    every ℓ_t are non-decreasing, so on it D ≤ D(l) + log f(r) - log f(l) and D ≤ D(r) + Σ_t p_t (ℓ_t(r) - ℓ_t(l))."""
    weights = np.exp(log_p)
    big_lo, big_hi = logsumexp(lo, axis=0), logsumexp(hi, axis=0)
    count = len(gaps)
    best = float(_scan(lo, hi, big_lo, big_hi, log_p, weights, np.repeat(np.arange(count), 2),
                       np.column_stack([-gaps, gaps]).ravel())[0].max())
    bends = np.vstack([lo - hi, big_lo - big_hi])
    pieces, grids = [], []
    for k, gap in enumerate(gaps):
        near = [c for c in bends[:, k] if math.isfinite(c) and -gap - WINDOW < c < gap + WINDOW]
        for a, c in _merged((max(x - WINDOW, -gap), min(x + WINDOW, gap)) for x in near):
            grids.append(np.linspace(a, c, max(2, math.ceil((c - a) * 8) + 1)))
            pieces.append(k)
    if not grids:
        return best
    sizes = np.array([len(w) for w in grids])
    w = np.concatenate(grids)
    values, log_f, mean_ell = _scan(lo, hi, big_lo, big_hi, log_p, weights, np.repeat(pieces, sizes), w)
    best = max(best, float(values.max()))
    candidates = []  # (bound on the bracket, piece, left, right)
    for piece, first, size in zip(pieces, np.cumsum(sizes) - sizes, sizes):
        v = values[first:first + size]
        peaks = [j for j in range(size) if (j == 0 or v[j] >= v[j - 1]) and (j == size - 1 or v[j] > v[j + 1])]
        for j in sorted(peaks, key=lambda j: -v[j])[:4]:
            left, right = first + max(j - 1, 0), first + min(j + 1, size - 1)
            if w[right] > w[left]:
                bound = min(values[left] + log_f[right] - log_f[left], values[right] + mean_ell[right] - mean_ell[left])
                candidates.append((float(bound), piece, w[left], w[right]))
    for bound, piece, left, right in sorted(candidates, key=lambda c: -c[0] if not math.isnan(c[0]) else -math.inf):
        if bound + BOUND_SLACK * (1 + abs(best)) <= best:
            break  # sorted by bound: no later bracket can beat `best` either

        def minus(v: float, k=piece) -> float:
            return -float(_scan(lo, hi, big_lo, big_hi, log_p, weights, np.array([k]), np.array([v]))[0][0])

        res = optimize.minimize_scalar(minus, bounds=(left, right), method="bounded", options={"xatol": 1e-9})
        best = max(best, -float(res.fun))
    return best


def _scan(lo: np.ndarray, hi: np.ndarray, big_lo: np.ndarray, big_hi: np.ndarray, log_p: np.ndarray,
          weights: np.ndarray, piece: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(D, log f, Σ_t p_t ℓ_t) at the points w of the pieces `piece`, SCAN_CELLS cells at a time."""
    out = np.empty((3, len(w)))
    step = max(1, SCAN_CELLS // len(log_p))
    for a in range(0, len(w), step):
        k, x = piece[a:a + step], w[a:a + step]
        log_f = np.logaddexp(big_lo[k], big_hi[k] + x)
        ell = np.logaddexp(lo[:, k], hi[:, k] + x)
        out[:, a:a + step] = weights @ (log_p[:, None] + log_f[None, :] - ell), log_f, weights @ ell
    return out[0], out[1], out[2]


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
