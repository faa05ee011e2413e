"""Random categorical Bayesian networks for tests: x_k's table conditions on every earlier tuple."""

from __future__ import annotations

import pymc as pm
import pytensor.tensor as pt

from ddpbayes import DependenceModel


def chain_model(tables) -> DependenceModel:
    """The PyMC model of `tables`: x0 ~ tables[0], x_k ~ tables[k][x0, ..., x_{k-1}]."""
    with pm.Model() as m:
        xs = [pm.Categorical("x0", p=tables[0])]
        for k, t in enumerate(tables[1:], start=1):
            xs.append(pm.Categorical(f"x{k}", p=pt.as_tensor_variable(t)[tuple(xs)]))
    return DependenceModel(m, tuples=[f"x{k}" for k in range(len(tables))])


def random_chain(rng, sizes):
    """Random conditional tables with entries in [0.05, 1] (normalised) and their joint, by numpy."""
    tables = []
    for k in range(len(sizes)):
        t = rng.uniform(0.05, 1.0, size=tuple(sizes[: k + 1]))
        tables.append(t / t.sum(axis=-1, keepdims=True))
    joint = tables[0]
    for t in tables[1:]:
        joint = joint[..., None] * t
    return tables, joint
