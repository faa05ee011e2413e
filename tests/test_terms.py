"""The term tables (DESIGN §2.1b, `engines/terms.py`) when terms differ only in their constants.

Terms equal up to small float constants read as data share one compiled graph, the constants fed
as inputs (issue #29). Every table is compared, cell by cell, with the log-probability written
by hand in the test and with PyMC's own log-density of the whole model evaluated at that cell
(float constants in float64, as the engines read them), to 1e-12.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.stats import norm

from ddpbayes import DependenceModel
from ddpbayes.engines import terms
from ddpbayes.engines.terms import model_slots, tabulate
from ddpbayes.model.precision import in_float64

LIMIT = 1 << 20


def _probability(rng) -> float:
    """A probability, a quarter of the time one that float32 holds exactly (stored as float32 by PyTensor)."""
    return float(rng.choice([0.25, 0.5, 0.75, 0.625])) if rng.random() < 0.25 else float(rng.uniform(0.05, 0.95))


def _tables(model: DependenceModel) -> tuple[list, list[tuple[list[int], np.ndarray]]]:
    slots = model_slots(model, lambda rv: np.arange(2))
    return slots, tabulate(model, slots, LIMIT)


def _check(model: DependenceModel, expected: list) -> None:
    """Every term's table against `expected[j](values by name)` and against PyMC's log-density of the
    model at that cell (the other tuples at 0); terms in the model's order: free, observed, potentials."""
    slots, tables = _tables(model)
    m = model.model
    names = [s.rv.name for s in slots]
    values = [m.rvs_to_values[rv] for rv in m.free_RVs]
    direct = pytensor.function(values, in_float64(m.logp(sum=False)), mode="FAST_COMPILE")
    assert len(tables) == len(expected) == len(m.free_RVs) + len(m.observed_RVs) + len(m.potentials)
    for j, ((ids, table), hand) in enumerate(zip(tables, expected)):
        cells = list(itertools.product(*[slots[k].values for k in ids]))
        assert table.shape == (len(cells),)
        for cell, got in zip(cells, table):
            at = dict(zip([names[k] for k in ids], (int(v) for v in cell)))
            assert got == pytest.approx(hand(at), abs=1e-12, rel=0)
            point = [np.asarray(at.get(rv.name, 0), dtype=rv.dtype) for rv in m.free_RVs]
            assert got == pytest.approx(float(direct(*point)[j]), abs=1e-12, rel=0)


def _bernoulli(p: float, x: int) -> float:
    return math.log(p if x else 1 - p)


@pytest.mark.parametrize("seed", range(4))
def test_time_varying_binary_chains(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 9))
    p0, stay, up = _probability(rng), [_probability(rng) for _ in range(n)], [_probability(rng) for _ in range(n)]
    with pm.Model() as m:
        prev = pm.Bernoulli("x0", p0)
        for k in range(1, n):
            prev = pm.Bernoulli(f"x{k}", pm.math.switch(prev, stay[k], up[k]))
    expected = [lambda at: _bernoulli(p0, at["x0"])]
    expected += [lambda at, k=k: _bernoulli(stay[k] if at[f"x{k - 1}"] else up[k], at[f"x{k}"]) for k in range(1, n)]
    _check(DependenceModel(m, tuples=[f"x{k}" for k in range(n)]), expected)


@pytest.mark.parametrize("seed", range(4))
def test_categorical_chains_with_a_matrix_per_day(seed):
    rng = np.random.default_rng(10 + seed)
    n, size = int(rng.integers(3, 7)), int(rng.integers(2, 4))
    start = rng.dirichlet(np.ones(size))
    matrices = [rng.dirichlet(np.ones(size), size=size) for _ in range(n)]
    with pm.Model() as m:
        prev = pm.Categorical("x0", p=start)
        for k in range(1, n):
            prev = pm.Categorical(f"x{k}", p=pt.constant(matrices[k])[prev])
    expected = [lambda at: math.log(start[at["x0"]])]
    expected += [lambda at, k=k: math.log(matrices[k][at[f"x{k - 1}"], at[f"x{k}"]]) for k in range(1, n)]
    model = DependenceModel(m, tuples=[f"x{k}" for k in range(n)])
    _check(model, expected)
    groups, _ = terms._groups(m, terms._model_terms(model, list(m.free_RVs)))
    assert len(groups) == 2  # day 0, and every other day in one compiled graph


@pytest.mark.parametrize("seed", range(3))
def test_trees_with_a_table_per_node(seed):
    """A random tree of binary and ternary nodes, each with its own conditional table; binary nodes of
    a binary parent are written as a switch, the others index their table with the parent."""
    rng = np.random.default_rng(20 + seed)
    n = int(rng.integers(4, 9))
    sizes = [int(rng.integers(2, 4)) for _ in range(n)]
    parent = [None] + [int(rng.integers(0, k)) for k in range(1, n)]
    cpts = [rng.dirichlet(np.ones(sizes[k]), size=sizes[parent[k]] if k else 1) for k in range(n)]
    with pm.Model() as m:
        xs = [pm.Categorical("x0", p=cpts[0][0])]
        for k in range(1, n):
            up = xs[parent[k]]
            if sizes[k] == 2 and sizes[parent[k]] == 2:
                xs.append(pm.Bernoulli(f"x{k}", pm.math.switch(up, float(cpts[k][1, 1]), float(cpts[k][0, 1]))))
            else:
                xs.append(pm.Categorical(f"x{k}", p=pt.constant(cpts[k])[up]))
    expected = [lambda at: math.log(cpts[0][0, at["x0"]])]
    expected += [lambda at, k=k: math.log(cpts[k][at[f"x{parent[k]}"], at[f"x{k}"]]) for k in range(1, n)]
    model = DependenceModel(m, tuples=[f"x{k}" for k in range(n)])
    slots = model_slots(model, lambda rv: np.arange(2))
    assert [len(s.values) for s in slots] == sizes
    _check(model, expected)


@pytest.mark.parametrize("seed", range(3))
def test_hidden_markov_models(seed):
    """A hidden binary chain with a transition per day, a Normal emission per day (its own mean
    vector and scale), a Bernoulli emission every other day, and a potential per pair of days."""
    rng = np.random.default_rng(30 + seed)
    n = int(rng.integers(3, 7))
    stay, up = [_probability(rng) for _ in range(n)], [_probability(rng) for _ in range(n)]
    means, scales, data = rng.normal(size=(n, 2)), rng.uniform(0.5, 2, size=n), rng.normal(size=n)
    flips, seen = [_probability(rng) for _ in range(n)], rng.integers(0, 2, size=n)
    bonus = rng.normal(size=n)
    with pm.Model() as m:
        xs = [pm.Bernoulli("x0", 0.5)]
        for k in range(1, n):
            xs.append(pm.Bernoulli(f"x{k}", pm.math.switch(xs[-1], stay[k], up[k])))
        for k in range(n):
            pm.Normal(f"y{k}", mu=pt.constant(means[k])[xs[k]], sigma=float(scales[k]), observed=data[k])
        for k in range(0, n, 2):
            pm.Bernoulli(f"z{k}", pm.math.switch(xs[k], flips[k], 1 - flips[k]), observed=int(seen[k]))
        for k in range(1, n):
            pm.Potential(f"u{k}", pt.switch(pt.eq(xs[k], xs[k - 1]), bonus[k], -bonus[k]))
    expected = [lambda at: math.log(0.5)]
    expected += [lambda at, k=k: _bernoulli(stay[k] if at[f"x{k - 1}"] else up[k], at[f"x{k}"]) for k in range(1, n)]
    expected += [lambda at, k=k: norm.logpdf(data[k], means[k][at[f"x{k}"]], scales[k]) for k in range(n)]
    expected += [lambda at, k=k: _bernoulli(flips[k] if at[f"x{k}"] else 1 - flips[k], seen[k]) for k in range(0, n, 2)]
    expected += [lambda at, k=k: bonus[k] if at[f"x{k}"] == at[f"x{k - 1}"] else -bonus[k] for k in range(1, n)]
    model = DependenceModel(m, tuples=[f"x{k}" for k in range(n)])
    _check(model, expected)
    groups, _ = terms._groups(m, terms._model_terms(model, list(m.free_RVs)))
    assert len(groups) == 5  # x0; x1..; the Normal emissions; the Bernoulli emissions; the potentials


def test_constants_that_set_a_shape_stay_in_the_graph():
    """A float constant that sets a length (arange's stop) is structure, not data: its terms are not
    grouped, and each table is still its own."""
    stops = [2.0, 3.0, 3.5, 3.0]
    with pm.Model() as m:
        xs = [pm.Bernoulli(f"x{k}", 0.5) for k in range(len(stops))]
        for k, stop in enumerate(stops):
            pm.Potential(f"u{k}", pt.sum(pt.arange(0.0, stop)) * xs[k])
    expected = [lambda at: math.log(0.5)] * len(stops)
    expected += [lambda at, k=k: sum(np.arange(0.0, stops[k])) * at[f"x{k}"] for k in range(len(stops))]
    model = DependenceModel(m, tuples=[f"x{k}" for k in range(len(stops))])
    _check(model, expected)
    groups, _ = terms._groups(m, terms._model_terms(model, list(m.free_RVs)))
    assert len(groups) == 1 + 3  # the Bernoulli(0.5) terms; the potentials with stops 2, 3 (twice) and 3.5


def test_groups_too_large_to_feed_are_split_by_constants(monkeypatch):
    """Above the budget of fed constants a group is compiled once per distinct constants: same tables."""
    rng = np.random.default_rng(40)
    n, size = 6, 3
    matrices = [rng.dirichlet(np.ones(size), size=size) for _ in range(n)]
    matrices[4] = matrices[2]
    with pm.Model() as m:
        prev = pm.Categorical("x0", p=np.full(size, 1 / size))
        for k in range(1, n):
            prev = pm.Categorical(f"x{k}", p=pt.constant(matrices[k])[prev])
    expected = [lambda at: math.log(1 / size)]
    expected += [lambda at, k=k: math.log(matrices[k][at[f"x{k - 1}"], at[f"x{k}"]]) for k in range(1, n)]
    monkeypatch.setattr(terms, "LIFT_BUDGET", 0)
    _check(DependenceModel(m, tuples=[f"x{k}" for k in range(n)]), expected)
