"""Witnesses attain their leakage (issue #40.3): on random Bayesian networks with deterministic zeros (rows that
force a value, a quarter of the other entries 0, latent nodes), every witness the structured and exact engines
print for idp, pdp with fixed known sets and ddp is evaluated here from the definition,

    log L(y | t, x_K) - log L(y | t', x_K),  L(y | t, x_K) = Σ_{x: x_i = t, x_K} P(x) e^{-|y - q(x)|/b} / P(t, x_K)

(y = ±inf: the limit, the factor e^{∓y/b} common to both sides dropped), on the joint enumerated state by state;
it must equal the leakage to 1e-9, the leakage must equal the exact engine's and the largest log-ratio over
every x_K, t, t' and a grid of y holding every breakpoint, midpoints and both limits (DESIGN §2.1)."""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytest
from scipy.special import logsumexp

import ddpbayes
from ddpbayes import DependenceModel

TOL = 1e-9


def _law(rng: np.random.Generator, size: int, certain: float) -> np.ndarray:
    """A random probability vector: one value for certain with probability `certain`, else about a quarter
    zeros."""
    if rng.random() < certain:
        return np.eye(size)[rng.integers(size)]
    law = rng.dirichlet(np.ones(size)) * (rng.random(size) > 0.25)
    if law.sum() == 0:
        law[rng.integers(size)] = 1.0
    return law / law.sum()


def _network(seed: int) -> tuple[DependenceModel, np.ndarray, np.random.Generator]:
    """5-6 nodes of 2-3 values, each with up to two earlier parents and a table of `_law` rows (three children in
    ten a function of their parents, as x2 = 1 - x1); a third of the nodes latent. Also P over the tuples' values
    (the latents summed out), and the generator."""
    rng = np.random.default_rng(4000 + seed)
    nodes = int(rng.integers(5, 7))
    sizes = [int(s) for s in rng.integers(2, 4, size=nodes)]
    parents, tables = [], []
    for v in range(nodes):
        count = min(v, int(rng.choice(3, p=[0.2, 0.4, 0.4])))
        parents.append(sorted(rng.choice(v, size=count, replace=False).tolist()) if count else [])
        certain = 1.0 if parents[v] and rng.random() < 0.3 else 0.25  # a function of its parents, or rows
        rows = [_law(rng, sizes[v], certain) for _ in range(int(np.prod([sizes[p] for p in parents[v]], dtype=int)))]
        tables.append(np.array(rows).reshape(*[sizes[p] for p in parents[v]], sizes[v]))
    latent = set(rng.choice(nodes, size=nodes // 3, replace=False).tolist())
    with pm.Model() as m:
        rvs = []
        for v in range(nodes):
            p = pm.math.constant(tables[v])[tuple(rvs[u] for u in parents[v])] if parents[v] else tables[v]
            rvs.append(pm.Categorical(f"v{v}", p=p))
    tuples = [v for v in range(nodes) if v not in latent]
    joint = np.zeros([sizes[v] for v in tuples])
    for x in itertools.product(*[range(s) for s in sizes]):
        joint[tuple(x[v] for v in tuples)] += np.prod([tables[v][tuple(x[u] for u in parents[v]) + (x[v],)]
                                                       for v in range(nodes)])
    return DependenceModel(m, tuples=[f"v{v}" for v in tuples]), joint, rng


def _states(joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The configurations of positive probability (values = indices: Categorical) and their probabilities."""
    xs = np.array(list(itertools.product(*[range(s) for s in joint.shape])), dtype=float)
    p = joint.reshape(-1)
    return xs[p > 0], p[p > 0]


def _log_l(q: np.ndarray, p: np.ndarray, y: np.ndarray, b: float) -> np.ndarray:
    """log Σ p e^{-|y - q|/b} / Σ p at every y; at y = ±inf without the factor e^{∓y/b}."""
    y = np.atleast_1d(np.asarray(y, dtype=float))
    with np.errstate(invalid="ignore"):
        kernel = np.where(np.isinf(y)[:, None], np.sign(y)[:, None] * q[None, :], -np.abs(y[:, None] - q[None, :])) / b
    return logsumexp(np.log(p)[None, :] + kernel, axis=1) - logsumexp(np.log(p))


def _log_ratio(xs, p, q, b, target: int, known: dict[int, float], t: float, t_prime: float, y) -> np.ndarray:
    """log L(y | t, x_K) - log L(y | t', x_K) at every y from the enumerated states; t and t' must be possible."""
    given = np.all([xs[:, k] == v for k, v in known.items()], axis=0) if known else np.ones(len(p), dtype=bool)
    a, c = given & (xs[:, target] == t), given & (xs[:, target] == t_prime)
    assert a.any() and c.any(), "the witness compares a value of probability zero"
    return _log_l(q[a], p[a], y, b) - _log_l(q[c], p[c], y, b)


def _sup(xs, p, q, b, target: int, known: tuple[int, ...], integer: bool) -> float:
    """The largest log-ratio over x_K, t, t' and y on every breakpoint, the midpoints (Laplace) and both limits."""
    levels = np.unique(q)
    grid = np.arange(levels[0], levels[-1] + 1) if integer else np.union1d(levels, (levels[:-1] + levels[1:]) / 2)
    grid = np.concatenate([grid, [np.inf, -np.inf]])
    best = 0.0
    for x_k in {tuple(r) for r in xs[:, list(known)]}:
        given = dict(zip(known, x_k))
        mask = np.all([xs[:, k] == v for k, v in given.items()], axis=0) if known else np.ones(len(p), dtype=bool)
        for t, u in itertools.permutations(np.unique(xs[mask, target]), 2):
            best = max(best, float(_log_ratio(xs, p, q, b, target, given, t, u, grid).max()))
    return best


def _dependence_sets(joint: np.ndarray) -> list[set[int]]:
    """N(i) = {j : P(X_j | X_i = t) changes with t beyond 1e-10}."""
    n = joint.ndim
    sets = [set() for _ in range(n)]
    for i, j in itertools.permutations(range(n), 2):
        pair = np.moveaxis(joint, (i, j), (0, 1)).sum(axis=tuple(range(2, n)))
        marg = pair.sum(axis=1)
        cond = pair[marg > 0] / marg[marg > 0, None]
        if np.abs(cond - cond[0]).max() > 1e-10:
            sets[i].add(j)
    return sets


def _check(model, joint, query: str, weights: np.ndarray, mechanism: str, b: float, notion: str,
           known: list[int] | None) -> None:
    xs, p = _states(joint)
    q = xs @ weights
    n = joint.ndim
    deps = _dependence_sets(joint)
    runs = {engine: ddpbayes.audit(model, query, mechanism, notion, scale=b, known=known, engine=engine,
                                   information=None) for engine in ("structured", "exact")}
    assert runs["structured"].engine == "structured"
    for engine, run in runs.items():
        for target, worst in run.target_worst.items():
            w = worst.witness
            want = {"pdp": set(known or ()), "idp": set()}.get(notion, set(range(n)) - deps[target] - {target})
            assert w.adversary.target == target and set(w.adversary.known) == want
            assert set(w.known_values) == want
            at = float(_log_ratio(xs, p, q, b, target, w.known_values, w.t, w.t_prime, w.y[0])[0])
            where = f"{engine} {notion} {known} target {target}: {w}"
            assert at == pytest.approx(worst.value, abs=TOL), where
            sup = _sup(xs, p, q, b, target, tuple(sorted(want)), mechanism == "geometric")
            assert worst.value == pytest.approx(sup, abs=TOL), where
    got, want = runs["structured"].per_target, runs["exact"].per_target
    assert [g is None for g in got] == [w is None for w in want]
    assert [g for g in got if g is not None] == pytest.approx([w for w in want if w is not None], abs=TOL)


def _one_network(seed: int) -> None:
    """idp, ddp and pdp with a known set of one and of two tuples, on network `seed` with a random integer
    linear query (or the sum) and Laplace or geometric noise."""
    model, joint, rng = _network(seed)
    n = joint.ndim
    weights = np.ones(n) if rng.random() < 0.3 else rng.integers(-2, 4, size=n).astype(float)
    query = "sum" if np.all(weights == 1) else "linear:" + ",".join(str(int(w)) for w in weights)
    mechanism, b = ("geometric" if seed % 3 == 2 else "laplace"), float(rng.uniform(0.4, 2.0))
    pdp = [sorted(rng.choice(n, size=s, replace=False).tolist()) for s in (1, 2) if s < n]
    for notion, known in [("idp", None), ("ddp", None), *[("pdp", k) for k in pdp]]:
        _check(model, joint, query, weights, mechanism, b, notion, known)


def test_issue_example_witness_attains_the_leakage():
    """The issue's network: x2 = 1 - x1 makes a message's partial sum certain (length 1, offset 1), which the
    structured engine's fused sum-out dropped, moving every y by one below the root."""
    with pm.Model() as m:
        v0 = pm.Categorical("x0", p=np.array([0.594615, 0.405385]))
        v1 = pm.Bernoulli("x1", pm.math.constant(np.array([1.0, 0.241484]))[v0])
        v2 = pm.Bernoulli("x2", pm.math.switch(v1, 0.0, 1.0))
        v3 = pm.Bernoulli("x3", pm.math.constant(np.array([[0.397231, 0.681334], [0.568506, 0.934907]]))[v0, v2])
        pm.Categorical("x4", p=pm.math.constant(np.array([[0.419279, 0.580721], [0.0, 1.0]]))[v3])
        pm.Bernoulli("x5", pm.math.constant(np.array([0.095027, 0.382802]))[v0])
    model = DependenceModel(m, tuples=[f"x{k}" for k in range(6)])
    p0, p1 = np.array([0.594615, 0.405385]), np.array([1.0, 0.241484])
    p3, p5 = np.array([[0.397231, 0.681334], [0.568506, 0.934907]]), np.array([0.095027, 0.382802])
    p4 = np.array([[0.419279, 0.580721], [0.0, 1.0]])
    joint = np.zeros((2,) * 6)
    for x0, x1, x2, x3, x4, x5 in itertools.product(range(2), repeat=6):
        joint[x0, x1, x2, x3, x4, x5] = (p0[x0] * (p1[x0] if x1 else 1 - p1[x0]) * (x2 == 1 - x1)
                                         * (p3[x0, x2] if x3 else 1 - p3[x0, x2]) * p4[x3, x4]
                                         * (p5[x0] if x5 else 1 - p5[x0]))
    _check(model, joint, "count", np.ones(6), "laplace", 1.0, "idp", None)


@pytest.mark.parametrize("seed", range(3))  # seed 2 failed before the fix (and 19 of the slow ones)
def test_random_networks_with_zeros_witnesses_attain_the_leakage(seed):
    _one_network(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3, 36))
def test_more_random_networks_with_zeros_witnesses_attain_the_leakage(seed):
    _one_network(seed)
