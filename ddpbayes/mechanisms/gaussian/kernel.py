"""Log-densities of Gaussian mixtures in standardised units (DESIGN §3.5, "Mixtures").

Rows of log-weights a_bs (normalised, -inf allowed) over centres u_s give
log M_b(z) = log Σ_s exp(a_bs - (z - u_s)²/2), the mixture's log-density up to the constant
-log √(2π) (continuous) or -log Z(σ) (discrete Gaussian), which cancels in log-ratios and is
added back where masses are needed.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.special import log_ndtr
from threadpoolctl import threadpool_limits

from ddpbayes.numerics import logsumexp

SHIFT = 300.0  # bound on the exponent a window's factorisation may reach (e^±300 is safe)
CUT = 400.0  # terms below the window's largest by e^-CUT are dropped
PER_WINDOW = 8  # fewer grid points per window than this on average: sum the terms directly
CELLS = 4_000_000  # terms (rows x points x centres) summed directly at once (32 MB)


@threadpool_limits.wrap(limits=1, user_api="blas")  # small products: threads only contend
def log_mixture_grid(logw: np.ndarray, u: np.ndarray, z: np.ndarray) -> np.ndarray:
    """log M_b(z_g) for every row b and every point of the sorted grid z (B, G), to rounding.

    Windows of width w around centres c factor each term as
    exp(a_s - (c - u_s)²/2 - M_b) · exp(-(z - c)(z + c - 2u_s)/2) with M_b the largest first
    exponent, so one matrix product per window sums all terms; the second factor stays within
    e^±SHIFT because |z - c| <= w/2 and w (w/4 + max|c - u|) <= 2 SHIFT. Terms below the window's
    largest by e^-CUT are dropped: a relative error below m e^-(CUT - SHIFT) < m 1e-43.
    Centres far from the grid (levels many standard deviations apart) shrink the windows; when
    they would hold fewer than PER_WINDOW points on average the terms are summed directly
    (`_log_mixture_direct`), so the number of windows never exceeds the number of points."""
    reach = float(max(np.max(np.abs(z[-1] - u)), np.max(np.abs(z[0] - u)))) + 1.0
    width = min(4.0, 2 * SHIFT / (reach + 1.0))
    if (z[-1] - z[0]) / width > z.size / PER_WINDOW:
        return _log_mixture_direct(logw, u, z)
    out = np.empty((logw.shape[0], z.size))
    edges = np.arange(z[0], z[-1] + width, width)
    bounds = np.searchsorted(z, edges)
    bounds[-1] = z.size
    for lo, hi in itertools.pairwise(bounds):
        if hi <= lo:
            continue
        c = 0.5 * (z[lo] + z[hi - 1])
        first = logw - 0.5 * (c - u) ** 2
        peak = np.max(first, axis=1, keepdims=True)
        scaled = np.exp(np.maximum(first - peak, -CUT))
        scaled[first - peak < -CUT] = 0.0  # no subnormal numbers in the product (they are slow)
        zz = z[lo:hi]
        factor = np.exp(-0.5 * (zz[None, :] - c) * (zz[None, :] + c - 2 * u[:, None]))
        with np.errstate(divide="ignore"):
            out[:, lo:hi] = np.log(scaled @ factor) + peak
    return out


def _log_mixture_direct(logw: np.ndarray, u: np.ndarray, z: np.ndarray) -> np.ndarray:
    """log M_b(z_g) by log-sum-exp over the centres, CELLS terms at a time (exact to rounding)."""
    out = np.empty((logw.shape[0], z.size))
    size = max(1, CELLS // max(1, logw.size))
    for s in range(0, z.size, size):
        zz = z[s:s + size]
        out[:, s:s + size] = logsumexp(logw[:, None, :] - 0.5 * (zz[None, :, None] - u[None, None, :]) ** 2, axis=2)
    return out


def log_mixture_at(logw: np.ndarray, u: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log M(z_k) and the posterior mean E[u | z_k] = d/dz log M + z, for rows logw (K, m) and
    points z (K,): exact log-sum-exp, O(K m)."""
    terms = logw - 0.5 * (z[:, None] - u[None, :]) ** 2
    value = logsumexp(terms, axis=1)
    weights = np.exp(terms - value[:, None])
    return value, weights @ u


def log_interval_mass(a: np.ndarray, b: np.ndarray, u: np.ndarray) -> np.ndarray:
    """log (Φ(b - u_s) - Φ(a - u_s)) for intervals (K,) and centres (m,) -> (K, m), computed from
    the nearer tail (log Φ of both ends, then log1p(-ratio)) so masses far in either tail keep
    their relative precision (no 1 - Φ cancellation, no underflow before e^-700000)."""
    lo_small, lo_large = _log_tails(a[:, None] - u[None, :])
    hi_small, hi_large = _log_tails(b[:, None] - u[None, :])
    upper = a[:, None] > u[None, :]  # both ends above the centre: the upper tails Φ(-lo) > Φ(-hi)
    near = np.where(upper, lo_small, hi_large)
    far = np.where(upper, hi_small, lo_large)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = near + np.log1p(-np.exp(far - near))
    return np.where(b[:, None] > a[:, None], out, -np.inf)


def _log_tails(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log Φ(-x), log Φ(x)) from one log_ndtr: the smaller tail t = log Φ(-|x|) directly and the
    larger as log1p(-e^t)."""
    small = log_ndtr(-np.abs(x))
    large = np.log1p(-np.exp(small))
    pos = x >= 0
    return np.where(pos, small, large), np.where(pos, large, small)


def discrete_log_normaliser(sigma: float) -> float:
    """log Z(σ), Z = Σ_k exp(-k²/2σ²) over the integers: the direct sum for σ < 2, else Poisson
    summation Z = σ√(2π) (1 + 2 Σ_{j>=1} exp(-2π²σ²j²)), whose correction is below 2e-34 there."""
    if sigma < 2:
        k = np.arange(-int(40 * sigma) - 2, int(40 * sigma) + 3)
        with np.errstate(over="ignore"):  # a tiny σ: every k ≠ 0 has mass e^-inf = 0
            return float(logsumexp(-0.5 * (k / sigma) ** 2, axis=0))
    return math.log(sigma * math.sqrt(2 * math.pi)) + math.log1p(2 * math.exp(-2 * math.pi ** 2 * sigma ** 2))
