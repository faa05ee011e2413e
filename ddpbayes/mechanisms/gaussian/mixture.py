"""Privacy profiles between pairs of Gaussian mixtures (DESIGN §3.5, "Mixtures: how δ(ε) is computed").

Row b of `logp` and `logq` (B, m) are normalised log-weights over the common query `levels`
(m,). P_b = Σ_s p_bs N(levels_s, σ²) and Q_b likewise (or the discrete Gaussian N_Z(levels_s, σ²)
on the integers when `discrete`), and

    δ_b(ε) = ∫ max(0, dP_b - e^ε dQ_b),   ε_b(δ) = inf{ε >= 0 : δ_b(ε) <= δ}

(the hockey-stick divergence; Balle, Barthe & Gaboardi 2018; Zhu, Dong & Wang 2022). δ_b is
convex and decreasing with dδ_b/dε = -e^ε Q_b(A_ε), A_ε = {dP_b/dQ_b > e^ε}; ε_b(δ) = 0 when
δ_b(0), the total variation distance, is at most δ. For Gaussian mixtures δ_b(ε) -> 0 as ε grows
(beyond the sup of the log-ratio over the range it is below 2e-23), so ε_b(δ) is finite for every
δ > 0 on the grid. Continuous case: `continuous.py`; discrete: `discrete.py`.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from ddpbayes.mechanisms.gaussian import continuous
from ddpbayes.mechanisms.gaussian.discrete import mixture_hockey_stick, mixture_profiles
from ddpbayes.mechanisms.gaussian.renyi import pair_rho as rho
from ddpbayes.profiles import PairProfiles

TOL = 1e-13  # relative tolerance on ε of the Newton iteration
CELLS = 4e6  # grid values of ℓ held at once (32 MB)


def pair_profiles(logp, logq, levels, sigma, deltas, discrete) -> PairProfiles:
    """ε_b(δ) on `deltas` and δ_b(0) for every pair of rows."""
    logp, logq, levels = _inputs(logp, logq, levels)
    deltas = np.asarray(deltas, dtype=float)
    if discrete:
        return PairProfiles(*mixture_profiles(logp, logq, levels, float(sigma), deltas), None)
    if logp.shape[0] == 0:
        return PairProfiles(np.zeros((0, deltas.size)), np.zeros(0), np.ones(0, dtype=bool))
    segs = continuous.segments(levels, float(sigma), continuous.reach(float(deltas.min(initial=1.0))))
    parts = [_continuous_profiles(logp[sl], logq[sl], segs, deltas) for sl in _chunks(logp.shape[0], segs)]
    return PairProfiles(*(np.concatenate(arrays) for arrays in zip(*parts)))


def _chunks(rows: int, segs: list[continuous.Segment]) -> list[slice]:
    """Row blocks whose grids of ℓ (rows x grid points) stay near CELLS numbers."""
    points = sum(s.points for s in segs)
    size = max(1, int(CELLS // max(points, 1)))
    return [slice(s, min(rows, s + size)) for s in range(0, rows, size)]


def hockey_stick(logp, logq, levels, sigma, epsilon, discrete) -> np.ndarray:
    """δ_b(ε) for every pair (ε a number or one per pair)."""
    logp, logq, levels = _inputs(logp, logq, levels)
    eps = np.broadcast_to(np.asarray(epsilon, dtype=float), (logp.shape[0],)).copy()
    if discrete:
        return mixture_hockey_stick(logp, logq, levels, float(sigma), eps)
    segs = continuous.segments(levels, float(sigma))
    out = np.empty(logp.shape[0])
    for sl in _chunks(logp.shape[0], segs):
        out[sl] = _continuous_delta(logp[sl], logq[sl], segs, eps[sl])
    return out


def pair_rho(logp, logq, levels, sigma, discrete) -> tuple[float, str]:
    """zCDP ρ = sup_α max(D_α(P‖Q), D_α(Q‖P)) / α of one pair (1-D rows), with how it was found."""
    logp2, logq2, levels = _inputs(np.atleast_2d(logp), np.atleast_2d(logq), levels)
    return rho(logp2[0], logq2[0], levels, float(sigma), bool(discrete))


def _inputs(logp, logq, levels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float arrays with the levels sorted increasing and distinct: columns permuted alike, and the
    weights of equal levels (equal-weight draws of a discrete query) added up."""
    logp, logq = np.atleast_2d(np.asarray(logp, dtype=float)), np.atleast_2d(np.asarray(logq, dtype=float))
    levels = np.asarray(levels, dtype=float).ravel()
    if logp.shape != logq.shape or logp.shape[1] != levels.size:
        raise ValueError(f"log-weights {logp.shape} and {logq.shape} do not match {levels.size} levels")
    if not np.all(np.isfinite(levels)):
        raise ValueError("levels must be finite")
    order = np.argsort(levels, kind="stable")
    levels, logp, logq = levels[order], logp[:, order], logq[:, order]
    starts = np.flatnonzero(np.concatenate([[True], np.diff(levels) != 0]))
    if starts.size < levels.size:
        with np.errstate(invalid="ignore"):
            logp, logq = (np.logaddexp.reduceat(a, starts, axis=1) for a in (logp, logq))
        levels = levels[starts]
    return logp, logq, levels


def log_delta(log_p: np.ndarray, log_q: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """log δ = log(P(A) - e^ε Q(A)) = log P(A) + log(1 - e^{ε + log Q(A) - log P(A)}), -inf if empty."""
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.minimum(0.0, eps + log_q - log_p)
        out = log_p + np.log(-np.expm1(gap))
    return np.where(np.isfinite(log_p), out, -np.inf)


def _continuous_delta(logp, logq, segs, eps) -> np.ndarray:
    cur = continuous.build(logp, logq, segs)
    lp, lq, _ = continuous.evaluate(cur, np.arange(logp.shape[0]), eps)
    return np.exp(log_delta(lp, lq, eps))


def _continuous_profiles(logp, logq, segs, deltas) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ε (B, D), δ(0) (B,), certified (B,))."""
    cur = continuous.build(logp, logq, segs)
    rows = np.arange(logp.shape[0])
    lp, lq, ok = continuous.evaluate(cur, rows, np.zeros(rows.size))
    tv = np.exp(log_delta(lp, lq, np.zeros(rows.size)))
    eps = np.zeros((rows.size, deltas.size))
    b, d = np.nonzero(deltas[None, :] < tv[:, None])
    if b.size:
        x, sure = _invert(cur, b, np.log(deltas[d]), tv[b])
        eps[b, d] = x
        np.logical_and.at(ok, b, sure)
    return eps, tv, ok


def _invert(cur, rows, target, tv) -> tuple[np.ndarray, np.ndarray]:
    """ε with log δ_row(ε) = target (< log δ(0)): Newton on log δ, whose slope is
    -e^ε Q(A_ε)/δ(ε), kept inside a bracket [lo, hi] that starts at [0, sup ℓ] (bisection when a
    step leaves it); the first guess is the GDP profile with the same δ(0)."""
    lo = np.zeros(rows.size)
    hi = np.maximum(cur.lmax[rows], 0.0)
    mu = 2 * np.sqrt(2) * special.erfinv(np.minimum(tv, 1 - 1e-16))
    guess = mu * mu / 2 - mu * special.ndtri(np.exp(target))
    x = np.where((guess > lo) & (guess < hi), guess, 0.5 * (lo + hi))
    sure = np.ones(rows.size, dtype=bool)
    active = np.arange(rows.size)
    for _ in range(300):
        xa = x[active]
        lp, lq, ok = continuous.evaluate(cur, rows[active], xa)
        sure[active] &= ok
        logd = log_delta(lp, lq, xa)
        f = logd - target[active]
        lo[active] = np.where(f > 0, xa, lo[active])
        hi[active] = np.where(f > 0, hi[active], xa)
        la, ha = lo[active], hi[active]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = xa + f / np.exp(xa + lq - logd)
        scale = TOL * np.maximum(1.0, xa)
        done = (f == 0) | (np.abs(step - xa) <= scale) | (ha - la <= scale)
        keep = (np.abs(step - xa) <= scale) | ((step > la) & (step < ha))
        new = np.where(f == 0, xa, np.where(keep, step, 0.5 * (la + ha)))
        x[active] = new
        active = active[~done]
        if active.size == 0:
            break
    return x, sure
