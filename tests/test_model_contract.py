"""The model contract (DESIGN §4) and the enumeration of the joint: latents (scalar, vector,
DiscreteUniform) are marginalised, vector tuples are split, potentials weight the joint, and a
Finite domain that truncates a support conditions the model on it (with a note). Every expected
number comes from a joint written by hand in numpy and the brute-force reference."""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from bruteforce import leak_bruteforce

import ddpbayes
from ddpbayes import DependenceModel, Finite, InputError, Interval

BIN = np.array([0.0, 1.0])


def _check_lattice(model, joint, values, weights, b, query):
    r = ddpbayes.audit(model, query, "laplace", "pdp", scale=b, lattice=True)
    for node in r.lattice:
        expected = leak_bruteforce(joint, values, weights, b, node.adversary.target, sorted(node.adversary.known))
        assert node.value == pytest.approx(expected, abs=1e-9), str(node.adversary)
    return r


def test_vector_latent_marginalised():
    """h = (h0, h1) independent Bernoulli(0.3), Bernoulli(0.6); x_k | h ~ Bern(0.9 if h[k % 2] else 0.1).
    P(x) = sum_h P(h) prod_k P(x_k | h_{k % 2})."""
    with pm.Model() as m:
        h = pm.Bernoulli("h", p=[0.3, 0.6], shape=2)
        for k in range(3):
            pm.Bernoulli(f"x{k}", pm.math.switch(h[k % 2], 0.9, 0.1))
    joint = np.zeros((2, 2, 2))
    for h0 in (0, 1):
        for h1 in (0, 1):
            ph = (0.3 if h0 else 0.7) * (0.6 if h1 else 0.4)
            hs = [h0, h1, h0]
            for x in np.ndindex(2, 2, 2):
                pr = ph
                for k in range(3):
                    q = 0.9 if hs[k] else 0.1
                    pr *= q if x[k] else 1 - q
                joint[x] += pr
    _check_lattice(DependenceModel(m, ["x0", "x1", "x2"]), joint, [BIN] * 3, [1, 1, 1], 1.0, "count")


def test_vector_tuple_with_shared_latent():
    """tuples='x', x ~ Bern(0.9 if h else 0.1) elementwise, h ~ Bern(0.3):
    P(x) = 0.3 * 0.9^s 0.1^(3-s) + 0.7 * 0.1^s 0.9^(3-s), s = sum x."""
    with pm.Model() as m:
        h = pm.Bernoulli("h", 0.3)
        pm.Bernoulli("x", p=pm.math.switch(h, 0.9, 0.1), shape=3)
    joint = np.zeros((2, 2, 2))
    for x in np.ndindex(2, 2, 2):
        s = sum(x)
        joint[x] = 0.3 * 0.9**s * 0.1 ** (3 - s) + 0.7 * 0.1**s * 0.9 ** (3 - s)
    _check_lattice(DependenceModel(m, "x"), joint, [BIN] * 3, [1, 2, -1], 0.8, "linear:1,2,-1")


def test_discrete_uniform_latent_and_categorical_tuples():
    """z ~ DiscreteUniform(0, 2), x0, x1 | z iid Categorical(P[z]): P(x0, x1) = (1/3) sum_z P[z,x0] P[z,x1]."""
    P = np.array([[0.8, 0.2], [0.5, 0.5], [0.1, 0.9]])
    with pm.Model() as m:
        z = pm.DiscreteUniform("z", 0, 2)
        pm.Categorical("x0", p=pt.as_tensor_variable(P)[z])
        pm.Categorical("x1", p=pt.as_tensor_variable(P)[z])
    joint = sum(np.outer(P[z], P[z]) for z in range(3)) / 3
    _check_lattice(DependenceModel(m, ["x0", "x1"]), joint, [BIN] * 2, [1, 1], 0.5, "sum")


def test_potential_weights_the_joint():
    """x0, x1 fair coins and a potential log 3 when they agree: P = [[3, 1], [1, 3]] / 8."""
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", 0.5)
        x1 = pm.Bernoulli("x1", 0.5)
        pm.Potential("agree", pm.math.switch(pm.math.eq(x0, x1), math.log(3.0), 0.0))
    joint = np.array([[3.0, 1.0], [1.0, 3.0]]) / 8
    _check_lattice(DependenceModel(m, ["x0", "x1"]), joint, [BIN] * 2, [1, 1], 1.0, "count")


def test_truncating_finite_domain_conditions_the_model():
    """x0 ~ Bern(1/2), x1 | x0 ~ Binomial(3, 0.8 if x0 else 0.2), domain of x1 given as {0, 1}:
    the leakage is for the model conditioned on x1 <= 1 (P(x1 <= 1) = 0.5 * (0.104 + 0.896) = 0.5),
    and the result says so in a note."""
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", 0.5)
        pm.Binomial("x1", 3, pm.math.switch(x0, 0.8, 0.2))
    model = DependenceModel(m, ["x0", "x1"], domains={"x1": Finite([0, 1])})
    joint = np.zeros((2, 2))
    for a in (0, 1):
        p = 0.8 if a else 0.2
        for c in (0, 1):
            joint[a, c] = 0.5 * math.comb(3, c) * p**c * (1 - p) ** (3 - c)
    assert joint.sum() == pytest.approx(0.5)
    joint /= joint.sum()
    r = _check_lattice(model, joint, [BIN] * 2, [1, 1], 1.0, "sum")
    assert r.notes and "0.5" in r.notes[0]


def test_deterministic_inside_the_model():
    """A pm.Deterministic between tuples is just a function: x1 ~ Bern(d), d = 0.2 + 0.7 x0."""
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", 0.4)
        d = pm.Deterministic("d", 0.2 + 0.7 * x0)
        pm.Bernoulli("x1", d)
    joint = np.array([[0.6 * 0.8, 0.6 * 0.2], [0.4 * 0.1, 0.4 * 0.9]])
    _check_lattice(DependenceModel(m, ["x0", "x1"]), joint, [BIN] * 2, [1, 1], 1.0, "count")


# --------------------------------------------------------------------------- contract errors


@pytest.fixture(scope="module")
def small():
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", 0.5)
        pm.Deterministic("d", x0 * 2)
        pm.Bernoulli("v", 0.5, shape=2)
        pm.Normal("z", 0, 1)
    return m


@pytest.mark.parametrize(
    ("tuples", "domains"),
    [
        (["x0", "nope"], None),  # unknown name
        (["x0", "x0"], None),  # repeated
        (["d"], None),  # deterministic, not a free variable
        (["v"], None),  # vector named as a scalar tuple
        ("x0", None),  # scalar named as a vector
        ([], None),  # no tuples
        (["x0"], {"other": Finite([0, 1])}),  # domain for a non-tuple
        (["x0"], {"x0": [0, 1]}),  # not a Domain
    ],
)
def test_contract_errors(small, tuples, domains):
    with pytest.raises(InputError):
        DependenceModel(small, tuples=tuples, domains=domains)


def test_not_a_pymc_model():
    with pytest.raises(InputError):
        DependenceModel(object(), tuples=["x"])


@pytest.mark.parametrize("bad", [lambda: Interval(1, 1), lambda: Interval(2, 1), lambda: Finite([]), lambda: Finite([0, math.inf])])
def test_domain_errors(bad):
    with pytest.raises(InputError):
        bad()


def test_continuous_latent_refused_by_exact():
    """A continuous latent cannot be enumerated: the exact engine says so (InputError, not a crash)."""
    with pm.Model() as m:
        p = pm.Beta("p", 2, 2)
        pm.Bernoulli("x0", p)
        pm.Bernoulli("x1", p)
    with pytest.raises(InputError):
        ddpbayes.audit(DependenceModel(m, ["x0", "x1"]), "count", "laplace", "idp", scale=1.0, engine="exact")
