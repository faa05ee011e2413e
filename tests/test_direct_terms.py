"""Term tables read off the model's constants (`engines.direct`, issue #44; DESIGN §2.1b).

A Categorical of constant probabilities or indexed by the previous day, a Bernoulli of a constant or
`switch(prev, a, b)`, and a DiscreteMarkovChain with constant P and initial law are tabulated without a
compiled graph. Each table is compared cell by cell with the log-probability written here; numbers PyMC's
checks refuse still end in its one-line refusal (the compiled route evaluates them), and a form not read
directly is left to the compiled route.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import ddpbayes
from ddpbayes import DependenceModel, Finite
from ddpbayes.engines import terms
from ddpbayes.engines.terms import model_slots, tabulate
from ddpbayes.errors import InputError

pmx = pytest.importorskip("pymc_extras.distributions")


def _terms(model: DependenceModel) -> list:
    return terms._model_terms(model, [s.rv for s in model.slots])


def _cells(model: DependenceModel, states: int):
    slots = model_slots(model, lambda rv: np.arange(states))
    for ids, table in tabulate(model, slots, 1 << 20):
        cells = list(itertools.product(*[slots[k].values for k in ids]))
        assert table.shape == (len(cells),)
        yield ids, cells, table


def test_categorical_rows_indexed_by_the_previous_day():
    rng = np.random.default_rng(0)
    p0 = rng.dirichlet(np.ones(3))
    P = rng.dirichlet(np.ones(3), size=3)
    with pm.Model() as m:
        prev = pm.Categorical("x0", p=p0)
        for day in range(1, 4):
            prev = pm.Categorical(f"x{day}", p=pm.math.constant(P)[prev])
    model = DependenceModel(m, [f"x{day}" for day in range(4)])
    assert all(t.direct is not None for t in _terms(model))
    for ids, cells, table in _cells(model, 3):
        for (x, *prev), got in zip(cells, table):
            want = math.log(p0[int(x)]) if not prev else math.log(P[int(prev[0]), int(x)])
            assert got == want, (ids, x, prev)


def test_bernoulli_switch_and_constant():
    with pm.Model() as m:
        prev = pm.Bernoulli("x0", 0.5)  # stored as float32 by PyTensor: read in float64, exactly
        for day in range(1, 3):
            prev = pm.Bernoulli(f"x{day}", pm.math.switch(prev, 0.9, 0.15))
    model = DependenceModel(m, ["x0", "x1", "x2"])
    assert all(t.direct is not None for t in _terms(model))
    for ids, cells, table in _cells(model, 2):
        for (x, *prev), got in zip(cells, table):
            p = 0.5 if not prev else (0.9 if prev[0] else 0.15)
            assert got == pytest.approx(math.log(p) if x else math.log1p(-p), abs=1e-15, rel=0)


def test_discrete_markov_chain_with_constants():
    rng = np.random.default_rng(1)
    p0, P = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4), size=4)
    with pm.Model() as m:
        pmx.DiscreteMarkovChain("x", P=P, init_dist=pm.Categorical.dist(p=p0), shape=(5,))
    model = DependenceModel(m, "x")
    assert all(t.direct is not None for t in _terms(model))
    for ids, cells, table in _cells(model, 4):
        for cell, got in zip(cells, table):
            want = math.log(p0[int(cell[0])]) if len(ids) == 1 else math.log(P[int(cell[1]), int(cell[0])])
            assert got == want


def test_values_outside_the_support_have_probability_zero():
    """A declared domain wider than the Categorical's states: log 0 there, as PyMC's logp says."""
    P = np.array([[0.6, 0.4], [0.3, 0.7]])
    with pm.Model() as m:
        x0 = pm.Categorical("x0", p=[0.5, 0.5])
        pm.Categorical("x1", p=pt.as_tensor_variable(P)[x0])
    model = DependenceModel(m, ["x0", "x1"], domains={"x0": Finite([0, 1]), "x1": Finite([0, 1, 2])})
    assert all(t.direct is not None for t in _terms(model))
    slots = model_slots(model, lambda rv: np.arange(2))
    tables = dict((tuple(ids), table) for ids, table in tabulate(model, slots, 1 << 20))
    assert np.array_equal(tables[(1, 0)].reshape(3, 2), np.log(np.vstack([P.T, [0.0, 0.0]])))


def test_other_forms_are_compiled():
    """A probability computed from the parent (sigmoid) is not a lookup: the compiled route tabulates it."""
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", 0.3)
        pm.Bernoulli("x1", pm.math.sigmoid(0.4 + 1.2 * x0))
    model = DependenceModel(m, ["x0", "x1"])
    assert [t.direct is not None for t in _terms(model)] == [True, False]
    for ids, cells, table in _cells(model, 2):
        if len(ids) == 2:
            for (x, prev), got in zip(cells, table):
                p = 1 / (1 + math.exp(-(0.4 + 1.2 * prev)))
                assert got == pytest.approx(math.log(p) if x else math.log1p(-p), abs=1e-12, rel=0)


@pytest.mark.parametrize("kind", ["rows", "switch"])
def test_refused_numbers_are_refused_as_before(kind):
    """Rows that do not sum to 1 (picked by the parent) or a probability above 1: PyMC's check, one line."""
    with pm.Model() as m:
        x0 = pm.Categorical("x0", p=[0.5, 0.5]) if kind == "rows" else pm.Bernoulli("x0", 0.5)
        if kind == "rows":
            pm.Categorical("x1", p=pt.as_tensor_variable(np.array([[0.6, 0.4], [0.5, 0.9]]))[x0])
        else:
            pm.Bernoulli("x1", pm.math.switch(x0, 1.2, 0.3))
    model = DependenceModel(m, ["x0", "x1"])
    with pytest.raises(InputError, match="rejects its own parameters"):
        ddpbayes.audit(model, "count", "laplace", "idp", epsilon=1.0, engine="structured", information=None)


def test_a_long_chain_of_scalar_variables_is_advised_the_vector_form(monkeypatch):
    """Past MANY_SCALARS scalar days (5,000; 4 here) the audit's notes say to write the chain as one
    DiscreteMarkovChain; the same chain as one vector variable gets no such note."""
    from ddpbayes.engines.structured import engine

    monkeypatch.setattr(engine, "MANY_SCALARS", 4)
    P, p0 = np.array([[0.8, 0.2], [0.3, 0.7]]), np.array([0.6, 0.4])
    with pm.Model() as loop:
        prev = pm.Categorical("x0", p=p0)
        for day in range(1, 4):
            prev = pm.Categorical(f"x{day}", p=pt.as_tensor_variable(P)[prev])
    with pm.Model() as vector:
        pmx.DiscreteMarkovChain("x", P=P, init_dist=pm.Categorical.dist(p=p0), shape=(4,))
    notes = [ddpbayes.audit(DependenceModel(m, tuples), "count", "laplace", "idp", epsilon=1.0,
                            engine="structured", information=None).notes
             for m, tuples in ((loop, [f"x{day}" for day in range(4)]), (vector, "x"))]
    assert [any("DiscreteMarkovChain" in n for n in found) for found in notes] == [True, False]
