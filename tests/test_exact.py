"""Exact engine against hand derivations: the household mixture (models/household.py) and
004 Thm. 1 (likelihood-ratio form of IDP = posterior odds over prior odds)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from bruteforce import (
    household_idp_closed_form,
    household_joint,
    idp_posterior_odds,
    leak_bruteforce,
    markov_joint,
    scalar_grid,
    states,
)
from scipy.special import logsumexp

import ddpbayes


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("b", [0.5, 1.0, 2.0])
def test_household_idp_closed_form(household, n, b):
    expected = household_idp_closed_form(n, b)
    r = ddpbayes.audit(household(n=n), "count", "laplace", "idp", scale=b)
    assert r.per_target == pytest.approx([expected] * n, abs=1e-9)
    assert 1 / b < expected < n / b  # between independence and perfect contagion
    # the closed form agrees with the dense-grid reference (both are independent of the engine)
    assert leak_bruteforce(household_joint(n), [np.array([0.0, 1.0])] * n, [1.0] * n, b, 0) == pytest.approx(
        expected, abs=1e-9
    )


@pytest.mark.parametrize("b", [0.02, 50.0])
def test_household_extreme_scales(household, b):
    """Tiny noise (kernels down to e^{-200}) and huge noise (leak ~ 1e-2): log space must hold up."""
    expected = household_idp_closed_form(4, b)
    r = ddpbayes.audit(household(n=4), "count", "laplace", "idp", scale=b)
    assert r.leakage == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_household_other_parameters(household):
    params = dict(n=3, p_house=0.5, p_sick=0.95, p_base=0.3)
    expected = household_idp_closed_form(3, 1.0, 0.5, 0.95, 0.3)
    r = ddpbayes.audit(household(**params), "count", "laplace", "idp", scale=1.0)
    assert r.leakage == pytest.approx(expected, abs=1e-9)


def test_household_geometric_equals_laplace_value(household):
    """Integer breakpoints: the sup over integer y of the geometric log-ratio is at the same
    points (y = 0..n and the limits) as for Laplace, with the same values."""
    b = 0.8
    r = ddpbayes.audit(household(n=4), "count", "geometric", "idp", scale=b)
    assert r.leakage == pytest.approx(household_idp_closed_form(4, b), abs=1e-9)


# --------------------------------------------------------------------------- 004 Thm. 1
# For a binary target, L(y|1)/L(y|0) = [P(X_i=1|y)/P(X_i=0|y)] / [P(X_i=1)/P(X_i=0)] (Bayes).
# leak(i, {}) = sup over y and the two orders of (t, t') = max(log max_y r(y), -log min_y r(y)),
# where r is the odds ratio. Beyond the largest (smallest) query value r is constant, so the
# grid (dense + breakpoints + points beyond both extremes) attains the sup exactly.


def _idp_from_odds(joint, values, weights, b, target):
    X, p = states(joint, values)
    q = X @ np.asarray(weights, float)
    r = idp_posterior_odds(joint, values, weights, b, target, scalar_grid(q, b, dense=4001).ravel())
    return max(math.log(r.max()), -math.log(r.min()))


def test_idp_equals_posterior_odds_household(household):
    n, b = 4, 0.7
    joint = household_joint(n)
    expected = [_idp_from_odds(joint, [np.array([0.0, 1.0])] * n, [1.0] * n, b, i) for i in range(n)]
    r = ddpbayes.audit(household(n=n), "count", "laplace", "idp", scale=b)
    assert r.per_target == pytest.approx(expected, abs=1e-6)
    # and the odds form agrees with the closed form of the likelihood form
    assert expected[0] == pytest.approx(household_idp_closed_form(n, b), abs=1e-6)


def test_idp_equals_posterior_odds_markov_linear(markov4):
    w, b = [1.0, -2.0, 0.5, 1.5], 0.9
    joint = markov_joint()
    expected = [_idp_from_odds(joint, [np.array([0.0, 1.0])] * 4, w, b, i) for i in range(4)]
    r = ddpbayes.audit(markov4, "linear:1,-2,0.5,1.5", "laplace", "idp", scale=b)
    assert r.per_target == pytest.approx(expected, abs=1e-6)


def test_witness_reproduces_leakage_markov(markov4):
    """Evaluate log L(y|t,x_K) - log L(y|t',x_K) at the engine's witness from the numpy joint."""
    w, b = np.array([1.0, -2.0, 0.5, 1.5]), 0.9
    X, p = states(markov_joint(), [np.array([0.0, 1.0])] * 4)
    q = X @ w
    r = ddpbayes.audit(markov4, "linear:1,-2,0.5,1.5", "laplace", "pdp", scale=b, lattice=True)
    for node in r.lattice:
        wit = node.witness
        i, known = node.adversary.target, sorted(node.adversary.known)
        sel = np.ones(len(p), bool)
        for k in known:
            sel &= X[:, k] == wit.known_values[k]
        (y,) = wit.y
        if math.isinf(y):  # the limit equals the value at any y beyond the extreme query values
            y = q.max() + 1 if y > 0 else q.min() - 1

        def log_l(t):
            rows = sel & (X[:, i] == t)
            return logsumexp(np.log(p[rows]) - np.abs(y - q[rows]) / b) - logsumexp(np.log(p[rows]))

        assert log_l(wit.t) - log_l(wit.t_prime) == pytest.approx(node.value, abs=1e-9), str(node.adversary)


def test_overflowing_query_values_are_not_reported_as_zero(contagious):
    """linear:1e308,1e308 on the contagious pair: the query is 0 or 2e308, which overflows to inf.
    The true leakage 2e308/b is finite, not unbounded: inf would be a wrong answer, and 0 (a NaN
    inside the engine turned into 'no leakage') would pass any claim. Weights whose query values
    double precision cannot hold are an input that cannot be used: an InputError naming the
    overflow, as for a noise scale too small for the query's span. An unbounded leakage (an
    unbounded domain) is by contrast the answer inf with a reason
    (test_cli.py::test_json_witness_inf_encoding_and_lists).

    Just below the overflow the answer is exact: linear:1e300,1e300 puts the query at 0 or
    2e300, two Laplace centres whose log-ratio is at most 2e300/b: leak = 2e300, and claim 1 fails."""
    with pytest.raises(ddpbayes.InputError, match="overflow"):
        ddpbayes.audit(contagious(2), "linear:1e308,1e308", "laplace", "idp", scale=1.0, claim=1.0)
    r = ddpbayes.audit(contagious(2), "linear:1e300,1e300", "laplace", "idp", scale=1.0, claim=1.0)
    assert r.leakage == pytest.approx(2e300, rel=1e-12)
    assert r.verdict == "fail"
