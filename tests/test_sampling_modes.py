"""Across modes (issue #42.1): chains that disagree are detected, and the event is drawn again by SMC.

Expected values come from math written here: the two-mode model's leakage by one-dimensional
quadrature of the mixture's moments; the detection on chains drawn here from known laws.
"""

from __future__ import annotations

import math

import arviz as az
import numpy as np
import pymc as pm
import pytest
from scipy import integrate, special, stats

from ddpbayes import DependenceModel, audit
from ddpbayes.engines.sampling.estimate import Draws, ratio_at
from ddpbayes.engines.sampling.runs import (RHAT_MAX, _block_tuples, _event_unit, bounding, disagreement,
                                           known_multimodal, rebound, settled)
from ddpbayes.engines.sampling.tempering import (KDE_SCALES, Tempering, _block_proposal, _BlockKernel, _forgotten,
                                                 _kde_draw, _kde_logpdf, _normal_logpdf, next_beta, systematic)
from ddpbayes.errors import InputError
from ddpbayes.model.condition import TUPLES, WEIGHTS, condition
from ddpbayes.parallel import units
from ddpbayes.parallel.forked import forked_map, local_processes
from ddpbayes.settings import RunSettings


def test_chains_in_different_modes_disagree_and_mixed_chains_do_not():
    """Two chains at N(-10, 1) and N(10, 1): R-hat far above 1.01. Four chains of one N(0, 1): no
    disagreement. Two long chains 0.08 apart (R-hat below 1.01, but each mean's standard error is
    1/sqrt(20,000) = 0.0071, so 8 standard errors apart): their means are separated."""
    rng = np.random.default_rng(42)
    apart = np.stack([rng.normal(-10, 1, 500), rng.normal(10, 1, 500)])[..., None]
    why, rhat = disagreement(apart)
    assert rhat > 1.5 and why.startswith("NUTS chains disagreed: R-hat")
    assert disagreement(rng.normal(0, 1, (4, 500, 1))) is None
    shifted = np.stack([rng.normal(0, 1, 20_000), rng.normal(0.08, 1, 20_000)])[..., None]
    why, rhat = disagreement(shifted)
    assert rhat <= 1.01 and "chain means" in why
    assert disagreement(apart[:1]) is None  # one chain cannot disagree
    constant = np.stack([np.zeros(2000), np.ones(2000)])[..., None]  # the second output: each chain constant, apart
    assert disagreement(np.concatenate([rng.normal(0, 1, (2, 2000, 1)), constant], axis=-1))[1] > 1.5


def _shifted(chains: int, draws: int, offset: float) -> np.ndarray:
    """Query draws the test writes itself: N(0, 1) per chain (seeded), the chains after the first
    shifted by `offset` (0.4 over 50 draws: R-hat 1.067)."""
    q = np.random.default_rng(7).normal(0.0, 1.0, (chains, draws, 1))
    q[1:] += offset
    return q


@pytest.mark.slow  # 8 s: a Slice step and SMC's density compiled, 7 runs
def test_a_choosing_switch_sends_the_later_choosing_runs_to_smc_and_the_bounding_runs_follow_their_choice():
    """x0, x1 ~ N(mu, 1), mu ~ N(0, 1), on the query's draws the test writes (`_shifted`). A choosing run
    whose chains disagree with R-hat under 1.1 is switched to SMC and marks the model; a later
    choosing run goes to SMC directly; each bounding run is drawn as its choosing run was (SMC
    after a switch or a direct SMC run, NUTS/Slice after one that mixed); a bounding run's own
    switch marks nothing (the later choices must not depend on the bounding draws). A unit of work
    carries the mark to a copy of the model that has none (a Dask worker's rebuilt model): its
    choosing run is SMC's directly there too, as here; without the mark it is NUTS's."""
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("x0", mu, 1.0)
        pm.Normal("x1", mu, 1.0)
    ego = DependenceModel(m, tuples=["x0", "x1"])

    def mixed(run) -> np.ndarray:
        return _shifted(*run.x.shape[:2], 0.0)

    def apart(run) -> np.ndarray:
        return _shifted(*run.x.shape[:2], 0.4)

    assert 1.01 < float(az.rhat(_shifted(2, 50, 0.4)[..., 0])) < 1.1
    choose = RunSettings(seed=0, draws=50, tune=50, chains=2)
    bound = bounding(choose)
    assert settled(ego, {0: 2.0}, bound, apart).sampler == "smc" and known_multimodal(ego, choose) is None
    first = settled(ego, {0: -1.0}, choose, mixed)  # drawn before the switch, and mixed: kept
    assert first.smc is None and known_multimodal(ego, choose) is None
    switched = settled(ego, {0: 0.0}, choose, apart)
    assert switched.sampler == "smc" and 1.01 < switched.smc["nuts_rhat"] < 1.1
    assert known_multimodal(ego, choose)[1] == switched.smc["nuts_rhat"]
    direct = settled(ego, {0: 1.0}, choose, apart)
    assert direct.smc["nuts_rhat"] is None and direct.smc["why"].startswith("SMC directly: an earlier event's")
    assert settled(ego, {0: 0.0}, bound, mixed).smc["why"].startswith("the choosing run's NUTS chains disagreed")
    assert settled(ego, {0: 1.0}, bound, mixed).smc["why"].startswith("the choosing run's SMC directly")
    assert settled(ego, {0: -1.0}, bound, mixed).smc is None  # its choosing run was not SMC's
    mark = known_multimodal(ego, choose)
    rebuilt = DependenceModel(m, tuples=["x0", "x1"])  # no mark of its own
    carried = _event_unit((rebuilt, {0: 2.0}, choose, mark))
    assert carried.smc["why"].startswith("SMC directly") and known_multimodal(rebuilt, choose) == mark
    assert _event_unit((DependenceModel(m, tuples=["x0", "x1"]), {0: 2.0}, choose, None)).smc is None


@pytest.mark.slow  # 23 s at load 4: Slice and SMC's density compiled (twice), 9 SMC runs
def test_a_choosing_smc_run_over_the_rhat_limit_is_drawn_again_with_more_particles_and_its_bounding_run_too():
    """x0, x1 ~ N(mu, 1), mu ~ N(0, 1), on query draws the test writes: 8 SMC runs of 50 particles whose
    second chain's four runs sit 0.4 higher (R-hat over 1.01, ArviZ's on the 8 runs written here) and wider
    runs that agree. A choosing SMC run over the limit is drawn once more, fresh (other particles), with k
    times the particles per run, k = ceil((R-hat - 1) / 0.006) within [2, 4] (R-hat - 1 falls as
    1/particles: sized for 1.006), and records the first R-hat; the event's bounding run has as many,
    decided by the choosing run alone. A choosing run under the limit keeps 50, and so does its bounding
    run. A wider run still over the limit is kept: the rule widens once. A bounding run over the limit gets
    a second, fresh, wider run beside it (`rebound`, k from its own R-hat, at most 4 times the draws asked
    for; the engine keeps the lower of the two lower bounds), once; one under it none, nor one at 4 times.
    A model declared multimodal draws its first choosing run by SMC directly."""
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("x0", mu, 1.0)
        pm.Normal("x1", mu, 1.0)
    model = DependenceModel(m, tuples=["x0", "x1"])

    def narrow_apart(run) -> np.ndarray:  # runs of 50 particles disagree, wider runs agree
        return _shifted(*run.x.shape[:2], 0.4 if run.x.shape[1] == 4 * 50 else 0.0)

    def always_apart(run) -> np.ndarray:
        return _shifted(*run.x.shape[:2], 0.4)

    def mixed(run) -> np.ndarray:
        return _shifted(*run.x.shape[:2], 0.0)

    first_rhat = float(az.rhat(_shifted(2, 200, 0.4)[..., 0].reshape(8, 50)))  # as `Run.diagnose` groups SMC's runs
    wide = 50 * min(4, max(2, math.ceil((first_rhat - 1) / 0.006)))
    assert first_rhat > RHAT_MAX and float(az.rhat(_shifted(2, 4 * wide, 0.0)[..., 0].reshape(8, wide))) <= RHAT_MAX
    assert float(az.rhat(_shifted(2, 200, 0.0)[..., 0].reshape(8, 50))) <= RHAT_MAX
    choose = RunSettings(seed=0, draws=50, tune=50, chains=2)
    switched = settled(model, {0: 0.0}, choose, always_apart)  # NUTS's chains apart: SMC, then over the limit
    assert switched.smc["particles"] == wide and switched.smc["first_rhat"] == pytest.approx(first_rhat, rel=1e-12)
    assert switched.x.shape[:2] == (2, 4 * wide)  # the rule widens once: still over the limit, kept
    widened = settled(model, {0: 1.0}, choose, narrow_apart)  # SMC directly (the model is marked), then widened
    assert widened.smc["nuts_rhat"] is None and widened.smc["particles"] == wide
    assert widened.smc["first_rhat"] == pytest.approx(first_rhat, rel=1e-12)
    assert settled(model, {0: 1.0}, choose, narrow_apart) is widened  # cached
    kept = settled(model, {0: -1.0}, choose, mixed)
    assert kept.smc["particles"] == 50 and kept.smc["first_rhat"] is None
    bound = bounding(choose)
    assert settled(model, {0: 1.0}, bound, mixed).smc["particles"] == wide  # its choosing run decided
    apart_bound = settled(model, {0: -1.0}, bound, always_apart)
    assert apart_bound.smc["particles"] == 50  # its own draws do not change it
    second = rebound(model, {0: -1.0}, bound, apart_bound, always_apart)  # a second, wider run beside it
    bound_rhat = float(az.rhat(_shifted(4, 200, 0.4)[..., 0].reshape(16, 50)))
    assert second.smc["particles"] == 50 * min(4, max(2, math.ceil((bound_rhat - 1) / 0.006)))
    assert second.smc["first_rhat"] == pytest.approx(bound_rhat, rel=1e-12)
    assert float(az.rhat(_shifted(4, 200, 0.0)[..., 0].reshape(16, 50))) <= RHAT_MAX
    assert rebound(model, {0: -1.0}, bound, apart_bound, mixed) is None and rebound(model, {0: -1.0}, bound, second,
                                                                                      always_apart) is None
    at_most = settled(model, {0: 0.0}, bound, always_apart)  # its choosing run widened 4 times: the most
    assert at_most.smc["particles"] == 4 * 50 == wide and rebound(model, {0: 0.0}, bound, at_most, always_apart) is None
    assert settled(model, {0: -1.0}, choose, mixed) is kept  # cached
    declared = DependenceModel(m, tuples=["x0", "x1"], multimodal=True)  # no NUTS run first, even for the first event
    first = settled(declared, {0: 0.0}, choose, mixed)
    assert first.smc["why"] == "SMC directly: the model is declared multimodal" and first.smc["nuts_rhat"] is None


def test_smc_standard_error_comes_from_the_spread_between_runs():
    """Draws of SMC (groups > 1): the log-ratio's standard error is the spread of the independent runs'
    means over sqrt(runs), by the delta method, widened to Student's quantile; written out here for runs whose particles are
    constant within a run (their own spread is zero, the runs' is not)."""
    means = np.array([1.0, 1.2, 0.9, 1.1, 1.0, 0.8, 1.3, 1.0])
    q = np.repeat(means, 50).reshape(2, 4 * 50, 1)  # 2 chains of 4 runs of 50 identical particles
    smc = Draws({}, 0.0, q, groups=4)
    flat = Draws({}, 1.0, np.zeros((2, 200, 1)), groups=4)
    est, se = ratio_at(smc, flat, (50.0,), np.ones(1))  # y far right: the kernel is e^{(q - y)}
    k = np.exp(means)
    assert est == pytest.approx(math.log(k.mean()) - 0.0, abs=1e-12)
    widened = 1.894578605 / 1.644853627  # Student's t with 7 degrees of freedom over the normal, one-sided 95%
    assert se == pytest.approx(np.std(k, ddof=1) / math.sqrt(8) / k.mean() * widened, rel=1e-9)


def test_vectorised_log_density_equals_the_point_wise_one():
    """SMC's log-density and outputs over a (particles, dim) matrix equal PyMC's point-wise compiled
    model at every particle (1e-10): two free variables (a vector, a Beta's log-odds) and a summed
    Bernoulli record."""
    with pm.Model() as m:
        theta = pm.Normal("theta", 0.0, 1.0, shape=2)
        p = pm.Beta("p", 2.0, 2.0)
        pm.Bernoulli("x0", p * pm.math.sigmoid(theta[0]))
        pm.Bernoulli("x1", p * pm.math.sigmoid(theta[1]))
    cond = condition(DependenceModel(m, tuples=["x0", "x1"]), {0: 1.0}, summed=True)
    smc = Tempering(cond)
    x = np.random.default_rng(3).normal(0.0, 2.0, (40, smc.dim))
    points = [{n: v[j] for n, v in zip(smc.names, smc.split(x))} for j in range(len(x))]
    assert smc.dim == 3 and len(smc.names) == 2
    assert np.max(np.abs(smc.logp(x) - [cond.logp(q) for q in points])) < 1e-10
    outputs = cond.model.replace_rvs_by_values([cond.model[TUPLES], cond.model[WEIGHTS]])
    pointwise = cond.model.compile_fn(outputs, inputs=cond.model.value_vars, on_unused_input="ignore")
    tuples, weights = smc.outputs(x)
    want = [pointwise(q) for q in points]
    assert np.max(np.abs(tuples - [w[0] for w in want])) < 1e-10
    assert np.max(np.abs(weights - [w[1] for w in want])) < 1e-10 and weights.shape == (40, 2)


def test_vectorised_log_density_checks_each_particle_alone():
    """X_k ~ Bernoulli(r), r ~ Normal(0.5, 1): the parameter is invalid for r outside [0, 1], where PyMC's
    check gives -inf. Particles r = 0.3 and r = 1.5 together: the first keeps log N(0.3; 0.5, 1) + log 0.3
    (the two other records summed: their law sums to one), the second alone is -inf (a check over the
    whole batch would make both -inf)."""
    with pm.Model() as m:
        r = pm.Normal("r", 0.5, 1.0)
        pm.Bernoulli("x", p=r, shape=3)
    smc = Tempering(condition(DependenceModel(m, tuples="x"), {0: 1.0}, summed=True))
    logp = smc.logp(np.array([[0.3], [1.5]]))
    assert logp[0] == pytest.approx(stats.norm.logpdf(0.3, 0.5, 1.0) + math.log(0.3), abs=1e-12)
    assert logp[1] == -np.inf


def test_next_temperature_halves_the_effective_sample_size_and_resampling_is_systematic():
    """The next β keeps (Σw)²/Σw² at half the particles (or reaches 1 when the whole step does); a
    systematic resample takes particle i floor(N w_i) or ceil(N w_i) times."""
    ll = np.random.default_rng(0).normal(0.0, 10.0, 1000)
    beta, w = next_beta(ll, 0.2, 0.5)
    assert 0.2 < beta < 1 and 1 / np.sum(w**2) == pytest.approx(500, rel=1e-3)
    assert np.allclose(w, special.softmax((beta - 0.2) * ll))
    assert next_beta(np.zeros(10), 0.3, 0.5)[0] == 1.0
    weights = np.random.default_rng(1).dirichlet(np.ones(50))
    counts = np.bincount(systematic(weights, np.random.default_rng(2)), minlength=50)
    assert counts.sum() == 50 and np.all(np.abs(counts - 50 * weights) < 1)


def test_independent_proposal_density_is_its_draws_density():
    """SMC's independent proposal (a centre chosen uniformly, plus N(0, s² L Lᵀ), s uniform over the
    scales): `_kde_logpdf` is the mixture's log density written here up to one constant (it cancels in
    the Metropolis–Hastings ratio), with repeated centres (resampled copies) given once with their
    counts, and its draws have the mixture's mean and covariance; with the centres chosen with given
    probabilities (`share`: half on the settled prior draws), the same for the weighted mixture."""
    rng = np.random.default_rng(4)
    centres = rng.normal(0, 3, (6, 2))
    chol = np.linalg.cholesky(np.array([[2.0, 0.6], [0.6, 1.0]]))
    inverse = np.linalg.inv(chol)
    x = rng.normal(0, 3, (40, 2))
    want = np.log(sum(stats.multivariate_normal(c, s * s * chol @ chol.T).pdf(x) for c in centres for s in KDE_SCALES))
    ones = np.ones(len(centres))
    got = _kde_logpdf(x, inverse @ centres.T, ones, inverse)  # the whitened centres, a column each
    assert np.ptp(got - want) < 1e-9
    far = 1e8 * np.array([1.0, -3.0])  # a translation: the same density, far from 0 (x + far rounds by 1.5e-8;
    shifted = _kde_logpdf(x + far, inverse @ (centres + far).T, ones, inverse)
    assert np.ptp(shifted - want) < 1e-3  # |z|²+|c|²-2z·c: 366)
    repeated = np.repeat(centres, [1, 3, 1, 2, 1, 1], axis=0)  # resampled copies: each distinct centre counted
    listed = np.log(sum(stats.multivariate_normal(c, s * s * chol @ chol.T).pdf(x)
                        for c in repeated for s in KDE_SCALES))
    counted = _kde_logpdf(x, inverse @ centres.T, np.array([1, 3, 1, 2, 1, 1]), inverse)
    assert np.ptp(counted - listed) < 1e-9 and np.ptp(counted - got) > 0.01
    draws = _kde_draw(centres, chol, 200_000, rng)
    spread = np.mean(KDE_SCALES ** 2) * chol @ chol.T + np.cov(centres, rowvar=False, ddof=0)
    assert draws.mean(axis=0) == pytest.approx(centres.mean(axis=0), abs=0.03)
    assert np.cov(draws, rowvar=False) == pytest.approx(spread, rel=0.02, abs=0.02)
    share = np.array([0.35, 0.05, 0.1, 0.2, 0.2, 0.1])  # the centres chosen with these probabilities
    weighted = np.log(sum(w * stats.multivariate_normal(c, s * s * chol @ chol.T).pdf(x)
                          for c, w in zip(centres, share) for s in KDE_SCALES))
    assert np.ptp(_kde_logpdf(x, inverse @ centres.T, share, inverse) - weighted) < 1e-9
    draws = _kde_draw(centres, chol, 200_000, rng, share)
    assert draws.mean(axis=0) == pytest.approx(share @ centres, abs=0.03)
    assert np.abs(share @ centres - centres.mean(axis=0)).max() > 0.3  # the uniform choice's mean is not it


def _two_modes() -> DependenceModel:
    """mu ~ 0.5 N(-10, 1) + 0.5 N(10, 1) (through s ~ Bernoulli(1/2), summed out); X_0, X_1 ~
    Bernoulli(sigmoid(mu / 4)) given mu."""
    with pm.Model() as m:
        s = pm.Bernoulli("s", 0.5)
        mu = pm.Normal("mu", -10 + 20 * s, 1.0)
        for k in range(2):
            pm.Bernoulli(f"x{k}", pm.math.sigmoid(mu / 4))
    return DependenceModel(m, tuples=["x0", "x1"])


def _two_modes_truth(b: float = 1.0) -> float:
    """idp of X_0 under count + Laplace(b): P(X_1 | X_0) from E[p^a (1 - p)^c] by quadrature over the
    mixture, then the log-ratio of the two Laplace mixtures at its breakpoints y = 0, 1, 2 and y -> ±inf."""
    def moment(a: int, c: int) -> float:
        def f(u: float) -> float:
            return (0.5 * (stats.norm.pdf(u, -10, 1) + stats.norm.pdf(u, 10, 1)) * special.expit(u / 4) ** a
                    * special.expit(-u / 4) ** c)
        return integrate.quad(f, -30, 30, points=[-10, 10], epsabs=1e-13, limit=200)[0]

    law = {x0: np.array([moment(x0 + x1, 2 - x0 - x1) for x1 in (0, 1)]) for x0 in (0, 1)}
    law = {x0: w / w.sum() for x0, w in law.items()}

    def density(y: float, x0: int) -> float:
        return sum(law[x0][x1] * math.exp(-abs(y - x0 - x1) / b) for x1 in (0, 1))

    def tail(x0: int, sign: int) -> float:  # L(y | x0) e^{sign y / b} as y -> sign ∞
        return sum(law[x0][x1] * math.exp(sign * (x0 + x1) / b) for x1 in (0, 1))

    best = 0.0
    for t, u in ((0, 1), (1, 0)):
        best = max([best] + [math.log(density(y, t) / density(y, u)) for y in (0.0, 1.0, 2.0)]
                   + [math.log(tail(t, s) / tail(u, s)) for s in (1, -1)])
    return best


@pytest.mark.slow
def test_two_far_apart_modes_are_crossed_by_smc_and_the_verdict_is_earned():
    """Given X_0 the posterior of mu has modes 20 prior SDs apart (weights 0.86/0.14): chains
    started apart never meet (R-hat ~1.8), so the engine draws every event by SMC; the interval
    brackets the quadrature (1.686150) and a claim 0.15 above it passes, 0.15 below it fails.
    (Without the switch, or with both chains started in the heavier mode, the answer was 1.825
    with an interval [1.823, 1.826] and a wrong pass at truth + 0.15 - 0.01.)"""
    truth = _two_modes_truth()
    assert truth == pytest.approx(1.686150, abs=1e-6)
    model = _two_modes()
    above = audit(model, "count", "laplace", "idp", scale=1.0, targets=[0], engine="sampling", seed=0,
                  claim=truth + 0.15)
    d = above.diagnostics
    assert d["sampler"].startswith("smc (NUTS chains disagreed: R-hat") and d["samplers"] == ["smc+summed 4"]
    assert d["smc"]["beta_min"] == 1.0 and d["smc"]["runs"] == 4 and d["ok"] and d["rhat_max"] <= 1.01
    lo, hi = above.ci
    assert lo <= truth <= hi and hi - lo < 0.1
    assert above.verdict == "pass"
    below = audit(model, "count", "laplace", "idp", scale=1.0, targets=[0], engine="sampling", seed=0,
                  claim=truth - 0.15)  # the runs are cached on the model: same draws, another claim
    assert below.verdict == "fail" and below.ci == above.ci
    again = audit(_two_modes(), "count", "laplace", "idp", scale=1.0, targets=[0], engine="sampling", seed=0,
                  claim=truth + 0.15)  # a fresh model: every run drawn again, the same seed
    assert again.ci == above.ci and again.diagnostics == above.diagnostics


@pytest.mark.slow  # 2.3 s: SMC's density compiled (1.6 s), 8 runs
def test_smc_runs_in_forked_processes_draw_the_same_particles_as_here():
    """An event's independent SMC runs in two forked processes (`processes=2`; the conditioned model is not
    pickled) give the particles, stages, final β and acceptance of the runs drawn one after the other here,
    bit for bit: each run has its own generator. mu ~ N(0, 1), x0, x1 ~ N(mu, 1) given x0 = 1: the
    posterior of mu is N(1/2, 1/2), its particles' mean within 4 standard errors of 1/2 (a check that the runs
    drew the posterior, not only that they agree)."""
    smc, cond = _normal_pair_given_x0(1.0, 1.0)
    here = smc.run(4, 100, 7, cond.prior_draws(0), processes=1)
    forked = smc.run(4, 100, 7, cond.prior_draws(0), processes=2)
    assert all(np.array_equal(here.particles[n], forked.particles[n]) for n in ("mu_free", "x1_free"))
    assert np.array_equal(here.tuples, forked.tuples)
    assert (here.stages, here.betas, here.acceptance) == (forked.stages, forked.betas, forked.acceptance)
    means = here.particles["mu_free"].mean(axis=1)  # one mean per independent run: their spread is the error
    assert here.betas == [1.0] * 4 and abs(means.mean() - 0.5) < 4 * max(means.std(ddof=1) / 2, math.sqrt(0.5 / 400))


def test_forked_pieces_come_back_in_order_and_a_piece_error_is_raised_here():
    """`forked_map` with a closure (not picklable) over two processes: the results in the items' order; a
    piece's own error is raised in the caller."""
    offset = 10

    def shifted(k: int) -> int:
        if k == 3:
            raise ValueError("piece 3")
        return k + offset

    assert forked_map(shifted, [0, 1, 2, 4, 5], 2) == [10, 11, 12, 14, 15]
    with pytest.raises(ValueError, match="piece 3"):
        forked_map(shifted, [1, 3], 2)


def test_forked_pieces_use_the_workers_asked_for_and_one_process_inside_a_dask_unit(monkeypatch):
    """`--workers 2`: two processes; `--workers 1`: one; inside a unit of work on a Dask worker (units do not
    nest): one, whatever was asked."""
    assert local_processes(2) == 2 and local_processes(1) == 1
    monkeypatch.setattr(units, "_inside", True)
    assert local_processes(2) == 1


def test_a_stage_has_forgotten_its_start_only_when_uncorrelated_either_way():
    """SMC's mutation stops once |correlation| with the stage's start is below 0.1 on 90% of the coordinates: fresh
    draws have forgotten it, the start itself and its mirror image (correlation -1) have not, and a coordinate that
    was constant at the start does not hold the stage back."""
    rng = np.random.default_rng(3)
    start = rng.normal(size=(4000, 10))
    assert _forgotten(start, rng.normal(size=start.shape))
    assert not _forgotten(start, start + 0.01 * rng.normal(size=start.shape))
    assert not _forgotten(start, -start)
    flat = start.copy()
    flat[:, 0] = 1.0
    assert _forgotten(flat, rng.normal(size=start.shape))


def test_a_stage_forgets_its_start_by_the_correlation_less_the_particles_own_noise():
    """At 200 particles and 9 coordinates, fresh draws' sample correlations |r| exceed 0.1 on each coordinate with
    probability P(|Z| > 0.1 √200) = 0.157, so the raw rule (every coordinate below 0.1: 8.1 of 9 needed) passes
    with (1 - 0.157)^9 = 0.21; on r² - 1/n < 0.01, i.e. |r| < √(0.015) = 0.122, with P(|Z| < 1.73)^9 = 0.46. A
    true correlation of 0.3 on one coordinate (r ~ N(0.3, 0.91²/200)) still holds the stage: it passes only when
    that r falls below 0.122, P(Z < -2.8) = 0.003."""
    rng = np.random.default_rng(7)
    n, dim, trials = 200, 9, 2000
    p_below = 2 * stats.norm.cdf(math.sqrt(0.01 + 1 / n) * math.sqrt(n)) - 1  # |r| < 0.122 for r ~ N(0, 1/n)
    expected = p_below ** dim
    passed = np.mean([_forgotten(rng.normal(size=(n, dim)), rng.normal(size=(n, dim))) for _ in range(trials)])
    assert abs(passed - expected) < 4 * math.sqrt(expected * (1 - expected) / trials), (passed, expected)
    held = 0
    for _ in range(200):
        start = rng.normal(size=(n, dim))
        x = rng.normal(size=(n, dim))
        x[:, 0] = 0.3 * start[:, 0] + math.sqrt(1 - 0.09) * x[:, 0]
        held += not _forgotten(start, x)
    assert held >= 195


@pytest.mark.slow  # 2.2 s at load 2.5 (12 s at 4): SMC's density compiled, 256 draws walked 120 steps, twice
def test_prior_draws_are_moved_under_the_event_before_they_are_the_proposals_centres():
    """mu ~ N(0, 1), x0 ~ N(mu, 0.1²), x1 ~ N(mu, 1) given x0 = 3: mu's posterior is N(3/1.01, 0.01/1.01)
    (conjugate Normal), 3 prior SDs from the prior draws (a Gowalla edge event's target, DESIGN §2.3). The
    settled centres' mu lies in the posterior (mean within 0.05, 90% within 3 posterior SDs) where the raw
    prior draws' does not (under 1% of them), and the same for one and two processes (each piece its own
    generator)."""
    smc, cond = _normal_pair_given_x0(0.1, 3.0)
    smc._reference(cond.prior_draws(0))
    mean, sd = 3.0 / 1.01, math.sqrt(0.01 / 1.01)
    raw = smc.split(smc._prior)[smc.names.index("mu_free")]
    centres = smc._settled(5, processes=1)
    moved = smc.split(centres)[smc.names.index("mu_free")]
    assert np.mean(np.abs(raw - mean) < 3 * sd) < 0.01
    assert abs(moved.mean() - mean) < 0.05 and np.mean(np.abs(moved - mean) < 3 * sd) >= 0.9
    assert np.array_equal(centres, smc._settled(5, processes=2)) and centres.shape == smc._prior.shape


@pytest.mark.slow  # 1.0 s at load 2.5: SMC's density compiled
def test_the_first_feasible_prior_draw_is_found_by_the_batched_density_as_point_by_point():
    """u ~ Uniform(0, 1), x0 ~ Uniform(0, u), x1 ~ N(u, 1) given x0 = 0.9: a prior draw is feasible iff
    u > 0.9 (about 1 in 10); `Tempering.feasible` returns the first whose point-wise log-density is finite,
    and None given x0 = 1.5, where no u in (0, 1) is feasible."""
    with pm.Model() as m:
        u = pm.Uniform("u", 0.0, 1.0)
        pm.Uniform("x0", 0.0, u)
        pm.Normal("x1", u, 1.0)
    cond = condition(DependenceModel(m, tuples=["x0", "x1"]), {0: 0.9}, summed=True)
    cond.pin({0: 0.9})
    smc = Tempering(cond)
    candidates = cond.prior_draws(0)[1:]  # the seed's first draw has u = 0.94: from the second, infeasible
    finite = [k for k, c in enumerate(candidates) if np.isfinite(cond.logp(c))]
    assert 0 < finite[0] and 5 <= len(finite) <= 60
    assert smc.feasible(candidates) is candidates[finite[0]]
    cond.pin({0: 1.5})
    assert smc.feasible(candidates) is None and not any(np.isfinite(cond.logp(c)) for c in candidates[:32])


def _normal_pair_given_x0(sd0: float, x0: float):
    """SMC (`Tempering`) on mu ~ N(0, 1), x0 ~ N(mu, sd0²), x1 ~ N(mu, 1) given x0 (pinned), and the
    conditioned model."""
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("x0", mu, sd0)
        pm.Normal("x1", mu, 1.0)
    cond = condition(DependenceModel(m, tuples=["x0", "x1"]), {0: x0}, summed=True)
    cond.pin({0: x0})
    return Tempering(cond), cond


def test_a_block_proposal_moves_only_its_block_and_its_ratio_is_the_block_marginals():
    """The Metropolis-within-Gibbs proposal (`_block_proposal`): each particle's block drawn from the
    stage's proposal restricted to it (a centre's block coordinates with the centre's probability, plus
    N(0, s² Σ_bb), s uniform over the scales), the other columns held; its log ratio log q_b(x_b) -
    log q_b(x'_b) is the block marginal's written here with scipy, and its draws have that marginal's mean."""
    rng = np.random.default_rng(11)
    around = rng.normal(0, 3, (7, 4))
    share = np.array([0.3, 0.1, 0.1, 0.2, 0.1, 0.1, 0.1])
    cov = np.array([[2.0, 0.5, 0.3, 0.0], [0.5, 1.0, 0.2, 0.1], [0.3, 0.2, 1.5, 0.4], [0.0, 0.1, 0.4, 0.8]])
    blocks = [_BlockKernel.of(around, share, cov, np.array(c)) for c in ([0, 2], [3])]
    x = rng.normal(0, 3, (4000, 4))
    proposal, correction = _block_proposal(x, blocks, rng)
    moved = proposal != x
    first, second = moved[:, [0, 2]].all(axis=1), moved[:, 3]
    assert not moved[:, 1].any() and np.array_equal(first, ~second) and 0.45 < first.mean() < 0.55
    assert not (moved[first][:, 3]).any() and not (moved[second][:, [0, 2]]).any()

    def marginal(values: np.ndarray, columns: list[int]) -> np.ndarray:
        block = cov[np.ix_(columns, columns)]
        return np.log(sum(w * stats.multivariate_normal(c[columns], s * s * block).pdf(values)
                          for c, w in zip(around, share) for s in KDE_SCALES))

    for rows, columns in ((first, [0, 2]), (second, [3])):
        want = marginal(x[rows][:, columns], columns) - marginal(proposal[rows][:, columns], columns)
        assert np.abs(correction[rows] - want).max() < 1e-9
        assert proposal[rows][:, columns].mean(axis=0) == pytest.approx(share @ around[:, columns], abs=0.15)


@pytest.mark.slow  # 2 s: SMC's density compiled, 4,000 particles 30 block steps
def test_the_block_kernel_keeps_the_posterior_and_its_blocks_are_the_declared_tuples_free_columns():
    """x0 ~ N(0, 1), a ~ N(x0, 1), b ~ N(a, 1) (one vector tuple, blocks {a} and {b, x0}) given x0 = 1:
    (a, b) ~ N((1, 1), [[1, 1], [1, 2]]) (a Gaussian chain). The declared blocks map to the free
    columns (x0 pinned drops out of its block); particles drawn from that law stay in it after 30 steps
    of the block kernel alone at β = 1, whose proposal sits 2 SDs off (centres at (3, 3)): means within
    0.06, covariance within 0.1 (the kernel is exact MH only with the block marginal's ratio: without
    it the particles drift to the proposal: means 2.2 and 2.5)."""
    def chain(_, rng=None, size=None):
        x0 = rng.normal(size=() if size is None else tuple(np.atleast_1d(size)))
        a = rng.normal(x0)
        return np.stack([x0, a, rng.normal(a)], axis=-1)

    with pm.Model() as m:
        pm.CustomDist("v", np.zeros(3), logp=lambda value, _: (
            pm.logp(pm.Normal.dist(0, 1), value[0]) + pm.logp(pm.Normal.dist(value[0], 1), value[1])
            + pm.logp(pm.Normal.dist(value[1], 1), value[2])), random=chain, signature="(n)->(n)")
    model = DependenceModel(m, tuples="v", blocks=[(1,), (2, 0)])
    cond = condition(model, {0: 1.0}, summed=True)
    cond.pin({0: 1.0})
    smc = Tempering(cond, _block_tuples(model))
    assert [c.tolist() for c in smc.blocks] == [[0], [1]] and smc.dim == 2
    rng = np.random.default_rng(3)
    mean, cov = np.array([1.0, 1.0]), np.array([[1.0, 1.0], [1.0, 2.0]])
    x = rng.multivariate_normal(mean, cov, 4000)
    smc._reference(cond.prior_draws(0))
    around = rng.multivariate_normal([3.0, 3.0], 0.3 * np.eye(2), 50)
    share = np.full(50, 1 / 50)
    blocks = [_BlockKernel.of(around, share, np.eye(2), c) for c in smc.blocks]
    logq = _normal_logpdf(x, smc._loc, smc._scale)
    ll = smc.logp(x) - logq
    for _ in range(30):
        proposal, correction = _block_proposal(x, blocks, rng)
        x, logq, ll, _ = smc._metropolis(x, logq, ll, 1.0, proposal, correction, rng)
    assert x.mean(axis=0) == pytest.approx(mean, abs=0.06)
    assert np.cov(x, rowvar=False) == pytest.approx(cov, abs=0.1)


def test_blocks_must_be_disjoint_groups_of_tuple_indices():
    """`DependenceModel(blocks=...)`: a tuple in two blocks, an index out of range, an empty block or a
    block of non-integers (a float among them: not rounded) is bad input (one line)."""
    with pm.Model() as m:
        pm.Normal("x", 0.0, 1.0, shape=3)
    assert DependenceModel(m, tuples="x", blocks=[(0, 1), [2]]).blocks == ((0, 1), (2,))
    assert DependenceModel(m, tuples="x").blocks == ()
    assert DependenceModel(m, tuples="x", blocks=[(np.int64(0), 1)]).blocks == ((0, 1),)
    for bad in ([(0, 1), (1, 2)], [(0, 3)], [()], [("a",)], 5, [(0, 1.5)], [("1",)]):
        with pytest.raises(InputError, match="blocks must be"):
            DependenceModel(m, tuples="x", blocks=bad)
