"""Perfectly dependent tuples (004 Example 2) and randomized response, derived by hand."""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytest
from bruteforce import binary_outputs, leak_grid, rr_log_kernel, states

import ddpbayes
from ddpbayes import DependenceModel

# --------------------------------------------------------------------------- contagious family
# k members, X_0 = ... = X_{k-1}. The count is 0 or k, so for any target
#     L(y | 1) = Lap_b(y - k),   L(y | 0) = Lap_b(y),
#     log L(y|1) - log L(y|0) = (|y| - |y - k|) / b,
# which increases from -k/b (y <= 0) to +k/b (y >= k): leak = k / b = k eps with b = 1/eps.
# Two-sided geometric: alpha^{|y-k|} / alpha^{|y|} = e^{(|y| - |y-k|)/b}, same supremum on integers.


@pytest.mark.parametrize("mechanism", ["laplace", "geometric"])
@pytest.mark.parametrize("k", [2, 3, 4])
def test_contagious_family_idp_is_k_eps(contagious, k, mechanism):
    eps = 0.7
    r = ddpbayes.audit(contagious(k), "count", mechanism, "idp", epsilon=eps)
    assert r.mechanism["scale"] == pytest.approx(1 / eps)  # count: sensitivity 1
    assert r.leakage == pytest.approx(k * eps, abs=1e-9)
    assert r.per_target == pytest.approx([k * eps] * k, abs=1e-9)
    assert r.engine == "exact"


@pytest.mark.parametrize("k", [2, 3])
def test_contagious_family_witness_attains_leakage(contagious, k):
    """The witness (t, t', y) must reproduce the leakage through the formula above."""
    b = 1.25
    r = ddpbayes.audit(contagious(k), "count", "laplace", "idp", scale=b)
    w = r.witness
    (y,) = w.y

    def log_l(t):
        if math.isinf(y):  # limit: drop the common e^{-|y|/b}
            return math.copysign(1, y) * k * t / b
        return -abs(y - k * t) / b

    assert {w.t, w.t_prime} == {0.0, 1.0}
    assert log_l(w.t) - log_l(w.t_prime) == pytest.approx(r.leakage, abs=1e-9)


def test_contagious_pair_dp_is_eps(contagious):
    """Classic DP is model-free: count sensitivity 1, leak 1/b = eps."""
    r = ddpbayes.audit(contagious(2), "count", "laplace", "dp", epsilon=0.7)
    assert r.leakage == pytest.approx(0.7, abs=1e-12)


def test_contagious_pair_verdicts(contagious):
    m = contagious(2)
    assert ddpbayes.audit(m, "count", "laplace", "idp", epsilon=0.5, claim=1.0).verdict == "pass"  # 2*0.5 = 1
    assert ddpbayes.audit(m, "count", "laplace", "idp", epsilon=0.5, claim=0.99).verdict == "fail"
    assert ddpbayes.audit(m, "count", "laplace", "dp", epsilon=0.5, claim=0.5).verdict == "pass"


# --------------------------------------------------------------------------- negatively dependent pair
# X_1 = 1 - X_0: the count is always 1, so L(y|t) = Lap_b(y - 1) for both t: leak 0.
# The difference X_0 - X_1 = 2 X_0 - 1 is -1 or 1: L(y|1)/L(y|0) = e^{(|y+1| - |y-1|)/b} -> leak 2/b.


@pytest.fixture(scope="module")
def negative_pair():
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", 0.3)
        pm.Bernoulli("x1", pm.math.switch(x0, 0.0, 1.0))
    return DependenceModel(m, tuples=["x0", "x1"])


def test_negative_pair_count_idp_zero(negative_pair):
    r = ddpbayes.audit(negative_pair, "count", "laplace", "idp", scale=0.5)
    assert r.leakage == pytest.approx(0.0, abs=1e-12)
    assert r.per_target == pytest.approx([0.0, 0.0], abs=1e-12)


def test_negative_pair_geometric_idp_zero(negative_pair):
    r = ddpbayes.audit(negative_pair, "count", "geometric", "idp", epsilon=1.0)
    assert r.leakage == pytest.approx(0.0, abs=1e-12)


def test_negative_pair_difference_doubles(negative_pair):
    b = 0.5
    r = ddpbayes.audit(negative_pair, "linear:1,-1", "laplace", "idp", scale=b)
    assert r.per_target == pytest.approx([2 / b, 2 / b], abs=1e-9)


def test_negative_pair_pdp_lattice_all_zero(negative_pair):
    """K = {other}: the other tuple determines the target (one possible value): 0. K = {}: 0 (above)."""
    r = ddpbayes.audit(negative_pair, "count", "laplace", "pdp", scale=1.0, lattice=True)
    assert sorted((n.adversary.target, tuple(sorted(n.adversary.known))) for n in r.lattice) == [
        (0, ()), (0, (1,)), (1, ()), (1, (0,))
    ]
    assert [n.value for n in r.lattice] == pytest.approx([0.0] * 4, abs=1e-12)


# --------------------------------------------------------------------------- randomized response
# Each bit is reported truthfully with probability keep = e^e / (1 + e^e), so keep/(1-keep) = e^e.
# dp: one bit's report changes by at most keep/(1-keep): leak e.
# Independent tuples: reports of the other bits do not depend on X_i: leak e.
# Perfectly dependent pair: L((y0,y1) | t) = f(y0,t) f(y1,t), f(y,t) = keep if y == t else 1-keep;
#     at y = (1,1): keep^2 / (1-keep)^2 = e^{2e} and no output does better: leak 2e.
# k perfectly dependent bits: k e.


@pytest.mark.parametrize("notion", ["dp", "idp", "pdp", "ddp"])
def test_rr_independent_bits(notion):
    with pm.Model() as m:
        pm.Bernoulli("x0", 0.3)
        pm.Bernoulli("x1", 0.6)
        pm.Bernoulli("x2", 0.5)
    e = 0.8
    r = ddpbayes.audit(DependenceModel(m, ["x0", "x1", "x2"]), "identity", "randomized_response", notion, epsilon=e)
    assert r.per_target == pytest.approx([e] * 3, abs=1e-9)


@pytest.mark.parametrize("k", [2, 3])
def test_rr_contagious_family(contagious, k):
    e = 0.8
    keep = math.exp(e) / (1 + math.exp(e))
    expected = k * math.log(keep / (1 - keep))  # = k e
    r = ddpbayes.audit(contagious(k), "identity", "randomized_response", "idp", epsilon=e)
    assert expected == pytest.approx(k * e)
    assert r.per_target == pytest.approx([expected] * k, abs=1e-9)
    assert ddpbayes.audit(contagious(k), "identity", "randomized_response", "dp", epsilon=e).leakage == pytest.approx(e)


def test_rr_household_against_enumeration(household):
    """Household (n = 3, latent h): idp of randomized response against every output in {0,1}^3."""
    n, ph, ps, pb = 3, 0.2, 0.8, 0.1
    joint = np.zeros((2,) * n)
    for x in np.ndindex(*joint.shape):
        s = sum(x)
        joint[x] = ph * ps**s * (1 - ps) ** (n - s) + (1 - ph) * pb**s * (1 - pb) ** (n - s)
    X, p = states(joint, [np.array([0.0, 1.0])] * n)
    e = 1.1
    expected = leak_grid(X, p, X, rr_log_kernel(e), binary_outputs(n), 0)[0]
    r = ddpbayes.audit(household(n=n), "identity", "randomized_response", "idp", epsilon=e)
    assert r.per_target == pytest.approx([expected] * n, abs=1e-9)
    assert e < expected < n * e  # strictly between independence and perfect contagion


@pytest.mark.parametrize("e", [10.0, 30.0, 40.0])
def test_rr_large_epsilon_independent_bits(e):
    """Independent bits: idp = log(keep / (1 - keep)) = e exactly, whatever e. In floating point
    1 - keep must not be formed as 1 - e^e/(1+e^e) (it cancels: relative error ~1e-16 e^e);
    log(1 - keep) = -e - log1p(e^{-e}) and log keep = -log1p(e^{-e}) are exact."""
    with pm.Model() as m:
        pm.Bernoulli("x0", 0.3)
        pm.Bernoulli("x1", 0.6)
    r = ddpbayes.audit(DependenceModel(m, ["x0", "x1"]), "identity", "randomized_response", "idp", epsilon=e)
    log_keep, log_flip = -math.log1p(math.exp(-e)), -e - math.log1p(math.exp(-e))
    assert log_keep - log_flip == pytest.approx(e, rel=1e-12)
    assert r.per_target == pytest.approx([e, e], rel=1e-9)
