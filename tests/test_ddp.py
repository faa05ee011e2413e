"""DDP (000): the adversary knows every tuple outside the target's dependence set N(i)
(DESIGN §3.1: the tuples whose conditional law changes with X_i)."""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytest
from bruteforce import household_idp_closed_form, household_joint, independent_joint, leak_bruteforce, markov_joint

import ddpbayes
from ddpbayes import DependenceModel

BIN = np.array([0.0, 1.0])


def pairwise_dependence_sets(joint: np.ndarray) -> list[list[int]]:
    """N(i) = {j != i : P(X_j | X_i = t) differs between values t}, from the numpy joint."""
    n = joint.ndim
    sets = []
    for i in range(n):
        dep = []
        for j in range(n):
            if j == i:
                continue
            pij = joint.sum(axis=tuple(k for k in range(n) if k not in (i, j)))
            if i > j:
                pij = pij.T  # axes in order (i, j)
            rows = pij[pij.sum(axis=1) > 0]
            cond = rows / rows.sum(axis=1, keepdims=True)
            if np.abs(cond - cond[0]).max() > 1e-12:
                dep.append(j)
        sets.append(dep)
    return sets


def test_independent_tuples_empty_sets_ddp_equals_dp():
    """Independent Bernoulli: N(i) = {}, K = all others, leak 1/b (see test_independent)."""
    with pm.Model() as m:
        for k, p in enumerate([0.3, 0.6, 0.5]):
            pm.Bernoulli(f"x{k}", p)
    b = 0.4
    r = ddpbayes.audit(DependenceModel(m, ["x0", "x1", "x2"]), "count", "laplace", "ddp", scale=b)
    assert pairwise_dependence_sets(independent_joint([[0.7, 0.3], [0.4, 0.6], [0.5, 0.5]])) == [[], [], []]
    assert r.dependence_sets == [[], [], []]
    assert r.per_target == pytest.approx([1 / b] * 3, abs=1e-9)
    assert r.witness.adversary.known == frozenset(range(3)) - {r.witness.adversary.target}


def test_household_everyone_depends_ddp_equals_idp(household):
    """Through h every member's law changes with every other's: N(i) = all others, K = {}, ddp = idp."""
    n, b = 4, 1.0
    assert pairwise_dependence_sets(household_joint(n)) == [[j for j in range(n) if j != i] for i in range(n)]
    r = ddpbayes.audit(household(n=n), "count", "laplace", "ddp", scale=b)
    assert r.dependence_sets == [[j for j in range(n) if j != i] for i in range(n)]
    assert r.per_target == pytest.approx([household_idp_closed_form(n, b)] * n, abs=1e-9)


def test_markov_chain_everyone_depends(markov4):
    """A Markov chain with a non-degenerate transition (0.9 vs 0.2) makes every pair marginally
    dependent (the k-step transition matrix has eigenvalue 0.7^k != 0); check on the numpy joint,
    then ddp = idp from the brute-force reference."""
    joint = markov_joint()
    full = [[j for j in range(4) if j != i] for i in range(4)]
    assert pairwise_dependence_sets(joint) == full
    b = 1.0
    r = ddpbayes.audit(markov4, "count", "laplace", "ddp", scale=b)
    assert r.dependence_sets == full
    expected = [leak_bruteforce(joint, [BIN] * 4, [1.0] * 4, b, i) for i in range(4)]
    assert r.per_target == pytest.approx(expected, abs=1e-9)


@pytest.fixture(scope="module")
def pair_plus_independent():
    """(x0, x1) perfectly dependent, x2 independent of both."""
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", 0.4)
        pm.Bernoulli("x1", pm.math.switch(x0, 1.0, 0.0))
        pm.Bernoulli("x2", 0.3)
    return DependenceModel(m, tuples=["x0", "x1", "x2"])


def test_blocks(pair_plus_independent):
    """N(0) = {1}, N(1) = {0}, N(2) = {}.
    Target 0, K = {2}: L(y | t, x2) = Lap(y - 2t - x2): 2/b. Same for target 1.
    Target 2, K = {0, 1}: L(y | t, x0, x1) = Lap(y - t - x0 - x1): 1/b."""
    b = 0.5
    r = ddpbayes.audit(pair_plus_independent, "count", "laplace", "ddp", scale=b)
    assert r.dependence_sets == [[1], [0], []]
    assert r.per_target == pytest.approx([2 / b, 2 / b, 1 / b], abs=1e-9)
    assert r.witness.adversary.known == frozenset({2})


def test_xor_pairwise_definition():
    """X2 = X0 xor X1 with X0, X1 fair and independent: every pair is independent (P(X2 | X0) is
    Bern(1/2) for both values of X0), so by DESIGN §3.1's pairwise definition N(i) = {} and the
    ddp adversary knows both others, which determine the target: ddp = 0 — while idp > 0:
    count given X0 = 0 is 0 or 2 (prob 1/2 each), given X0 = 1 it is 2, so
    L(y|1) = Lap(y - 2), L(y|0) = (Lap(y) + Lap(y - 2)) / 2. As y -> +inf, L(y|1)/L(y|0) ->
    2 e^{2/b} / (1 + e^{2/b}) < 2; as y -> -inf, L(y|0)/L(y|1) -> (1 + e^{2/b}) / 2, the larger
    (for y in [0, 2] the ratio moves monotonically between these). This documents the pairwise
    definition: DDP's adversary is blind to this dependence."""
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", 0.5)
        x1 = pm.Bernoulli("x1", 0.5)
        pm.Bernoulli("x2", pm.math.switch(pm.math.eq(x0, x1), 0.0, 1.0))
    model = DependenceModel(m, ["x0", "x1", "x2"])
    joint = np.zeros((2, 2, 2))
    for a, c in itertools.product((0, 1), repeat=2):
        joint[a, c, a ^ c] = 0.25
    assert pairwise_dependence_sets(joint) == [[], [], []]
    b = 1.0
    r = ddpbayes.audit(model, "count", "laplace", "ddp", scale=b)
    assert r.dependence_sets == [[], [], []]
    assert r.per_target == pytest.approx([0.0, 0.0, 0.0], abs=1e-12)
    idp = ddpbayes.audit(model, "count", "laplace", "idp", scale=b, targets=[0])
    assert idp.leakage == pytest.approx(leak_bruteforce(joint, [BIN] * 3, [1, 1, 1], b, 0), abs=1e-9)
    assert idp.leakage == pytest.approx(np.log((1 + np.exp(2 / b)) / 2), abs=1e-9)
