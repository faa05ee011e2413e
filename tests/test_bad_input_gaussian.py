"""Issue #25, "Bad input, round two": Gaussian and discrete Gaussian noise at extreme σ, ρ, ε and δ.

Each input either gets the right number or one line (InputError, exit 2) naming the limit and the
flag, decided before anything large is allocated. Expected numbers come from independent formulas
written here: the GDP curve δ_μ(ε) = Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2) (Balle & Wang 2018), closed
forms for components many σ apart, and brute-force sums over the integers (discrete Gaussian).
"""

from __future__ import annotations

import itertools
import math
import re
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize
from scipy.special import log_ndtr, logsumexp, ndtri

from ddpbayes.cli.main import main
from ddpbayes.errors import InputError
from ddpbayes.limits import state_limit
from ddpbayes.profiles import delta_grid
from ddpbayes.mechanisms.gaussian.discrete import discrete_sigma, shift_profile
from ddpbayes.mechanisms.gaussian.gdp import analytic_sigma, gdp_epsilon
from ddpbayes.mechanisms.gaussian.mixture import pair_profiles, pair_rho

HOUSEHOLD = str(Path(__file__).resolve().parent.parent / "models" / "household.py")
SINGLE = (np.array([[0.0, -np.inf]]), np.array([[-np.inf, 0.0]]))  # N(0, σ²) against N(1, σ²)


def log_gdp_delta(eps: float, mu: float) -> float:
    """log δ_μ(ε) of two unit Gaussians μ apart (Balle & Wang 2018, Thm. 8)."""
    a, b = log_ndtr(-eps / mu + mu / 2), log_ndtr(-eps / mu - mu / 2)
    return float(a + np.log(-np.expm1(eps + b - a)))


def household_weights(n: int = 4, p_house: float = 0.2, p_sick: float = 0.8, p_base: float = 0.1):
    """models/household.py enumerated: P(count = s | x0 = 1) and P(count = s | x0 = 0), s = 0..n."""
    xs = np.array(list(itertools.product([0, 1], repeat=n)))
    prob = np.zeros(len(xs))
    for h, ph in ((1, p_house), (0, 1 - p_house)):
        rate = p_sick if h else p_base
        prob += ph * np.prod(np.where(xs == 1, rate, 1 - rate), axis=1)
    count = xs.sum(axis=1)
    law = [np.bincount(count[xs[:, 0] == t], prob[xs[:, 0] == t], minlength=n + 1) for t in (1, 0)]
    return [w / w.sum() for w in law]


# ------------------------------------------------------------------ continuous: levels many σ apart


@pytest.mark.parametrize("sigma", [1e-3, 1e-4, 1e-5])
def test_tiny_sigma_two_gaussians_follow_the_gdp_curve(sigma):
    """N(0, σ²) vs N(1, σ²) is μ-GDP with μ = 1/σ: every ε(δ) on the grid solves δ_μ(ε) = δ. The old
    grid spanned 1/σ standard deviations at step 0.05 (hung at σ = 1e-5)."""
    deltas = np.array(delta_grid(1e-6))
    found = pair_profiles(*SINGLE, np.array([0.0, 1.0]), sigma, deltas, False)
    assert found.certified[0]
    assert found.tv[0] == pytest.approx(math.erf(1 / sigma / (2 * math.sqrt(2))), abs=1e-12)
    for eps, delta in zip(found.epsilons[0], deltas):
        assert log_gdp_delta(eps, 1 / sigma) == pytest.approx(math.log(delta), abs=1e-8)


def top_level_delta(eps: float, p: float, q: float, gap: float) -> float:
    """δ(ε) when P has mass p at a level `gap` σ beyond Q's last level (mass q) and every other level
    is far: on that window ℓ(z) = log(p/q) + gap (z - u) + gap²/2, so A_ε = {z > u + x} with
    x = (ε - log(p/q) - gap²/2)/gap and δ = p Φ(-x) - e^ε q Φ(-x - gap)."""
    x = (eps - math.log(p / q) - gap * gap / 2) / gap
    log_first = math.log(p) + log_ndtr(-x)
    return math.exp(log_first) * -math.expm1(eps + math.log(q) + log_ndtr(-x - gap) - log_first)


def test_household_count_at_sigma_1e3_against_the_separated_closed_form():
    """Count on models/household.py, x0 = 1 vs x0 = 0, σ = 1e-3: the levels 0..4 are 1000 σ apart,
    so at δ = 1e-6 only count = 4 (impossible when x0 = 0) matters: ε solves the closed form above
    with Q's mass at count = 3 (the other levels' overlap is below e^-(1000²/8))."""
    p, q = household_weights()
    with np.errstate(divide="ignore"):
        logp, logq = np.log(p)[None], np.log(q)[None]
    found = pair_profiles(logp, logq, np.arange(5.0), 1e-3, np.array([1e-2, 1e-6, 1e-10]), False)
    for eps, delta in zip(found.epsilons[0], (1e-2, 1e-6, 1e-10)):
        expected = optimize.brentq(lambda e: math.log(top_level_delta(e, p[4], q[3], 1e3)) - math.log(delta),
                                   4.8e5, 5.2e5, xtol=1e-9, rtol=1e-15)
        assert eps == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("sigma", [1e-50, 1e-150])
def test_extreme_sigma_gives_the_huge_epsilon(sigma):
    """Levels 1e50 and 1e150 σ apart: ε(δ) = μ²/2 - μ Φ^{-1}(δ) to rounding (δ_μ's first term; the
    second is below e^-μ²/2), far beyond what the old grid could span."""
    mu = 1 / sigma
    found = pair_profiles(*SINGLE, np.array([0.0, 1.0]), sigma, np.array([1e-6]), False)
    assert found.epsilons[0, 0] == pytest.approx(mu * mu / 2 - mu * ndtri(1e-6), rel=1e-12)


def test_levels_beyond_the_float_range_are_refused_in_one_line():
    """σ = 1e-300 puts the levels 1e300 σ apart: ε ~ 5e599 has no double, so one line names the limit."""
    for discrete in (False, True):
        with pytest.raises(InputError, match=r"1e\+300 standard deviations apart, over the limit of 1e\+152"):
            pair_profiles(*SINGLE, np.array([0.0, 1.0]), 1e-300, np.array([1e-6]), discrete)


def test_the_continuous_grid_is_bounded_by_max_states():
    """The grid of ℓ counts against --max-states: 2 windows of 10 σ at step 0.05 are 2 x 401 points."""
    with state_limit(801), pytest.raises(InputError, match=r"grid at sigma 0.001 has 802 points.*--max-states"):
        pair_profiles(*SINGLE, np.array([0.0, 1.0]), 1e-3, np.array([1e-6]), False)
    with state_limit(802):
        pair_profiles(*SINGLE, np.array([0.0, 1.0]), 1e-3, np.array([1e-6]), False)


def test_delta_1e300_is_resolved_without_warnings():
    """δ = 1e-300 is far below the 2e-23 the default 10 σ windows lose: the windows widen so that
    δ_μ(ε(δ)) = δ still holds (μ = 1), for the mixture code and the GDP inverse, with no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = pair_profiles(*SINGLE, np.array([0.0, 1.0]), 1.0, np.array([1e-300]), False)
        eps = gdp_epsilon(1e-300, 1.0)
    assert log_gdp_delta(found.epsilons[0, 0], 1.0) == pytest.approx(math.log(1e-300), abs=1e-8)
    assert log_gdp_delta(eps, 1.0) == pytest.approx(math.log(1e-300), abs=1e-8)


# ----------------------------------------------------------------------------- calibration extremes


def test_huge_epsilon_has_a_tiny_analytic_sigma():
    """δ_μ(ε) = δ for huge ε: -ε/μ + μ/2 = Φ^{-1}(δ) to first order, so μ = √(2ε) + Φ^{-1}(δ) and
    σ = 1/μ; the old bracket stopped at μ = 1e12 and said no noise reaches δ."""
    sigma = analytic_sigma(1e300, 1e-6, 1.0)
    assert sigma == pytest.approx(1 / (math.sqrt(2e300) + ndtri(1e-6)), rel=1e-12)
    with pytest.raises(InputError, match="no Gaussian noise reaches"):
        analytic_sigma(1e308, 1e-6, 1.0)  # μ ≈ 1.4e154: past the 1e152 the profiles can represent


def test_discrete_calibration_at_tiny_epsilon_is_refused_before_the_bisection():
    """ε = 1e-300 needs σ near 4e5: the support at the bracket's top is 1.6e7 integers."""
    with pytest.raises(InputError, match=r"calibrating the discrete Gaussian to epsilon 1e-300.*--max-states"):
        discrete_sigma(1e-300, 1e-6, 1)


def test_discrete_calibration_at_huge_epsilon():
    """ε = 1e300, shift 1: N_Z at tiny σ is a point mass, δ(ε) = 1 - e^{ε - 1/2σ²} while 1/2σ² > ε and
    e^{-1/2σ²}-small after, so the smallest σ meeting δ = 1e-6 is 1/√(2ε) (to the bisection's 1e-11)."""
    assert discrete_sigma(1e300, 1e-6, 1) == pytest.approx(1 / math.sqrt(2e300), rel=1e-10)


# --------------------------------------------------------------------------------- discrete Gaussian


def brute_log_delta(eps: float, shift: int, sigma: float, half: int = 400) -> float:
    """log Σ_y max(0, P(y) - e^ε Q(y)) for N_Z(0, σ²) vs N_Z(shift, σ²), summed over |y| <= half."""
    y = np.arange(-half, half + 1, dtype=float)
    log_z = logsumexp(-0.5 * (y / sigma) ** 2)
    lp, lq = -0.5 * (y / sigma) ** 2 - log_z, -0.5 * ((y - shift) / sigma) ** 2 - log_z
    keep = lp - lq > eps
    return float(logsumexp(lp[keep] + np.log(-np.expm1(eps + lq[keep] - lp[keep]))))


@pytest.mark.parametrize("sigma", [0.7, 2.0])
def test_discrete_profile_down_to_delta_1e300_against_brute_force(sigma):
    """Down to δ = 1e-300 each ε(δ) solves the brute-force sum (the old support, 10 σ, lost 2e-23)."""
    deltas = delta_grid(1e-300)
    profile = shift_profile(1, sigma, deltas)
    for eps, delta in zip(profile.epsilons, deltas):
        if eps > 0:
            assert brute_log_delta(eps, 1, sigma) == pytest.approx(math.log(delta), abs=1e-8)


def test_discrete_tiny_sigma_is_a_point_mass():
    """σ = 1e-100: P = δ_0, Q(0) = e^{-1/2σ²}, so δ(ε) = 1 - e^{ε - 1/2σ²} and ε(δ) = 1/2σ² + log(1 - δ)."""
    sigma = 1e-100
    profile = shift_profile(1, sigma, (1e-6,))
    assert profile.epsilons[0] == pytest.approx(0.5 / sigma ** 2 + math.log1p(-1e-6), rel=1e-14)
    assert profile.tv == 1.0


@pytest.mark.parametrize(("sigma", "count"), [(1e7, "200,000,002"), (1e300, "about 2e+301")])
def test_discrete_support_over_max_states_is_refused_before_allocating(sigma, count):
    """N_Z(0, σ²) vs N_Z(1, σ²) sums over [−⌈10σ⌉, 1 + ⌈10σ⌉]: 2e8 integers at σ = 1e7 (the old code
    built them: 3.7 GB), refused naming the count and --max-states, with no large allocation."""
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=re.escape(f"sigma {sigma:g} has {count} integers, over the limit")):
            shift_profile(1, sigma, (1e-6,))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000


# ------------------------------------------------------------------------------------- command line


def test_cli_discrete_sigma_1e7_is_one_line(capsys):
    """The issue's command: exit 2 and one line on stderr naming the support and --max-states."""
    code = main(["audit", HOUSEHOLD, "--query", "count", "--mechanism", "discrete_gaussian", "--sigma", "1e7",
                 "--notion", "idp"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "integers, over the limit of 4,194,304 (raise --max-states" in err[0]


# ------------------------------------------------------------------------------- sampling engine


def test_sampling_discrete_event_over_max_states_is_refused_before_allocating():
    """The held-out event's integers at σ = 1e7, levels 0..3: 3 + 2 ⌈10σ⌉ + 1 of them (built before
    the old size check), checked against --max-states first."""
    from ddpbayes.engines.sampling.profile import outcome_event
    from ddpbayes.mechanisms.gaussian import DiscreteGaussian

    q = np.array([[0.0, 1.0, 1.0, 2.0]])
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=re.escape("sigma 1e+07 has 200,000,004 integers, over the limit")):
            outcome_event(q, q + 1, 0.5, DiscreteGaussian(1e7))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000


@pytest.mark.parametrize("sigma", [1e-200, 1e9])
def test_sampling_discrete_masses_at_extreme_sigma(sigma):
    """Mass of {0, 3} under N_Z(v, σ²) averaged over draws v: at σ = 1e-200 a point mass (the draws at
    0 and 3 count 1, the others 0; the old code warned of overflow); at σ = 1e9 Z = σ√(2π) to 1e-30
    (Poisson summation; the old normaliser built 2 ⌈13σ⌉ + 3 integers, 2.6e10 at σ = 1e9)."""
    from ddpbayes.engines.sampling.profile import Event, mean_mass
    from ddpbayes.mechanisms.gaussian import DiscreteGaussian

    points, q = np.array([0.0, 3.0]), np.array([[0.0, 1.0, 3.0, 5.0]])
    if sigma < 1:
        expected = 0.5
    else:
        z = sigma * math.sqrt(2 * math.pi)
        expected = np.mean([np.exp(-0.5 * ((points - v) / sigma) ** 2).sum() / z for v in q.ravel()])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        log_mean, _ = mean_mass(Event(np.empty(0), np.empty(0), points), q, DiscreteGaussian(sigma))
    assert math.exp(log_mean) == pytest.approx(expected, rel=1e-12)


def test_gaussian_engine_gdp_inverse_at_huge_mu():
    """μ = 1e150 (σ = 1e-150 on a jointly Gaussian model): e^ε Φ(b) is below Φ(a) by a factor ~1/μ,
    so Φ(a) = δ and ε = μ²/2 - μ Φ^{-1}(δ) (the old bisection read a cancelled difference of
    exponents near 1e299 and stopped 1.5e-8 short)."""
    from ddpbayes.engines.gaussian.noise import gdp_profiles

    mu = 1e150
    profile = gdp_profiles(np.array([mu]), (1e-2, 1e-6, 1e-300))[0]
    for eps, delta in zip(profile.epsilons, profile.deltas):
        assert eps == pytest.approx(mu * mu / 2 - mu * ndtri(delta), rel=1e-14)


def test_mu_beyond_the_float_range_is_refused_in_one_line():
    """dp at σ = 1e-300: μ = 1e300 and ε ≈ μ²/2 has no double (the old bracket μ²/2 was inf and the
    root finder crashed); the gaussian engine's W = V + diag(σ²) cannot hold σ² = 1e-600."""
    from ddpbayes.engines.gaussian.noise import gdp_profiles, noise_variances
    from ddpbayes.mechanisms.gaussian import Gaussian
    from ddpbayes.mechanisms.gaussian.gdp import gdp_profile

    with pytest.raises(InputError, match=r"1e\+300 standard deviations apart \(mu\), over the limit of 1e\+152"):
        gdp_profile(1e300, (1e-6,))
    with pytest.raises(InputError, match=r"over the limit of 1e\+152"):
        gdp_profiles(np.array([1.0, 1e300]), (1e-6,))
    with pytest.raises(InputError, match=r"sigma 1e-300 squares below the smallest double.*sigma >= 1.49e-154"):
        noise_variances(Gaussian(1e-300), 1)
    assert noise_variances(Gaussian(1e-150), 1)[0] == pytest.approx(1e-300, rel=1e-15)


def test_zcdp_rho_of_the_household_pair_at_sigma_1e3():
    """ρ = sup_α D_α/α for x0 = 1 vs x0 = 0 at σ = 1e-3: D_α(P‖Q) is carried by P's count = 4 against
    Q's count = 3 (g = 1000 σ apart), ∫ (p4 φ(z - g))^α (q3 φ(z))^{1-α} = p4^α q3^{1-α} e^{α(α-1)g²/2},
    so D_α/α = g²/2 + (α log p4 + (1 - α) log q3) / (α(α - 1)) (the other order gives less). The old
    refinement reused the window the largest α had widened, found no grid within the limits and
    kept the coarse α grid's best (0.025 short)."""
    p, q = household_weights()
    with np.errstate(divide="ignore"):
        rho, _ = pair_rho(np.log(p), np.log(q), np.arange(5.0), 1e-3, False)
    excess = lambda a: (a * math.log(p[4]) + (1 - a) * math.log(q[3])) / (a * (a - 1))
    best = optimize.minimize_scalar(lambda a: -excess(a), bounds=(1.01, 10.0), method="bounded",
                                    options={"xatol": 1e-10})
    assert rho - 5e5 == pytest.approx(-best.fun, abs=1e-6)


def test_household_at_delta_1e300_against_a_direct_integral():
    """Count on household, x0 = 1 vs 0, σ = the analytic σ for (ε, δ) = (1, 1e-300): δ(ε) at the ε
    found, integrated here by the trapezoid rule in log space over z in [-45, 45] (step 1e-3), is
    1e-300. The old 10 σ range lost 2e-23 of δ, so it read ε = 0.65 instead of 2.45 (a silent
    underestimate)."""
    p, q = household_weights()
    sigma = analytic_sigma(1.0, 1e-300, 1.0)
    with np.errstate(divide="ignore"):
        logp, logq = np.log(p), np.log(q)
    eps = pair_profiles(logp[None], logq[None], np.arange(5.0), sigma, np.array([1e-300]), False).epsilons[0, 0]
    z = np.linspace(-45.0, 45.0, 90_001)
    terms = -0.5 * (z[:, None] - np.arange(5.0)[None, :] / sigma) ** 2 - 0.5 * math.log(2 * math.pi)
    lp, lq = logsumexp(terms + logp, axis=1), logsumexp(terms + logq, axis=1)
    keep = lp - lq > eps
    log_f = lp[keep] + np.log(-np.expm1(eps + lq[keep] - lp[keep]))
    log_delta = logsumexp(log_f + np.log(z[1] - z[0]))  # the integrand vanishes at the interval ends
    assert log_delta == pytest.approx(math.log(1e-300), abs=1e-4)


def test_discrete_support_beyond_memory_is_refused_whatever_max_states_allows():
    """σ = 1e9 with --max-states raised past its 2e10 integers: about 160 bytes each (the sorted
    masses and their temporaries) is 3 TiB, more than the machine has: refused before building
    (the old code, given the room, went on allocating: 20 GB at σ = 1e7 before it was killed)."""
    tracemalloc.start()
    try:
        with state_limit(10**12), pytest.raises(InputError, match=r"integers\) would need about .* more than this "
                                                                   r"machine's available memory"):
            shift_profile(1, 1e9, (1e-6,))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000
