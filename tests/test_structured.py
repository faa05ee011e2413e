"""Structured engine (issue 13) against independent references: tests/bruteforce.py's dense-grid
leakage on numpy joints written here, a plain-numpy forward-backward recursion with a count
axis for a chain too long to enumerate, and the exact engine (DESIGN §2.1) to 1e-12."""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytest
from bruteforce import household_idp_closed_form, household_joint, leak_bruteforce, markov_joint, states

import ddpbayes
from ddpbayes import DependenceModel
from ddpbayes.engines.exact import ExactEngine
from ddpbayes.engines.structured import StructuredEngine
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Geometric, Laplace, RandomizedResponse
from ddpbayes.model.domains import Finite
from ddpbayes.problem import Adversary, Problem
from ddpbayes.queries import parse_query
from ddpbayes.settings import RunSettings

STRUCTURED, EXACT = StructuredEngine(), ExactEngine()


def _problem(model, query="count", mechanism=None, adversaries=(), **settings) -> Problem:
    mech = mechanism or Laplace(1.0)
    return Problem(model, parse_query(query), mech, tuple(adversaries), RunSettings(**settings))


def _adversaries(n: int, known_sets=((),)) -> list[Adversary]:
    """Every target with each known set (indices mod n, the target left out)."""
    out = []
    for i in range(n):
        for known in known_sets:
            out.append(Adversary(i, frozenset((i + k) % n for k in known) - {i}))
    return out


def _assert_matches_exact(problem: Problem) -> None:
    assert STRUCTURED.supports(problem) is None
    got, want = STRUCTURED.leakage(problem), EXACT.leakage(problem)
    assert [r.adversary for r in got] == list(problem.adversaries)
    for g, w in zip(got, want):
        assert g.value == pytest.approx(w.value, rel=1e-12, abs=1e-12), g.adversary


# --------------------------------------------------------------------------- against the exact engine


@pytest.mark.parametrize("n", [3, 4, 5, 6, 8])
@pytest.mark.parametrize("p01, p10", [(0.2, 0.2), (0.1, 0.4), (0.0, 0.0), (1.0, 1.0), (0.3, 0.7)])
def test_binary_chain_matches_exact(models_dir, n, p01, p10):
    model = ddpbayes.load_model(models_dir / "markov_chain.py", {"n": n, "p01": p01, "p10": p10})
    advs = _adversaries(n, ((), (1,), (2,), (1, -1), (2, 3)))
    for mech in (Laplace(1.0), Geometric(0.7)):
        _assert_matches_exact(_problem(model, "count", mech, advs))
    weights = ",".join(str(w) for w in ([2, 0, -1, 3, -2, 1, 0, 1][:n]))
    _assert_matches_exact(_problem(model, f"linear:{weights}", Laplace(1.3), advs))


@pytest.mark.parametrize("n", [3, 5])
def test_categorical_chain_matches_exact(models_dir, n):
    model = ddpbayes.load_model(models_dir / "categorical_chain.py", {"n": n, "k": 3, "p_stay": 0.6})
    advs = _adversaries(n, ((), (1,), (1, 2)))
    _assert_matches_exact(_problem(model, "sum", Laplace(0.9), advs))
    weights = ",".join(str(w) for w in [1, -2, 0, 3, 1][:n])
    _assert_matches_exact(_problem(model, f"linear:{weights}", Geometric(1.5), advs))


@pytest.mark.parametrize("n", [3, 5])
def test_household_matches_closed_form_and_exact(models_dir, n):
    """A latent cause: the household's closed form (tests/bruteforce.py) and the exact engine."""
    model = ddpbayes.load_model(models_dir / "household.py", {"n": n})
    got = STRUCTURED.leakage(_problem(model, adversaries=_adversaries(n)))
    assert [r.value for r in got] == pytest.approx([household_idp_closed_form(n, 1.0)] * n, abs=1e-12)
    _assert_matches_exact(_problem(model, "count", Geometric(0.6), _adversaries(n, ((), (1,), (1, 2)))))
    weights = ",".join(str(w) for w in [3, 0, -1, 1, -2][:n])
    _assert_matches_exact(_problem(model, f"linear:{weights}", Laplace(2.0), _adversaries(n, ((), (1,)))))


# --------------------------------------------------------------------------- against bruteforce.py


def test_markov4_matches_bruteforce(markov4):
    """x0 ~ Bern(0.5), x_t ~ Bern(0.9 if x_{t-1} else 0.2): bruteforce.markov_joint's numpy table."""
    joint, values = markov_joint(4), [np.array([0.0, 1.0])] * 4
    for weights in ([1, 1, 1, 1], [2, 0, -1, 1]):
        query = "linear:" + ",".join(map(str, weights))
        advs = _adversaries(4, ((), (1,), (2,), (1, 3)))
        got = STRUCTURED.leakage(_problem(markov4, query, Laplace(0.8), advs))
        for r in got:
            want = leak_bruteforce(joint, values, weights, 0.8, r.adversary.target, r.adversary.known)
            assert r.value == pytest.approx(want, abs=1e-9), r.adversary


def test_household_matches_bruteforce(models_dir):
    model = ddpbayes.load_model(models_dir / "household.py", {"n": 4})
    joint, values, weights = household_joint(4), [np.array([0.0, 1.0])] * 4, [1, -1, 2, 0]
    got = STRUCTURED.leakage(_problem(model, "linear:1,-1,2,0", Laplace(1.0), _adversaries(4, ((), (1,), (2, 3)))))
    for r in got:
        assert r.value == pytest.approx(leak_bruteforce(joint, values, weights, 1.0, r.adversary.target,
                                                        r.adversary.known), abs=1e-9)


def _random_tree(seed: int, n: int, chain: bool):
    """A random tree (or chain) of categorical tuples with random tables: the PyMC model and the
    same joint as a numpy table, built independently of ddpbayes."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 4, size=n)
    parents = [None] + [k - 1 if chain else int(rng.integers(0, k)) for k in range(1, n)]
    root = rng.dirichlet(np.ones(sizes[0]))
    tables = [None] + [rng.dirichlet(np.ones(sizes[k]), size=sizes[parents[k]]) for k in range(1, n)]
    with pm.Model() as m:
        xs = [pm.Categorical("x0", p=root)]
        for k in range(1, n):
            xs.append(pm.Categorical(f"x{k}", p=pm.math.constant(tables[k])[xs[parents[k]]]))
    joint = np.zeros(tuple(sizes))
    for x in np.ndindex(*joint.shape):
        joint[x] = root[x[0]] * math.prod(tables[k][x[parents[k]], x[k]] for k in range(1, n))
    model = DependenceModel(m, tuples=[f"x{k}" for k in range(n)])
    return model, joint, [np.arange(s, dtype=float) for s in sizes], rng


@pytest.mark.parametrize("seed", range(6))
def test_random_trees_and_chains(seed):
    n = 4 + seed % 3
    model, joint, values, rng = _random_tree(seed, n, chain=seed % 2 == 0)
    weights = [int(w) for w in rng.integers(-2, 3, size=n)]
    query = "linear:" + ",".join(map(str, weights))
    known_sets = [(), (int(rng.integers(1, n)),), tuple(int(k) for k in rng.integers(1, n, size=2))]
    advs = _adversaries(n, known_sets)
    b = float(rng.uniform(0.5, 2.0))
    got = STRUCTURED.leakage(_problem(model, query, Laplace(b), advs))
    for r in got:
        want = leak_bruteforce(joint, values, weights, b, r.adversary.target, r.adversary.known)
        assert r.value == pytest.approx(want, abs=1e-9), r.adversary
        alone = STRUCTURED.leakage(_problem(model, query, Laplace(b), [r.adversary]))[0]  # its tree rooted at it
        assert alone.value == pytest.approx(want, abs=1e-9), r.adversary
    _assert_matches_exact(_problem(model, query, Laplace(b), advs))
    _assert_matches_exact(_problem(model, "sum", Geometric(b), advs))


# --------------------------------------------------------------------------- a chain too long to enumerate


def _chain_count_law(n: int, p01: float, p10: float) -> np.ndarray:
    """P(X_i = t, count = s) as an (n, 2, n + 1) array, by a forward-backward recursion with a
    count axis in plain numpy (stationary start, as models/markov_chain.py)."""
    trans = np.array([[1 - p01, p01], [p10, 1 - p10]])
    pi1 = p01 / (p01 + p10)
    alpha = np.zeros((n, 2, n + 1))  # P(X_0..X_k with X_k = x, count of X_0..X_k = s)
    alpha[0, 0, 0], alpha[0, 1, 1] = 1 - pi1, pi1
    for k in range(1, n):
        for x in (0, 1):
            moved = alpha[k - 1, 0] * trans[0, x] + alpha[k - 1, 1] * trans[1, x]
            alpha[k, x] = np.roll(moved, x) if x else moved
    beta = np.zeros((n, 2, n + 1))  # P(count of X_{k+1}..X_{n-1} = s | X_k = x)
    beta[n - 1, :, 0] = 1.0
    for k in range(n - 2, -1, -1):
        for x in (0, 1):
            beta[k, x] = trans[x, 0] * beta[k + 1, 0] + trans[x, 1] * np.roll(beta[k + 1, 1], 1)
    out = np.zeros((n, 2, n + 1))
    for i in range(n):
        for t in (0, 1):
            out[i, t] = np.convolve(alpha[i, t], beta[i, t])[: n + 1]
    return out


def _idp_from_law(law: np.ndarray, b: float) -> float:
    """max over y in {0..n} and y -> ±inf of |log L(y|1) - log L(y|0)| for Laplace(b)."""
    s = np.arange(law.shape[1])
    with np.errstate(divide="ignore"):
        logw = np.log(law) - np.log(law.sum(axis=1, keepdims=True))
    kernel = np.concatenate([-np.abs(s[:, None] - s[None, :]) / b, [s / b], [-s / b]])  # (y, s)
    log_l = np.logaddexp.reduce(logw[:, None, :] + kernel[None], axis=2)
    return float(np.abs(log_l[1] - log_l[0]).max())


def test_long_chain_against_forward_backward(models_dir):
    n, p01, p10, b = 60, 0.1, 0.3, 1.0
    model = ddpbayes.load_model(models_dir / "markov_chain.py", {"n": n, "p01": p01, "p10": p10})
    law = _chain_count_law(n, p01, p10)
    targets = [0, 1, 17, 30, 59]
    got = STRUCTURED.leakage(_problem(model, "count", Laplace(b), [Adversary(i) for i in targets]))
    for r in got:
        assert r.value == pytest.approx(_idp_from_law(law[r.adversary.target], b), abs=1e-10)
    from ddpbayes.engines.structured.graph import calibrate, factor_graph

    graph = factor_graph(model, RunSettings().max_states)
    calibration = calibrate(graph, [np.array([0, 1])] * n, {}, RunSettings().max_states)
    for i in targets:
        pot = calibration.marginal(i)
        mine = np.full((2, n + 1), -np.inf)
        for t in (0, 1):
            mine[t, pot.offset + t: pot.offset + t + pot.length] = pot.table[t]
        with np.errstate(divide="ignore"):
            assert np.allclose(mine, np.log(law[i]), rtol=0, atol=1e-10)


# --------------------------------------------------------------------------- dependence sets, notes, refusals


@pytest.mark.parametrize("build", [
    lambda d: ddpbayes.load_model(d / "markov_chain.py", {"n": 5, "p01": 0.3, "p10": 0.7}),
    lambda d: ddpbayes.load_model(d / "markov_chain.py", {"n": 4}),
    lambda d: ddpbayes.load_model(d / "household.py", {"n": 4}),
    lambda d: _random_tree(3, 5, chain=False)[0],
])
def test_dependence_sets_match_exact(models_dir, build):
    problem = _problem(build(models_dir))
    assert STRUCTURED.dependence_sets(problem) == EXACT.dependence_sets(problem)


def test_independent_components():
    """Two separate pairs: N(i) stays inside i's pair."""
    with pm.Model() as m:
        a = pm.Bernoulli("a", 0.3)
        pm.Bernoulli("b", pm.math.switch(a, 0.9, 0.2))
        c = pm.Bernoulli("c", 0.6)
        pm.Bernoulli("d", pm.math.switch(c, 0.1, 0.7))
    problem = _problem(DependenceModel(m, tuples=["a", "b", "c", "d"]), adversaries=_adversaries(4, ((), (1,), (2,))))
    assert STRUCTURED.dependence_sets(problem) == [frozenset({1}), frozenset({0}), frozenset({3}), frozenset({2})]
    _assert_matches_exact(problem)


def test_truncating_domains_note_and_leakage():
    with pm.Model() as m:
        x0 = pm.Poisson("x0", 1.0)
        pm.Poisson("x1", x0 + 0.5)
    model = DependenceModel(m, tuples=["x0", "x1"], domains={"x0": Finite(range(4)), "x1": Finite(range(5))})
    problem = _problem(model, "linear:1,-1", Laplace(1.0), _adversaries(2, ((), (1,))))
    _assert_matches_exact(problem)
    assert STRUCTURED.notes(problem) == EXACT.notes(problem) != []


@pytest.mark.parametrize("query, mechanism, reason", [
    ("histogram:0,1,2", Laplace(1.0), "not linear"),
    ("mean", Laplace(1.0), "integer weights"),
    ("linear:0.5,1,1", Laplace(1.0), "integer weights"),
    ("count", RandomizedResponse(1.0), "randomized_response"),
])
def test_refused_queries_and_mechanisms(models_dir, query, mechanism, reason):
    model = ddpbayes.load_model(models_dir / "markov_chain.py", {"n": 3})
    problem = _problem(model, query, mechanism, [Adversary(0)])
    assert reason in STRUCTURED.supports(problem)
    with pytest.raises(InputError, match="structured engine cannot solve"):
        STRUCTURED.leakage(problem)


def test_identity_is_continual_release_on_chains_only(models_dir):
    """identity goes to the chain recursion (tests/test_continual.py); a latent cause is no chain."""
    chain = ddpbayes.load_model(models_dir / "markov_chain.py", {"n": 3})
    assert STRUCTURED.supports(_problem(chain, "identity", RandomizedResponse(1.0), [Adversary(0)])) is None
    household = ddpbayes.load_model(models_dir / "household.py", {"n": 3})
    problem = _problem(household, "identity", RandomizedResponse(1.0), [Adversary(0)])
    assert "latent slot" in STRUCTURED.supports(problem)
    with pytest.raises(InputError, match="structured engine cannot solve"):
        STRUCTURED.leakage(problem)


def test_refused_models():
    with pm.Model() as m:
        pm.Normal("x0")
    assert "continuous" in STRUCTURED.supports(_problem(DependenceModel(m, tuples=["x0"]), "sum"))
    with pm.Model() as m:
        pm.Bernoulli("x0", 0.5)
    halves = DependenceModel(m, tuples=["x0"], domains={"x0": Finite([0, 0.5, 1])})
    assert "not integer-valued" in STRUCTURED.supports(_problem(halves, "sum"))


def test_treewidth_over_the_limit_is_refused(models_dir):
    model = ddpbayes.load_model(models_dir / "markov_chain.py", {"n": 8})
    with pytest.raises(InputError, match="treewidth"):
        STRUCTURED.leakage(_problem(model, adversaries=[Adversary(3)], max_states=12))


def test_elementwise_vector_is_one_table_per_element():
    """Bernoulli(0.3, shape=40) is 40 independent elements: 40 tables of 2 cells, not one of
    2^40; independent tuples leak what classic DP says, 1/b (003 Thm. 1)."""
    with pm.Model() as m:
        pm.Bernoulli("x", 0.3, shape=40)
    got = STRUCTURED.leakage(_problem(DependenceModel(m, tuples="x"), adversaries=[Adversary(0), Adversary(39)]))
    assert [a.value for a in got] == pytest.approx([1.0, 1.0], abs=1e-12)


def test_joint_term_table_checked_before_it_is_built():
    """A potential over all 40 elements of a vector is one term over 2^40 combinations: refused, not built."""
    with pm.Model() as m:
        x = pm.Bernoulli("x", 0.3, shape=40)
        pm.Potential("together", 0.1 * x.sum() ** 2)
    with pytest.raises(InputError, match="term's table"):
        STRUCTURED.leakage(_problem(DependenceModel(m, tuples="x"), adversaries=[Adversary(0)]))


def test_zero_probability_known_values_are_skipped(models_dir):
    """p01 = p10 = 0: only the all-0 and all-1 days; knowing any day leaves nothing to learn."""
    model = ddpbayes.load_model(models_dir / "markov_chain.py", {"n": 5, "p01": 0.0, "p10": 0.0})
    got = STRUCTURED.leakage(_problem(model, adversaries=[Adversary(0), Adversary(2, frozenset({0, 4}))]))
    assert got[0].value == pytest.approx(5.0, abs=1e-12)
    assert got[1].value == 0.0 and got[1].witness.t == got[1].witness.t_prime
    assert list(got[1].witness.known_values.values()) in ([0.0, 0.0], [1.0, 1.0])


# --------------------------------------------------------------------------- d-separation


def _collider(evidence: bool) -> DependenceModel:
    """x0 -> c <- x1 with c latent; a potential on c (evidence) makes the parents dependent."""
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", 0.3)
        x1 = pm.Bernoulli("x1", 0.6)
        c = pm.Bernoulli("c", pm.math.switch(pm.math.eq(x0, x1), 0.9, 0.2))
        pm.Bernoulli("x2", pm.math.switch(c, 0.7, 0.1))
        if evidence:
            pm.Potential("seen", pm.math.switch(c, 0.0, -2.0))
    return DependenceModel(m, tuples=["x0", "x1", "x2"])


def test_d_separation_of_a_collider():
    """Without evidence the parents of a latent collider are independent (never even checked
    numerically); a potential on the collider connects them. Both agree with the exact engine."""
    from ddpbayes.engines.structured.graph import factor_graph

    free, seen = _problem(_collider(False)), _problem(_collider(True))
    graph = factor_graph(free.model, RunSettings().max_states)
    assert graph.directed.reachable(0) == {2, 3}  # x2 and the latent c (slot 3), not x1
    assert STRUCTURED.dependence_sets(free) == EXACT.dependence_sets(free) == [{2}, {2}, {0, 1}]
    assert factor_graph(seen.model, RunSettings().max_states).directed.reachable(0) >= {1, 2}
    assert STRUCTURED.dependence_sets(seen) == EXACT.dependence_sets(seen)
    assert 1 in STRUCTURED.dependence_sets(seen)[0]


def _random_dag(seed: int, n: int) -> tuple[DependenceModel, list[list[int]]]:
    """Binary nodes, each with 0-2 random earlier parents and a random table; every third latent."""
    rng = np.random.default_rng(seed)
    parents = [sorted(rng.choice(k, size=min(k, int(rng.integers(0, 3))), replace=False).tolist()) for k in range(n)]
    with pm.Model() as m:
        nodes = []
        for k in range(n):
            table = rng.uniform(0.05, 0.95, size=2 ** len(parents[k]))
            index = sum(nodes[p] * 2**j for j, p in enumerate(parents[k])) if parents[k] else 0
            nodes.append(pm.Bernoulli(f"v{k}", pm.math.constant(table)[index]))
    tuples = [f"v{k}" for k in range(n) if k % 3 != 2]
    return DependenceModel(m, tuples=tuples), parents


@pytest.mark.parametrize("seed", range(6))
def test_numeric_dependence_lies_inside_d_connection(seed):
    """On random DAGs with colliders and latents: the exact engine's numeric dependence sets lie
    within the d-connected sets, and d-separated pairs are independent (checked by the exact engine)."""
    from ddpbayes.engines.structured.graph import factor_graph

    model, _ = _random_dag(seed, 7)
    problem = _problem(model)
    graph = factor_graph(model, RunSettings().max_states)
    exact = EXACT.dependence_sets(problem)
    for i, dep in enumerate(exact):
        assert dep <= graph.directed.reachable(i)
    assert STRUCTURED.dependence_sets(problem) == exact


# --------------------------------------------------------------------------- known tuples that only shift the query


@pytest.mark.parametrize("known", [(0, 1, 2, 6, 7), (0, 3, 7), (1, 2, 5, 6), (0, 1, 2, 3, 5, 6, 7)])
def test_far_known_tuples_only_shift_the_query(known):
    """On a chain, known days beyond the nearest known one on each side are not enumerated; the
    value still equals the brute force over every x_K, and the witness (all of x_K, y) attains it."""
    p_up, p_stay1 = 0.3, 0.75
    with pm.Model() as m:
        prev = pm.Bernoulli("x0", 0.4)
        for k in range(1, 8):
            prev = pm.Bernoulli(f"x{k}", pm.math.switch(prev, p_stay1, p_up))
    model = DependenceModel(m, tuples=[f"x{k}" for k in range(8)])
    joint, values = markov_joint(8, p0=0.6, p_stay1=p_stay1, p_up=p_up), [np.array([0.0, 1.0])] * 8
    weights = [1, 2, 1, 1, 1, 1, 3, 1]
    query = "linear:" + ",".join(map(str, weights))
    got = STRUCTURED.leakage(_problem(model, query, Laplace(1.0), [Adversary(4, frozenset(known))]))[0]
    assert got.value == pytest.approx(leak_bruteforce(joint, values, weights, 1.0, 4, known), abs=1e-9)
    w = got.witness
    assert sorted(w.known_values) == list(known)
    X, p = states(joint, values)
    rows = np.all([X[:, k] == v for k, v in w.known_values.items()], axis=0)
    assert p[rows].sum() > 0  # the completed x_K is possible
    q = X @ np.array(weights, dtype=float)

    def log_l(t: float) -> float:
        sel = rows & (X[:, 4] == t)
        y = w.y[0]
        kernel = np.exp(-np.abs(y - q[sel])) if math.isfinite(y) else np.exp(np.sign(y) * (q[sel] - q[rows].mean()))
        return math.log(np.sum(p[sel] * kernel) / p[sel].sum())

    assert log_l(w.t) - log_l(w.t_prime) == pytest.approx(got.value, abs=1e-9)


def test_year_of_days_readme_figures(models_dir):
    """docs/guide/models.md's "A chain: a year of days": n = 365, count, b = 1; idp of the first and a middle day against
    the numpy forward-backward law, and exactly 1 for a day whose two neighbours are known (its
    Markov blanket: the rest of the year no longer depends on it)."""
    n = 365
    model = ddpbayes.load_model(models_dir / "markov_chain.py", {"n": n})
    law = _chain_count_law(n, 0.2, 0.2)
    # the information measures (70% of the audit's time here) are not among the figures
    idp = ddpbayes.audit(model, "count", "laplace", "idp", epsilon=1.0, targets=[0, 182], information=None)
    assert idp.per_target[0] == pytest.approx(_idp_from_law(law[0], 1.0), abs=1e-10)
    assert idp.per_target[182] == pytest.approx(_idp_from_law(law[182], 1.0), abs=1e-10)
    assert round(idp.per_target[0], 5) == 1.98075 and round(idp.per_target[182], 5) == 2.96149
    blanket = ddpbayes.audit(model, "count", "laplace", "pdp", epsilon=1.0, targets=[182], known=[181, 183])
    assert blanket.leakage == pytest.approx(1.0, abs=1e-12)


def test_cost_of_a_shared_known_set_is_one_pass(models_dir):
    """idp of every day of a long chain shares one elimination pass: its estimate is not n passes (the audit
    of 10,000 days was refused as 36 hours), while n distinct known sets still cost n passes."""
    from ddpbayes.auditing.cost import check_adversaries
    from ddpbayes.limits import MAX_SECONDS
    from ddpbayes.notions import IDP

    n = 3000
    model = ddpbayes.load_model(models_dir / "markov_chain.py", {"n": n})
    problem = _problem(model, "count", Laplace(1.0), [Adversary(0)])
    shared, apart = STRUCTURED.seconds(problem, n, 1), STRUCTURED.seconds(problem, n, n)
    pass_s = STRUCTURED.seconds_per_adversary(problem)
    assert apart - shared == pytest.approx((n - 1) * pass_s)
    assert shared < MAX_SECONDS
    check_adversaries(STRUCTURED, problem, IDP, list(range(n)), None, n, 1 << 20, False)  # not refused
