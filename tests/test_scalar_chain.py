"""A chain of scalar variables read off its constants at once (`graph._scalar_chain`, issue #44; DESIGN §2.1b).

The recognised chain's factor graph must be the general route's bit for bit (factors, path, directed graph),
every other model must take the general route, and random chains' leakages must equal a brute-force
enumeration of the joint written here.
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
from ddpbayes.engines.structured import graph as graph_module
from ddpbayes.engines.structured.pathsum import path_of

LIMIT = 1 << 20


def _categorical_chain(rng: np.random.Generator, n: int, k: int,
                       shared: bool = False) -> tuple[DependenceModel, np.ndarray, list]:
    """x_0 ~ Categorical(p0), x_j ~ Categorical(P_j[x_{j-1}]), P_j drawn from two matrices (repeats shared), some
    transitions zero; with `shared`, the days drawing one matrix index one PyTensor constant (read once)."""
    p0 = rng.dirichlet(np.ones(k))
    pool = [rng.dirichlet(np.ones(k), size=k) for _ in range(2)]
    pool[1][0] = np.eye(k)[0]  # a row with zeros
    picks = [int(rng.integers(2)) for _ in range(n - 1)]
    with pm.Model() as m:
        constants = [pt.as_tensor_variable(matrix) for matrix in pool]
        prev = pm.Categorical("x0", p=p0)
        for day in range(1, n):
            matrix = constants[picks[day - 1]] if shared else pt.as_tensor_variable(pool[picks[day - 1]])
            prev = pm.Categorical(f"x{day}", p=matrix[prev])
    return DependenceModel(m, [f"x{day}" for day in range(n)]), p0, [pool[j] for j in picks]


def _bernoulli_chain(rng: np.random.Generator, n: int) -> tuple[DependenceModel, np.ndarray, list]:
    """x_0 ~ Bernoulli(p), x_j ~ Bernoulli(switch(x_{j-1}, a_j, b_j)), a certain transition among them."""
    p = float(rng.uniform(0.1, 0.9))
    pairs = [(float(rng.uniform()), float(rng.uniform())) for _ in range(n - 1)]
    pairs[0] = (1.0, pairs[0][1])
    with pm.Model() as m:
        prev = pm.Bernoulli("x0", p)
        for day in range(1, n):
            prev = pm.Bernoulli(f"x{day}", pm.math.switch(prev, *pairs[day - 1]))
    P = [np.array([[1 - b, b], [1 - a, a]]) for a, b in pairs]
    return DependenceModel(m, [f"x{day}" for day in range(n)]), np.array([1 - p, p]), P


def _general(model: DependenceModel, monkeypatch) -> graph_module.FactorGraph:
    with monkeypatch.context() as patched:
        patched.setattr(graph_module, "_scalar_chain", lambda model, limit: None)
        return graph_module._build(model, LIMIT, None)


def _same_graph(fast: graph_module.FactorGraph, slow: graph_module.FactorGraph) -> None:
    assert fast.sizes == slow.sizes and fast.rules == slow.rules == {}
    assert all(np.array_equal(a, b) for a, b in zip(fast.values, slow.values))
    assert [(p.scope, p.offset, p.table.shape) for p in fast.factors] == \
        [(p.scope, p.offset, p.table.shape) for p in slow.factors]
    assert all(a.table.tobytes() == b.table.tobytes() for a, b in zip(fast.factors, slow.factors))
    got, want = path_of(fast), path_of(slow)
    assert got.order == want.order and got.constant == want.constant
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got.unary + got.pair, want.unary + want.pair))
    assert all(a.linear.tobytes() == b.linear.tobytes() and (a.top, a.span) == (b.top, b.span)
               for a, b in zip(got.forward + got.backward, want.forward + want.backward))
    assert (fast.directed.parents, fast.directed.children) == (slow.directed.parents, slow.directed.children)
    # what the engine caches with the graph: the slots on a factor's zero, every slot's values in one table
    assert fast.trees["on zeros"] == {v for p in slow.factors if np.isinf(p.table).any() for v in p.scope}
    assert np.array_equal(fast.trees["value table"], np.array(slow.values))


@pytest.mark.parametrize("seed", range(4))
def test_the_recognised_chain_is_the_general_routes_graph_bit_for_bit(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    for model, _, _ in (_categorical_chain(rng, int(rng.integers(2, 7)), int(rng.integers(2, 4))),
                        _categorical_chain(rng, int(rng.integers(2, 7)), int(rng.integers(2, 4)), shared=True),
                        _bernoulli_chain(rng, int(rng.integers(2, 7)))):
        fast = graph_module._scalar_chain(model, LIMIT)
        assert fast is not None
        _same_graph(fast, _general(model, monkeypatch))


def _brute_idp(p0: np.ndarray, P: list, weights: np.ndarray, b: float) -> list[float]:
    """idp of every day of the chain for the release Σ_j w_j x_j + Laplace(b), by enumerating the joint: for each
    target the largest log L(y | t) - log L(y | t') over the breakpoints y (the sums) and both tails."""
    n, k = len(P) + 1, len(p0)
    configs = np.array(list(itertools.product(range(k), repeat=n)))
    prob = p0[configs[:, 0]].copy()
    for j in range(1, n):
        prob *= P[j - 1][configs[:, j - 1], configs[:, j]]
    q = configs @ weights
    levels = np.unique(q)
    out = []
    for i in range(n):
        rows = []
        for t in range(k):
            chosen = (configs[:, i] == t) & (prob > 0)
            if chosen.any():
                w = np.array([prob[chosen & (q == s)].sum() for s in levels]) / prob[chosen].sum()
                at = [math.log(sum(w * np.exp(-np.abs(y - levels) / b))) for y in levels]
                tails = [math.log(sum(w * np.exp(levels / b))), math.log(sum(w * np.exp(-levels / b)))]
                rows.append(at + tails)
        rows = np.array(rows)
        out.append(float((rows.max(axis=0) - rows.min(axis=0)).max()))
    return out


@pytest.mark.parametrize("seed", range(3))
def test_random_chains_against_enumeration(seed):
    """idp of every day of random chains (zeros in the transitions, days sharing matrices or not), the sum of the
    values with Laplace noise at epsilon = 1 (b = the sum's sensitivity, k - 1), equals the enumerated joint's."""
    rng = np.random.default_rng(10 + seed)
    n, k = int(rng.integers(3, 6)), int(rng.integers(2, 4))
    for (model, p0, P), query in ((_categorical_chain(rng, n, k), "sum"), (_bernoulli_chain(rng, n), "count")):
        assert graph_module._scalar_chain(model, LIMIT) is not None
        result = ddpbayes.audit(model, query, "laplace", "idp", epsilon=1.0, engine="structured", information=None)
        want = _brute_idp(p0, P, np.ones(len(P) + 1), float(len(p0) - 1))
        assert np.allclose(np.array(result.per_target, dtype=float), want, rtol=0, atol=1e-12)


def test_other_models_take_the_general_route():
    """A day reading a day other than the previous one, a latent, an observed variable, tuples out of order and
    domains that differ are not a recognised chain."""
    P = np.array([[0.8, 0.2], [0.3, 0.7]])
    with pm.Model() as skip:
        x0 = pm.Categorical("x0", p=[0.5, 0.5])
        x1 = pm.Categorical("x1", p=pt.as_tensor_variable(P)[x0])
        pm.Categorical("x2", p=pt.as_tensor_variable(P)[x0])
    with pm.Model() as latent:
        z = pm.Bernoulli("z", 0.5)
        x0 = pm.Bernoulli("x0", pm.math.switch(z, 0.9, 0.2))
        pm.Bernoulli("x1", pm.math.switch(x0, 0.9, 0.2))
    with pm.Model() as observed:
        x0 = pm.Bernoulli("x0", 0.5)
        x1 = pm.Bernoulli("x1", pm.math.switch(x0, 0.9, 0.2))
        pm.Bernoulli("y", pm.math.switch(x1, 0.7, 0.1), observed=1)
    with pm.Model() as chain:
        x0 = pm.Bernoulli("x0", 0.5)
        x1 = pm.Bernoulli("x1", pm.math.switch(x0, 0.9, 0.2))
    models = [DependenceModel(skip, ["x0", "x1", "x2"]), DependenceModel(latent, ["x0", "x1"]),
              DependenceModel(observed, ["x0", "x1"]), DependenceModel(chain, ["x1", "x0"]),
              DependenceModel(chain, ["x0", "x1"], domains={"x0": Finite([0, 1]), "x1": Finite([0, 1, 2])})]
    assert [graph_module._scalar_chain(m, LIMIT) for m in models] == [None] * len(models)
    assert graph_module._scalar_chain(DependenceModel(chain, ["x0", "x1"]), LIMIT) is not None



def test_the_recognised_chain_follows_the_state_limit():
    """A chain is read at once when a day's table (values²) fits the audit's --max-states, not a fixed constant:
    3 values need 9 states; below that the general route (which refuses the table in one line)."""
    model = _categorical_chain(np.random.default_rng(5), 6, 3)[0]
    assert graph_module._scalar_chain(model, 8) is None
    assert graph_module._scalar_chain(model, 9) is not None
    wide = _categorical_chain(np.random.default_rng(6), 3, 50)[0]
    assert graph_module._scalar_chain(wide, 2_499) is None and graph_module._scalar_chain(wide, 2_500) is not None

@pytest.mark.parametrize("seed", range(3))
def test_continual_release_reads_the_stacked_tables_bit_for_bit(seed):
    """The continual release's chain and tables on a recognised chain (read off its stacked path) are those it sums
    from the factors (`continual._summed_tables`), and its leakage of every day is the general route's."""
    from ddpbayes.engines.structured import continual

    model, _, _ = _bernoulli_chain(np.random.default_rng(20 + seed), 6)
    fast = graph_module._scalar_chain(model, LIMIT)
    plain = graph_module.FactorGraph(fast.sizes, fast.values, fast.factors)  # no stacked tables kept
    assert continual._chain(fast) == continual._chain(plain)
    got, want = (continual._tables(g, continual._chain(g).order) for g in (fast, plain))
    assert got.unary.tobytes() == want.unary.tobytes() and got.edges.tobytes() == want.edges.tobytes()
    assert [(v.tobytes(), k) for v, k in got.groups] == [(v.tobytes(), k) for v, k in want.groups]
