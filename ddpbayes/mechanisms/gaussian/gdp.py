"""Gaussian differential privacy: the profile when the privacy loss is Gaussian (DESIGN §3.5).

Two Gaussians of equal variance whose means are μ standard deviations apart have the privacy
loss N(μ²/2, μ²) under the first, so (Dong, Roth & Su 2019, Cor. 2.13; Balle & Wang 2018, Thm. 8)

    δ_μ(ε) = Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2),

increasing in μ and decreasing in ε, and the Rényi divergence of order α is α μ²/2: ρ = μ²/2.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from ddpbayes.errors import InputError
from ddpbayes.profiles import Profile

FLOOR = -1e4  # log δ below this is 0 to the root finders (log of the smallest double is -744)
MU_MAX = 1e152  # the largest μ calibrated (continuous.SPAN): μ²/2 stays inside the float range


def gdp_delta(epsilon: float, mu: float) -> float:
    """δ_μ(ε) (`log_gdp_delta`)."""
    return math.exp(log_gdp_delta(epsilon, mu))


def log_gdp_delta(epsilon: float, mu: float) -> float:
    """log δ_μ(ε) (`log_gdp_deltas`); -inf where δ underflows, never nan."""
    if mu == 0:
        return -math.inf
    if math.isinf(mu):
        return 0.0
    return float(log_gdp_deltas(np.array([float(epsilon)]), np.array([float(mu)]))[0])


def log_gdp_deltas(eps: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """log δ_μ(ε) elementwise (μ > 0 finite, ε >= 0), without cancellation at any scale. With
    a, b = -ε/μ ± μ/2 (b < 0), ε - b²/2 = -a²/2, so e^ε Φ(b) = e^{-a²/2} erfcx(-b/√2)/2 and, for
    a < 0, Φ(a) = e^{-a²/2} erfcx(-a/√2)/2: the ratio of the two terms of δ is a ratio of erfcx
    values, not a difference of huge exponents (μ up to 1e152 keeps ε(δ) to rounding)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        a, b = -eps / mu + mu / 2, -eps / mu - mu / 2
        half = -0.5 * a * a
        second = np.log(special.erfcx(-b / math.sqrt(2)) / 2)  # log(e^ε Φ(b)) - half
        low = np.log(special.erfcx(-a / math.sqrt(2)) / 2)  # log Φ(a) - half, for a < 0
        log_a = np.where(a < 0, half + low, special.log_ndtr(a))
        gap = np.where(a < 0, second - low, half + second - special.log_ndtr(a))
        out = log_a + np.log(-np.expm1(np.minimum(0.0, gap)))
    return np.where(np.isnan(out), -np.inf, out)


def gdp_epsilon(delta: float, mu: float) -> float:
    """inf{ε >= 0 : δ_μ(ε) <= δ}: 0 when δ_μ(0) = 2Φ(μ/2) - 1 <= δ; else the root of log δ_μ(ε) = log δ,
    bracketed by ε_hi = μ²/2 - μ Φ^{-1}(δ), where the first term of δ_μ alone equals δ."""
    if mu == 0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    if gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = mu * mu / 2 - mu * float(special.ndtri(delta))
    f = lambda e: max(log_gdp_delta(e, mu), FLOOR) - math.log(delta)
    if f(hi) >= 0:  # rounding at the end of the bracket
        return hi
    return float(optimize.brentq(f, 0.0, hi, xtol=1e-15, rtol=1e-15, maxiter=200))


def check_mu(mu: float) -> None:
    """Refuse a finite μ above MU_MAX (ε near μ²/2 would leave the float range) in one line."""
    if math.isfinite(mu) and mu > MU_MAX:
        raise InputError(f"sigma puts the two outputs compared {mu:.3g} standard deviations apart (mu), over the "
                         f"limit of {MU_MAX:g}: the leakage (about mu^2 / 2) would leave the float range; use a "
                         "larger sigma (--sigma, or a smaller --rho / --epsilon)")


def gdp_profile(mu: float, deltas: tuple[float, ...]) -> Profile:
    """The profile of μ-GDP on `deltas`, with δ(0) = 2Φ(μ/2) - 1 and ρ = μ²/2 (μ at most MU_MAX)."""
    check_mu(mu)
    tv = 0.0 if mu == 0 else 1.0 if math.isinf(mu) else float(math.erf(mu / (2 * math.sqrt(2))))
    return Profile(deltas, tuple(gdp_epsilon(d, mu) for d in deltas), tv, float(mu), float(mu) ** 2 / 2,
                   "mu^2 / 2: the privacy loss is Gaussian")


def gdp_mu(epsilon: float, delta: float) -> float:
    """The μ whose profile passes through (ε, δ): δ_μ(ε) = δ (increasing in μ), bracketed by
    doubling from 1 (a huge ε needs μ near √(2ε)) up to MU_MAX, then Brent on log δ_μ(ε)."""
    lo, hi = 0.0, 1.0
    while log_gdp_delta(epsilon, hi) < math.log(delta):
        lo, hi = hi, hi * 2
        if hi > MU_MAX:
            raise InputError(f"no Gaussian noise reaches delta = {delta:g} at epsilon = {epsilon:g}: sigma would be "
                             f"below the sensitivity / {MU_MAX:g}")
    f = lambda m: max(log_gdp_delta(epsilon, m), FLOOR) - math.log(delta)
    return float(optimize.brentq(f, lo, hi, xtol=1e-300, rtol=1e-15, maxiter=500))


def analytic_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The analytic Gaussian mechanism (Balle & Wang 2018, Thm. 8 and Alg. 1): the smallest σ with
    Φ(Δ/2σ - εσ/Δ) - e^ε Φ(-Δ/2σ - εσ/Δ) <= δ, i.e. σ = Δ / μ* with δ_μ*(ε) = δ."""
    return sensitivity / gdp_mu(epsilon, delta)


def zcdp_sigma(rho: float, sensitivity: float) -> float:
    """σ = Δ₂ / √(2ρ): ρ-zCDP for a change of L2 norm Δ₂ (Bun & Steinke 2016, Prop. 1.6; OpenDP)."""
    return sensitivity / math.sqrt(2 * rho)
