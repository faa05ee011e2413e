"""Gaussian noise on a jointly Gaussian model: the privacy loss is Gaussian (DESIGN §3.5).

For the adversary A(i, K), given X_i = t and x_K the query is Q = A X ~ N(q0 + c t, V) with
c = c(i, K) of DESIGN §2.2 and V = Cov(A X | X_i, X_K), free of t. With independent noise
N(0, σ_c²) on output coordinate c, Y = Q + E ~ N(q0 + c t, W), W = V + diag(σ²): the two laws of Y
compared (t, t') are Gaussians with one covariance and means c (t - t') apart, so the privacy loss
is Gaussian and the adversary is μ-GDP with

    μ = |t - t'| sqrt(c^T W^{-1} c),   largest at t, t' = hi, lo   (δ_μ(ε) increases in μ).

Engines keep M = Cov(Y | X_K) = Cov(A X | X_K) + diag(σ²) (it does not depend on the target),
d = Var(X_i | X_K) and c. Since V = Cov(A X | X_K) - d c c^T, W = M - d c c^T, and by
Sherman–Morrison with q = c^T M^{-1} c,

    c^T W^{-1} c = q / (1 - d q),    1 - d q = Var(X_i | Y, X_K) / Var(X_i | X_K) > 0,

so one solve with M serves every target of a known set. Rounding: M's condition number is at
most ||M||_inf / min σ² (its eigenvalues lie between min σ² and its largest absolute row sum),
so q carries a relative error up to about 1e-16 ||M||_inf / min σ², which 1 - d q amplifies by
1 / (1 - d q).
Where that bound exceeds `ROUNDING`, W is formed and solved directly instead (its own error is
the same bound without the amplification).
"""

from __future__ import annotations

import math
import sys

import numpy as np
from scipy.special import ndtri

from ddpbayes.errors import InputError
from ddpbayes.profiles import Profile
from ddpbayes.mechanisms.gaussian.gdp import check_mu, gdp_profile, log_gdp_deltas

ROUNDING = 1e-11  # Sherman–Morrison's error bound above this: solve W directly
HALVINGS = 80  # bisection steps for ε(δ): the bracket shrinks to 1e-24 of itself (below one ulp)


def loss_scale(cov_y: np.ndarray, c: np.ndarray, d: np.ndarray, floor: float) -> np.ndarray:
    """c^T W^{-1} c with W = M - d c c^T, for batches: M = `cov_y` (B, m, m), c (B, s, m), d (B, s),
    `floor` the smallest noise variance; returns (B, s). μ = width · sqrt of it."""
    x = np.linalg.solve(cov_y, np.swapaxes(c, 1, 2))  # (B, m, s)
    q = np.einsum("bsm,bms->bs", c, x)
    rest = 1.0 - d * q
    bound = 1e-16 * np.abs(cov_y).sum(axis=2).max(axis=1)[:, None] / floor
    sure = rest * ROUNDING > bound
    out = np.divide(q, rest, out=np.zeros_like(q), where=sure)
    for b, k in np.argwhere(~sure & np.any(c != 0, axis=2)):
        w = cov_y[b] - d[b, k] * np.outer(c[b, k], c[b, k])
        out[b, k] = c[b, k] @ np.linalg.solve(w, c[b, k])
    return out


def noise_variances(mechanism, rows: int) -> np.ndarray:
    """σ_c² of every output coordinate (`Mechanism.coordinate(c).sigma`), refused in one line when
    one is not a normal double (σ below 1.5e-154: W = V + diag(σ²) would lose the noise)."""
    sigmas = [mechanism.coordinate(c).sigma for c in range(rows)]
    small = min(sigmas, default=1.0)
    if small * small < sys.float_info.min:
        raise InputError(f"sigma {small:g} squares below the smallest double ({sys.float_info.min:.3g}): the gaussian "
                         f"engine needs sigma >= {math.sqrt(sys.float_info.min):.3g}; use a larger sigma (--sigma, or "
                         "a smaller --rho / --epsilon)")
    return np.array(sigmas, dtype=float) ** 2


def gdp_profiles(mus: np.ndarray, deltas: tuple[float, ...]) -> list[Profile]:
    """μ-GDP's profile for every μ (`mechanisms.gaussian.gdp.gdp_profile`, all at once): ε(δ) = inf{ε >= 0 :
    δ_μ(ε) <= δ} by bisection of log δ_μ(ε) - log δ (decreasing in ε) on every (μ, δ) together,
    bracketed by 0 and μ²/2 - μ Φ^{-1}(δ), where the first term of δ_μ alone equals δ."""
    mus = np.asarray(mus, dtype=float)
    unique, inverse = np.unique(mus, return_inverse=True)
    check_mu(float(np.max(unique[np.isfinite(unique)], initial=0.0)))
    inner = (unique > 0) & np.isfinite(unique)
    mu, delta = unique[inner][:, None], np.array(deltas)[None, :]
    lo = np.zeros((len(mu), len(deltas)))
    hi = np.maximum(mu * mu / 2 - mu * ndtri(delta), 0.0)
    zero = _log_gdp_delta(lo, mu) <= np.log(delta)
    for _ in range(HALVINGS):
        mid = (lo + hi) / 2
        above = _log_gdp_delta(mid, mu) > np.log(delta)
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    eps = np.where(zero, 0.0, hi)
    found, rows = [], iter(eps)
    for m, ok in zip(unique, inner):
        if not ok:
            found.append(gdp_profile(float(m), deltas))
            continue
        tv = float(math.erf(m / (2 * math.sqrt(2))))
        found.append(Profile(deltas, tuple(float(e) for e in next(rows)), tv, float(m), float(m) ** 2 / 2,
                             "mu^2 / 2: the privacy loss is Gaussian"))
    return [found[k] for k in inverse]


def _log_gdp_delta(eps: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """log δ_μ(ε) = log Φ(a) + log(1 - e^ε Φ(b) / Φ(a)), a, b = -ε/μ ± μ/2, without cancellation at
    any μ (`mechanisms.gaussian.gdp.log_gdp_deltas`)."""
    return log_gdp_deltas(*np.broadcast_arrays(eps, mu))
