"""pdp with many known tuples: the structured engine's sup over x_R by orbits of exchangeable tuples (issue #41).

Known tuples with the same factors (same cluster effect, same covariates) and the same query weight are
exchangeable, so the engine enumerates how many of each class take each value instead of every assignment
(`engines/structured/exchangeable.py`, DESIGN §2.1b). Expected values come from a brute force written here
over every assignment of the records: P(x) = Π_c Σ_u π_u Π_{k∈c} Bernoulli(x_k; logit⁻¹(η_k + s·(u − 1)))
(each cluster's effect a three-valued latent, so the law is exact, no quadrature), and the leakage from its
definition on a grid holding every breakpoint and the limits beyond the extremes (`bruteforce.leak_grid`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pymc as pm
import pytest
from scipy.special import expit

import ddpbayes
from bruteforce import laplace_log_kernel, leak_grid, log_likelihoods, scalar_grid
from ddpbayes import DependenceModel
from ddpbayes.engines.structured.exchangeable import Orbits
from ddpbayes.engines.structured.graph import factor_graph
from ddpbayes.engines.structured.potential import Potential

B = 1.0  # Laplace scale
PRIOR = np.array([0.3, 0.5, 0.2])  # the law of each cluster's effect level u in {0, 1, 2}


class Villages:
    """A random small clustered table: records in clusters, a binary covariate (so some records of a cluster share
    theirs), integer query weights (1 or 2, so some records sharing covariates still differ)."""

    def __init__(self, seed: int, weighted: bool):
        rng = np.random.default_rng(seed)
        sizes = (int(rng.integers(8, 10)), 2)
        self.cluster = np.repeat(np.arange(2), sizes)
        self.covariate = rng.integers(0, 2, size=len(self.cluster)).astype(float)
        self.eta = rng.normal(-0.3, 0.5) + rng.normal(0.0, 1.0) * self.covariate
        self.spread = float(rng.uniform(0.5, 1.5))
        self.weights = rng.integers(1, 3, size=len(self.cluster)) if weighted else np.ones(len(self.cluster), int)

    @property
    def query(self) -> str:
        return "linear:" + ",".join(str(int(w)) for w in self.weights)

    def model(self) -> DependenceModel:
        with pm.Model() as m:
            u = pm.Categorical("u", p=PRIOR, shape=2)
            pm.Bernoulli("y", logit_p=self.eta + self.spread * (u[self.cluster] - 1.0), shape=len(self.cluster))
        return DependenceModel(m, tuples="y")

    def joint(self) -> tuple[np.ndarray, np.ndarray]:
        """Every assignment of the records and its probability."""
        X = np.array(list(itertools.product([0.0, 1.0], repeat=len(self.cluster))))
        p = np.ones(len(X))
        for c in range(2):
            k = np.flatnonzero(self.cluster == c)
            law = sum(PRIOR[u] * np.prod(np.where(X[:, k] == 1, expit(self.eta[k] + self.spread * (u - 1)),
                                                  1 - expit(self.eta[k] + self.spread * (u - 1))), axis=1)
                      for u in range(3))
            p *= law
        return X, p

    def classes(self, known: list[int]) -> set[frozenset[int]]:
        """The exchangeable classes by hand: same cluster, same covariate (under Laplace noise a known record's
        weight only shifts the query, which the sup does not see)."""
        out: dict[tuple, set[int]] = {}
        for k in known:
            out.setdefault((self.cluster[k], self.covariate[k]), set()).add(k)
        return {frozenset(c) for c in out.values()}


CASES = [(0, False), (1, True), pytest.param(2, False, marks=pytest.mark.slow), pytest.param(3, True, marks=pytest.mark.slow)]


@pytest.mark.parametrize("seed,weighted", CASES)
def test_pdp_with_the_cluster_known_equals_brute_force(seed, weighted):
    """Target: the first record; known: its cluster but its last record, and the other cluster's first (7 to 8
    records, more than the 2^6 configurations the engine keeps as axes). Every assignment of the known records in the brute force;
    the engine's orbits of them, whose classes, read off the compiled factor tables, are the hand-made ones (same
    cluster and covariate; weights 1 and 2 mixed in a class when `weighted`); to 1e-9."""
    table = Villages(seed, weighted)
    model = table.model()
    known = _known(table)
    graph = factor_graph(model, 10**6)
    orbits = Orbits(graph.factors, graph.sizes, None, known)
    found: dict[int, set[int]] = {}
    for k, c in zip(known, orbits.label):
        found.setdefault(c, set()).add(k)
    assert {frozenset(c) for c in found.values()} == table.classes(known)
    assert orbits.count() == math.prod(len(c) + 1 for c in table.classes(known)) < 2 ** len(known)
    X, p = table.joint()
    q = X @ table.weights
    expected, _ = leak_grid(X, p, q, laplace_log_kernel(B), scalar_grid(q, B, dense=11), 0, known)
    got = ddpbayes.audit(model, table.query, "laplace", "pdp", scale=B, targets=[0], known=known,
                         engine="structured", information=None)
    assert got.leakage == pytest.approx(expected, abs=1e-9)
    w = got.witness  # one representative assignment of its orbit, which attains the leakage
    ll = log_likelihoods(X, p, q[:, None], laplace_log_kernel(B), np.array([w.y]), 0, known,
                         tuple(w.known_values[k] for k in known))
    assert float(ll[w.t][0] - ll[w.t_prime][0]) == pytest.approx(got.leakage, abs=1e-9)


def _known(table: Villages) -> list[int]:
    mates = np.flatnonzero(table.cluster == 0)
    return [*mates[1:-1].tolist(), int(np.flatnonzero(table.cluster == 1)[0])]


def _orbits(label: list[int], sizes: list[int], weights: list[int] | None = None) -> Orbits:
    """Orbits over slots 0..m-1 given their classes, from unary factors equal within a class (and query weights
    when given: noise that is not shift-invariant)."""
    tables = {c: np.log(np.arange(1.0, sizes[k] + 1) + c)[:, None] for k, c in enumerate(label)}
    factors = [Potential((k,), tables[c], 0) for k, c in enumerate(label)]
    contribution = None if weights is None else [w * np.arange(sizes[k]) for k, w in enumerate(weights)]
    return Orbits(factors, sizes, contribution, list(range(len(label))))


def test_weights_split_classes_when_the_noise_is_not_shift_invariant():
    orbits = _orbits([0, 0, 0, 0], [2, 2, 2, 2], weights=[1, 2, 1, 2])
    assert orbits.label == [0, 1, 0, 1] and orbits.count() == 9
    assert _orbits([0, 0, 0, 0], [2, 2, 2, 2]).count() == 5


@pytest.mark.parametrize("label,sizes", [([0, 1, 0, 0, 1], [2, 3, 2, 2, 3]), ([0, 0, 0], [3, 3, 3]),
                                         ([0, 1, 2], [2, 2, 3])])
def test_each_orbit_once_by_its_first_assignment(label, sizes):
    """Interleaved classes: one representative per orbit, the orbit's first assignment in mixed-radix order, in
    that order, and the orbits' sizes adding up to every assignment."""
    orbits = _orbits(label, sizes)
    assert [orbits.label[k] == orbits.label[label.index(c)] for k, c in enumerate(label)] == [True] * len(label)
    first: dict[tuple, tuple] = {}
    size: dict[tuple, int] = {}
    for codes in itertools.product(*[range(s) for s in sizes]):  # mixed-radix order
        key = tuple(sorted((c, v) for c, v in zip(label, codes)))
        first.setdefault(key, codes)
        size[key] = size.get(key, 0) + 1
    got = list(orbits)
    assert got == sorted(first.values()) and len(got) == orbits.count()
    sizes_of = {first[key]: n for key, n in size.items()}
    assert all(math.exp(orbits.log_size(codes)) == pytest.approx(sizes_of[codes], rel=1e-12) for codes in got)


def test_tuples_sharing_a_factor_are_kept_apart():
    """Two slots with equal signatures that share a factor (a swap would have to map it onto itself): no class."""
    pair = np.log(np.array([[0.4, 0.1], [0.1, 0.4]]))[:, :, None]
    factors = [Potential((0, 1), pair, 0), Potential((1, 0), pair, 0)]
    orbits = Orbits(factors, [2, 2], None, [0, 1])
    assert orbits.count() == 4 and orbits.label == [0, 1]


def test_information_weights_each_orbit_by_its_size():
    """The information measures' groups: their probabilities sum to one and give H(X_i | X_K) by brute force."""
    from ddpbayes.engines import engine_named
    from ddpbayes.mechanisms import Laplace
    from ddpbayes.problem import Adversary, Problem
    from ddpbayes.queries import parse_query

    table = Villages(1, False)
    model = table.model()
    known = frozenset(k for k in range(1, len(table.cluster)) if table.cluster[k] == 0)
    problem = Problem(model, parse_query("count").bind(model), Laplace(B))
    groups = engine_named("structured").mixtures(problem, Adversary(0, known), True).groups
    got = sum(math.exp(g.log_prob) * _entropy(np.exp(g.log_w).sum(axis=1)) for g in groups)
    X, p = table.joint()
    keys = [tuple(r) for r in X[:, sorted(known)]]
    expected = 0.0
    for key in set(keys):
        rows = np.array([k == key for k in keys])
        expected += p[rows].sum() * _entropy(np.array([p[rows & (X[:, 0] == t)].sum() for t in (0, 1)]) / p[rows].sum())
    assert sum(math.exp(g.log_prob) for g in groups) == pytest.approx(1.0, abs=1e-12)
    assert got == pytest.approx(expected, abs=1e-12)


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def test_a_count_too_large_for_a_float_is_a_power_of_ten():
    """2,034 known children in 65 villages: Π (n_c + 1) passes 1e308 (it raised OverflowError in the message)."""
    from ddpbayes.engines.structured.exchangeable import many

    assert many(2**32) == "4.29e+09" and many(10**400) == "about 10^400"
