"""Clustered models integrated clique by clique by the structured engine (issue #41, DESIGN §2.1b).

The shape a fitted clustered model takes: the records are one Bernoulli vector y with logit
intercept + X beta + u[cluster], the cluster effects u one Normal vector. Expected values come
from a brute force written here: each cluster's law P(x_c) = ∫ N(u; 0, σ) Π_k p_k(u)^x_k (1 -
p_k(u))^(1 - x_k) du by scipy's adaptive quadrature, the joint of all records the product over
clusters, and the leakage from its definition (DESIGN §1) on a grid of outputs holding every
breakpoint and points beyond the extremes (`bruteforce.leak_grid`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pymc as pm
import pytest
from scipy import integrate
from scipy.special import expit

import ddpbayes
from bruteforce import coordinate_grid, laplace_log_kernel, leak_grid, log_likelihoods, scalar_grid
from ddpbayes import DependenceModel
from ddpbayes.errors import InputError

B = 1.0  # Laplace scale


class Clustered:
    """A simulated clustered table: its cluster of every record, covariates, and the model's fixed parameters."""

    def __init__(self, sizes: tuple[int, ...], sigma: float, intercept: float, beta: tuple[float, ...], seed: int):
        rng = np.random.default_rng(seed)
        self.cluster = rng.permutation(np.repeat(np.arange(len(sizes)), sizes))  # records of a cluster interleaved
        self.X = rng.normal(size=(len(self.cluster), len(beta)))
        self.sigma, self.eta = sigma, intercept + self.X @ np.asarray(beta)

    def model(self) -> DependenceModel:
        with pm.Model() as m:
            u = pm.Normal("u", 0.0, self.sigma, shape=int(self.cluster.max()) + 1)
            pm.Bernoulli("y", logit_p=self.eta + u[self.cluster], shape=len(self.cluster))
        return DependenceModel(m, tuples="y")

    def members(self, c: int) -> np.ndarray:
        return np.flatnonzero(self.cluster == c)

    def states(self) -> tuple[np.ndarray, np.ndarray]:
        """Every configuration of the records (S, n) and its probability, by quadrature over each cluster's effect."""
        n = len(self.cluster)
        X = np.array(list(itertools.product([0.0, 1.0], repeat=n)))
        log_p = np.zeros(len(X))
        for c in range(int(self.cluster.max()) + 1):
            k = self.members(c)
            law = {x: math.log(self._cluster_probability(k, x)) for x in itertools.product([0, 1], repeat=len(k))}
            log_p += np.array([law[tuple(int(v) for v in row)] for row in X[:, k]])
        return X, np.exp(log_p)

    def _cluster_probability(self, k: np.ndarray, x: tuple[int, ...]) -> float:
        def f(u: float) -> float:
            p = expit(self.eta[k] + u)
            density = math.exp(-u * u / (2 * self.sigma**2)) / (math.sqrt(2 * math.pi) * self.sigma)
            return density * float(np.prod(np.where(np.array(x) == 1, p, 1 - p)))
        return integrate.quad(f, -np.inf, np.inf, epsabs=0, epsrel=1e-13, limit=400)[0]


@pytest.fixture(scope="module")
def table() -> Clustered:
    return Clustered((3, 2, 4), sigma=1.2, intercept=-0.4, beta=(0.7, -0.5), seed=3)


@pytest.fixture(scope="module")
def model(table):
    return table.model()


@pytest.fixture(scope="module")
def joint(table):
    return table.states()


def _count_leak(joint, target: int, known: tuple[int, ...]) -> tuple[float, tuple]:
    X, p = joint
    q = X.sum(axis=1)
    return leak_grid(X, p, q, laplace_log_kernel(B), scalar_grid(q, B), target, known)


@pytest.mark.parametrize("notion", ["idp", "ddp"])
def test_count_leakage_equals_brute_force(model, table, joint, notion):
    """idp (K = {}) and ddp (K = the other clusters' records) for a record of each cluster, to 1e-8. Three Normal
    effects: refused before issue #41 (more than two continuous latent dimensions), now one clique each."""
    targets = [int(table.members(c)[0]) for c in range(3)]
    got = ddpbayes.audit(model, "count", "laplace", notion, scale=B, targets=targets, engine="structured",
                         information=None)  # not checked here; it was 60% of the time
    assert got.engine == "structured"
    assert any("'u' (3 elements, one rule each) by Gauss–Hermite" in note for note in got.notes)
    for i in targets:
        known = () if notion == "idp" else tuple(np.flatnonzero(table.cluster != table.cluster[i]))
        assert got.per_target[i] == pytest.approx(_count_leak(joint, i, known)[0], abs=1e-8)


def test_ddp_dependence_sets_are_the_cluster_mates(model, table):
    got = ddpbayes.audit(model, "count", "laplace", "ddp", scale=B, targets=[0], engine="structured")
    mates = set(table.members(table.cluster[0]).tolist()) - {0}
    assert set(got.witness.adversary.known) == set(range(len(table.cluster))) - mates - {0}


def test_pdp_with_the_rest_of_the_village_known(model, table, joint):
    """pdp with K = the target's cluster mates (and one record of another cluster): every x_K, to 1e-8."""
    i = int(table.members(2)[0])
    known = tuple(sorted([*table.members(2)[1:].tolist(), int(table.members(0)[0])]))
    got = ddpbayes.audit(model, "count", "laplace", "pdp", scale=B, targets=[i], known=list(known),
                         engine="structured")
    assert got.leakage == pytest.approx(_count_leak(joint, i, known)[0], abs=1e-8)


def test_witness_attains_the_leakage(model, table, joint):
    """log L(y | t, x_K) - log L(y | t', x_K) at the engine's witness, computed from the brute-force joint."""
    i = int(table.members(1)[0])
    known = tuple(int(k) for k in table.members(2))
    got = ddpbayes.audit(model, "count", "laplace", "pdp", scale=B, targets=[i], known=list(known),
                         engine="structured")
    w = got.witness
    X, p = joint
    ll = log_likelihoods(X, p, X.sum(axis=1)[:, None], laplace_log_kernel(B), np.array([w.y]), i, known,
                         tuple(w.known_values[k] for k in known))
    assert float(ll[w.t][0] - ll[w.t_prime][0]) == pytest.approx(got.leakage, abs=1e-8)


def _village_rows(table: Clustered) -> str:
    return "linear:" + ";".join(",".join("1" if c == v else "0" for c in table.cluster)
                                for v in range(int(table.cluster.max()) + 1))


@pytest.mark.parametrize("notion", ["idp", "ddp"])
def test_per_village_counts_cancel_to_the_targets_row(model, table, joint, notion):
    """Each cluster's count with its own Laplace noise (one row per cluster): the brute force takes the sup over the
    whole output vector on a product grid; the engine answers with the target's own row (the other rows cancel)."""
    X, p = joint
    q = X @ np.array([[1.0 if c == v else 0.0 for c in table.cluster] for v in range(3)]).T
    grid = coordinate_grid(q, extra_per_gap=1)
    i = int(table.members(1)[1])
    known = () if notion == "idp" else tuple(np.flatnonzero(table.cluster != table.cluster[i]))
    expected, _ = leak_grid(X, p, q, laplace_log_kernel(B), grid, i, known)
    got = ddpbayes.audit(model, _village_rows(table), "laplace", notion, scale=B, targets=[i], engine="structured")
    assert got.leakage == pytest.approx(expected, abs=1e-8)
    w = got.witness
    ll = log_likelihoods(X, p, q, laplace_log_kernel(B), np.array([w.y]), i, known,
                         tuple(w.known_values[k] for k in known))
    assert float(ll[w.t][0] - ll[w.t_prime][0]) == pytest.approx(got.leakage, abs=1e-8)


def test_rows_coupled_through_one_effect_are_refused(model, table):
    """Two rows reading records of the target's cluster: not one row, so no exact answer here (one line)."""
    mates = table.members(0)
    rows = ";".join(",".join("1" if k == m else "0" for k in range(len(table.cluster))) for m in mates[:2])
    with pytest.raises(InputError, match="both read tuples dependent on tuple"):
        ddpbayes.audit(model, "linear:" + rows, "laplace", "idp", scale=B, targets=[int(mates[0])],
                       engine="structured")


def test_gather_by_a_constant_index_reads_one_effect_per_record(table):
    """Each record's term reads its own cluster's effect: the factor graph's scopes follow the index array."""
    from ddpbayes.engines.structured.graph import factor_graph
    model = table.model()
    graph = factor_graph(model, 10**7)
    n = len(table.cluster)
    pairs = {p.scope for p in graph.factors if len(p.scope) == 2}
    assert pairs == {(k, n + int(table.cluster[k])) for k in range(n)}


def test_a_cluster_whose_tail_nodes_round_to_certainty_still_cancels():
    """With a wide effect (σ = 5) a record's probability rounds to exactly 0 or 1 at the far Gauss–Hermite
    nodes, so the other clusters' factors hold zeros. Their sum over the effect is still positive for every
    value of their known records (the central nodes are positive), so they cancel from the ddp adversary's
    log-ratio as before: 30 known clusters of two (3^30 orbits of their values, refused before) are not
    enumerated. Expected: the target's cluster alone by scipy quadrature, to 1e-8."""
    table = Clustered((3,) + (2,) * 30, sigma=5.0, intercept=-0.4, beta=(), seed=5)
    k = table.members(0)
    weights = np.zeros(len(table.cluster))
    weights[k] = 1
    X = np.array(list(itertools.product([0.0, 1.0], repeat=len(k))))
    p = np.array([table._cluster_probability(k, tuple(int(v) for v in row)) for row in X])
    q = X.sum(axis=1)
    expected = leak_grid(X, p, q, laplace_log_kernel(B), scalar_grid(q, B), 0, ())[0]
    got = ddpbayes.audit(table.model(), "linear:" + ",".join(str(int(w)) for w in weights), "laplace", "ddp",
                         scale=B, targets=[int(k[0])], engine="structured")
    assert got.per_target[int(k[0])] == pytest.approx(expected, abs=1e-8)
