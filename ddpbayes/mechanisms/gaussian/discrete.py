"""Privacy profiles of the discrete Gaussian (DESIGN §3.5; Canonne, Kamath & Steinke 2020).

N_Z(c, σ²) puts mass exp(-(y - c)²/2σ²)/Z(σ) on each integer y. Between two mixtures of them
δ(ε) = Σ_y max(0, P(y) - e^ε Q(y)) is a finite sum once truncated to the union Y of the windows
[level - ⌈Rσ⌉, level + ⌈Rσ⌉] (each kernel puts less than 2e-23 outside its own window, so the sum
loses less than that; R grows for δ below 1e-12 as in `continuous.reach`; Y's size is checked
against --max-states before it is built). With Y
sorted by ℓ_y = log P(y) - log Q(y) decreasing and cumulative masses P_j, Q_j of the first j points,
δ(ε) = P_j - e^ε Q_j exactly for ε between the (j+1)-th and j-th largest ℓ, so δ(ε) and its
inverse ε(δ) = log(P_j - δ) - log Q_j are closed forms on the right piece. The sums are in log space
(log-cumulative sums), so no mass underflows.
"""

from __future__ import annotations

import math

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.limits import check_states
from ddpbayes.mechanisms.gaussian.continuous import check_span, reach
from ddpbayes.mechanisms.gaussian.gdp import analytic_sigma
from ddpbayes.mechanisms.gaussian.kernel import discrete_log_normaliser, log_mixture_grid
from ddpbayes.profiles import Profile, zero_profile

R = 10.0
CHUNK = 2_000_000  # pairs x support points handled at once
BYTES = 160  # bytes per support point of one pair at the peak, with a margin (measured 84)


def _windows(levels: np.ndarray, sigma: float, half: float = R) -> list[tuple[int, int]]:
    """The merged windows [level - ⌈half σ⌉, level + ⌈half σ⌉] as (first, last) integers, refused (one
    line) when the levels lie more than SPAN standard deviations apart."""
    if not np.all(np.equal(np.mod(levels, 1), 0)):
        raise InputError("the discrete Gaussian needs integer query levels")
    check_span(levels, sigma)
    reach = math.ceil(half * sigma)
    out: list[tuple[int, int]] = []
    for level in sorted({int(v) for v in np.ravel(levels)}):
        if out and level - reach <= out[-1][1] + 1:
            out[-1] = (out[-1][0], level + reach)
        else:
            out.append((level - reach, level + reach))
    return out


def _check_support(size: int, what: str) -> None:
    """`limits.check_states` for a support of `size` integers, each costing about BYTES (the sorted
    masses of one pair, with their temporaries) against the machine's available memory."""
    check_states(size, what, "integers", advice=", or use --mechanism gaussian", bytes_per=BYTES)


def support_size(levels: np.ndarray, sigma: float, half: float = R) -> int:
    """|Y|, without building Y."""
    return sum(b - a + 1 for a, b in _windows(levels, sigma, half))


def support(levels: np.ndarray, sigma: float, half: float = R) -> np.ndarray:
    """The integers Y the sums run over, refused (one line) above --max-states before they are built."""
    _check_support(support_size(levels, sigma, half), f"the discrete Gaussian's support at sigma {sigma:g}")
    return np.concatenate([np.arange(a, b + 1, dtype=float) for a, b in _windows(levels, sigma, half)])


def _sorted_masses(logp, logq, levels, sigma, half) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ℓ_y sorted decreasing and the log-cumulative masses log P_j, log Q_j along that order (in
    units of σ from the first level, so a tiny σ keeps every exponent finite)."""
    y = support(levels, sigma, half)
    log_z = discrete_log_normaliser(sigma)
    u, z = (levels - levels[0]) / sigma, (y - levels[0]) / sigma
    lp = log_mixture_grid(logp, u, z) - log_z
    lq = log_mixture_grid(logq, u, z) - log_z
    ell = lp - lq
    order = np.argsort(-ell, axis=1, kind="stable")
    take = lambda a: np.take_along_axis(a, order, axis=1)
    return take(ell), np.logaddexp.accumulate(take(lp), axis=1), np.logaddexp.accumulate(take(lq), axis=1)


def _chunks(rows: int, points: int):
    size = max(1, CHUNK // max(points, 1))
    return [slice(s, min(rows, s + size)) for s in range(0, rows, size)]


def mixture_hockey_stick(logp, logq, levels, sigma, eps, half: float = R) -> np.ndarray:
    """δ_b(ε_b) for each pair: P_j - e^ε Q_j with j = #{y : ℓ_y > ε} (windows of `half` σ)."""
    out = np.empty(logp.shape[0])
    for sl in _chunks(logp.shape[0], support_size(levels, sigma, half)):
        ell, cp, cq = _sorted_masses(logp[sl], logq[sl], levels, sigma, half)
        out[sl] = _delta(ell, cp, cq, eps[sl])
    return out


def _delta(ell, cp, cq, eps) -> np.ndarray:
    j = np.sum(ell > eps[:, None], axis=1)
    k = np.maximum(j - 1, 0)
    rows = np.arange(ell.shape[0])
    lp, lq = cp[rows, k], cq[rows, k]
    with np.errstate(divide="ignore", invalid="ignore"):
        val = np.exp(lp) * -np.expm1(np.minimum(0.0, eps + lq - lp))
    return np.where(j > 0, val, 0.0)


def mixture_profiles(logp, logq, levels, sigma, deltas) -> tuple[np.ndarray, np.ndarray]:
    """ε_b(δ) on `deltas` (B, D) and δ_b(0) (B,) by the closed-form inverse (`profiles.PairProfiles`)."""
    b = logp.shape[0]
    half = reach(float(deltas.min(initial=1.0)))
    eps, tv = np.zeros((b, deltas.size)), np.zeros(b)
    for sl in _chunks(b, support_size(levels, sigma, half)):
        ell, cp, cq = _sorted_masses(logp[sl], logq[sl], levels, sigma, half)
        tv[sl] = _delta(ell, cp, cq, np.zeros(ell.shape[0]))
        eps[sl] = _invert(ell, cp, cq, deltas)
    return eps, tv


def _invert(ell, cp, cq, deltas) -> np.ndarray:
    """For each δ: j* = the largest j with V_j = δ(ℓ_(j)) = P_j - e^{ℓ_(j)} Q_j <= δ (V grows with j),
    then ε = log(P_j* - δ) - log Q_j* on that piece, and 0 if that is negative. V_j is summed
    without its j-th terms, which cancel exactly (P(y_j) = e^{ℓ_(j)} Q(y_j)): P_{j-1} - e^{ℓ_(j)} Q_{j-1},
    so it keeps its relative precision when it is far below P_j (a δ of 1e-300)."""
    before = lambda c: np.concatenate([np.full((c.shape[0], 1), -np.inf), c[:, :-1]], axis=1)
    cp0, cq0 = before(cp), before(cq)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_v = cp0 + np.log(-np.expm1(np.minimum(0.0, ell + cq0 - cp0)))
    log_v = np.maximum.accumulate(np.where(np.isnan(log_v), -np.inf, log_v), axis=1)  # monotone despite rounding
    log_d = np.log(deltas)
    j = np.sum(log_v[:, None, :] <= log_d[None, :, None], axis=2)  # (B, D), >= 1 since V_1 = 0
    k = np.maximum(j - 1, 0)
    lp = np.take_along_axis(cp, k, axis=1)
    lq = np.take_along_axis(cq, k, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = lp + np.log1p(-np.exp(log_d[None, :] - lp)) - lq
    return np.maximum(np.where(np.isfinite(eps), eps, 0.0), 0.0)


def shift_profile(shift: int, sigma: float, deltas) -> Profile:
    """N_Z(0, σ²) against N_Z(shift, σ²), exactly; ρ = shift²/2σ², the zCDP bound of Canonne,
    Kamath & Steinke (2020, Thm. 4), which their Rényi divergences attain up to a term that
    vanishes as σ grows."""
    deltas = tuple(float(d) for d in deltas)
    if shift == 0:
        return zero_profile(deltas)
    levels = np.array([0.0, float(abs(shift))])
    logp = np.array([[0.0, -np.inf]])
    logq = np.array([[-np.inf, 0.0]])
    eps, tv = mixture_profiles(logp, logq, levels, float(sigma), np.asarray(deltas))
    rho = shift * shift / (2 * sigma * sigma)
    return Profile(deltas, tuple(float(e) for e in eps[0]), float(tv[0]), None, rho,
                   "shift^2 / (2 sigma^2): the discrete Gaussian's zCDP bound (Canonne, Kamath, Steinke 2020)")


def shift_delta(shift: int, sigma: float, epsilon: float, delta: float = 1.0) -> float:
    """δ(ε) of N_Z(0, σ²) against N_Z(shift, σ²), resolved to 1e-11 relative down to `delta`."""
    levels = np.array([0.0, float(abs(shift))])
    return float(mixture_hockey_stick(np.array([[0.0, -np.inf]]), np.array([[-np.inf, 0.0]]), levels, float(sigma),
                                      np.array([float(epsilon)]), reach(delta))[0])


def discrete_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest σ (to 1e-10 relative, rounded up) whose shift profile at the integer
    `sensitivity` has δ(ε) <= δ, by bisection on σ (δ(ε) decreases as σ grows), bracketed around
    the continuous analytic Gaussian's σ."""
    if not float(sensitivity).is_integer() or sensitivity <= 0:
        raise InputError(f"the discrete Gaussian is calibrated for an integer sensitivity, got {sensitivity:g}")
    shift = int(sensitivity)
    meets = lambda s: shift_delta(shift, s, epsilon, delta) <= delta
    guess = analytic_sigma(epsilon, delta, shift)
    _check_support(support_size(np.array([0.0, float(shift)]), 2 * guess, reach(delta)),
                   f"calibrating the discrete Gaussian to epsilon {epsilon:g}, delta {delta:g} (sigma near {guess:.4g}): "
                   f"its support at sigma {2 * guess:.4g}")
    lo, hi = guess / 2, guess * 2
    while meets(lo):
        lo /= 2
    while not meets(hi):
        hi *= 2
    while hi - lo > 1e-11 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return hi
