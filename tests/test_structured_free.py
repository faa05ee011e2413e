"""pdp under a release that reads every cluster: the parts free of the known tuples summed once (issue #41).

Given the known tuples (and, for the Bayesian adversary's model, the draw index J) the clusters that hold
no target and no tuple sharing a factor with a known one are independent of the rest: the structured
engine computes their law of the partial sum once and convolves it with the target's part for each
configuration of the known tuples (`engines/structured/free.py`, DESIGN §2.1b). Expected values come from a
brute force written here over every assignment of the records:

    P(x) = Σ_j ρ_j Π_c Σ_u π_u Π_{k∈c} Bernoulli(x_k; logit⁻¹(η_k + s_j (u − 1)))

(each cluster's effect a three-valued latent, J two-valued or absent, so the law is exact), and the leakage
from its definition on a grid holding every breakpoint and the limits (`bruteforce.leak_grid`).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pymc as pm
import pytest
from scipy.special import expit

import ddpbayes
from bruteforce import coordinate_grid, laplace_log_kernel, leak_grid, log_likelihoods, scalar_grid
from ddpbayes import DependenceModel
from ddpbayes.engines.structured.free import fold_free_parts
from ddpbayes.engines.structured.graph import factor_graph

B = 1.0  # Laplace scale
PRIOR = np.array([0.3, 0.5, 0.2])  # the law of each cluster's effect level u in {0, 1, 2}
DRAW = np.array([0.4, 0.6])  # the law of the draw index J (the hub)


class Clusters:
    """A random small clustered table: 3 or 4 clusters of 2 to 4 records (12 at most), a binary covariate, random
    intercept and slope, integer query weights 1 or 2; the effect's spread s_J per draw J (one draw: fixed
    parameters; two: the Bayesian adversary's mixture)."""

    def __init__(self, seed: int, draws: int):
        rng = np.random.default_rng(seed)
        count = int(rng.integers(3, 5))
        sizes = rng.integers(2, 5, size=count)
        while sizes.sum() > 12:
            sizes[int(np.argmax(sizes))] -= 1
        sizes[0] = max(sizes[0], 3)  # the target, a known mate and an unknown one
        self.cluster = np.repeat(np.arange(count), sizes)
        self.covariate = rng.integers(0, 2, size=len(self.cluster)).astype(float)
        self.eta = rng.normal(-0.3, 0.5) + rng.normal(0.0, 1.0) * self.covariate
        self.spread = rng.uniform(0.5, 1.5, size=draws)
        self.weights = rng.integers(1, 3, size=len(self.cluster))

    @property
    def n(self) -> int:
        return len(self.cluster)

    def model(self) -> DependenceModel:
        count = int(self.cluster.max()) + 1
        with pm.Model() as m:
            u = pm.Categorical("u", p=PRIOR, shape=count)
            if len(self.spread) == 1:
                spread = float(self.spread[0])
            else:
                j = pm.Categorical("j", p=DRAW)
                spread = pm.math.constant(self.spread)[j]
            pm.Bernoulli("y", logit_p=self.eta + spread * (u[self.cluster] - 1.0), shape=self.n)
        return DependenceModel(m, tuples="y")

    def joint(self) -> tuple[np.ndarray, np.ndarray]:
        """Every assignment of the records and its probability."""
        X = np.array(list(itertools.product([0.0, 1.0], repeat=self.n)))
        rho = DRAW if len(self.spread) > 1 else np.ones(1)
        p = np.zeros(len(X))
        for r, s in zip(rho, self.spread):
            given = np.ones(len(X))
            for c in range(int(self.cluster.max()) + 1):
                k = np.flatnonzero(self.cluster == c)
                given *= sum(PRIOR[u] * np.prod(np.where(X[:, k] == 1, expit(self.eta[k] + s * (u - 1)),
                                                         1 - expit(self.eta[k] + s * (u - 1))), axis=1)
                             for u in range(3))
            p += r * given
        return X, p

    def known(self) -> list[int]:
        """The target's cluster but the target and its last record, and the second cluster's first record: the
        third cluster on is free of them."""
        mates = np.flatnonzero(self.cluster == 0)
        return [*mates[1:-1].tolist(), int(np.flatnonzero(self.cluster == 1)[0])]


@functools.lru_cache(maxsize=None)
def _case(seed: int, draws: int) -> tuple[Clusters, DependenceModel, np.ndarray, np.ndarray]:
    """The table, its model and its brute-force joint, built once per case (the sum and the rows share seed 0's:
    the model's compiled tables are cached on it)."""
    table = Clusters(seed, draws)
    return (table, table.model(), *table.joint())


CASES = [(0, 1), (2, 2), pytest.param(1, 1, marks=pytest.mark.slow), pytest.param(3, 2, marks=pytest.mark.slow),
         pytest.param(4, 1, marks=pytest.mark.slow),
         pytest.param(5, 2, marks=pytest.mark.slow)]


@pytest.mark.parametrize("seed,draws", CASES)
def test_pdp_under_the_whole_sum_equals_brute_force(seed, draws):
    """Target record 0, known: mates of its cluster and a record of the second cluster; the release: the weighted
    sum of every record. The free clusters are folded into one factor (over J when there are draws), and the
    leakage and its witness equal the brute force's to 1e-9."""
    table, model, X, p = _case(seed, draws)
    known = table.known()
    _assert_folded(table, model, known)
    q = X @ table.weights
    expected, _ = leak_grid(X, p, q, laplace_log_kernel(B), scalar_grid(q, B, dense=11), 0, known)
    query = "linear:" + ",".join(str(int(w)) for w in table.weights)
    got = ddpbayes.audit(model, query, "laplace", "pdp", scale=B, targets=[0], known=known, engine="structured",
                         information=None)
    assert got.leakage == pytest.approx(expected, abs=1e-9)
    _assert_witness(got, X, p, q[:, None], known)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_pdp_under_a_several_row_release_equals_brute_force(seed):
    """Rows: the target's cluster with the third (weighted), the second cluster, the fourth (or none). The target's
    row reads the free third cluster; the second cluster's row is independent of the target given x_K. The brute
    force takes the sup over the whole output vector on a product grid."""
    table, model, X, p = _case(seed, 1)
    known = table.known()
    rows = [np.isin(table.cluster, (0, 2)) * table.weights, (table.cluster == 1) * 1, (table.cluster == 3) * 1]
    rows = np.array([r for r in rows if r.any()], dtype=float)
    q = X @ rows.T
    expected, _ = leak_grid(X, p, q, laplace_log_kernel(B), coordinate_grid(q, extra_per_gap=1), 0, known)
    query = "linear:" + ";".join(",".join(str(int(w)) for w in r) for r in rows)
    got = ddpbayes.audit(model, query, "laplace", "pdp", scale=B, targets=[0], known=known, engine="structured",
                         information=None)
    assert got.leakage == pytest.approx(expected, abs=1e-9)
    _assert_witness(got, X, p, q, known)


def _assert_folded(table: Clusters, model: DependenceModel, known: list[int]) -> None:
    """The clusters from the third on leave the graph for one factor: scope-free with fixed parameters, over the
    two-valued draw index J otherwise; the target's two clusters keep their own factors."""
    graph = factor_graph(model, 10**6)
    contribution = [np.rint(table.weights[k] * v).astype(np.int64) if k < table.n else np.zeros(len(v), np.int64)
                    for k, v in enumerate(graph.values)]
    folded = fold_free_parts(graph, frozenset(known), {0}, contribution, 10**6)
    added = [p for p in folded.factors if not any(p is f for f in graph.factors)]
    assert len(added) == 1
    if len(table.spread) == 1:
        assert added[0].scope == ()
    else:
        assert [graph.sizes[v] for v in added[0].scope if v >= table.n and graph.sizes[v] == 2] == [2]
    far = set(np.flatnonzero(table.cluster >= 2).tolist())
    assert not far.intersection(v for p in folded.factors for v in p.scope)


def _assert_witness(got, X: np.ndarray, p: np.ndarray, q: np.ndarray, known: list[int]) -> None:
    """The witness (x_K, t, t', y) attains the reported leakage under the brute force."""
    w = got.witness
    ll = log_likelihoods(X, p, q, laplace_log_kernel(B), np.array([w.y]), 0, known,
                         tuple(w.known_values[k] for k in known))
    assert float(ll[w.t][0] - ll[w.t_prime][0]) == pytest.approx(got.leakage, abs=1e-9)
