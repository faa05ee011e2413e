"""Interop with OpenDP and diffprivlib (issue #16; docs/guide/mechanisms.md, "Interop"; `pip install ".[interop]"`).

For each row of the Interop table (docs/guide/mechanisms.md), the library's REAL sampler draws N = 10^5 noise values and
a goodness-of-fit test checks that they follow the kernel ddpbayes audits for the flags of that
row: Kolmogorov–Smirnov for Laplace and Gaussian noise, a chi-square test on the integer counts
for the two-sided geometric, α^{|y|}(1 − α)/(1 + α) with α = e^{-1/b}, and the discrete Gaussian,
e^{-y²/2σ²} normalised by a direct sum. The right law must give p > P_MIN; each test also shows
it CAN fail: the same samples against the law with the scale 5% off give p < P_MIN.

diffprivlib is seeded (`random_state`). OpenDP samples from the operating system's CSPRNG and
cannot be seeded (by design), so P_MIN = 1e-4 bounds the false-failure rate of each OpenDP test;
a 5% error gives p below 1e-7 at this N (five numpy draws per law: at most 2e-8). The privacy
parameters are checked too: OpenDP's own accounting (`map`) of the measurement ddpbayes' flags
describe, and diffprivlib's calibrated scale (`_scale`) against ddpbayes' calibration.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ddpbayes.mechanisms import make_mechanism
from ddpbayes.model.domains import Finite
from ddpbayes.mechanisms.gaussian.gdp import analytic_sigma
from ddpbayes.queries import parse_query

N = 100_000
P_MIN = 1e-4
WRONG = 1.05  # a scale this far off must be rejected by the same samples
DOMAINS = [Finite([0, 1])]  # one tuple: the query linear:Δ has L1 and L2 sensitivity Δ


@pytest.fixture(scope="module")
def dp():
    prelude = pytest.importorskip("opendp.prelude", reason="OpenDP is not installed (pip install '.[interop]')")
    prelude.enable_features("contrib")
    return prelude


@pytest.fixture(scope="module")
def dpl():
    return pytest.importorskip("diffprivlib.mechanisms", reason="diffprivlib is not installed (pip install '.[interop]')")


def flags(kind: str, sensitivity: float, **params):
    """The mechanism ddpbayes builds from `--mechanism kind` and `params` for a query of sensitivity Δ."""
    return make_mechanism(kind, parse_query(f"linear:{sensitivity:g}"), DOMAINS, **params)


# ----------------------------------------------------------------------------- goodness of fit


def assert_continuous_fit(samples: np.ndarray, law: str, scale: float) -> None:
    """KS against `law`(0, scale) passes; against the scale 5% off either way, fails."""
    assert len(samples) >= N
    assert stats.kstest(samples, law, args=(0, scale)).pvalue > P_MIN
    for wrong in (scale * WRONG, scale / WRONG):
        assert stats.kstest(samples, law, args=(0, wrong)).pvalue < P_MIN


def geometric_pmf(b: float):
    alpha = math.exp(-1 / b)
    return lambda y: alpha ** np.abs(y) * (1 - alpha) / (1 + alpha)


def discrete_gaussian_pmf(sigma: float):
    support = np.arange(-support_end(sigma), support_end(sigma) + 1)
    total = np.exp(-(support**2) / (2 * sigma**2)).sum()  # the normalising constant, by a direct sum
    return lambda y: np.exp(-(np.asarray(y, dtype=float) ** 2) / (2 * sigma**2)) / total


def support_end(scale: float) -> int:
    """Beyond ±(40 scale + 40) both integer laws have mass below e^-40: the tables stop there."""
    return math.ceil(40 * scale) + 40


def chi_square_p(samples: np.ndarray, pmf, scale: float) -> float:
    """Chi-square p-value of the integer counts: one bin per integer whose expected count is at
    least 5, the two tails pooled into the end bins."""
    end = support_end(scale)
    ys = np.arange(-end, end + 1)
    p = pmf(ys)
    central = ys[N * p >= 5]
    lo, hi = int(central.min()), int(central.max())
    expected = np.concatenate([[p[ys <= lo].sum()], p[(ys > lo) & (ys < hi)], [p[ys >= hi].sum()]])
    observed = np.bincount(np.clip(np.asarray(samples, dtype=np.int64), lo, hi) - lo, minlength=hi - lo + 1)
    return float(stats.chisquare(observed, len(samples) * expected / expected.sum()).pvalue)


def assert_integer_fit(samples: np.ndarray, make_pmf, scale: float) -> None:
    assert len(samples) >= N and np.all(np.equal(np.mod(samples, 1), 0))
    assert chi_square_p(samples, make_pmf(scale), scale) > P_MIN
    for wrong in (scale * WRONG, scale / WRONG):
        assert chi_square_p(samples, make_pmf(wrong), wrong) < P_MIN


def assert_laplace_kernel(mech, b: float) -> None:
    """ddpbayes' log-kernel differs from log Lap_b(y - q) by a constant per output y."""
    q = np.array([0.0, 1.0, 3.0])
    grid, log_k = mech.log_kernel(q)
    finite = np.isfinite(grid)
    dens = stats.laplace(scale=b).logpdf(grid[finite][:, None] - q[None, :])
    gap = log_k[finite] - dens
    assert np.allclose(gap, gap[:, :1], atol=1e-12)


def gdp_delta(eps: float, mu: float) -> float:
    """Balle & Wang 2018 Thm 8: δ(ε) of N(0, σ²) against its shift by Δ, μ = Δ/σ."""
    return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


# ----------------------------------------------------------------------------- OpenDP


def opendp_draws(dp, maker: str, kind: type, metric: str, scale: float) -> np.ndarray:
    """N draws of `maker`'s noise: the measurement applied to a vector of N zeros."""
    atom = dp.atom_domain(T=float, nan=False) if kind is float else dp.atom_domain(T=int)
    meas = getattr(dp.m, maker)(dp.vector_domain(atom), getattr(dp, metric)(T=kind), scale=scale)
    return np.asarray(meas([kind(0)] * N), dtype=float)


def opendp_scalar(dp, maker: str, kind: type, scale: float):
    atom = dp.atom_domain(T=float, nan=False) if kind is float else dp.atom_domain(T=int)
    return getattr(dp.m, maker)(atom, dp.absolute_distance(T=kind), scale=scale)


def test_opendp_laplace_is_ddpbayes_laplace(dp):
    """make_laplace(scale=b) on floats ↔ --mechanism laplace --scale b; OpenDP's ε for Δ is Δ/b."""
    b = 2.5
    mech = flags("laplace", 1.0, scale=b)
    assert_laplace_kernel(mech, b)
    assert_continuous_fit(opendp_draws(dp, "make_laplace", float, "l1_distance", b), "laplace", mech.scale)
    for delta_in in (1.0, 3.0):
        assert opendp_scalar(dp, "make_laplace", float, b).map(delta_in) == pytest.approx(
            mech.dp_leakage(delta_in), rel=1e-12)


@pytest.mark.parametrize("maker", ["make_laplace", "make_geometric"])
def test_opendp_integer_laplace_is_ddpbayes_geometric(dp, maker):
    """On integers make_laplace (and make_geometric, its integer-only form in OpenDP 0.16) is the
    two-sided geometric: ↔ --mechanism geometric --scale b."""
    b = 2.5
    mech = flags("geometric", 1.0, scale=b)
    assert mech.kind == "geometric"
    assert_laplace_kernel(mech, b)  # on integer levels its sup points are Laplace's
    assert_integer_fit(opendp_draws(dp, maker, int, "l1_distance", b), geometric_pmf, mech.scale)
    assert opendp_scalar(dp, maker, int, b).map(2) == pytest.approx(mech.dp_leakage(2), rel=1e-12)


@pytest.mark.slow  # 6 s: OpenDP's exact float sampler
def test_opendp_gaussian_is_ddpbayes_gaussian(dp):
    """make_gaussian(scale=σ) on floats ↔ --mechanism gaussian --sigma σ."""
    sigma = 2.5
    mech = flags("gaussian", 1.0, scale=sigma)
    assert mech.sigma == sigma
    assert_continuous_fit(opendp_draws(dp, "make_gaussian", float, "l2_distance", sigma), "norm", mech.sigma)


def test_opendp_integer_gaussian_is_ddpbayes_discrete_gaussian(dp):
    """make_gaussian(scale=σ) on integers ↔ --mechanism discrete_gaussian --sigma σ."""
    sigma = 2.5
    mech = flags("discrete_gaussian", 1.0, scale=sigma)
    assert mech.discrete and mech.sigma == sigma
    assert_integer_fit(opendp_draws(dp, "make_gaussian", int, "l2_distance", sigma), discrete_gaussian_pmf, sigma)


@pytest.mark.parametrize("kind,number", [("gaussian", float), ("discrete_gaussian", int)])
@pytest.mark.parametrize("rho,sensitivity", [(0.5, 1), (0.1, 3), (2.0, 2)])
def test_opendp_zcdp_accounting_matches_rho(dp, kind, number, rho, sensitivity):
    """--rho ρ sets σ = Δ₂/√(2ρ); OpenDP's zCDP map of make_gaussian(σ) gives back ρ for Δ₂, and
    the classic profile's ρ (μ²/2) is the same."""
    mech = flags(kind, sensitivity, rho=rho)
    assert mech.sigma == pytest.approx(sensitivity / math.sqrt(2 * rho), rel=1e-14)
    meas = opendp_scalar(dp, "make_gaussian", number, mech.sigma)
    assert meas.map(number(sensitivity)) == pytest.approx(rho, rel=1e-9)
    if kind == "gaussian":
        assert mech.classic_profile(sensitivity).rho == pytest.approx(rho, rel=1e-12)


@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-9])
def test_opendp_zcdp_conversion_is_looser_than_the_exact_profile(dp, delta):
    """OpenDP's ε(δ) from zCDP (a conversion bound) is at least the exact Gaussian profile ddpbayes
    reports under dp, which solves Balle–Wang's δ_μ(ε) = δ."""
    sigma = 2.0
    mech = flags("gaussian", 1.0, scale=sigma, delta=delta)
    exact = mech.dp_leakage(1.0)
    assert gdp_delta(exact, 1 / sigma) == pytest.approx(delta, rel=1e-6)
    converted = dp.c.make_zCDP_to_approxDP(opendp_scalar(dp, "make_gaussian", float, sigma)).map(1.0)
    assert converted.epsilon(delta) >= exact


# ----------------------------------------------------------------------------- diffprivlib


def diffprivlib_draws(mechanism, zero) -> np.ndarray:
    return np.array([mechanism.randomise(zero) for _ in range(N)], dtype=float)


def test_diffprivlib_laplace_is_ddpbayes_laplace(dpl):
    """Laplace(epsilon=ε, sensitivity=Δ) ↔ --mechanism laplace --epsilon ε for a query of sensitivity Δ."""
    eps, sens = 0.5, 2.0
    mech = flags("laplace", sens, epsilon=eps)
    assert mech.scale == pytest.approx(sens / eps, rel=1e-15)
    assert mech.dp_leakage(sens) == pytest.approx(eps, rel=1e-15)
    draws = diffprivlib_draws(dpl.Laplace(epsilon=eps, sensitivity=sens, random_state=11), 0.0)
    assert_continuous_fit(draws, "laplace", mech.scale)


def test_diffprivlib_geometric_is_ddpbayes_geometric(dpl):
    """Geometric(epsilon=ε, sensitivity=Δ) ↔ --mechanism geometric --epsilon ε (α = e^{-ε/Δ})."""
    eps, sens = 0.5, 2
    mech = flags("geometric", sens, epsilon=eps)
    assert mech.scale == pytest.approx(sens / eps, rel=1e-15)
    draws = diffprivlib_draws(dpl.Geometric(epsilon=eps, sensitivity=sens, random_state=12), 0)
    assert_integer_fit(draws, geometric_pmf, mech.scale)


@pytest.mark.parametrize("eps,delta,sens", [(0.5, 1e-5, 2.0), (1.0, 1e-6, 1.0), (3.0, 1e-9, 0.5), (0.1, 0.01, 5.0)])
def test_diffprivlib_analytic_sigma_matches(dpl, eps, delta, sens):
    """GaussianAnalytic(ε, δ, Δ) ↔ --mechanism gaussian --epsilon ε --delta δ: the same σ (Balle–Wang),
    and ddpbayes' dp leakage of that σ at δ is ε again."""
    mech = flags("gaussian", sens, epsilon=eps, delta=delta)
    theirs = dpl.GaussianAnalytic(epsilon=eps, delta=delta, sensitivity=sens)._scale
    assert analytic_sigma(eps, delta, sens) == pytest.approx(theirs, rel=1e-6)
    assert mech.sigma == pytest.approx(theirs, rel=1e-6)
    assert gdp_delta(eps, sens / mech.sigma) == pytest.approx(delta, rel=1e-6)
    assert mech.dp_leakage(sens) == pytest.approx(eps, rel=1e-6)


def test_diffprivlib_analytic_gaussian_samples(dpl):
    eps, delta, sens = 0.5, 1e-5, 2.0
    mech = flags("gaussian", sens, epsilon=eps, delta=delta)
    draws = diffprivlib_draws(dpl.GaussianAnalytic(epsilon=eps, delta=delta, sensitivity=sens, random_state=13), 0.0)
    assert_continuous_fit(draws, "norm", mech.sigma)


@pytest.mark.parametrize("eps,delta", [(0.5, 1e-5), (1.0, 1e-6), (0.1, 1e-3)])
def test_diffprivlib_classic_gaussian_is_conservative(dpl, eps, delta):
    """Gaussian(ε ≤ 1, δ, Δ) uses σ = √(2 ln(1.25/δ)) Δ/ε ↔ --mechanism gaussian --sigma σ: its
    exact dp leakage at δ is at most ε (the classic calibration over-noises)."""
    sens = 1.0
    theirs = dpl.Gaussian(epsilon=eps, delta=delta, sensitivity=sens)._scale
    assert theirs == pytest.approx(math.sqrt(2 * math.log(1.25 / delta)) * sens / eps, rel=1e-12)
    assert flags("gaussian", sens, scale=theirs, delta=delta).dp_leakage(sens) <= eps


@pytest.mark.parametrize("eps,delta,sens", [(1.0, 1e-5, 1), (0.5, 1e-6, 2), (2.0, 1e-3, 1)])
def test_diffprivlib_discrete_sigma_matches(dpl, eps, delta, sens):
    """GaussianDiscrete(ε, δ, Δ) ↔ --mechanism discrete_gaussian --epsilon ε --delta δ: both take the
    smallest σ whose exact profile meets (ε, δ) (diffprivlib bisects to a relative 1e-6)."""
    mech = flags("discrete_gaussian", sens, epsilon=eps, delta=delta)
    theirs = dpl.GaussianDiscrete(epsilon=eps, delta=delta, sensitivity=sens)._scale
    assert mech.sigma == pytest.approx(theirs, rel=1e-6)
    assert abs(mech.sigma - analytic_sigma(eps, delta, sens)) > 1e-5 * mech.sigma  # not the continuous σ


@pytest.mark.slow  # 5 s: diffprivlib's discrete Gaussian sampler, one draw per call
def test_diffprivlib_discrete_gaussian_samples(dpl):
    eps, delta, sens = 1.0, 1e-5, 1
    mech = flags("discrete_gaussian", sens, epsilon=eps, delta=delta)
    lib = dpl.GaussianDiscrete(epsilon=eps, delta=delta, sensitivity=sens, random_state=14)
    assert_integer_fit(diffprivlib_draws(lib, 0), discrete_gaussian_pmf, mech.sigma)
