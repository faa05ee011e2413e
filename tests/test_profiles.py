"""Privacy profiles of Gaussian mixtures (DESIGN §3.5): every expected value is computed here
independently — the GDP formula, Balle–Wang's condition, scipy.integrate.quad split at roots
found on a dense grid, brute-force sums over the integers, quad-computed Rényi divergences."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, optimize
from scipy.stats import norm

from ddpbayes.profiles import delta_grid
from ddpbayes.mechanisms.gaussian.discrete import discrete_sigma, shift_profile
from ddpbayes.mechanisms.gaussian.gdp import analytic_sigma, gdp_delta, gdp_epsilon
from ddpbayes.mechanisms.gaussian.mixture import hockey_stick, pair_profiles, pair_rho

DELTAS = np.array(delta_grid(1e-6))


def gdp_formula(eps: float, mu: float) -> float:
    """Dong, Roth & Su (2019), Cor. 2.13: δ(ε) = Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2), as
    Φ(a)(1 - e^{ε + log Φ(b) - log Φ(a)}) so that large ε neither overflows nor cancels."""
    log_a, log_b = norm.logcdf(-eps / mu + mu / 2), norm.logcdf(-eps / mu - mu / 2)
    return math.exp(log_a) * -math.expm1(eps + log_b - log_a)


def one_component(level_p: float, level_q: float):
    return np.array([[0.0, -np.inf]]), np.array([[-np.inf, 0.0]]), np.array([level_p, level_q])


# --- one component each: Gaussian differential privacy ---------------------------------------

@pytest.mark.parametrize("sigma", [0.05, 0.4, 1.0, 3.0])
def test_single_gaussians_are_gdp(sigma):
    logp, logq, levels = one_component(0.0, 1.0)
    mu = 1.0 / sigma
    for eps in (0.0, 0.3, 1.0, 2.5):
        assert hockey_stick(logp, logq, levels, sigma, eps, False)[0] == pytest.approx(gdp_formula(eps, mu), abs=1e-12)
        assert gdp_delta(eps, mu) == pytest.approx(gdp_formula(eps, mu), abs=1e-13)
    prof = pair_profiles(logp, logq, levels, sigma, DELTAS, False)
    assert prof.tv[0] == pytest.approx(2 * norm.cdf(mu / 2) - 1, abs=1e-13)
    for d, e in zip(DELTAS, prof.epsilons[0]):
        if gdp_formula(0.0, mu) <= d:
            assert e == 0.0
            continue
        expected = optimize.brentq(lambda x, d=d: math.log(max(gdp_formula(x, mu), 1e-300) / d), 0.0, mu * mu / 2 + 10 * mu + 10, xtol=1e-14, rtol=1e-14)
        assert e == pytest.approx(expected, rel=1e-9, abs=1e-12)
        assert gdp_epsilon(d, mu) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_analytic_sigma_meets_balle_wang():
    """Balle & Wang (2018, Thm. 8): Φ(Δ/2σ - εσ/Δ) - e^ε Φ(-Δ/2σ - εσ/Δ) = δ at the smallest σ."""
    cond = lambda s, e, d, sens: norm.cdf(sens / (2 * s) - e * s / sens) - math.exp(e) * norm.cdf(
        -sens / (2 * s) - e * s / sens) - d
    for e, d, sens in [(1.0, 1e-5, 1.0), (0.5, 1e-6, 2.0), (3.0, 1e-3, 1.0)]:
        s = analytic_sigma(e, d, sens)
        assert abs(cond(s, e, d, sens)) < 1e-12
        assert cond(s * (1 - 1e-6), e, d, sens) > 0
    assert analytic_sigma(1.0, 1e-5, 1.0) == pytest.approx(3.7306, abs=1e-4)


# --- random mixtures against quad ------------------------------------------------------------

def random_pair(rng, m, zeros=True):
    levels = np.sort(rng.choice(np.arange(-6, 7), size=m, replace=False)).astype(float) * rng.uniform(0.3, 1.5)
    w = rng.dirichlet(np.ones(m), size=2)
    if zeros and m > 2:
        w[0, rng.integers(m)] = 0.0
        w[1, rng.integers(m)] = 0.0
        w /= w.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        return np.log(w[:1]), np.log(w[1:]), levels


def densities(logp, logq, levels, sigma):
    p, q = np.exp(logp[0]), np.exp(logq[0])
    dp = lambda y: float(np.sum(p * norm.pdf(y, levels, sigma)))
    dq = lambda y: float(np.sum(q * norm.pdf(y, levels, sigma)))
    return dp, dq


def quad_hockey(logp, logq, levels, sigma, eps):
    """∫ max(0, p - e^ε q) by quad on the pieces between sign changes found on a dense grid."""
    dp, dq = densities(logp, logq, levels, sigma)
    g = lambda y: dp(y) - math.exp(eps) * dq(y)
    lo, hi = levels.min() - 14 * sigma, levels.max() + 14 * sigma
    ys = np.linspace(lo, hi, 40001)
    vals = (np.exp(logp[0]) - math.exp(eps) * np.exp(logq[0])) @ norm.pdf(ys[None, :], levels[:, None], sigma)
    cuts = [lo]
    for i in np.flatnonzero(np.sign(vals[1:]) != np.sign(vals[:-1])):
        cuts.append(optimize.brentq(g, ys[i], ys[i + 1], xtol=1e-15))
    cuts.append(hi)
    total = 0.0
    for a, b in itertools.pairwise(cuts):
        if g(0.5 * (a + b)) > 0:
            total += integrate.quad(g, a, b, epsabs=1e-14, epsrel=1e-13, limit=200)[0]
    return total


@pytest.mark.parametrize("seed", range(6))
def test_random_mixtures_against_quad(seed):
    rng = np.random.default_rng(seed)
    logp, logq, levels = random_pair(rng, m=2 + seed % 4)
    sigma = rng.uniform(0.5, 2.0)
    for eps in (0.0, 0.2, 0.7):
        got = hockey_stick(logp, logq, levels, sigma, eps, False)[0]
        assert got == pytest.approx(quad_hockey(logp, logq, levels, sigma, eps), abs=1e-10)
    dp, dq = densities(logp, logq, levels, sigma)
    lo, hi = levels.min() - 14 * sigma, levels.max() + 14 * sigma
    tv = 0.5 * integrate.quad(lambda y: abs(dp(y) - dq(y)), lo, hi, points=list(levels), limit=400,
                              epsabs=1e-14)[0]
    assert pair_profiles(logp, logq, levels, sigma, DELTAS, False).tv[0] == pytest.approx(tv, abs=1e-10)


@pytest.mark.parametrize("seed", range(4))
def test_epsilon_of_delta_round_trips(seed):
    rng = np.random.default_rng(100 + seed)
    pairs = [random_pair(rng, m=4) for _ in range(3)]
    logp = np.vstack([p[0] for p in pairs])
    logq = np.vstack([p[1] for p in pairs])
    levels = pairs[0][2]
    sigma = 0.7
    prof = pair_profiles(logp, logq, levels, sigma, DELTAS, False)
    assert np.all(np.diff(prof.epsilons, axis=1) >= 0)  # δ decreasing, ε non-decreasing
    for d_index, d in enumerate(DELTAS):
        eps = prof.epsilons[:, d_index]
        back = hockey_stick(logp, logq, levels, sigma, eps, False)
        for b in range(3):
            if eps[b] > 0:
                assert back[b] == pytest.approx(d, rel=1e-8)
            else:
                assert prof.tv[b] <= d
    # the batch is the rows one at a time
    one = pair_profiles(logp[1:2], logq[1:2], levels, sigma, DELTAS, False)
    assert np.allclose(one.epsilons[0], prof.epsilons[1], rtol=1e-12, atol=0)


def test_delta_is_decreasing_and_convex_in_exp_epsilon():
    """δ = sup_A P(A) - t Q(A) is a sup of lines in t = e^ε: convex in t (not in ε)."""
    rng = np.random.default_rng(7)
    logp, logq, levels = random_pair(rng, m=5)
    eps = np.log(np.linspace(1, 20, 61))
    d = np.array([hockey_stick(logp, logq, levels, 1.0, e, False)[0] for e in eps])
    assert np.all(np.diff(d) <= 1e-15)
    assert np.all(d[:-2] + d[2:] - 2 * d[1:-1] >= -1e-13)


def test_many_levels_posterior_like_rows():
    """A chain-like pair (shifted smooth weights over 60 levels): quad agrees at small δ."""
    levels = np.arange(60.0)
    logp = -0.5 * ((levels - 30.0) / 4.0) ** 2
    logq = -0.5 * ((levels - 31.0) / 4.0) ** 2
    logp, logq = (logp - np.logaddexp.reduce(logp))[None], (logq - np.logaddexp.reduce(logq))[None]
    for eps in (0.1, 0.5):
        got = hockey_stick(logp, logq, levels, 2.0, eps, False)[0]
        assert got == pytest.approx(quad_hockey(logp, logq, levels, 2.0, eps), abs=1e-10)
    assert pair_profiles(logp, logq, levels, 2.0, DELTAS, False).certified.all()  # p_s/q_s monotone: V = 1


# --- discrete Gaussian -----------------------------------------------------------------------

def nz_pmf(y: np.ndarray, centre: float, sigma: float) -> np.ndarray:
    k = np.arange(-2000, 2001)
    z = np.sum(np.exp(-k * k / (2 * sigma * sigma)))
    return np.exp(-((y - centre) ** 2) / (2 * sigma * sigma)) / z


@pytest.mark.parametrize("seed", range(5))
def test_discrete_mixtures_against_brute_force(seed):
    rng = np.random.default_rng(200 + seed)
    m = 2 + seed % 3
    levels = np.sort(rng.choice(np.arange(-8, 9), size=m, replace=False)).astype(float)
    w = rng.dirichlet(np.ones(m), size=2)
    sigma = rng.uniform(0.4, 3.0)
    y = np.arange(-400, 401, dtype=float)
    p = sum(w[0, s] * nz_pmf(y, levels[s], sigma) for s in range(m))
    q = sum(w[1, s] * nz_pmf(y, levels[s], sigma) for s in range(m))
    logp, logq = np.log(w[:1]), np.log(w[1:])
    for eps in (0.0, 0.3, 1.0):
        expected = float(np.sum(np.maximum(0.0, p - math.exp(eps) * q)))
        assert hockey_stick(logp, logq, levels, sigma, eps, True)[0] == pytest.approx(expected, abs=1e-12)
    prof = pair_profiles(logp, logq, levels, sigma, DELTAS, True)
    assert prof.tv[0] == pytest.approx(0.5 * np.abs(p - q).sum(), abs=1e-12)
    for d, e in zip(DELTAS, prof.epsilons[0]):
        hs = lambda x: float(np.sum(np.maximum(0.0, p - math.exp(x) * q)))
        if hs(0.0) <= d:
            assert e == 0.0
        else:
            assert hs(e) == pytest.approx(d, rel=1e-9)


def test_shift_profile_matches_canonne_kamath_steinke():
    """CKS (2020, Thm. 7): δ = P[X > εσ²/Δ - Δ/2]... written as the direct sum over the integers of
    max(0, N_Z(0)(y) - e^ε N_Z(Δ)(y))."""
    y = np.arange(-500, 501, dtype=float)
    for shift, sigma in [(1, 1.0), (2, 0.8), (1, 3.0)]:
        p, q = nz_pmf(y, 0.0, sigma), nz_pmf(y, float(shift), sigma)
        hs = lambda x, p=p, q=q: float(np.sum(np.maximum(0.0, p - math.exp(x) * q)))
        prof = shift_profile(shift, sigma, tuple(DELTAS))
        assert prof.rho == pytest.approx(shift * shift / (2 * sigma * sigma))
        assert prof.tv == pytest.approx(hs(0.0), abs=1e-13)
        for d, e in zip(DELTAS, prof.epsilons):
            if e > 0:
                assert hs(e) == pytest.approx(d, rel=1e-9)


def test_discrete_sigma_is_smallest():
    y = np.arange(-800, 801, dtype=float)
    for eps, delta in [(1.0, 1e-5), (0.5, 1e-3)]:
        s = discrete_sigma(eps, delta, 1)
        hs = lambda sig, eps=eps: float(np.sum(np.maximum(0.0, nz_pmf(y, 0.0, sig) - math.exp(eps) * nz_pmf(y, 1.0, sig))))
        assert hs(s) <= delta * (1 + 1e-9)
        assert hs(s * (1 - 1e-7)) > delta


# --- Rényi: zCDP ρ ---------------------------------------------------------------------------

def quad_renyi(logp, logq, levels, sigma, alpha):
    """D_α(P‖Q) = log ∫ p^α q^(1-α) / (α - 1) by quad, the log-integrand shifted by its peak on a grid."""
    from scipy.special import logsumexp

    lp = lambda y: logsumexp(logp[0] + norm.logpdf(np.asarray(y)[..., None], levels, sigma), axis=-1)
    lq = lambda y: logsumexp(logq[0] + norm.logpdf(np.asarray(y)[..., None], levels, sigma), axis=-1)
    log_f = lambda y: alpha * lp(y) + (1 - alpha) * lq(y)
    reach = (30 + alpha * np.ptp(levels) / sigma) * sigma
    ys = np.linspace(levels.min() - reach, levels.max() + reach, 20001)
    vals = log_f(ys)
    peak, top = vals.max(), ys[vals.argmax()]
    inner = ys[vals > peak - 120]
    val = integrate.quad(lambda y: math.exp(float(log_f(y)) - peak), inner.min(), inner.max(), points=[top], limit=400,
                         epsabs=0, epsrel=1e-12)[0]
    return (math.log(val) + peak) / (alpha - 1)


def test_pair_rho_single_gaussians():
    logp, logq, levels = one_component(0.0, 1.5)
    rho, note = pair_rho(logp[0], logq[0], levels, 1.2, False)
    assert rho == pytest.approx((1.5 / 1.2) ** 2 / 2, rel=1e-9)
    assert isinstance(note, str)


def test_pair_rho_against_quad_renyi():
    rng = np.random.default_rng(11)
    logp, logq, levels = random_pair(rng, m=3, zeros=False)
    sigma = 1.0
    grid = [1.5, 2.0, 4.0, 8.0]
    best = max(max(quad_renyi(logp, logq, levels, sigma, a), quad_renyi(logq, logp, levels, sigma, a)) / a
               for a in grid)
    rho, _ = pair_rho(logp[0], logq[0], levels, sigma, False)
    assert rho >= best - 1e-9
    assert rho < 2 * best + 1e-6


def test_equal_levels_are_merged_and_equal_rows_leak_nothing():
    levels = np.array([0.0, 1.0, 1.0, 2.0])
    logp, logq = np.log([[0.25, 0.25, 0.25, 0.25]]), np.log([[0.1, 0.2, 0.3, 0.4]])
    merged = pair_profiles(np.log([[0.25, 0.5, 0.25]]), np.log([[0.1, 0.5, 0.4]]), [0.0, 1.0, 2.0], 1.0, DELTAS, False)
    assert np.array_equal(pair_profiles(logp, logq, levels, 1.0, DELTAS, False).epsilons, merged.epsilons)
    same = pair_profiles(logp, logp, levels, 1.0, DELTAS, False)
    assert same.tv[0] == 0.0 and not same.epsilons.any()
    assert pair_profiles(logp, logp, levels, 1.0, DELTAS, True).tv[0] == 0.0
