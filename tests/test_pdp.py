"""PDP (003): the lattice of adversaries A(i, K)."""

from __future__ import annotations

import json
import math

import numpy as np
import pymc as pm
import pytest
from bruteforce import household_idp_closed_form, household_joint, leak_bruteforce

import ddpbayes
from ddpbayes import DependenceModel
from ddpbayes.cli.main import main

BIN = np.array([0.0, 1.0])


def test_pdp_known_empty_equals_idp(household):
    """K = {} is the weakest adversary: pdp restricted to it is idp (the same quantity)."""
    m, b = household(n=4), 0.8
    pdp = ddpbayes.audit(m, "count", "laplace", "pdp", scale=b, known=[])
    idp = ddpbayes.audit(m, "count", "laplace", "idp", scale=b)
    expected = household_idp_closed_form(4, b)
    assert pdp.per_target == pytest.approx([expected] * 4, abs=1e-9)
    assert idp.per_target == pytest.approx([expected] * 4, abs=1e-9)
    assert pdp.witness.adversary.known == frozenset()


def test_pdp_known_empty_cli(household, capsys, models_dir):
    """`--known ''` on the command line means K = {}."""
    code = main(["audit", str(models_dir / "household.py"), "-p", "n=3", "--query", "count", "--mechanism", "laplace",
                 "--scale", "1", "--notion", "pdp", "--known", "", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["per_target"] == pytest.approx([household_idp_closed_form(3, 1.0)] * 3, abs=1e-9)
    assert out["witness"]["known"] == []


def test_pdp_all_others_known_equals_dp_household(household):
    """Every combination has positive probability (mixture of two product laws with
    probabilities in (0,1)), so K = all others, with x_K fixed, leaves
    L(y | t, x_K) = Lap_b(y - t - sum x_K): ratio e^{1/b}, = dp."""
    m, b = household(n=4), 0.8
    assert (household_joint(4) > 0).all()
    for i in range(4):
        others = [j for j in range(4) if j != i]
        r = ddpbayes.audit(m, "count", "laplace", "pdp", scale=b, targets=[i], known=others)
        assert r.leakage == pytest.approx(1 / b, abs=1e-9)
        assert r.per_target == [None if j != i else pytest.approx(1 / b, abs=1e-9) for j in range(4)]
    assert ddpbayes.audit(m, "count", "laplace", "dp", scale=b).leakage == pytest.approx(1 / b, abs=1e-12)


def test_pdp_twin_known_leaves_nothing(contagious):
    """Knowing one member of the perfectly dependent pair fixes the other: only one t is possible: 0."""
    m = contagious(2)
    assert ddpbayes.audit(m, "count", "laplace", "pdp", scale=1.0, targets=[0], known=[1]).leakage == 0.0
    assert ddpbayes.audit(m, "count", "laplace", "pdp", scale=1.0, targets=[1], known=[0]).leakage == 0.0
    # ... and the full lattice: K = {} gives 2/b, K = {twin} gives 0 -> pdp = 2/b at K = {}
    r = ddpbayes.audit(m, "count", "laplace", "pdp", scale=1.0)
    assert r.leakage == pytest.approx(2.0, abs=1e-9)
    assert r.witness.adversary.known == frozenset()


def test_pdp_lattice_household_against_bruteforce(household):
    n, b = 3, 0.6
    r = ddpbayes.audit(household(n=n), "count", "laplace", "pdp", scale=b, lattice=True)
    assert len(r.lattice) == n * 2 ** (n - 1)
    joint = household_joint(n)
    for node in r.lattice:
        expected = leak_bruteforce(joint, [BIN] * n, [1.0] * n, b, node.adversary.target, sorted(node.adversary.known))
        assert node.value == pytest.approx(expected, abs=1e-9), str(node.adversary)
    # household: positive dependence only, every x_K possible; K = all others gives 1/b
    full = [v for v in r.lattice if len(v.adversary.known) == n - 1]
    assert [v.value for v in full] == pytest.approx([1 / b] * n, abs=1e-9)
    assert r.leakage == pytest.approx(max(household_idp_closed_form(n, b), 1 / b), abs=1e-9)


def test_lattice_json(household):
    r = ddpbayes.audit(household(n=3), "count", "laplace", "pdp", scale=1.0, lattice=True).to_dict()
    json.dumps(r)
    assert len(r["lattice"]) == 12
    sizes = r["lattice_summary"]["max_by_known_size"]
    assert set(sizes) == {"0", "1", "2"}
    assert sizes["2"] == pytest.approx(1.0, abs=1e-9)
    assert sizes["0"] == pytest.approx(household_idp_closed_form(3, 1.0), abs=1e-9)


# --------------------------------------------------------------------------- weakest adversary is not always worst
# Discrete analogue of 003's Gaussian counterexample (DESIGN §3.2): X_0 ~ Bern(1/2), X_1 = X_0,
# X_2 | X_0 ~ Bern(0.1 if X_0 else 0.9) (negatively correlated), count, Laplace(b = 1).
#   K = {2}: given x_2, both values of X_0 stay possible and the count is 2 X_0 + x_2:
#            L(y | t, x_2) = Lap(y - 2t - x_2) -> leak 2/b = 2 exactly.
#   K = {}:  X_2 counteracts X_0. As y -> +inf, the ratio is
#            E[e^{S}|X_0=1] / E[e^{S}|X_0=0] = e^2 (0.9 + 0.1 e) / (0.1 + 0.9 e) ≈ 3.40 -> log ≈ 1.224,
#            and (by the brute-force grid) no y does better: leak ≈ 1.224 < 2.
#   K = {1}, {1,2}: X_1 reveals X_0: 0.


@pytest.fixture(scope="module")
def counteracting():
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", 0.5)
        pm.Bernoulli("x1", pm.math.switch(x0, 1.0, 0.0))
        pm.Bernoulli("x2", pm.math.switch(x0, 0.1, 0.9))
    return DependenceModel(m, tuples=["x0", "x1", "x2"])


def counteracting_joint():
    joint = np.zeros((2, 2, 2))
    for x0 in (0, 1):
        p2 = 0.1 if x0 else 0.9
        joint[x0, x0, 1] = 0.5 * p2
        joint[x0, x0, 0] = 0.5 * (1 - p2)
    return joint


def test_stronger_adversary_leaks_more(counteracting):
    b = 1.0
    weak = leak_bruteforce(counteracting_joint(), [BIN] * 3, [1, 1, 1], b, 0, ())
    limit = math.log(math.e**2 * (0.9 + 0.1 * math.e) / (0.1 + 0.9 * math.e))
    assert weak == pytest.approx(limit, abs=1e-9)  # the sup is the y -> inf limit
    assert leak_bruteforce(counteracting_joint(), [BIN] * 3, [1, 1, 1], b, 0, (2,)) == pytest.approx(2.0, abs=1e-12)

    r = ddpbayes.audit(counteracting, "count", "laplace", "pdp", scale=b, targets=[0], lattice=True)
    by_k = {tuple(sorted(v.adversary.known)): v.value for v in r.lattice}
    assert by_k[()] == pytest.approx(limit, abs=1e-9)
    assert by_k[(2,)] == pytest.approx(2.0, abs=1e-9)
    assert by_k[(1,)] == pytest.approx(0.0, abs=1e-12)
    assert by_k[(1, 2)] == pytest.approx(0.0, abs=1e-12)
    assert r.leakage == pytest.approx(2.0, abs=1e-9)
    assert r.witness.adversary.known == frozenset({2})
    idp = ddpbayes.audit(counteracting, "count", "laplace", "idp", scale=b, targets=[0])
    assert idp.leakage == pytest.approx(limit, abs=1e-9) and idp.leakage < r.leakage
