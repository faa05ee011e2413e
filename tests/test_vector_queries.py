"""Vector-valued linear queries (several output coordinates, Laplace noise on each) and the
Gaussian engine's sparse path for large GMRFs such as a CAR on a friendship graph (issue 14;
DESIGN §2.2; seed 002 §IV-B's noisy K-means centroids).

Expected values come from derivations written here: the conditional Gaussian of the query
given the target (numpy Schur complements), the output density as a one-dimensional numerical
integral of closed-form Laplace–Gaussian convolutions, enumerated joints (`bruteforce`),
connected components by a breadth-first search, and dense covariances from numpy inverses.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import deque

import numpy as np
import pymc as pm
import pytest
from bruteforce import coordinate_grid, household_joint, laplace_log_kernel, leak_grid, states
from scipy.special import log_ndtr, logsumexp

import ddpbayes.engines.gaussian.graph as gaussian_graph
from ddpbayes import DependenceModel, InputError, Interval, Problem, audit, load_model, parse_query
from ddpbayes.cli.main import main
from ddpbayes.engines import ENGINES
from ddpbayes.engines.base import Declined
from ddpbayes.problem import Adversary
from ddpbayes.mechanisms import Laplace, make_mechanism
from ddpbayes.queries import Centroids, LinearRows

LO, HI = -1.0, 2.0


def mvnormal(cov: np.ndarray, mean: np.ndarray | None = None) -> DependenceModel:
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(len(cov)) if mean is None else mean, cov=cov)
    return DependenceModel(m, tuples="x", domains=Interval(LO, HI))


def random_spd(n: int, rng: np.random.Generator) -> np.ndarray:
    a = rng.normal(size=(n, n))
    return a @ a.T / n + 0.3 * np.eye(n)


def rows_spec(a: np.ndarray) -> str:
    return "linear:" + ";".join(",".join(repr(float(v)) for v in row) for row in a)


def conditional_shift(cov: np.ndarray, a: np.ndarray, i: int, known: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Given X_i = t and X_K, A X ~ N(const + g t, V): (g, V) from the Gaussian conditional, by numpy."""
    n = len(cov)
    s = [i] + [j for j in range(n) if j != i and j not in known]
    c = cov[np.ix_(s, s)]
    if known:
        c = c - cov[np.ix_(s, known)] @ np.linalg.inv(cov[np.ix_(known, known)]) @ cov[np.ix_(known, s)]
    beta = c[1:, 0] / c[0, 0]
    rest = c[1:, 1:] - np.outer(c[1:, 0], c[0, 1:]) / c[0, 0]
    a_u = a[:, s[1:]]
    return a[:, i] + a_u @ beta, a_u @ rest @ a_u.T


def formula(g: np.ndarray, b: float) -> float:
    return (HI - LO) / b * float(np.abs(g).sum())


def leak_of(model: DependenceModel, query, b: float, i: int, known: list[int]) -> float:
    """The engine's leak(i, K) through `audit` (idp when K is empty, pdp with --known otherwise)."""
    if known:
        return audit(model, query, "laplace", "pdp", scale=b, targets=[i], known=known).leakage
    return audit(model, query, "laplace", "idp", scale=b, targets=[i]).leakage


# ----------------------------------------------------------------------------- the sup, numerically


def log_laplace_gauss(u: np.ndarray, b: float, var: float) -> np.ndarray:
    """log of the density of Laplace(b) + N(0, var) at u (exact; var = 0: the Laplace density):
    e^{var/2b^2}/2b [e^{-u/b} Phi((u - var/b)/s) + e^{u/b} Phi(-(u + var/b)/s)], s = sqrt(var)."""
    if var <= 1e-300:
        return -np.abs(u) / b - math.log(2 * b)
    s = math.sqrt(var)
    return var / (2 * b * b) - math.log(2 * b) + np.logaddexp(-u / b + log_ndtr((u - var / b) / s),
                                                               u / b + log_ndtr(-(u + var / b) / s))


def log_density_2d(y: np.ndarray, mean: np.ndarray, v: np.ndarray, b: float, nodes: int = 40001) -> float:
    """log h(y) for two output coordinates: h = N(mean, V) convolved with Laplace(b) on each.
    Q_2 | Q_1 is Gaussian, so the inner integral is the closed form above; the outer one over
    Q_1 is a trapezoid rule on 24 standard deviations (with the kink at y_1 on the grid)."""
    s1 = math.sqrt(v[0, 0])
    q1 = np.union1d(np.linspace(mean[0] - 12 * s1, mean[0] + 12 * s1, nodes), [y[0]])
    q1 = q1[(q1 >= mean[0] - 12 * s1) & (q1 <= mean[0] + 12 * s1)]
    slope, var2 = v[1, 0] / v[0, 0], v[1, 1] - v[1, 0] ** 2 / v[0, 0]
    log_f = (-np.abs(y[0] - q1) / b - math.log(2 * b) - 0.5 * ((q1 - mean[0]) / s1) ** 2
             - math.log(s1 * math.sqrt(2 * math.pi))
             + log_laplace_gauss(y[1] - mean[1] - slope * (q1 - mean[0]), b, max(var2, 0.0)))
    h = np.diff(q1)
    return float(logsumexp(np.logaddexp(log_f[:-1], log_f[1:]) + np.log(h / 2)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_rows_formula_is_the_numerical_sup(seed):
    """DESIGN §2.2: the log-ratio h(y - g hi) / h(y - g lo) stays below (hi - lo) ||g||_1 / b at
    every y and approaches it as y -> (sign(g_1), sign(g_2)) * inf; other sign patterns reach less."""
    rng = np.random.default_rng(seed)
    n, b = 5, 0.7
    cov, a = random_spd(n, rng), rng.normal(size=(2, n))
    i = int(rng.integers(n))
    known = sorted(rng.choice([j for j in range(n) if j != i], size=seed % 3, replace=False).tolist())
    g, v = conditional_shift(cov, a, i, known)
    bound = formula(g, b)
    assert leak_of(mvnormal(cov), rows_spec(a), b, i, known) == pytest.approx(bound, rel=1e-12)

    def ratio(y):
        return log_density_2d(y - g * HI, np.zeros(2), v, b) - log_density_2d(y - g * LO, np.zeros(2), v, b)

    spread = 4 * math.sqrt(v.max()) + 3 * b + (HI - LO) * np.abs(g).max()
    signs = np.sign(g)
    approach = [ratio(signs * r * spread) for r in (0.5, 1, 2, 4)]
    assert all(x <= bound + 1e-7 for x in approach)
    assert approach[-1] == pytest.approx(bound, rel=1e-6)
    assert approach == sorted(approach)
    for y in rng.normal(scale=2 * spread, size=(20, 2)):
        assert ratio(y) <= bound + 1e-7
    mixed = ratio(np.array([signs[0], -signs[1]]) * 4 * spread)
    assert mixed == pytest.approx((HI - LO) / b * (abs(g[0]) - abs(g[1])), abs=1e-6)


def test_one_row_is_the_scalar_formula_and_rows_add_up():
    """||c||_1 = sum over rows of |c_row|: every adversary's leakage of A x is the sum of its
    leakages of the rows released alone, and one row is today's formula (`linear:w`)."""
    rng = np.random.default_rng(7)
    n, b = 6, 1.3
    cov, a = random_spd(n, rng), rng.normal(size=(3, n))
    model = mvnormal(cov)
    for i, known in [(0, []), (2, [1, 4]), (5, [0, 1, 2, 3, 4])]:
        g, _ = conditional_shift(cov, a, i, known)
        rows = [leak_of(model, LinearRows((tuple(r),)), b, i, known) for r in a]
        assert rows == pytest.approx([(HI - LO) / b * abs(x) for x in g], rel=1e-12)
        assert rows[0] == pytest.approx(leak_of(model, rows_spec(a[:1]), b, i, known), rel=1e-12)
        assert leak_of(model, rows_spec(a), b, i, known) == pytest.approx(sum(rows), rel=1e-12)


def test_witness_is_a_vector_of_signed_infinities():
    """y_c -> +inf where c_c > 0 and -inf where c_c < 0 (mirrored so that the first is +inf)."""
    cov = np.array([[1.0, 0.5], [0.5, 1.0]])
    r = audit(mvnormal(cov), "linear:1,0;0,-1;-1,0", "laplace", "idp", scale=1.0, targets=[0])
    # c = (1, -0.5, -1) for target 0
    assert r.leakage == pytest.approx((HI - LO) * 2.5, rel=1e-12)
    assert (r.witness.t, r.witness.t_prime, r.witness.y) == (HI, LO, (math.inf, -math.inf, -math.inf))
    assert r.to_dict()["witness"]["y"] == ["inf", "-inf", "-inf"]
    flipped = audit(mvnormal(cov), "linear:-1,0;0,1", "laplace", "idp", scale=1.0, targets=[0])
    assert (flipped.witness.t, flipped.witness.y) == (LO, (math.inf, -math.inf))


def test_pdp_lattice_search_with_several_rows_is_the_max_over_every_known_set():
    rng = np.random.default_rng(3)
    n, b = 6, 1.0
    cov, a = random_spd(n, rng), rng.normal(size=(2, n))
    got = audit(mvnormal(cov), rows_spec(a), "laplace", "pdp", scale=b)
    expected = []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        expected.append(max(formula(conditional_shift(cov, a, i, list(k))[0], b)
                            for s in range(n) for k in itertools.combinations(others, s)))
    assert got.per_target == pytest.approx(expected, rel=1e-10)
    greedy = ENGINES["gaussian"].pdp_worst(Problem(mvnormal(cov), LinearRows(tuple(map(tuple, a))), Laplace(b)),
                                           range(n), top_k=2 ** (n - 1))
    assert [r.value for r in greedy] == pytest.approx(expected, rel=1e-10)


# ----------------------------------------------------------------------------- the exact engine


def test_exact_engine_two_rows_against_enumeration(models_dir):
    """household n = 4 (a latent exposure), two output coordinates: the exact engine against the
    enumerated joint on a product grid of outputs (`bruteforce`)."""
    params = {"n": 4, "p_house": 0.3, "p_sick": 0.8, "p_base": 0.2}
    model = load_model(models_dir / "household.py", params)
    a = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 2.0, -1.0]])
    b = 0.8
    x, p = states(household_joint(4, 0.3, 0.8, 0.2), [[0, 1]] * 4)
    q = x @ a.T
    grid = coordinate_grid(q)
    idp = audit(model, "linear:1,1,0,0;0,1,2,-1", "laplace", "idp", scale=b, engine="exact")
    expected = [leak_grid(x, p, q, laplace_log_kernel(b), grid, i)[0] for i in range(4)]
    assert idp.per_target == pytest.approx(expected, rel=1e-10)
    pdp = audit(model, "linear:1,1,0,0;0,1,2,-1", "laplace", "pdp", scale=b, engine="exact", known=[1])
    expected = [leak_grid(x, p, q, laplace_log_kernel(b), grid, i, known=[1])[0] for i in (0, 2, 3)]
    assert pdp.per_target[1] is None
    assert [pdp.per_target[i] for i in (0, 2, 3)] == pytest.approx(expected, rel=1e-10)


def test_engines_that_take_one_row_say_so(models_dir):
    """The structured engine takes a several-row release only where one row reads the target's dependence
    (DESIGN §2.1b, `rows.py`): in a household every member depends on every other through h, so both rows are
    coupled with the target and it declines (auto moves on), naming them."""
    model = load_model(models_dir / "household.py", {"n": 3})
    problem = Problem(model, parse_query("linear:1,1,0;0,1,1"), Laplace(1.0), (Adversary(0),))
    assert ENGINES["structured"].supports(problem) is None
    with pytest.raises(Declined, match="rows 0 and 1 of the query both read"):
        ENGINES["structured"].leakage(problem)
    assert ENGINES["sampling"].supports(problem) is None  # several outputs: tests/test_sampling_queries.py
    assert ENGINES["exact"].supports(problem) is None
    with pytest.raises(InputError, match="integer query"):
        make_mechanism("geometric", problem.query, model.domains, scale=1.0)


# ----------------------------------------------------------------------------- sparse path


def random_graph(n: int, edges: int, isolated: int, rng: np.random.Generator) -> np.ndarray:
    """A symmetric 0/1 adjacency with `edges` random edges among the first n - isolated nodes."""
    w = np.zeros((n, n))
    m = n - isolated
    while w.sum() < 2 * edges:
        i, j = rng.integers(m, size=2)
        if i != j:
            w[i, j] = w[j, i] = 1.0
    return w


def car_precision(w: np.ndarray, alpha: float, tau: float) -> np.ndarray:
    """tau (D - alpha W), an isolated node getting precision tau (D_kk = 1 there)."""
    d = w.sum(axis=1)
    return tau * (np.diag(np.where(d > 0, d, 1.0)) - alpha * w)


def components(w: np.ndarray) -> list[frozenset[int]]:
    """Every node's connected component, by breadth-first search."""
    n, comp = len(w), [None] * len(w)
    for s in range(n):
        if comp[s] is None:
            seen, queue = {s}, deque([s])
            while queue:
                u = queue.popleft()
                for v in np.flatnonzero(w[u]):
                    if int(v) not in seen:
                        seen.add(int(v))
                        queue.append(int(v))
            for u in seen:
                comp[u] = frozenset(seen)
    return comp


def both_paths(build, monkeypatch) -> tuple[DependenceModel, DependenceModel]:
    """The same model twice: one solved on the dense path, one forced onto the sparse path (the
    choice is made once per model)."""
    dense = build()
    assert not gaussian_graph.use_sparse(dense)
    monkeypatch.setattr(gaussian_graph, "SPARSE_SIZE", 0)
    monkeypatch.setattr(gaussian_graph, "SPARSE_DENSITY", 1.0)
    sparse_model = build()
    assert gaussian_graph.use_sparse(sparse_model)
    return dense, sparse_model


def car_with_mean(w, alpha, tau, mu):
    def build():
        with pm.Model() as m:
            pm.CAR("x", mu=mu, W=w, alpha=alpha, tau=tau)
        return DependenceModel(m, tuples="x", domains=Interval(0, 1))

    return build


def precision_model(q, mu):
    def build():
        with pm.Model() as m:
            pm.MvNormal("x", mu=mu, tau=q)
        return DependenceModel(m, tuples="x", domains=Interval(0, 1))

    return build


def car_with_latent_mean(w, alpha, tau):
    def build():
        with pm.Model() as m:
            region = pm.Normal("region", 0.5, 0.2)
            pm.CAR("x", mu=region + 0.1 * np.arange(len(w)) / len(w), W=w, alpha=alpha, tau=tau)
        return DependenceModel(m, tuples="x", domains=Interval(0, 1))

    return build


def cases():
    rng = np.random.default_rng(11)
    out = []
    for n, edges, isolated, alpha in [(50, 40, 6, 0.9), (120, 100, 20, 0.6), (200, 150, 30, -0.5)]:
        w = random_graph(n, edges, isolated, rng)
        out.append((f"precision-{n}", precision_model(car_precision(w, alpha, 3.0), rng.random(n)), w))
    w = random_graph(80, 90, 0, rng)
    w[np.flatnonzero(w.sum(axis=1) == 0), 0] = 1.0  # pm.CAR needs a neighbour for every node
    w = np.maximum(w, w.T)
    out.append(("car-80", car_with_mean(w, 0.8, 2.0, rng.random(80)), w))
    out.append(("car-latent-80", car_with_latent_mean(w, 0.8, 2.0), np.ones((80, 80))))
    return out


@pytest.mark.parametrize("name,build,w", cases(), ids=[c[0] for c in cases()])
def test_sparse_path_equals_dense_path(name, build, w, monkeypatch):
    """idp, ddp and pdp with a fixed known set (which cuts components) for a three-row query:
    the per-component sparse factorisations give the dense Schur complements to 1e-10."""
    n = len(w)
    rng = np.random.default_rng(n)
    spec = rows_spec(rng.normal(size=(3, n)))
    dense, sparse_model = both_paths(build, monkeypatch)
    known = sorted(rng.choice(n, size=n // 5, replace=False).tolist())
    for notion, kw in [("idp", {}), ("ddp", {}), ("pdp", {"known": known})]:
        d = audit(dense, spec, "laplace", notion, scale=0.5, **kw)
        s = audit(sparse_model, spec, "laplace", notion, scale=0.5, **kw)
        assert s.engine == d.engine == "gaussian"
        mask = [v is not None for v in d.per_target]
        assert np.allclose(np.array(s.per_target)[mask].astype(float), np.array(d.per_target)[mask].astype(float),
                           rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,build,w", cases()[:4], ids=[c[0] for c in cases()[:4]])
def test_ddp_equals_idp_and_dependence_sets_are_components(name, build, w, monkeypatch):
    """Tuples outside i's component are independent of it: N(i) is the component (breadth-first
    search here), ddp's adversary knows everything else, and ddp = idp target by target."""
    _, model = both_paths(build, monkeypatch)
    comp = components(w)
    sets = ENGINES["gaussian"].dependence_sets(Problem(model, parse_query("sum"), Laplace(1.0)))
    assert sets == [c - {i} for i, c in enumerate(comp)]
    idp = audit(model, "sum", "laplace", "idp", scale=1.0)
    ddp = audit(model, "sum", "laplace", "ddp", scale=1.0)
    assert ddp.per_target == idp.per_target
    isolated = [i for i in range(len(w)) if len(comp[i]) == 1]
    assert all(idp.per_target[i] == pytest.approx(1.0, rel=1e-12) for i in isolated)  # width 1, b = 1


def test_weak_chain_components_keep_what_the_dense_rule_rounds_away(monkeypatch):
    """A CAR chain with alpha = 0.3: Sigma = Q^{-1} > 0 everywhere (an M-matrix), but far along the
    chain below the dense rule's 1e-12. The sparse path's N(i) is the whole chain, the dense one
    drops far tuples; the ddp leakages still agree to 1e-10 (what is dropped is that small)."""
    n = 60
    w = np.eye(n, k=1) + np.eye(n, k=-1)
    dense, sparse_model = both_paths(car_with_mean(w, 0.3, 1.0, np.zeros(n)), monkeypatch)
    problem = Problem(sparse_model, parse_query("sum"), Laplace(1.0))
    sparse_sets = ENGINES["gaussian"].dependence_sets(problem)
    dense_sets = ENGINES["gaussian"].dependence_sets(Problem(dense, parse_query("sum"), Laplace(1.0)))
    assert sparse_sets == [frozenset(range(n)) - {i} for i in range(n)]
    sigma = np.linalg.inv(car_precision(w, 0.3, 1.0))
    assert sigma.min() > 0 and len(dense_sets[0]) < n - 1
    d = audit(dense, "sum", "laplace", "ddp", scale=1.0).per_target
    s = audit(sparse_model, "sum", "laplace", "ddp", scale=1.0).per_target
    assert s == pytest.approx(d, rel=1e-10)


def test_self_loops_give_isolated_nodes_precision_tau(monkeypatch):
    """models/gowalla_friends.py's convention: one pm.CAR over both fields with weights
    blockdiag(tau_x A, tau_y A), A = W + diag(1 / (1 - alpha)) on rows without neighbours, tau = 1.
    Its precision is blockdiag(car_precision(W, alpha, tau_x), car_precision(W, alpha, tau_y)) (an
    isolated row gets tau): the same leakages as pm.MvNormal given that precision, on both paths."""
    rng = np.random.default_rng(4)
    users, alpha, taus = 60, 0.95, (2.0, 7.0)
    w = random_graph(users, 40, 15, rng)
    alone = w.sum(axis=1) == 0
    a = w + np.diag(alone / (1 - alpha))
    weights = np.block([[taus[0] * a, np.zeros_like(a)], [np.zeros_like(a), taus[1] * a]])
    q = np.block([[car_precision(w, alpha, taus[0]), np.zeros_like(a)],
                  [np.zeros_like(a), car_precision(w, alpha, taus[1])]])
    mu = np.repeat([0.4, 0.6], users)
    query = Centroids("inline", tuple(rng.integers(4, size=users).tolist()))
    reference = audit(precision_model(q, mu)(), query, "laplace", "idp", scale=0.1)
    dense, sparse_model = both_paths(car_with_mean(weights, alpha, 1.0, mu), monkeypatch)
    for model in (dense, sparse_model):
        got = audit(model, query, "laplace", "idp", scale=0.1)
        assert got.per_target == pytest.approx(reference.per_target, rel=1e-10)
    isolated = np.flatnonzero(alone)
    per = np.array(reference.per_target)
    sizes = np.bincount(query.labels)
    assert per[isolated] == pytest.approx(1 / sizes[np.array(query.labels)[isolated]] / 0.1, rel=1e-12)


def test_car_refusals_are_one_line():
    w = np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=float)
    with pm.Model() as m:
        pm.CAR("x", mu=np.zeros(3), W=w, alpha=0.5, tau=1.0)
    model = DependenceModel(m, tuples="x", domains=Interval(0, 1))
    with pytest.raises(InputError, match="node 2 of CAR 'x' has no neighbours"):
        audit(model, "sum", "laplace", "idp", scale=1.0, engine="gaussian")
    with pm.Model() as m:
        pm.CAR("x", mu=np.zeros(2), W=np.array([[0.0, 1.0], [1.0, 0.0]]), alpha=1.0, tau=1.0)
    with pytest.raises(InputError, match="-1 < alpha < 1"):
        audit(DependenceModel(m, tuples="x", domains=Interval(0, 1)), "sum", "laplace", "idp", scale=1.0)
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(2), tau=np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(InputError, match="precision of 'x' is not positive definite"):
        audit(DependenceModel(m, tuples="x", domains=Interval(0, 1)), "sum", "laplace", "idp", scale=1.0)


# ----------------------------------------------------------------------------- user level: two coordinates


def test_user_level_leakage_is_the_sum_of_the_coordinates():
    """A user's record (x_i, y_i) with independent x and y fields and a query whose rows touch
    one field each (centroids): the log-ratio for the pair separates into the x and y parts, so
    the pair's leakage is leak(x_i) + leak(y_i). Checked against the general two-tuple formula
    written here: with G the slopes of A X in (X_xi, X_yi), sup = max over sign vectors s of
    ||G diag(width) s||_1 / b."""
    rng = np.random.default_rng(5)
    users = 7
    cov_x, cov_y = random_spd(users, rng), random_spd(users, rng)
    cov = np.block([[cov_x, np.zeros((users, users))], [np.zeros((users, users)), cov_y]])
    labels = (0, 1, 0, 2, 1, 1, 2)
    query = Centroids("inline", labels)
    a = query.matrix(2 * users)
    b = 0.3
    model = mvnormal(cov)
    per_tuple = audit(model, query, "laplace", "idp", scale=b).per_target
    for i in range(users):
        pair = [i, users + i]
        rest = [j for j in range(2 * users) if j not in pair]
        slopes = a[:, pair] + a[:, rest] @ cov[np.ix_(rest, pair)] @ np.linalg.inv(cov[np.ix_(pair, pair)])
        joint = max(np.abs(slopes @ (np.array(s) * (HI - LO))).sum() / b for s in itertools.product([1, -1], repeat=2))
        assert joint == pytest.approx(per_tuple[i] + per_tuple[users + i], rel=1e-12)


# ----------------------------------------------------------------------------- the query kinds


def test_linear_rows_parse_and_round_trip():
    q = parse_query("linear:1,0,0.5;0,-2,1")
    assert isinstance(q, LinearRows) and q.spec == "linear:1,0,0.5;0,-2,1"
    assert parse_query(q.spec) == q
    assert q.values(np.array([[1.0, 2.0, 4.0]])).tolist() == [[3.0, 0.0]]
    domains = [Interval(0, 1), Interval(0, 2), Interval(-1, 1)]
    assert [q.sensitivity(k, domains) for k in range(3)] == [1.0, 4.0, 3.0]
    assert parse_query("linear:1,2").spec == "linear:1,2"  # one row: the scalar query
    assert parse_query("linear:1,2").weights(2).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("spec,message", [
    ("linear:1,0;0,x", "comma-separated numbers"),
    ("linear:1,0;0", "rows of different lengths"),
    ("linear:1,0;", "comma-separated numbers"),
    ("linear:1,0;inf,0", "finite numbers"),
    ("centroids:/nonexistent/assignment.csv", "cannot read the assignment"),
])
def test_bad_query_specs(spec, message):
    with pytest.raises(InputError, match=message):
        parse_query(spec)


def test_rows_must_match_the_tuples():
    model = mvnormal(np.eye(3))
    with pytest.raises(InputError, match="2 weights per row but the model has 3 tuples"):
        audit(model, "linear:1,0;0,1", "laplace", "idp", scale=1.0)


@pytest.fixture
def assignment(tmp_path):
    def write(text: str) -> str:
        path = tmp_path / "assignment.csv"
        path.write_text(text)
        return str(path)

    return write


def test_centroid_query_values_and_sensitivity(assignment):
    """5 users in clusters {7: users 0, 3} and {2: users 1, 2, 4}; tuples x_0..x_4, y_0..y_4.
    Outputs in increasing label order: cluster 2's (x, y) mean, then cluster 7's. A user's
    coordinate moves its cluster's centroid by width / |cluster|: the sensitivity."""
    q = parse_query("centroids:" + assignment("user,cluster\n10,7\n11,2\n12,2\n13,7\n14,2\n"))
    assert q.labels == (7, 2, 2, 7, 2)
    x = np.array([[0.1, 0.2, 0.3, 0.4, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0]])
    expected = [(0.2 + 0.3 + 0.5) / 3, (2.0 + 3.0 + 5.0) / 3, (0.1 + 0.4) / 2, (1.0 + 4.0) / 2]
    assert q.values(x)[0] == pytest.approx(expected, rel=1e-15)
    domains = [Interval(0, 1)] * 5 + [Interval(0, 2)] * 5
    sizes = [2, 3, 3, 2, 3]
    assert [q.sensitivity(k, domains) for k in range(10)] == pytest.approx(
        [1 / s for s in sizes] + [2 / s for s in sizes], rel=1e-15)
    assert q.global_sensitivity(domains) == pytest.approx(1.0)
    mech = make_mechanism("laplace", q, [Interval(0, 1)] * 10, epsilon=2.0)
    assert mech.scale == pytest.approx(0.25)  # max 1/|c| = 1/2, over epsilon
    with pytest.raises(InputError, match="5 users but the model has 7 tuples"):
        q.check([Interval(0, 1)] * 7)


@pytest.mark.parametrize("text,message", [
    ("user,group\n1,0\n", "'cluster' column"),
    ("", "'cluster' column"),
    ("user,cluster\n1,0\n2,a\n", "line 3: cluster 'a' is not an integer"),
    ("user,cluster\n1,0\n2\n", "line 3: cluster '' is not an integer"),
])
def test_bad_assignment_files(assignment, text, message):
    with pytest.raises(InputError, match=message):
        parse_query("centroids:" + assignment(text))


def test_cli_bad_rows_exit_2_one_line(models_dir, capsys, assignment):
    base = ["audit", str(models_dir / "independent.py"), "--mechanism", "laplace", "--epsilon", "1", "--notion", "idp"]
    assert main([*base, "--query", "linear:1,0;0,x"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "comma-separated numbers" in err
    assert main([*base, "--query", "centroids:" + assignment("cluster\n0\n1\n0\n")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "3 users but the model has 4 tuples" in err


def test_cli_centroids_json(models_dir, capsys, assignment):
    """The centroid query through the command line on independent tuples: every tuple leaks
    width / (|cluster| b); with --epsilon 1 the smallest cluster's members leak exactly 1."""
    path = assignment("cluster\n0\n1\n1\n1\n")
    code = main(["audit", str(models_dir / "independent.py"), "-p", "n=4", "--query", f"centroids:{path}", "--mechanism",
                 "laplace", "--epsilon", "1", "--notion", "idp", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["per_target"] == pytest.approx([1.0, 1 / 3, 1 / 3, 1 / 3], rel=1e-12)
    assert out["query"] == f"centroids:{path}"
