"""Prefix sums (DP-Sniper's PrefixSum): Laplace noise on each answer, released as running sums. Every likelihood
ratio is Laplace's on the answers (the running sums are an invertible map), checked here against a brute force
in the released coordinates: p(y | q) = Π_j Lap_b(y_j − y_{j−1} − q_j), maximised over a grid of y."""

from __future__ import annotations


import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from ddpbayes import DependenceModel
from ddpbayes.auditing import audit


def pair_chain():
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", 0.35)
        pm.Bernoulli("x1", pt.switch(x0, 0.85, 0.25))
    joint = {(0, 0): 0.65 * 0.75, (0, 1): 0.65 * 0.25, (1, 0): 0.35 * 0.15, (1, 1): 0.35 * 0.85}
    return DependenceModel(m, tuples=["x0", "x1"]), joint


def brute_idp_in_released_coordinates(joint, target: int, b: float) -> float:
    grid = np.linspace(-12, 14, 521)
    y1, y2 = np.meshgrid(grid, grid, indexing="ij")
    curves = []
    for t in (0, 1):
        lik = np.zeros_like(y1)
        mass = 0.0
        for x, p in joint.items():
            if x[target] == t:
                lik += p * np.exp(-(np.abs(y1 - x[0]) + np.abs(y2 - y1 - x[1])) / b) / (2 * b) ** 2
                mass += p
        curves.append(lik / mass)
    return float(np.max(np.abs(np.log(curves[0]) - np.log(curves[1]))))


@pytest.mark.parametrize("b", [0.7, 1.5])
def test_prefix_sums_leak_as_laplace_on_the_answers(b):
    model, joint = pair_chain()
    prefix = audit(model, "identity", "prefix_sums", "idp", scale=b, information=None)
    laplace = audit(model, "identity", "laplace", "idp", scale=b, information=None)
    assert prefix.per_target == pytest.approx(laplace.per_target, abs=1e-12)
    for i in (0, 1):  # the grid reaches past every breakpoint: the sup is attained on it (within its spacing)
        brute = brute_idp_in_released_coordinates(joint, i, b)
        assert prefix.per_target[i] == pytest.approx(brute, abs=2 * 0.05 / b)
        assert prefix.per_target[i] >= brute - 1e-9
    assert prefix.mechanism["kind"] == "prefix_sums"


def test_prefix_sums_on_a_gaussian_model_use_the_closed_form():
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(3), cov=np.array([[1.0, 0.5, 0.2], [0.5, 1.0, 0.5], [0.2, 0.5, 1.0]]))
    from ddpbayes.model.domains import Interval

    model = DependenceModel(m, tuples="x", domains=Interval(0, 1))
    prefix = audit(model, "identity", "prefix_sums", "idp", scale=1.0, information=None)
    assert prefix.engine == "gaussian"
    assert prefix.leakage == pytest.approx(audit(model, "identity", "laplace", "idp", scale=1.0,
                                                 information=None).leakage, abs=1e-12)
