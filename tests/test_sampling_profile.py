"""The sampling engine under Gaussian noise (DESIGN §2.3, §3.5): the privacy profile ε(δ) estimated
from MCMC draws, with an interval (a one-sided 95% lower bound and an approximate upper bound).

Every expected number is derived here: Gaussian DP in closed form (Dong, Roth & Su 2019, Cor. 2.13:
two Gaussians of equal variance μ standard deviations apart have
δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)), the conditional laws of a bivariate normal by hand, and a
brute-force enumeration of a Bernoulli chain with direct sums over the integers. The seeds are
fixed; the slow test measures how often the interval holds over seeds.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pymc as pm
import pytest
from scipy import integrate, optimize, stats

from ddpbayes import DependenceModel, InputError, Interval, audit
from ddpbayes.engines.sampling.estimate import Draws
from ddpbayes.engines.sampling.profile import Event, mean_mass, outcome_event, scalar_groups
from ddpbayes.mechanisms.gaussian import DiscreteGaussian, Gaussian

FAST = {"engine": "sampling", "draws": 500, "tune": 500, "chains": 2}
DELTA = 1e-6


# --- independent references ---------------------------------------------------------------


def gdp_delta(eps: float, mu: float) -> float:
    """δ_μ(ε) of N(0, 1) against N(μ, 1) (Dong, Roth & Su 2019, Cor. 2.13)."""
    return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


def gdp_epsilon(delta: float, mu: float) -> float:
    """inf{ε >= 0 : δ_μ(ε) <= δ} by bisection on the formula above."""
    if gdp_delta(0.0, mu) <= delta:
        return 0.0
    return optimize.brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, 200.0, xtol=1e-13)


def contains(ci, value, slack=0.0) -> bool:
    return ci[0] - slack <= value <= ci[1] + slack


def independent_model() -> DependenceModel:
    """X0, X1 ~ N(0, 1) independent, declared on [0, 1] (the target grid's range)."""
    with pm.Model() as m:
        pm.Normal("x0", 0.0, 1.0)
        pm.Normal("x1", 0.0, 1.0)
    return DependenceModel(m, tuples=["x0", "x1"], domains=Interval(0.0, 1.0))


def bivariate_model(r: float) -> DependenceModel:
    """(X0, X1) ~ N(0, [[1, r], [r, 1]]), declared on [0, 1]."""
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(2), cov=np.array([[1.0, r], [r, 1.0]]))
    return DependenceModel(m, tuples="x", domains=Interval(0.0, 1.0))


def chain_model(p0: float = 0.5, stay: float = 0.8) -> DependenceModel:
    """A Bernoulli chain X0 -> X1 -> X2: X0 ~ Bernoulli(p0), X_k = X_{k-1} with probability `stay`."""
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", p0)
        x1 = pm.Bernoulli("x1", pm.math.switch(x0, stay, 1 - stay))
        pm.Bernoulli("x2", pm.math.switch(x1, stay, 1 - stay))
    return DependenceModel(m, tuples=["x0", "x1", "x2"])


def chain_sum_law(t: int, target: int, p0: float = 0.5, stay: float = 0.8) -> dict[int, float]:
    """P(X0 + X1 + X2 = s | X_target = t) by enumerating the 8 states."""
    law: dict[int, float] = {}
    for x in itertools.product([0, 1], repeat=3):
        p = (p0 if x[0] else 1 - p0) * (stay if x[1] == x[0] else 1 - stay) * (stay if x[2] == x[1] else 1 - stay)
        if x[target] == t:
            law[sum(x)] = law.get(sum(x), 0.0) + p
    total = sum(law.values())
    return {s: p / total for s, p in law.items()}


def discrete_mixture_epsilon(p: dict[int, float], q: dict[int, float], sigma: float, delta: float) -> float:
    """ε(δ) of Σ p_s N_Z(s, σ²) against Σ q_s N_Z(s, σ²): δ(ε) = Σ_y max(0, P(y) − e^ε Q(y)) summed over
    every integer within 40σ of the levels (the rest weighs < e^-800), inverted by bisection."""
    y = np.arange(-math.ceil(40 * sigma) - 1, 3 + math.ceil(40 * sigma) + 2)
    k = np.arange(-math.ceil(60 * sigma) - 1, math.ceil(60 * sigma) + 2)
    z = np.exp(-0.5 * (k / sigma) ** 2).sum()
    pmf = lambda w: sum(v * np.exp(-0.5 * ((y - s) / sigma) ** 2) / z for s, v in w.items())
    big_p, big_q = pmf(p), pmf(q)
    hs = lambda e: float(np.maximum(0.0, big_p - math.exp(e) * big_q).sum())
    if hs(0.0) <= delta:
        return 0.0
    return optimize.brentq(lambda e: hs(e) - delta, 0.0, 200.0, xtol=1e-13)


# --- the exact cases: the interval holds the closed form ------------------------------------


def test_target_alone_is_gdp():
    """Query x0 alone (linear:1,0), σ = 0.5, target x0 on [0, 1]: given X0 = t the query is t, so
    L(y | t) = N(t, σ²) and the worst pair (0, 1) is μ-GDP with μ = width/σ = 2, the classic value.
    Every draw is the same number, so the mixtures are exact and the interval collapses on it."""
    r = audit(independent_model(), "linear:1,0", "gaussian", "idp", scale=0.5, targets=[0], seed=0, **FAST)
    truth = gdp_epsilon(DELTA, 2.0)
    assert r.leakage == pytest.approx(truth, rel=1e-8)
    assert r.ci[0] == pytest.approx(truth, rel=1e-6) and r.ci[1] == pytest.approx(truth, rel=1e-8)
    assert {r.witness.t, r.witness.t_prime} == {0.0, 1.0} and r.witness.y is None
    for d, e in zip(r.profile.deltas, r.profile.epsilons):
        assert e == pytest.approx(gdp_epsilon(d, 2.0), rel=1e-7, abs=1e-9), d
    assert r.profile.tv == pytest.approx(2 * stats.norm.cdf(1.0) - 1, abs=1e-9)


@pytest.mark.slow  # the default run's budget: three audits (~9 s idle)
@pytest.mark.parametrize("r_corr", [0.0, 0.6])
def test_bivariate_normal_sum(r_corr):
    """(X0, X1) bivariate normal with correlation r, sum, σ = 2, target X0 on [0, 1], idp (K = {}).
    By hand: given X0 = t, X1 ~ N(r t, 1 − r²), so the sum is N((1 + r) t, 1 − r²) and
    L(y | t) = N((1 + r) t, σ² + 1 − r²): μ-GDP between t = 0 and t = 1 with
    μ = (1 + r) / √(σ² + 1 − r²) (r = 0: the independent case, μ = 1/√5).

    A 90% interval misses at some seeds by design (measured for r = 0 over seeds 100–139: the
    lower bound above the truth once in 40, the upper bound never): of seeds 1–3 at least two
    intervals hold the truth (two or more miss it with probability < 1% at a 5% miss rate)."""
    model = independent_model() if r_corr == 0.0 else bivariate_model(r_corr)
    mu = (1 + r_corr) / math.sqrt(4.0 + 1 - r_corr**2)
    truth = gdp_epsilon(DELTA, mu)
    runs = [audit(model, "sum", "gaussian", "idp", scale=2.0, targets=[0], seed=seed, **FAST) for seed in (1, 2, 3)]
    assert sum(contains(r.ci, truth) for r in runs) >= 2, [(r.ci, truth) for r in runs]
    r = runs[0]
    assert r.ci[0] <= r.leakage <= r.ci[1]
    assert {r.witness.t, r.witness.t_prime} == {0.0, 1.0}
    assert "continuous" in r.diagnostics["pass_blocked"]
    out = r.to_dict()
    assert out["delta"] == DELTA and out["epsilon_at_delta"] == r.leakage and out["gdp_mu"] is None


def test_bernoulli_chain_discrete_gaussian():
    """X0 -> X1 -> X2 Bernoulli chain (stay 0.8), sum, discrete Gaussian σ = 1, target X1 (idp):
    the laws of the sum given X1 = 0, 1 by enumeration, and their profile by direct sums over the
    integers (`discrete_mixture_epsilon`), both orders. Every variable is discrete, so the
    sampling engine sums the chain exactly (issue #27): the enumerated value to 1e-9, an interval
    of width zero, no MCMC run; the profile at the user's δ is that value."""
    laws = [chain_sum_law(t, 1) for t in (0, 1)]
    truth = max(discrete_mixture_epsilon(laws[a], laws[1 - a], 1.0, DELTA) for a in (0, 1))
    r = audit(chain_model(), "sum", "discrete_gaussian", "idp", scale=1.0, targets=[1], seed=2, **FAST)
    assert r.engine == "sampling" and r.leakage == pytest.approx(truth, abs=1e-9)
    assert tuple(r.ci) == (r.leakage, r.leakage)
    assert r.diagnostics["runs"] == 0 and "summed" in r.diagnostics and r.diagnostics["exact"] is True
    assert r.profile.epsilons[r.profile.deltas.index(DELTA)] == pytest.approx(truth, abs=1e-9)
    assert r.diagnostics.get("pass_blocked") is None and r.witness.y is None


def test_same_seed_same_json():
    """Two fresh model instances, the same seed: the same JSON (runs are not shared between them).
    Beta-Bernoulli n = 3 under discrete Gaussian noise, 200 draws: its continuous rate is sampled
    (MCMC, the records summed given it); an all-discrete model such as `chain_model` is summed
    exactly (issue #27) and would run no MCMC at all."""
    from conftest import MODELS

    from ddpbayes import load_model

    runs = [audit(load_model(MODELS / "beta_bernoulli.py", {"n": 3}), "count", "discrete_gaussian", "idp",
                  scale=1.0, targets=[0], seed=5, **{**FAST, "draws": 200, "tune": 200}) for _ in range(2)]
    assert runs[0].diagnostics["samplers"] in (["nuts+summed 4"], ["slice+summed 4"]), runs[0].diagnostics
    assert runs[0].diagnostics["runs"] == 4
    texts = [json.dumps({k: v for k, v in r.to_dict().items() if k != "seconds"}, sort_keys=True) for r in runs]
    assert texts[0] == texts[1]


def test_two_varying_coordinates_are_refused_and_one_is_kept():
    """The refusal of test_vector_output_refused on draws written here: two coordinates that vary, one line;
    a constant coordinate beside the varying one is dropped (it cancels in every ratio)."""
    rng = np.random.default_rng(0)
    two = [[Draws({}, t, rng.normal(size=(2, 5, 2))) for t in (0.0, 1.0)]]
    with pytest.raises(InputError, match="2 varying output coordinates") as err:
        scalar_groups(two, seed=0)
    assert "\n" not in str(err.value)
    q = np.stack([np.full((2, 5), 3.0), rng.normal(size=(2, 5))], axis=-1)
    (kept,) = scalar_groups([[Draws({}, 0.0, q)]], seed=0)
    assert np.array_equal(kept[0].q, q[..., 1])


@pytest.mark.slow  # the default run's budget: SMC runs before the draws show two varying outputs (3-20 s);
# test_two_varying_coordinates_are_refused_and_one_is_kept checks the refusal on draws written out
def test_vector_output_refused():
    """Gaussian noise on two varying outputs (identity on the bivariate model): one-line InputError."""
    with pytest.raises(InputError, match="varying output"):
        audit(bivariate_model(0.6), "identity", "gaussian", "idp", scale=2.0, targets=[0], seed=1,
              engine="sampling", draws=8, tune=50)


# --- the event and its masses, against quadrature --------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_event_and_masses_random_mixtures(seed):
    """Random draw-mixtures: the event A = {y : L̂_a(y) > e^ε L̂_b(y)} matches the sign of the
    log-ratio on a dense grid (written here with scipy.stats.norm), and its mass under each
    mixture matches scipy.integrate.quad of the mixture's density over A's intervals."""
    rng = np.random.default_rng(seed)
    sigma = float(rng.uniform(0.3, 2.0))
    qa = rng.normal(rng.uniform(-1, 1), rng.uniform(0.1, 1.5), size=(2, 30))
    qb = rng.normal(rng.uniform(-1, 1), rng.uniform(0.1, 1.5), size=(2, 30))
    eps = float(rng.uniform(0.0, 2.0))
    mech = Gaussian(sigma)
    event = outcome_event(qa, qb, eps, mech)
    dens = lambda q, y: stats.norm.pdf(y[:, None], q.ravel()[None, :], sigma).mean(axis=1)
    y = np.linspace(min(qa.min(), qb.min()) - 8 * sigma, max(qa.max(), qb.max()) + 8 * sigma, 4001)
    inside = np.log(dens(qa, y)) - np.log(dens(qb, y)) > eps
    member = np.zeros(y.size, dtype=bool)
    for lo, hi in zip(event.lo, event.hi):
        member |= (y > lo) & (y < hi)
    ends = np.concatenate([event.lo, event.hi, [np.inf]])
    near = np.min(np.abs(y[:, None] - ends[None, :]), axis=1) < 1e-6
    assert np.array_equal(inside[~near], member[~near])
    for q in (qa, qb):
        pdf = lambda v, q=q: float(dens(q, np.array([v]))[0])
        expected = sum(integrate.quad(pdf, lo, hi, epsabs=1e-13)[0] for lo, hi in zip(event.lo, event.hi))
        log_mean, rel_se = mean_mass(event, q, mech)
        assert math.exp(log_mean) == pytest.approx(expected, rel=1e-7, abs=1e-12)
        assert rel_se >= 0


def test_discrete_masses_are_direct_sums():
    """The discrete Gaussian's mass of a set of integers, per draw, against a direct sum here."""
    sigma, points = 1.3, np.array([-2, 0, 3, 4])
    q = np.array([[0.0, 1.0, 1.0, 2.0], [0.0, 0.0, 3.0, 1.0]])
    k = np.arange(-100, 101)
    z = np.exp(-0.5 * (k / sigma) ** 2).sum()
    expected = np.mean([np.exp(-0.5 * ((points - v) / sigma) ** 2).sum() / z for v in q.ravel()])
    log_mean, _ = mean_mass(Event(np.empty(0), np.empty(0), points), q, DiscreteGaussian(sigma))
    assert math.exp(log_mean) == pytest.approx(expected, rel=1e-12)


# --- coverage over seeds (slow) -------------------------------------------------------------


@pytest.mark.slow
def test_coverage_bivariate_normal():
    """The bivariate-normal case of `test_bivariate_normal_sum` (r = 0.6) over 10 seeds with 1000
    draws: the lower bound (one-sided 95%) holds in at least 8 of 10 and the whole interval in at
    least 7 (the upper bound is approximate)."""
    mu = 1.6 / math.sqrt(4.0 + 1 - 0.36)
    truth = gdp_epsilon(DELTA, mu)
    lows, alls = 0, 0
    for seed in range(10):
        r = audit(bivariate_model(0.6), "sum", "gaussian", "idp", scale=2.0, targets=[0], seed=seed,
                  engine="sampling", draws=1000, tune=1000, chains=2)
        lows += r.ci[0] <= truth
        alls += contains(r.ci, truth)
    assert lows >= 8 and alls >= 7, (lows, alls)
