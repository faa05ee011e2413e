"""Report-noisy-max releasing the noisy maximum (DESIGN §5.2; `mechanisms/noisy_max_value.py`).

The densities are written here from scipy.stats' Laplace and exponential laws, p(i, v | a) = f(v − a_i)
Π_{j≠i} F(v − a_j), and integrated with scipy's quad; the supremum over v of a ratio of two mixtures is checked
against a dense grid written here: the engine's value must be attained (at least the grid's maximum) and, for
Laplace noise, within the grid's resolution of it (the log-ratio is 2K/b-Lipschitz in v: each factor's log is
1/b-Lipschitz, and so is a mixture's).
"""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import integrate, stats
from bruteforce import logsumexp  # scipy's, without its per-call overhead

from ddpbayes import DependenceModel
from ddpbayes.auditing import audit
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import make_mechanism
from ddpbayes.mechanisms.noisy_max_value import log_density, sup_log_ratio
from ddpbayes.model.domains import Finite
from ddpbayes.queries import parse_query


def density(i, v, a, b, noise):
    """p(i, v | a) for outputs v (G,) and answer vectors a (R, K): (G, R); i None: the value alone. From
    scipy.stats' pdf and cdf."""
    law = stats.laplace(scale=b) if noise == "laplace" else stats.expon(scale=b)
    x = np.asarray(v, dtype=float)[:, None, None] - np.asarray(a, dtype=float)[None]
    pdf, cdf = law.pdf(x), law.cdf(x)
    k = x.shape[2]
    terms = [pdf[:, :, m] * np.prod(cdf[:, :, [j for j in range(k) if j != m]], axis=2) for m in range(k)]
    return sum(terms) if i is None else terms[i]


@pytest.mark.parametrize("noise", ["laplace", "exponential"])
def test_density_matches_scipy_and_integrates_to_one(noise):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, size=(2, 3)).astype(float)
    b = 1.3
    v = rng.uniform(-3, 8, size=25)
    for i in (None, 0, 2):
        got = np.exp(log_density(v, None if i is None else np.full(len(v), i), a, b, noise))
        assert np.allclose(got, density(i, v, a, b, noise), rtol=1e-12, atol=1e-300)
    for row in a:
        total = sum(integrate.quad(lambda x: density(i, [x], row[None], b, noise)[0, 0], -60 * b, 60 * b + 10,
                                   points=sorted(set(row)), limit=200)[0] for i in range(3))
        assert total == pytest.approx(1.0, abs=1e-8)


def dense_sup(log_w, a, b, noise, both):
    """max over a dense grid of v (spacing h, with each answer and points 1e-9 either side of it) of the
    log-ratio of the two mixtures, written from `density`: (value, h)."""
    breaks = np.unique(a)
    grid = np.linspace(a.min() - 40 * b, a.max() + 40 * b, 40_001)
    v = np.unique(np.concatenate([grid, breaks, breaks - 1e-9, breaks + 1e-9]))
    best = -np.inf
    for i in (range(a.shape[1]) if both else [None]):
        with np.errstate(divide="ignore"):
            lp = np.log(density(i, v, a, b, noise))
        ll = logsumexp(log_w[:, None, :] + lp[None], axis=2)
        with np.errstate(invalid="ignore"):
            r = ll.max(axis=0) - ll.min(axis=0)
        best = max(best, float(np.max(np.where(np.isnan(r), -np.inf, r))))
    return best, grid[1] - grid[0]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("noise,both", [("laplace", False), ("laplace", True), ("exponential", False),
                                        ("exponential", True)])
def test_sup_over_the_value_against_a_dense_grid(seed, noise, both):
    rng = np.random.default_rng(seed)
    k, r = int(rng.integers(2, 5)), int(rng.integers(2, 5))
    a = rng.integers(0, 4, size=(r, k)).astype(float)
    b = float(rng.uniform(0.5, 3))
    with np.errstate(divide="ignore"):
        log_w = np.log(rng.dirichlet(np.ones(r), size=2) * (rng.uniform(size=(2, r)) > 0.2))
    log_w[np.isneginf(log_w).all(axis=1), 0] = 0.0
    value, t, t_prime, y = sup_log_ratio(log_w, a, b, noise, both)
    grid, h = dense_sup(log_w, a, b, noise, both)
    if np.isinf(grid):
        assert value == np.inf
        return
    assert value >= grid - 1e-9
    if noise == "laplace":  # 2K/b-Lipschitz: the grid is within h·K/b of the supremum
        assert value <= grid + h * k / b + 1e-9
    # the witness attains it (a finite output; +inf is the limit)
    if np.isfinite(y[-1]):
        idx = None if not both else np.array([int(y[0])])
        ll = logsumexp(log_w + log_density(np.array([y[-1]]), idx, a, b, noise), axis=1)
        assert ll[t] - ll[t_prime] == pytest.approx(value, abs=1e-9)


def test_the_noisy_maximum_leaks_k_times_each_answer():
    """DP-Sniper's ReportNoisyMax3 at its pair a = 1^5, a' = 2^5 with Laplace(20): as v → −∞ the density is
    Π_j ½ e^{(v − a_j)/20} · 5/20, so the ratio is e^{5/20}: 0.25 (hand derivation)."""
    with pm.Model() as m:
        pm.Bernoulli("x", 0.5)
    model = DependenceModel(m, tuples=["x"])
    query = "expr:" + ";".join(["1 + x"] * 5)
    result = audit(model, query, "report_noisy_max", "idp", scale=20.0, params={"returns": "value"}, information=None)
    assert result.leakage == pytest.approx(0.25, abs=1e-9)
    exp = audit(model, query, "report_noisy_max", "idp", scale=20.0,
                params={"returns": "value", "noise": "exponential"}, information=None)
    assert exp.leakage == np.inf  # the support [max a, ∞) moves with the answers


def test_engine_on_a_dependent_model_against_a_grid():
    """Three dependent bits, the value (and the index with it) of the noisy maximum of the bits: the exact engine
    against every state and a dense grid of v (a lower bound within the grid's Lipschitz resolution)."""
    rng = np.random.default_rng(5)
    p0, stay = 0.4, rng.uniform(0.6, 0.9, size=3)
    with pm.Model() as m:
        prev = pm.Bernoulli("x0", p0)
        for j in (1, 2):
            prev = pm.Bernoulli(f"x{j}", pt.switch(prev, stay[j], 1 - stay[j]))
    model = DependenceModel(m, tuples=["x0", "x1", "x2"])
    xs = np.array(list(itertools.product((0, 1), repeat=3)), dtype=float)
    px = np.array([(p0 if x[0] else 1 - p0) * np.prod([(stay[j] if x[j] == x[j - 1] else 1 - stay[j])
                                                        for j in (1, 2)]) for x in xs])
    b = 0.8
    for returns in ("value", "both"):
        result = audit(model, "identity", "report_noisy_max", "idp", scale=b, params={"returns": returns},
                       information=None, engine="exact")
        for i in range(3):
            with np.errstate(divide="ignore"):
                log_w = np.log(np.array([px * (xs[:, i] == t) for t in (0, 1)]))
            log_w -= logsumexp(log_w, axis=1, keepdims=True)
            grid, h = dense_sup(log_w, xs, b, "laplace", returns == "both")
            assert grid - 1e-9 <= result.per_target[i] <= grid + h * 3 / b + 1e-9


def test_bad_returns_and_too_many_answers():
    q = parse_query("identity")
    with pytest.raises(InputError, match="returns= of report_noisy_max must be index, value or both"):
        make_mechanism("report_noisy_max", q, [Finite([0, 1])] * 3, scale=1.0, params={"returns": "max"})
    mech = make_mechanism("report_noisy_max", q, [Finite([0, 1])] * 11, scale=1.0, params={"returns": "value"})
    with pytest.raises(InputError, match="at most 10 answers"):
        mech.sup_log_ratio(np.log(np.full((2, 2), 0.5)), np.eye(2, 11))
