"""δ(ε) between Gaussian mixtures from the exact breakpoints of the log-ratio (DESIGN §3.5).

In units z = y/σ, u_s = level_s/σ, P_b(z) = Σ_s p_bs φ(z - u_s) and Q_b alike. The set
A_ε = {ℓ_b > ε}, ℓ_b = log P_b - log Q_b, attains the hockey-stick divergence
δ_b(ε) = P_b(A_ε) - e^ε Q_b(A_ε), and on a union of intervals both masses are sums of normal
interval masses Φ(b - u_s) - Φ(a - u_s): closed forms, no quadrature.

The breakpoints: ℓ_b is evaluated on a uniform grid (step STEP) over [min u - R, max u + R]; the
grid's local extrema are refined to the zeros of ℓ' = E_P[u|z] - E_Q[u|z] (bisection), which cut
the range into pieces where ℓ_b is monotone; each ε then has at most one root per piece, bracketed
on the grid and refined by safeguarded Newton. The grid cannot prove it saw every extremum, so each
evaluation is checked against Descartes' rule of signs for exponential sums: P - e^ε Q =
e^{-z²/2} Σ_s (p_s - e^ε q_s) e^{u_s z - u_s²/2}/√(2π) has at most V sign changes, V the sign
changes of the coefficients in the order of u, with the parity of V; the roots found (in the range,
plus one for each end whose sign differs from the sign at ±∞) certify the evaluation when they are
at least V - 1; `certified` reports it. The bound is loose for irregular weights (V large), so an
uncertified pair is "not proven complete", not "wrong"; a monotone ratio p_s/q_s gives V = 1.

The range is the union of the windows [u_s - R, u_s + R], merged where they overlap into
segments, each on its own grid in local units z - u_first (so levels many standard deviations
apart cost 2R/STEP points each, not their distance over STEP, and keep their precision). A point
outside every window lies more than R from every level, so restricting A to the range loses at
most P_b(outside) <= Σ_s p_bs 2Φ(-R) = 2Φ(-R) < 2e-23 of δ (one-sided). Roots between
segments are not searched (A does not reach there); a sign change of ℓ - ε across a gap counts
as one root for the certificate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy.special import log_ndtr

from ddpbayes.errors import InputError
from ddpbayes.limits import check_states
from ddpbayes.numerics import logsumexp
from ddpbayes.mechanisms.gaussian.kernel import log_interval_mass, log_mixture_at, log_mixture_grid

R = 10.0  # the windows extend R standard deviations around the levels (more for δ below 1e-12: `reach`)
STEP = 0.05  # grid step in standard deviations
ROOT = 1e-10  # tolerance on a root, relative to 1 + |z|
FLAT = 1e-11  # grid differences below this (relative) are rounding: ℓ counts as flat there
SPAN = 1e152  # levels at most this many standard deviations apart: every (z - u)² stays finite
BYTES = 64  # bytes per grid point of one pair: z, ℓ, both log-densities and their temporaries


@dataclass(frozen=True)
class Curves:
    """The log-ratio ℓ_b of B pairs: grid values and monotone pieces (flat arrays, CSR by pair)."""

    u: np.ndarray
    logp: np.ndarray
    logq: np.ndarray
    z: np.ndarray
    ell: np.ndarray
    pair: np.ndarray
    z0: np.ndarray
    z1: np.ndarray
    l0: np.ndarray
    l1: np.ndarray
    g0: np.ndarray
    g1: np.ndarray
    start: np.ndarray
    count: np.ndarray

    @property
    def lmax(self) -> np.ndarray:
        """sup of ℓ_b over the range (its value at a breakpoint): δ_b vanishes beyond it."""
        out = np.full(self.logp.shape[0], -np.inf)
        np.maximum.at(out, self.pair, np.maximum(self.l0, self.l1))
        return out


@dataclass(frozen=True)
class Segment:
    """One segment of the range: the levels in local units u - u_first and the grid's ends."""

    u: np.ndarray
    lo: float
    hi: float

    @property
    def points(self) -> int:
        return math.ceil((self.hi - self.lo) / STEP) + 1


def reach(delta: float) -> float:
    """The window half-width for profiles read down to `delta`: R, or more when 2Φ(-R) (the mass
    the range may lose) exceeds 2e-11 δ, so a tiny δ is still resolved to 1e-11 relative."""
    target = math.log(2e-11) + math.log(delta) - math.log(2.0)
    if float(log_ndtr(-R)) <= target:
        return R
    return float(optimize.brentq(lambda r: float(log_ndtr(-r)) - target, R, 100.0, xtol=1e-6))


def check_span(levels: np.ndarray, sigma: float) -> None:
    """Refuse (one line) levels more than SPAN standard deviations apart, continuous or discrete."""
    with np.errstate(over="ignore"):
        span = float(np.ptp(levels)) / sigma
    if not span <= SPAN:
        raise InputError(f"sigma {sigma:g} puts the query's levels {span:.3g} standard deviations apart, over the "
                         f"limit of {SPAN:g}: the leakage (about the squared distance / 2) would leave the float "
                         "range; use a larger sigma (--sigma, or a smaller --rho / --epsilon)")


def segments(levels: np.ndarray, sigma: float, half: float = R) -> list[Segment]:
    """The merged windows [level_s/σ - half, level_s/σ + half] (levels sorted increasing and
    distinct), refused when the levels lie more than SPAN standard deviations apart or the grids
    together exceed --max-states."""
    check_span(levels, sigma)
    gaps = np.diff(levels) / sigma
    cut = np.concatenate([[0], np.flatnonzero(gaps > 2 * half) + 1, [levels.size]])
    out = [Segment((levels - levels[a]) / sigma, -half, (levels[b - 1] - levels[a]) / sigma + half)
           for a, b in zip(cut[:-1], cut[1:])]
    check_states(sum(s.points for s in out), f"the Gaussian profile's grid at sigma {sigma:g}", "points",
                 bytes_per=BYTES)
    return out


@dataclass(frozen=True)
class Segments:
    """The curves of every segment of the range, in order."""

    parts: list[Curves]

    @property
    def lmax(self) -> np.ndarray:
        """sup of ℓ_b over the range: δ_b vanishes beyond it."""
        return np.max([c.lmax for c in self.parts], axis=0)


def build(logp: np.ndarray, logq: np.ndarray, segs: list[Segment]) -> Segments:
    """The pieces of each pair's ℓ on every segment."""
    return Segments([_build_part(logp, logq, s.u, s.lo, s.hi) for s in segs])


def _build_part(logp: np.ndarray, logq: np.ndarray, u: np.ndarray, lo: float, hi: float) -> Curves:
    """The pieces of each pair's ℓ on the grid over [lo, hi] (u sorted increasing)."""
    z = np.linspace(lo, hi, math.ceil((hi - lo) / STEP) + 1)
    ell = log_mixture_grid(logp, u, z) - log_mixture_grid(logq, u, z)
    b, j, kind = _grid_extrema(ell)
    zc = _refine_extrema(logp[b], logq[b], u, z, j, kind)
    lc = exact_ell(logp[b], logq[b], u, zc)[0]
    nb = logp.shape[0]
    ends = np.arange(nb)
    bp_pair = np.concatenate([ends, b, ends])
    bp_z = np.concatenate([np.full(nb, z[0]), zc, np.full(nb, z[-1])])
    bp_l = np.concatenate([ell[:, 0], lc, ell[:, -1]])
    order = np.lexsort((bp_z, bp_pair))
    bp_pair, bp_z, bp_l = bp_pair[order], bp_z[order], bp_l[order]
    same = bp_pair[1:] == bp_pair[:-1]
    pair, z0, z1 = bp_pair[:-1][same], bp_z[:-1][same], bp_z[1:][same]
    count = np.bincount(pair, minlength=nb)
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    g0 = np.searchsorted(z, z0, side="right")
    g1 = np.searchsorted(z, z1, side="left") - 1
    return Curves(u, logp, logq, z, ell, pair, z0, z1, bp_l[:-1][same], bp_l[1:][same], g0, g1, start, count)


def exact_ell(logp: np.ndarray, logq: np.ndarray, u: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ℓ(z_k) and ℓ'(z_k) = E_P[u|z_k] - E_Q[u|z_k] for rows (K, m) and points (K,)."""
    lp, mp = log_mixture_at(logp, u, z)
    lq, mq = log_mixture_at(logq, u, z)
    return lp - lq, mp - mq


def _grid_extrema(ell: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pair, grid index, +1 max / -1 min) where the grid differences change sign, differences
    below FLAT relative counting as zero (carried over from the last non-zero sign)."""
    diff = np.diff(ell, axis=1)
    tol = FLAT * (1.0 + np.abs(ell[:, 1:]))
    sign = np.where(np.abs(diff) <= tol, 0, np.sign(diff)).astype(np.int8)
    filled = _forward_fill(sign)
    change = (filled[:, 1:] * filled[:, :-1] < 0) & (sign[:, 1:] != 0)
    b, j = np.nonzero(change)
    return b, j + 1, filled[b, j].astype(int)


def _forward_fill(sign: np.ndarray) -> np.ndarray:
    """Each zero replaced by the last non-zero value to its left (0 before the first)."""
    idx = np.where(sign != 0, np.arange(sign.shape[1])[None, :], 0)
    np.maximum.accumulate(idx, axis=1, out=idx)
    return np.take_along_axis(sign, idx, axis=1)


def _refine_extrema(logp, logq, u, z, j, kind) -> np.ndarray:
    """The zero of ℓ' within [z_{j-1}, z_{j+1}] by bisection (kind * ℓ' > 0 on the left); the
    grid point itself when the ends do not bracket one."""
    a, b = z[np.maximum(j - 1, 0)], z[np.minimum(j + 1, z.size - 1)]
    if j.size == 0:
        return np.empty(0)
    fa = kind * exact_ell(logp, logq, u, a)[1]
    fb = kind * exact_ell(logp, logq, u, b)[1]
    ok = (fa > 0) & (fb < 0)
    for _ in range(60):
        mid = 0.5 * (a + b)
        fm = kind * exact_ell(logp, logq, u, mid)[1]
        a, b = np.where(fm > 0, mid, a), np.where(fm > 0, b, mid)
        if np.all(b - a <= 1e-14 * (1 + np.abs(a))):
            break
    return np.where(ok, 0.5 * (a + b), z[j])


def roots(cur: Curves, piece: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """The z in each piece where ℓ = ε (the piece crosses ε): grid bisection, then Newton kept
    inside the bracket (bisection when a step leaves it)."""
    s = np.where(cur.l1 > cur.l0, 1.0, -1.0)[piece]
    pair, g0, g1 = cur.pair[piece], cur.g0[piece], cur.g1[piece]
    lo, hi = g0 - 1, g1 + 1
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        val = s * (cur.ell[pair, np.clip(mid, 0, cur.z.size - 1)] - eps)
        move = hi - lo > 1
        lo = np.where(move & (val < 0), mid, lo)
        hi = np.where(move & (val >= 0), mid, hi)
    a = np.where(lo < g0, cur.z0[piece], cur.z[np.clip(lo, 0, cur.z.size - 1)])
    b = np.where(hi > g1, cur.z1[piece], cur.z[np.clip(hi, 0, cur.z.size - 1)])
    fa = np.where(lo < g0, cur.l0[piece], cur.ell[pair, np.clip(lo, 0, cur.z.size - 1)]) - eps
    fb = np.where(hi > g1, cur.l1[piece], cur.ell[pair, np.clip(hi, 0, cur.z.size - 1)]) - eps
    with np.errstate(divide="ignore", invalid="ignore"):
        guess = a + (b - a) * fa / (fa - fb)  # the grid's linear interpolation
    guess = np.where((guess > a) & (guess < b), guess, 0.5 * (a + b))
    return _newton(cur.logp[pair], cur.logq[pair], cur.u, eps, s, a, b, guess)


def _newton(logp, logq, u, eps, s, a, b, x) -> np.ndarray:
    """The root of s (ℓ - ε) (negative at a, non-negative at b) to 1e-10 (1 + |z|); an error dz in
    a root moves δ only by O(dz²) (P - e^ε Q vanishes there), below 1e-20. x: the first guess."""
    active = np.arange(x.size)
    for _ in range(80):
        xa, aa, ba = x[active], a[active], b[active]
        val, slope = exact_ell(logp[active], logq[active], u, xa)
        f = s[active] * (val - eps[active])
        aa, ba = np.where(f < 0, xa, aa), np.where(f < 0, ba, xa)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = xa - (val - eps[active]) / slope
        tol = ROOT * (1 + np.abs(xa))
        done = (f == 0) | (np.abs(step - xa) <= tol) | (ba - aa <= tol)
        new = np.where(f == 0, xa, np.where((step >= aa) & (step <= ba), step, 0.5 * (aa + ba)))
        x[active], a[active], b[active] = new, aa, ba
        active = active[~done]
        if active.size == 0:
            break
    return x


def evaluate(segs: Segments, rows: np.ndarray, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log P(A_ε), log Q(A_ε) for each query (row, ε), and whether Descartes' bound certifies
    that every root was found (a sign change of ℓ - ε across a gap between segments counts as one)."""
    parts = [_evaluate_part(cur, rows, eps) for cur in segs.parts]
    log_p = np.logaddexp.reduce([p[0] for p in parts], axis=0)
    log_q = np.logaddexp.reduce([p[1] for p in parts], axis=0)
    found = np.sum([p[2] for p in parts], axis=0)
    for left, right in zip(segs.parts[:-1], segs.parts[1:]):
        found += (left.ell[rows, -1] > eps) != (right.ell[rows, 0] > eps)
    return log_p, log_q, _certified(segs.parts[0], segs.parts[-1], rows, eps, found)


def _evaluate_part(cur: Curves, rows: np.ndarray, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log P(A_ε ∩ segment), log Q(A_ε ∩ segment) and the roots found, for each query (row, ε)."""
    k = rows.size
    count = cur.count[rows]
    query = np.repeat(np.arange(k), count)
    piece = np.repeat(cur.start[rows], count) + np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    e = eps[query]
    l0, l1, z0, z1 = cur.l0[piece], cur.l1[piece], cur.z0[piece], cur.z1[piece]
    cross = ((l0 < e) & (l1 > e)) | ((l0 > e) & (l1 < e))  # no product: ℓ may be near the float range
    root = np.full(piece.size, np.nan)
    if np.any(cross):
        root[cross] = roots(cur, piece[cross], e[cross])
    inc = l1 > l0
    a = np.where(inc & cross, root, z0)
    b = np.where(~inc & cross, root, z1)
    active = np.where(inc, l1 > e, l0 > e)
    pa, q = cur.pair[piece][active], query[active]
    mass = log_interval_mass(a[active], b[active], cur.u)
    log_p = _scatter_logsumexp(logsumexp(cur.logp[pa] + mass, axis=1), q, k)
    log_q = _scatter_logsumexp(logsumexp(cur.logq[pa] + mass, axis=1), q, k)
    return log_p, log_q, np.bincount(query[cross], minlength=k)


def _scatter_logsumexp(values: np.ndarray, index: np.ndarray, size: int) -> np.ndarray:
    """log Σ exp(values) grouped by index (-inf for empty groups)."""
    peak = np.full(size, -np.inf)
    np.maximum.at(peak, index, values)
    shift = np.where(np.isfinite(peak), peak, 0.0)
    total = np.zeros(size)
    np.add.at(total, index, np.exp(values - shift[index]))
    with np.errstate(divide="ignore"):
        return np.log(total) + shift


def _certified(first: Curves, last: Curves, rows: np.ndarray, eps: np.ndarray, found: np.ndarray) -> np.ndarray:
    """Roots found + sign disagreements between the range ends and ±∞ >= V - 1 (Descartes)."""
    with np.errstate(invalid="ignore"):
        diff = first.logp[rows] - first.logq[rows] - eps[:, None]
    sign = np.where(np.isnan(diff), 0, np.where(diff >= 0, 1, -1)).astype(np.int8)
    filled = _forward_fill(sign)
    changes = np.sum(filled[:, 1:] * filled[:, :-1] < 0, axis=1)
    left = filled[np.arange(rows.size), np.argmax(sign != 0, axis=1)]
    right = filled[:, -1]
    at_lo = np.where(first.ell[rows, 0] > eps, 1, -1)
    at_hi = np.where(last.ell[rows, -1] > eps, 1, -1)
    return found + (left != at_lo) + (right != at_hi) >= changes - 1
