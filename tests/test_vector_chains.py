"""Chains and HMMs written as ONE vector variable (issue #29, DESIGN §2.1b): pymc-extras'
`DiscreteMarkovChain`, and element-wise emissions that read it element by element. Expected
values come from joints enumerated here in numpy (init · Π P entries, Σ over the hidden chain
of Π emissions), tests/bruteforce.py's dense-grid leakage, and a log-space forward–backward
recursion for a chain too long to enumerate; the same chains written as loops of scalar
Categoricals agree on both exact engines."""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from bruteforce import leak_bruteforce
from pymc.pytensorf import collect_default_updates
from bruteforce import logsumexp  # scipy's, without its per-call overhead

import ddpbayes
from ddpbayes import DependenceModel
from ddpbayes.engines.exact import ExactEngine
from ddpbayes.engines.structured import StructuredEngine
from ddpbayes.engines.terms import model_slots, tabulate
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Geometric, Laplace
from ddpbayes.model.chains import aligned_parents, chain
from ddpbayes.problem import Adversary, Problem
from ddpbayes.queries import parse_query
from ddpbayes.settings import RunSettings

pmx = pytest.importorskip("pymc_extras.distributions")

STRUCTURED, EXACT = StructuredEngine(), ExactEngine()


def _problem(model, query="sum", mechanism=None, adversaries=()) -> Problem:
    return Problem(model, parse_query(query), mechanism or Laplace(1.0), tuple(adversaries), RunSettings())


def _adversaries(n: int, known_sets=((), (1,), (-1, 2))) -> list[Adversary]:
    return [Adversary(i, frozenset((i + k) % n for k in known) - {i}) for i in range(n) for known in known_sets]


def _random_chain(rng, k: int) -> tuple[np.ndarray, np.ndarray]:
    p0 = rng.uniform(0.05, 1.0, k)
    P = rng.uniform(0.05, 1.0, (k, k))
    return p0 / p0.sum(), P / P.sum(axis=1, keepdims=True)


def _chain_joint(p0, P, n: int) -> np.ndarray:
    """P(x) = p0[x0] Π_k P[x_{k-1}, x_k], state by state."""
    k = len(p0)
    joint = np.zeros((k,) * n)
    for xs in itertools.product(range(k), repeat=n):
        joint[xs] = p0[xs[0]] * np.prod([P[xs[j - 1], xs[j]] for j in range(1, n)])
    return joint


def _vector_chain(p0, P, n: int) -> pm.Model:
    with pm.Model() as m:
        pmx.DiscreteMarkovChain("x", P=P, init_dist=pm.Categorical.dist(p=p0), shape=(n,))
    return m


def _loop_chain(p0, P, n: int) -> DependenceModel:
    with pm.Model() as m:
        prev = pm.Categorical("x0", p=p0)
        for day in range(1, n):
            prev = pm.Categorical(f"x{day}", p=pt.as_tensor_variable(P)[prev])
    return DependenceModel(m, [f"x{day}" for day in range(n)])


def _assert_leakages(got, want, tol: float) -> None:
    assert [r.adversary for r in got] == [r.adversary for r in want]
    for g, w in zip(got, want):
        assert g.value == pytest.approx(w.value, rel=tol, abs=tol), g.adversary


# --------------------------------------------------------------------------- DiscreteMarkovChain


@pytest.mark.parametrize("seed, k, n", [(0, 2, 5), (1, 3, 4), (2, 3, 5), (3, 4, 3)])
def test_chain_matches_hand_enumeration(seed, k, n):
    """Random (p0, P): the exact and structured engines against the dense-grid leakage of the
    enumerated joint init · Π P entries."""
    p0, P = _random_chain(np.random.default_rng(seed), k)
    model = DependenceModel(_vector_chain(p0, P, n), "x")
    assert [str(d) for d in model.domains] == ["{" + ", ".join(map(str, range(k))) + "}"] * n
    joint, values = _chain_joint(p0, P, n), [np.arange(k, dtype=float)] * n
    weights = [1, -2, 0, 3, 1][:n]
    problem = _problem(model, "linear:" + ",".join(map(str, weights)), Laplace(0.9), _adversaries(n))
    got = EXACT.leakage(problem)
    for r in got:
        want = leak_bruteforce(joint, values, weights, 0.9, r.adversary.target, r.adversary.known)
        assert r.value == pytest.approx(want, abs=1e-9), r.adversary
    _assert_leakages(STRUCTURED.leakage(problem), got, 1e-12)


@pytest.mark.parametrize("seed", [4, 5])
def test_chain_equals_the_loop_of_categoricals(seed):
    """The vector chain and the same chain as n scalar Categoricals: equal on both engines."""
    p0, P = _random_chain(np.random.default_rng(seed), 3)
    vector, loop = DependenceModel(_vector_chain(p0, P, 5), "x"), _loop_chain(p0, P, 5)
    for query, mech in (("sum", Laplace(1.3)), ("count", Geometric(0.8))):
        want = EXACT.leakage(_problem(loop, query, mech, _adversaries(5)))
        for engine in (EXACT, STRUCTURED):
            _assert_leakages(engine.leakage(_problem(vector, query, mech, _adversaries(5))), want, 1e-12)


def test_chain_terms_are_per_step_tables():
    """n = 6: one table over x[0] (log p0) and five over (x[k], x[k-1]) holding log P[x[k-1], x[k]]."""
    p0, P = _random_chain(np.random.default_rng(6), 3)
    model = DependenceModel(_vector_chain(p0, P, 6), "x")
    slots = model_slots(model, lambda rv: np.arange(3))
    tables = tabulate(model, slots, 10**6)
    assert [ids for ids, _ in tables] == [[0], [1, 0], [2, 1], [3, 2], [4, 3], [5, 4]]
    assert np.allclose(tables[0][1], np.log(p0), rtol=0, atol=1e-15)
    for _, table in tables[1:]:
        assert np.allclose(table.reshape(3, 3), np.log(P).T, rtol=0, atol=1e-15)  # rows: x[k]; columns: x[k-1]


def test_transition_that_depends_on_a_latent_regime():
    """P switched by a latent z ~ Bernoulli(0.3): the step terms read z; the exact engine against
    Σ_z P(z) init · Π P_z entries."""
    rng = np.random.default_rng(7)
    p0, P1 = _random_chain(rng, 2)
    _, P0 = _random_chain(rng, 2)
    n = 5
    with pm.Model() as m:
        z = pm.Bernoulli("z", 0.3)
        pmx.DiscreteMarkovChain("x", P=pt.switch(z, P1, P0), init_dist=pm.Categorical.dist(p=p0), shape=(n,))
    model = DependenceModel(m, "x")
    joint = 0.3 * _chain_joint(p0, P1, n) + 0.7 * _chain_joint(p0, P0, n)
    problem = _problem(model, "count", Laplace(1.0), _adversaries(n))
    for r in EXACT.leakage(problem):
        want = leak_bruteforce(joint, [np.array([0.0, 1.0])] * n, [1] * n, 1.0, r.adversary.target, r.adversary.known)
        assert r.value == pytest.approx(want, abs=1e-9), r.adversary
    _assert_leakages(STRUCTURED.leakage(problem), EXACT.leakage(problem), 1e-12)


def _log_count_law(p0, P, n: int, targets) -> dict[int, np.ndarray]:
    """log P(X_i = t, count = s) of a binary chain by a log-space forward–backward recursion with a
    count axis (plain numpy; the tails underflow in linear space at n = 1000)."""
    lp0, lP = np.log(p0), np.log(P)
    alpha = np.full((n, 2, n + 1), -np.inf)  # log P(X_0..X_k, X_k = x, count so far = s)
    alpha[0, 0, 0], alpha[0, 1, 1] = lp0
    for k in range(1, n):
        for x in (0, 1):
            moved = np.logaddexp(alpha[k - 1, 0] + lP[0, x], alpha[k - 1, 1] + lP[1, x])
            alpha[k, x] = np.concatenate([[-np.inf], moved[:-1]]) if x else moved
    beta = np.full((n, 2, n + 1), -np.inf)  # log P(count of X_{k+1}.. = s | X_k = x)
    beta[n - 1, :, 0] = 0.0
    for k in range(n - 2, -1, -1):
        shifted = np.concatenate([[-np.inf], beta[k + 1, 1, :-1]])
        for x in (0, 1):
            beta[k, x] = np.logaddexp(lP[x, 0] + beta[k + 1, 0], lP[x, 1] + shifted)
    out = {}
    for i in targets:
        law = np.full((2, n + 1), -np.inf)
        for t in (0, 1):
            pairs = alpha[i, t][:, None] + beta[i, t][None, :]  # (a, b) -> s = a + b
            for s in range(n + 1):
                law[t, s] = logsumexp(np.diagonal(pairs[:, ::-1], offset=n - s)) if s <= n else -np.inf
        out[i] = law
    return out


def _idp_from_log_law(law: np.ndarray, b: float) -> float:
    """max over y in {0..n} and y -> ±inf of |log L(y|1) - log L(y|0)| for Laplace(b), in log space."""
    s = np.arange(law.shape[1])
    logw = law - logsumexp(law, axis=1, keepdims=True)
    kernel = np.concatenate([-np.abs(s[:, None] - s[None, :]) / b, [s / b], [-s / b]])
    log_l = logsumexp(logw[:, None, :] + kernel[None], axis=2)
    return float(np.abs(log_l[1] - log_l[0]).max())


def test_thousand_day_chain_against_log_space_forward_backward():
    """n = 1000 (stay probability 0.4 < 0.5: P(count = s)'s tails underflow in linear space):
    the structured engine against the log-space recursion above."""
    n, b = 1000, 1.0
    p0, P = np.array([0.5, 0.5]), np.array([[0.4, 0.6], [0.25, 0.75]])
    model = DependenceModel(_vector_chain(p0, P, n), "x")
    targets = [0, 1, 500, 999]
    laws = _log_count_law(p0, P, n, targets)
    got = STRUCTURED.leakage(_problem(model, "count", Laplace(b), [Adversary(i) for i in targets]))
    for r in got:
        assert r.value == pytest.approx(_idp_from_log_law(laws[r.adversary.target], b), abs=1e-10)


# --------------------------------------------------------------------------- HMMs


def _hmm(kind: str, n: int, observed=None):
    """A hidden 2-state chain x and emissions y_k | x_k: Bernoulli(switch) or Categorical(E[x])."""
    p0, P = np.array([0.6, 0.4]), np.array([[0.8, 0.2], [0.3, 0.7]])
    emission = np.array([[0.8, 0.2], [0.1, 0.9]]) if kind == "bernoulli" else np.array([[0.7, 0.2, 0.1],
                                                                                      [0.1, 0.3, 0.6]])
    with pm.Model() as m:
        x = pmx.DiscreteMarkovChain("x", P=P, init_dist=pm.Categorical.dist(p=p0), shape=(n,))
        if kind == "bernoulli":
            pm.Bernoulli("y", p=pt.switch(x, 0.9, 0.2), shape=n, observed=observed)
        else:
            pm.Categorical("y", p=pt.as_tensor_variable(emission)[x], shape=n, observed=observed)
    return m, p0, P, emission


@pytest.mark.parametrize("kind", ["bernoulli", "categorical"])
def test_hmm_emissions_as_tuples(kind):
    """Tuples y, hidden chain x (latent): P(y) = Σ_x p0[x0] Π P[x_{k-1}, x_k] Π E[x_k, y_k]."""
    n = 4
    m, p0, P, E = _hmm(kind, n)
    model = DependenceModel(m, "y")
    m_out = E.shape[1]
    joint = np.zeros((m_out,) * n)
    hidden = _chain_joint(p0, P, n)
    for xs in itertools.product(range(2), repeat=n):
        for ys in itertools.product(range(m_out), repeat=n):
            joint[ys] += hidden[xs] * np.prod([E[xs[k], ys[k]] for k in range(n)])
    problem = _problem(model, "sum", Laplace(1.0), _adversaries(n))
    got = EXACT.leakage(problem)
    for r in got:
        want = leak_bruteforce(joint, [np.arange(m_out, dtype=float)] * n, [1] * n, 1.0, r.adversary.target,
                               r.adversary.known)
        assert r.value == pytest.approx(want, abs=1e-9), r.adversary
    _assert_leakages(STRUCTURED.leakage(problem), got, 1e-12)


@pytest.mark.parametrize("kind", ["bernoulli", "categorical"])
def test_hmm_emission_term_reads_one_hidden_day(kind):
    """Emission k's table is over (y[k], x[k]) only: a 300-day HMM is a chain of small factors."""
    m, *_ = _hmm(kind, 300)
    model = DependenceModel(m, "y")
    problem = _problem(model, "sum", Laplace(1.0), [Adversary(150)])
    assert STRUCTURED.supports(problem) is None
    assert np.isfinite(STRUCTURED.leakage(problem)[0].value)
    y = m["y"]
    [(parent, index)] = aligned_parents(y, [m["x"]]).items()
    assert parent is m["x"] and np.array_equal(index, np.arange(300))  # element k reads x[k]


def test_hmm_observed_emissions():
    """Observed records, the chain's days as tuples: P(x | y) ∝ p0[x0] Π P Π E[x_k, y_k]."""
    n, data = 4, np.array([1, 0, 0, 1])
    m, p0, P, E = _hmm("bernoulli", n, observed=data)
    model = DependenceModel(m, "x")
    joint = _chain_joint(p0, P, n)
    for xs in itertools.product(range(2), repeat=n):
        joint[xs] *= np.prod([E[xs[k], data[k]] for k in range(n)])
    joint /= joint.sum()
    problem = _problem(model, "count", Laplace(1.0), _adversaries(n))
    for r in EXACT.leakage(problem):
        want = leak_bruteforce(joint, [np.array([0.0, 1.0])] * n, [1] * n, 1.0, r.adversary.target, r.adversary.known)
        assert r.value == pytest.approx(want, abs=1e-9), r.adversary
    _assert_leakages(STRUCTURED.leakage(problem), EXACT.leakage(problem), 1e-12)


def test_parents_read_otherwise_are_whole_vectors():
    """Element k reading x[k-1] (a shift), x's sum or x reversed is not element-wise: whole-vector
    parents, and the exact engine still matches the enumeration."""
    x = pt.lvector("x")
    for p in (pt.switch(x[::-1], 0.9, 0.2), pt.switch(x.sum(), 0.9, 0.2) + pt.zeros(3),
              pt.switch(pt.concatenate([[0], x[:-1]]), 0.9, 0.2)):
        with pm.Model():
            y = pm.Bernoulli("y", p=pt.as_tensor_variable(p), shape=3)
        assert not aligned_parents(y, [x]), p
    n = 4
    p0, P = np.array([0.5, 0.5]), np.array([[0.7, 0.3], [0.4, 0.6]])
    with pm.Model() as m:
        h = pmx.DiscreteMarkovChain("x", P=P, init_dist=pm.Categorical.dist(p=p0), shape=(n,))
        pm.Bernoulli("y", p=pt.switch(pt.concatenate([pt.zeros(1, dtype="int64"), h[:-1]]), 0.9, 0.2), shape=n)
    model = DependenceModel(m, "y")
    joint = np.zeros((2,) * n)
    hidden = _chain_joint(p0, P, n)
    for xs in itertools.product(range(2), repeat=n):
        rates = [0.2] + [0.9 if xs[k - 1] else 0.2 for k in range(1, n)]
        for ys in itertools.product(range(2), repeat=n):
            joint[ys] += hidden[xs] * np.prod([r if v else 1 - r for r, v in zip(rates, ys)])
    for r in EXACT.leakage(_problem(model, "count", Laplace(1.0), _adversaries(n, ((), (1,))))):
        want = leak_bruteforce(joint, [np.array([0.0, 1.0])] * n, [1] * n, 1.0, r.adversary.target, r.adversary.known)
        assert r.value == pytest.approx(want, abs=1e-9), r.adversary


def test_dependence_sets_match_exact():
    """The per-step terms as a directed graph (x[k-1] -> x[k], x[k] -> y[k]): the structured
    engine's dependence sets equal the exact engine's, for the chain and the HMM's records."""
    hmm, *_ = _hmm("bernoulli", 5)
    p0, P = _random_chain(np.random.default_rng(12), 2)
    for model in (DependenceModel(_vector_chain(p0, P, 5), "x"), DependenceModel(hmm, "y")):
        problem = _problem(model)
        assert STRUCTURED.dependence_sets(problem) == EXACT.dependence_sets(problem)


# --------------------------------------------------------------------------- a scan CustomDist


def _scan_chain(n: int, initial: int, P, kind: str = "categorical") -> pm.Model:
    """PyMC's "time series with CustomDist and scan" pattern: x[k] ~ step(x[k-1]), x[-1] = `initial`."""

    def dist(P, size):
        def step(prev, P):
            if kind == "categorical":
                draw = pm.Categorical.dist(p=P[prev])
            else:
                draw = pm.Bernoulli.dist(p=pt.switch(prev, P[1, 1], P[0, 1]))
            return draw, collect_default_updates([draw])

        xs, _ = pytensor.scan(step, outputs_info=[pt.constant(initial, dtype="int64")], non_sequences=[P],
                              n_steps=n, strict=True)
        return xs

    with pm.Model() as m:
        pm.CustomDist("x", P, dist=dist, dtype="int64", shape=(n,))
    return m


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("seed, k, kind", [(8, 3, "categorical"), (9, 2, "categorical"), (10, 2, "bernoulli")])
def test_scan_chain_matches_hand_enumeration(seed, k, kind):
    """x[0] ~ P[initial], x[k] ~ P[x[k-1]]: both engines against the enumerated joint, and the
    per-step tables."""
    n, initial = 4, 1
    _, P = _random_chain(np.random.default_rng(seed), k)
    model = DependenceModel(_scan_chain(n, initial, P, kind), "x")
    tables = tabulate(model, model_slots(model, lambda rv: np.arange(k)), 10**6)
    assert [ids for ids, _ in tables] == [[0], [1, 0], [2, 1], [3, 2]]
    joint, values = _chain_joint(P[initial], P, n), [np.arange(k, dtype=float)] * n
    problem = _problem(model, "sum", Laplace(1.1), _adversaries(n))
    got = EXACT.leakage(problem)
    for r in got:
        want = leak_bruteforce(joint, values, [1] * n, 1.1, r.adversary.target, r.adversary.known)
        assert r.value == pytest.approx(want, abs=1e-9), r.adversary
    _assert_leakages(STRUCTURED.leakage(problem), got, 1e-12)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_scan_chain_with_a_latent_transition():
    """The scan's non-sequence P switched by a latent z ~ Bernoulli(0.4): Σ_z P(z) Π P_z entries."""
    rng = np.random.default_rng(11)
    (_, P1), (_, P0) = _random_chain(rng, 2), _random_chain(rng, 2)
    n = 4

    def dist(P, size):
        def step(prev, P):
            draw = pm.Categorical.dist(p=P[prev])
            return draw, collect_default_updates([draw])

        xs, _ = pytensor.scan(step, outputs_info=[pt.constant(0, dtype="int64")], non_sequences=[P], n_steps=n,
                              strict=True)
        return xs

    with pm.Model() as m:
        z = pm.Bernoulli("z", 0.4)
        pm.CustomDist("x", pt.switch(z, P1, P0), dist=dist, dtype="int64", shape=(n,))
    model = DependenceModel(m, "x")
    joint = 0.4 * _chain_joint(P1[0], P1, n) + 0.6 * _chain_joint(P0[0], P0, n)
    problem = _problem(model, "count", Laplace(1.0), _adversaries(n))
    got = EXACT.leakage(problem)
    for r in got:
        want = leak_bruteforce(joint, [np.array([0.0, 1.0])] * n, [1] * n, 1.0, r.adversary.target, r.adversary.known)
        assert r.value == pytest.approx(want, abs=1e-9), r.adversary
    _assert_leakages(STRUCTURED.leakage(problem), got, 1e-12)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_other_scans_stay_one_table():
    """A step that draws more than x[k] (a Beta inside the step) is not read as a chain."""

    def dist(size):
        def step(prev):
            rate = pm.Beta.dist(2.0, 2.0)
            draw = pm.Bernoulli.dist(p=pt.switch(prev, rate, 0.5))
            return draw, collect_default_updates([draw])

        xs, _ = pytensor.scan(step, outputs_info=[pt.constant(0, dtype="int64")], n_steps=3, strict=True)
        return xs

    with pm.Model():
        x = pm.CustomDist("x", dist=dist, dtype="int64", shape=(3,))
    assert chain(x) is None


# --------------------------------------------------------------------------- refusals, the shipped model


def test_refusals_name_the_reason():
    P = np.array([[0.5, 0.5], [0.5, 0.5]])
    with pm.Model() as m:
        init = pm.Categorical.dist(p=[0.5, 0.5], shape=(2,))
        pmx.DiscreteMarkovChain("x", P=np.stack([P, P]), init_dist=init, n_lags=2, shape=(5,))
    with pytest.raises(InputError, match="n_lags=2; only first-order"):
        DependenceModel(m, "x")
    with pm.Model() as m:
        pmx.DiscreteMarkovChain("x", P=np.array([[0.5, 0.6], [0.5, 0.5]]),
                                init_dist=pm.Categorical.dist(p=[0.5, 0.5]), shape=(3,))
    with pytest.raises(InputError, match="rejects its own parameters"):
        EXACT.leakage(_problem(DependenceModel(m, "x"), "count", Laplace(1.0), [Adversary(0)]))


def test_shipped_vector_chain(models_dir):
    """models/vector_chain.py's documented defaults, and equality with categorical_chain.py."""
    model = ddpbayes.load_model(models_dir / "vector_chain.py")
    got = EXACT.leakage(_problem(model, "sum", Laplace(1.0), [Adversary(i) for i in range(5)]))
    assert [round(r.value, 5) for r in got] == [3.30958, 4.24114, 4.44814, 4.24114, 3.30958]
    P = np.full((3, 3), 0.15) + np.eye(3) * 0.55  # the documented figures, by brute force over the 243 states
    joint = _chain_joint(np.full(3, 1 / 3), P, 5)
    for r in got:
        want = leak_bruteforce(joint, [np.arange(3, dtype=float)] * 5, [1] * 5, 1.0, r.adversary.target, frozenset())
        assert r.value == pytest.approx(want, abs=1e-10)
    loop = ddpbayes.load_model(models_dir / "categorical_chain.py", {"n": 4, "k": 3, "p_stay": 0.6})
    vector = ddpbayes.load_model(models_dir / "vector_chain.py", {"n": 4, "k": 3, "p_stay": 0.6})
    advs = _adversaries(4)
    _assert_leakages(STRUCTURED.leakage(_problem(vector, "sum", Laplace(0.7), advs)),
                     EXACT.leakage(_problem(loop, "sum", Laplace(0.7), advs)), 1e-12)
