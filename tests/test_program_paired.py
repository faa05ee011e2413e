"""The coupled check (common random numbers; DESIGN §2.6 step 4, `engines/program/paired`).

By hand: n independent pairs of indicators (A_i, B_i) fall in the cells 11, 10, 01 (and 00) with
probabilities q11, q10, q01; P(A) / P(B) = (q11 + q10) / (q11 + q01). Written with theta = q11 / (q11 +
q10 + q01) and pi = q10 / (q10 + q01) it is R(theta, pi) = (theta + (1 - theta) pi) / (theta + (1 -
theta)(1 - pi)). The bound is the minimum of R over the rectangle theta <= theta_hi, pi >= pi_lo of the
two Clopper–Pearson bounds (each the Beta quantile, written here from scipy's beta). A program adding
shared Laplace(1) noise to a count has classic epsilon 1 (|y - c| - |y - c - 1| <= 1), and its event
{y <= c} has ratio e exactly, with the pair nested (y + 1 <= c + 1 whenever y <= c)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import beta, binom

import ddpbayes
from ddpbayes import load_model
from ddpbayes.engines.program import bounds, paired
from ddpbayes.engines.program.certify import certify
from ddpbayes.engines.program.event import Threshold
from ddpbayes.errors import InputError
from ddpbayes.mechanisms.program import Program

MODELS = Path(__file__).resolve().parent.parent / "models"


def ratio(theta, pi):
    return (theta + (1 - theta) * pi) / (theta + (1 - theta) * (1 - pi))


def rectangle_minimum(num_only: int, den_only: int, both: int, alpha: float, share: float) -> float:
    """min R over a grid of theta in [0, theta_hi] and pi in [pi_lo, 1], the bounds from Beta quantiles."""
    m = num_only + den_only + both
    theta_hi = 1.0 if both == m else beta.ppf(1 - share * alpha, both + 1, m - both)
    pi_lo = beta.ppf((1 - share) * alpha, num_only, den_only + 1)
    thetas = np.linspace(0.0, theta_hi, 401)
    pis = np.linspace(pi_lo, 1.0, 401)[:-1]  # pi = 1 with theta = 0 is a ratio of 0 to 0's complement: left out
    t, p = np.meshgrid(thetas, pis)
    return float(ratio(t, p).min())


@pytest.mark.parametrize("seed", range(6))
def test_paired_bound_is_the_minimum_over_the_confidence_rectangle(seed):
    rng = np.random.default_rng(seed)
    for _ in range(20):
        both, num, den = (int(v) for v in rng.integers(0, 400, size=3))
        num = max(num, 1)
        share = float(rng.choice(paired.SHARES))
        got = bounds.paired_ratio_lower(num, den, both, 0.1, share)
        assert got == pytest.approx(rectangle_minimum(num, den, both, 0.1, share), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("q", [(0.02, 0.006, 0.0), (0.01, 0.004, 0.003), (0.0, 0.03, 0.01), (0.3, 0.1, 0.12),
                               (0.002, 0.001, 0.0005)])
@pytest.mark.parametrize("share", [0.5, 0.99])
def test_paired_bound_covers_multinomial_counts(q, share):
    """Over 600 samples of 5,000 pairs the bound at 0.1 exceeds the true ratio at most as often as
    Bin(600, 0.1)'s 99.9% quantile allows; and where the events are nested it is not vacuous."""
    q11, q10, q01 = q
    truth = (q11 + q10) / (q11 + q01)
    rng = np.random.default_rng(17)
    cells = rng.multinomial(5_000, [q11, q10, q01, 1 - q11 - q10 - q01], size=600)
    values = np.array([bounds.paired_ratio_lower(c[1], c[2], c[0], 0.1, share) for c in cells])
    assert np.sum(values > truth) <= binom.ppf(0.999, 600, 0.1)
    if q01 == 0:
        assert np.median(values) > 1 + 0.3 * (truth - 1)


def test_the_pilot_couples_nested_events_and_not_disjoint_ones():
    """Nested (78% of hit pairs hit both, none only b): coupled, most of the level on theta. Disjoint
    (never both): the coupled bound splits the level pi alone needs, so the independent check wins.
    (Pessimistic projections, `paired.projected`.)"""
    nested = paired.choose((7_800, 2_200, 0), 100_000, 1_000_000, "a", 0.1)
    assert nested.coupled and nested.share >= 0.75
    assert not paired.choose((0, 7_500, 2_500), 100_000, 1_000_000, "a", 0.1).coupled
    assert paired.choose((7_800, 0, 2_200), 100_000, 1_000_000, "b", 0.1).coupled  # the other direction


def shifted_laplace(answers, rng):
    """The count plus Laplace(1) noise drawn by shape: aligned."""
    return answers[:, 0] + rng.laplace(0.0, 1.0, len(answers))


shifted_laplace.vectorized = True
shifted_laplace.aligned = True


def wide_laplace(answers, rng):
    """Laplace(4): epsilon 1/4 on a shift by 1, where the coupled check gains most."""
    return answers[:, 0] + rng.laplace(0.0, 4.0, len(answers))


wide_laplace.vectorized = True
wide_laplace.aligned = True


def draw(program: Program, value: float):
    return lambda n, rng: program.sample(np.full((n, 1), value), rng)


def _shift_certificates(n_check: int) -> tuple[list, list]:
    program = Program(wide_laplace)
    coupled, alone = [], []
    for seed in range(8):
        for aligned, out in ((True, coupled), (False, alone)):
            out.append(certify(draw(program, 0.0), draw(program, 1.0), n_search=n_check // 2, n_check=n_check,
                               rng=np.random.default_rng(seed), aligned=aligned))
    return coupled, alone


def test_a_shared_shift_is_certified_tighter_than_by_independent_runs():
    """Laplace(4) on 0 against 1 (epsilon 1/4), equal budgets, 8 seeds: every coupled check's interval
    (estimate less bound) is under 0.6 times the independent one's (by hand, theta's part alone: the
    log ratio's standard error sqrt((1 - theta) / (theta m)) against sqrt(1 / m + 1 / (theta m)) for m
    hits of the likelier input, theta = e^-1/4: 0.35; pi's bound adds to it)."""
    coupled, alone = _shift_certificates(40_000)
    assert all(c.design.coupled and c.joint is not None and c.pilot == 2_500 and c.runs == (37_500, 37_500)
               for c in coupled)  # the pilot is a sixteenth of the check's budget
    assert all(not c.design.coupled and c.joint is None for c in alone)
    assert all(c.estimate - c.eps_lcb < 0.6 * (a.estimate - a.eps_lcb) for c, a in zip(coupled, alone))


@pytest.mark.slow
def test_a_shared_shift_falls_short_of_its_epsilon_by_less():
    """At 400,000 runs (a pilot of 25,000, large enough to place the threshold) the coupled checks'
    mean shortfall from 1/4 over 8 seeds is under 0.6 times the independent ones' (0.0026 and 0.0059
    when written)."""
    coupled, alone = _shift_certificates(400_000)
    assert np.mean([0.25 - c.eps_lcb for c in coupled]) < 0.6 * np.mean([0.25 - a.eps_lcb for a in alone])


def unaligned(answers, rng):
    """Declares aligned noise but draws an input-dependent amount of it."""
    extra = rng.random(int(answers[0, 0]) + 1)
    return answers[:, 0] + rng.laplace(0.0, 1.0, len(answers)) + 0 * extra[0]


unaligned.vectorized = True
unaligned.aligned = True


def test_a_false_alignment_declaration_is_refused():
    program = Program(unaligned)
    with pytest.raises(InputError, match="drew different amounts"):
        certify(draw(program, 0.0), draw(program, 1.0), n_search=2_000, n_check=2_000,
                rng=np.random.default_rng(0), aligned=True)


@pytest.mark.parametrize("seeds", [20, pytest.param(200, marks=pytest.mark.slow)])
def test_classic_dp_coverage_with_the_coupled_check(seeds):
    """Classic dp of the aligned Laplace(1) count (epsilon 1): above 1 on at most Bin(seeds, 0.05)'s 99.9%
    quantile of the seeds; every check coupled; the reason and diagnostics say so, the pair counts in the
    witness's order."""
    model = load_model(MODELS / "independent.py", {"n": 2})
    results = [ddpbayes.audit(model, "count", Program(shifted_laplace), "dp", target=[0], information=None,
                              program_runs=4_000, seed=seed) for seed in range(seeds)]
    assert sum(r.leakage > 1.0 for r in results) <= binom.ppf(0.999, seeds, 0.05)
    assert np.median([r.leakage for r in results]) > 0.7
    for r in results:  # joint is (both, only x, only x'), named the way the pair leaks as the counts are
        both, only_x, only_x_prime = r.diagnostics["joint"]
        assert r.diagnostics["counts"][:2] == [both + only_x, both + only_x_prime]
    r = results[0]
    assert r.diagnostics["check"].startswith("coupled") and sum(r.diagnostics["joint"]) > 0
    assert "shared generators" in r.reason and math.isfinite(r.leakage)


def test_the_pilot_moves_a_threshold_to_where_the_coupled_check_gains():
    """Scores y = L (input a) and L + 1 (input b), L ~ Laplace(4) shared, event {y <= tau}: the ratio
    P_a / P_b is e^(1/4) exactly for tau <= 0 (F(tau) / F(tau - 1) with F(x) = e^(x/4) / 2 there) and
    falls beyond. From a search's threshold of 6, the pilot moves it into [-2, 2] with a coupled
    design, and the projected coupled bound there is above the independent one at 6."""
    rng = np.random.default_rng(3)
    noise = rng.laplace(0.0, 4.0, 200_000)
    search = Threshold(None, np.ones(1), 0.0, 6.0, False)
    event, design = paired.choose_threshold(search, (noise, noise + 1.0), 2_000_000, "a", 0.1)
    assert isinstance(event, Threshold) and not event.above and event.weights is search.weights
    assert -2.0 <= event.tau <= 2.0 and design.coupled
    f = lambda x: np.where(x < 0, 0.5 * np.exp(x / 4), 1 - 0.5 * np.exp(-x / 4))  # Laplace(4)'s CDF
    n = 2_000_000
    at_search = bounds.rate_ratio_lower(n * f(6.0), n * f(5.0), 0.1)
    both, only_a = n * f(event.tau - 1.0), n * (f(event.tau) - f(event.tau - 1.0))
    assert bounds.paired_ratio_lower(only_a, 0.0, both, 0.1, design.share) > at_search
