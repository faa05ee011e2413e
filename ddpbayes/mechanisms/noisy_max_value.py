"""Report-noisy-max that releases the noisy maximum (issue #28; DESIGN §5.2): the value v = max_i (a_i + Z_i)
alone (Ding et al. 2018 Algs. 7, 8, DP-Sniper's ReportNoisyMax3/4) or with its index i. Z_i iid Laplace(b) or
one-sided exponential(b).

Densities. With F, f the noise's cdf and pdf, p(i, v | a) = f(v − a_i) Π_{j≠i} F(v − a_j) and p(v | a) =
Σ_i p(i, v | a). Between two consecutive answers (of all the answer vectors mixed) every factor is, in
E = e^{(v − β)/b} from the interval's left end β, a monomial c·E (v below the answer: F = ½e^{(v−a)/b}) or a
binomial 1 − d·E^{−1} (v above it: F = 1 − ½e^{−(v−a)/b}; exponential noise 1 − e^{−(v−a)/b}), with c, d ≤ 1
(Laplace: ≤ ½): each density is a Laurent polynomial in E of exponents −K..K, a mixture too.

The supremum over v of log P(v) − log Q(v) (two mixtures) on an interval is at an end or where P'Q − PQ' = 0,
a polynomial in E of degree ≤ 4K whose real roots in the interval (numpy's companion-matrix eigenvalues) are
the candidates. Below the smallest answer every Laplace density is a multiple of E^K (the ratio is constant: its
value at that answer is also the limit v → −∞); above the largest, E^{−1} leads as v → +∞, whose coefficients'
ratio is the limit (witness v = +inf). Each candidate's log-ratio is evaluated from the closed-form densities (the
polynomial only locates it), so the value is attained at a real output; a stationary point located to δ in v
moves the value by O(δ²). Exponential noise: a density is zero left of its vector's largest answer, so the ratio
is +inf on an interval where Q vanishes and P does not, and densities jump or vanish at answers: the one-sided
limits there are taken at a ± SIDE·max(b, |a|) (within LAW_ERROR of the limit).

Coefficient expansion loses up to ~3^K ulps (alternating products), so K is at most MAX_ANSWERS.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.special import logsumexp

from ddpbayes.errors import InputError
from ddpbayes.mechanisms.quadrature import laplace_log_cdf, laplace_log_pdf

MAX_ANSWERS = 10  # K: the Laurent coefficients of a density lose up to ~3^K ulps
SIDE = 1e-11  # v = a ± SIDE·max(b, |a|) stands for the one-sided limits at an answer a
LAW_ERROR = 1e-10  # the log-ratio at a ± SIDE differs from the one-sided limit by O(SIDE): the stated error


def log_density(v: np.ndarray, index: np.ndarray | None, answers: np.ndarray, b: float, noise: str) -> np.ndarray:
    """log p(i, v | a_r) (or log p(v | a_r) when `index` is None) for outputs v (G,) and every answer vector
    (R, K): (G, R)."""
    x = np.asarray(v, dtype=float)[:, None, None] - answers[None, :, :]  # (G, R, K)
    with np.errstate(divide="ignore", invalid="ignore"):
        if noise == "laplace":
            log_cdf, log_pdf = laplace_log_cdf(x, b), laplace_log_pdf(x, b)
        else:
            xp = np.maximum(x, 0.0)
            log_cdf = np.where(x > 0, np.log(-np.expm1(-xp / b)), -np.inf)
            log_pdf = np.where(x >= 0, -xp / b - math.log(b), -np.inf)
    k = answers.shape[1]
    terms = np.empty_like(log_pdf)
    for i in range(k):  # log f_i + Σ_{j≠i} log F_j, never dividing by F_i (zero for exponential noise at v = a_i)
        terms[:, :, i] = log_pdf[:, :, i] + np.delete(log_cdf, i, axis=2).sum(axis=2)
    if index is None:
        return logsumexp(terms, axis=2)
    i = np.asarray(index, dtype=int)
    return np.take_along_axis(terms, np.broadcast_to(i[:, None, None], (len(i), terms.shape[1], 1)), axis=2)[:, :, 0]


def log_limit(index: np.ndarray | None, answers: np.ndarray, b: float, noise: str) -> np.ndarray:
    """log of the leading coefficient of each density as v → +inf (p ~ C e^{−v/b}): (G, R) for the indices
    (G,), or (1, R) for the value alone. Laplace: C_i = e^{a_i/b}/(2b); exponential noise: e^{a_i/b}/b."""
    lead = answers / b - math.log(b) + (math.log(0.5) if noise == "laplace" else 0.0)  # (R, K)
    if index is None:
        return logsumexp(lead, axis=1)[None, :]
    return lead[:, np.asarray(index, dtype=int)].T


def _factor_polys(a: np.ndarray, beta: float, b: float, noise: str, k: int) -> tuple[list, list]:
    """For one answer vector a (K,) on an interval starting at beta: each F_j and f_j as a Laurent polynomial
    in E = e^{(v − beta)/b} (coefficient arrays over exponents −k..k)."""
    size = 2 * k + 1
    half = 0.5 if noise == "laplace" else 1.0
    cdfs, pdfs = [], []
    for a_j in a:
        F, f = np.zeros(size), np.zeros(size)
        if a_j > beta:  # v < a_j on the interval (Laplace only: exponential rows start at their largest answer)
            c = 0.5 * math.exp((beta - a_j) / b)
            F[k + 1], f[k + 1] = c, c / b
        else:
            d = half * math.exp((a_j - beta) / b)
            F[k], F[k - 1] = 1.0, -d
            f[k - 1] = d / b
        cdfs.append(F)
        pdfs.append(f)
    return cdfs, pdfs


def _mul(p: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    """The product of two Laurent polynomials over exponents −k..k (no product here leaves that range)."""
    return np.convolve(p, q)[k:3 * k + 1]


def _densities(rows: np.ndarray, beta: float, b: float, noise: str, index: int | None) -> np.ndarray:
    """Each row's density on the interval from beta as Laurent coefficients (R, 2K + 1)."""
    k = rows.shape[1]
    out = np.zeros((len(rows), 2 * k + 1))
    for r, a in enumerate(rows):
        cdfs, pdfs = _factor_polys(a, beta, b, noise, k)
        for i in (range(k) if index is None else (index,)):
            term = pdfs[i]
            for j in range(k):
                if j != i:
                    term = _mul(term, cdfs[j], k)
            out[r] += term
    return out


def _stationary(p: np.ndarray, q: np.ndarray, k: int, hi: float) -> list[float]:
    """The s in (0, hi) (s = (v − beta)/b) where P'Q − PQ' = 0, P and Q Laurent coefficient arrays."""
    m = np.arange(-k, k + 1, dtype=float)
    p, q = _unit(p), _unit(q)  # P'Q − PQ' = 0 is unchanged by positive factors; the products stay finite at tiny b
    cross = np.convolve(p * m, q) - np.convolve(p, q * m)  # exponents −2k..2k
    scale = np.abs(cross).max(initial=0.0)
    nz = np.flatnonzero(np.abs(cross) > 1e-14 * scale) if scale > 0 else np.array([], dtype=int)
    if nz.size < 2:
        return []
    roots = np.roots(cross[nz[0]:nz[-1] + 1][::-1])  # in E, after dividing out its lowest power
    out = []
    for z in roots:
        if abs(z.imag) <= 1e-6 * max(1.0, abs(z)) and z.real > 0:
            s = math.log(z.real)
            if 0 < s < hi:
                out.append(s)
    return out


def _unit(p: np.ndarray) -> np.ndarray:
    """p divided by its largest absolute coefficient (p itself when zero)."""
    top = np.abs(p).max(initial=0.0)
    return p / top if top > 0 else p


def candidates(rows: np.ndarray, weights: np.ndarray, b: float, noise: str, index: int | None) -> np.ndarray:
    """Finite outputs v at which sup_v of log Σ_r w_r p(v|a_r) − log Σ_r u_r p(v|a_r) can be attained for any two
    rows w, u of `weights` (T, R) (probabilities over the answer vectors `rows` (R, K)): every answer, the
    stationary points between consecutive answers and beyond the largest, and a point inside each interval (where
    one mixture vanishes on all of it). The limit v → +inf is `log_limit`'s."""
    k = rows.shape[1]
    if k > MAX_ANSWERS:
        raise InputError(f"report_noisy_max releasing the noisy maximum takes at most {MAX_ANSWERS} answers (its "
                         f"densities' coefficients lose ~3^K ulps), got {k}")
    breaks = np.unique(rows)
    near = SIDE * np.maximum(b, np.abs(breaks))
    points = [*breaks, *(breaks - near), *(breaks + near)]  # one-sided limits: exponential densities jump or vanish
    for beta, end in zip(breaks, [*breaks[1:], math.inf]):
        live = np.ones(len(rows), dtype=bool) if noise == "laplace" else rows.max(axis=1) <= beta
        if not live.any():
            continue
        dens = _densities(rows[live], beta, b, noise, index)
        hi = (end - beta) / b
        mixtures = weights[:, live] @ dens  # (T, 2K + 1)
        for t, u in itertools.permutations(range(len(weights)), 2):
            points += [beta + b * s for s in _stationary(mixtures[t], mixtures[u], k, hi)]
        if math.isfinite(hi):
            points.append(beta + b * hi / 2)
    return np.unique(np.array(points, dtype=float))


def sup_log_ratio(log_w: np.ndarray, answers: np.ndarray, b: float, noise: str,
                  both: bool) -> tuple[float, int, int, tuple[float, ...]]:
    """max over ordered pairs (t, t') of the rows of `log_w` (T, R) (each a log-probability vector over the answer
    vectors `answers` (R, K)) and over outputs y of log L(y | t) − log L(y | t'), L(y | t) = Σ_r w_tr p(y | a_r):
    (value, t, t', y), y = (v,) or (i, v); v = +inf is the limit."""
    live = np.isfinite(log_w).any(axis=0)
    log_w, answers = log_w[:, live], answers[live]
    weights = np.exp(log_w)
    k = answers.shape[1]
    best = (-math.inf, 0, 1 if len(log_w) > 1 else 0, (math.nan,))
    for index in (range(k) if both else (None,)):
        v = candidates(answers, weights, b, noise, index)
        idx = None if index is None else np.full(len(v), index)
        log_p = np.concatenate([log_density(v, idx, answers, b, noise),
                                log_limit(None if index is None else np.array([index]), answers, b, noise)])
        ys = np.append(v, math.inf)
        log_l = logsumexp(log_w[:, None, :] + log_p[None, :, :], axis=2)  # (T, G + 1)
        with np.errstate(invalid="ignore"):
            ratio = log_l.max(axis=0) - log_l.min(axis=0)
        ratio[np.isnan(ratio)] = -math.inf  # an output no target value gives
        g = int(np.argmax(ratio))
        if ratio[g] > best[0]:
            y = (float(ys[g]),) if index is None else (float(index), float(ys[g]))
            best = (float(ratio[g]), int(log_l[:, g].argmax()), int(log_l[:, g].argmin()), y)
    return best
