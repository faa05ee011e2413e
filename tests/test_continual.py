"""Continual release on chains (issue 13, DESIGN §2.1c): the identity query with randomized
response, Laplace or geometric noise on every tuple, against references written here from the
definition (DESIGN §1): enumeration of every configuration and every output, Cao et al.'s
temporal privacy leakage recursion (ICDE 2017), closed forms, and the exact engine.

Most chains are built directly as `FactorGraph`s from numpy tables (fast, any slot order, any
unnormalised potentials); the `Problem`'s model then only names the n tuples."""

from __future__ import annotations

import itertools
import math
import pickle
from dataclasses import replace

import numpy as np
import pymc as pm
import pytest

import ddpbayes
from ddpbayes import DependenceModel
from ddpbayes.engines.base import AdversaryLeakage, Outputs, Witness
from ddpbayes.engines.exact import ExactEngine
from ddpbayes.engines.structured.continual import continual_leakage, continual_reason
from ddpbayes.engines.structured.graph import FactorGraph, factor_graph
from ddpbayes.engines.structured.potential import Potential
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Geometric, Laplace, Mechanism, RandomizedResponse
from ddpbayes.problem import Adversary, Problem
from ddpbayes.queries import parse_query

LIMIT = 10**7

# --------------------------------------------------------------------------- building chains


def _stand_in(n: int) -> DependenceModel:
    """A model that only names n tuples x[0..n-1] (the law is the FactorGraph's)."""
    with pm.Model() as m:
        pm.Bernoulli("x", 0.5, shape=n)
    return DependenceModel(m, tuples="x")


def _problem(model: DependenceModel, mechanism: Mechanism, adversaries, query: str = "identity") -> Problem:
    return Problem(model, parse_query(query), mechanism, tuple(adversaries))


def _log(table) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(table, dtype=float))


def _unary(slot: int, law) -> Potential:
    return Potential((slot,), _log(law).reshape(-1, 1), 0)


def _pair(slot_a: int, slot_b: int, table, flip: bool = False) -> Potential:
    """table[x_a, x_b] as a factor, stored with its scope in either order."""
    table = np.asarray(table, dtype=float)
    if flip:
        return Potential((slot_b, slot_a), _log(table.T)[..., None], 0)
    return Potential((slot_a, slot_b), _log(table)[..., None], 0)


def _graph(n: int, factors: list[Potential], values=(0.0, 1.0)) -> FactorGraph:
    return FactorGraph([2] * n, [np.array(values, dtype=float)] * n, factors)


def _markov(order, init, transitions) -> list[Potential]:
    """A Markov chain along `order` (slots): P(x_order[0]) = init, P(x_order[k+1] | x_order[k]) = transitions[k]."""
    return [_unary(order[0], init)] + [_pair(a, b, tr) for a, b, tr in zip(order, order[1:], transitions)]


def _random_law(rng: np.random.Generator) -> np.ndarray:
    """A law on {0, 1}: deterministic (30%), or random with both values possible."""
    if rng.random() < 0.3:
        return np.eye(2)[rng.integers(2)]
    return rng.dirichlet([1.0, 1.0])


def _random_chain(rng: np.random.Generator, n: int) -> list[Potential]:
    """A random binary chain along a random permutation of the slots: a Markov chain with random
    initial law and transition rows (zeros and deterministic rows included); some links broken
    (a union of paths: independent pieces); half the time extra unnormalised positive potentials
    on the nodes and links (a chain MRF); factor scopes in random orientation."""
    order = [int(s) for s in rng.permutation(n)]
    factors = [_unary(order[0], _random_law(rng))]
    for a, b in itertools.pairwise(order):
        if rng.random() < 0.15:
            factors.append(_unary(b, _random_law(rng)))
        else:
            factors.append(_pair(a, b, [_random_law(rng), _random_law(rng)], flip=bool(rng.random() < 0.5)))
    if rng.random() < 0.5:
        factors += [_unary(s, rng.uniform(0.2, 3.0, 2)) for s in order if rng.random() < 0.5]
        factors += [_pair(a, b, rng.uniform(0.2, 3.0, (2, 2)), flip=bool(rng.random() < 0.5))
                    for a, b in itertools.pairwise(order) if rng.random() < 0.5]
    return factors


def _random_adversaries(rng: np.random.Generator, n: int, count: int) -> list[Adversary]:
    out = []
    for _ in range(count):
        target = int(rng.integers(n))
        others = [k for k in range(n) if k != target]
        size = int(rng.integers(0, len(others) + 1)) if rng.random() < 0.7 else 0
        out.append(Adversary(target, frozenset(int(k) for k in rng.choice(others, size, replace=False))))
    return out


# --------------------------------------------------------------------------- the brute-force reference


def _joint(graph: FactorGraph) -> np.ndarray:
    """P(x) over the value indices of every slot: the product of exp(factor) over all 2^n
    configurations, normalised."""
    n = graph.slots
    joint = np.zeros((2,) * n)
    for x in itertools.product(range(2), repeat=n):
        joint[x] = math.exp(sum(float(f.table[tuple(x[k] for k in f.scope)][0]) for f in graph.factors))
    return joint / joint.sum()


def _log_kernel(mechanism: Mechanism):
    """log p_M(y | x) for one coordinate, from each mechanism's definition (constants dropped
    where they are the same for every x: they cancel in likelihood ratios)."""
    if isinstance(mechanism, RandomizedResponse):
        keep, flip = -math.log1p(math.exp(-mechanism.epsilon)), -math.log1p(math.exp(mechanism.epsilon))
        return lambda y, x: np.where(y == x, keep, flip)
    return lambda y, x: -np.abs(y - x) / mechanism.scale  # Laplace(b); geometric: alpha^|y-x|, alpha = e^(-1/b)


def _outputs(mechanism: Mechanism, values) -> list[float]:
    """Outputs of one coordinate on which the sup over y is attained.

    Randomized response: its whole output space {0, 1}. Laplace and geometric noise on values
    v0 < v1: fix every coordinate but y_j; then L(y | t, x_K) = A_t K(y_j|v0) + B_t K(y_j|v1)
    with A_t, B_t >= 0 free of y_j, so the log-ratio for (t, t') is a monotone (Möbius) function
    of k = K(y_j|v1)/K(y_j|v0) = e^{(|y_j - v0| - |y_j - v1|)/b}, which is monotone in y_j on
    [v0, v1] and constant beyond: the sup over y_j is attained at y_j = v0 or v1 (both integers
    for geometric noise, so both are outputs). Replacing the coordinates one at a time never
    lowers the objective, so the sup over all y is the max over {v0, v1}^n.
    `test_denser_output_grid_changes_nothing` checks this on a denser grid."""
    return [0.0, 1.0] if isinstance(mechanism, RandomizedResponse) else sorted(values)


def _likelihoods(joint, values, log_k, ys, target, known, known_idx):
    """{t: log L(y | t, x_K) for y in ys} over the values t with P(t, x_K) > 0."""
    n = joint.ndim
    states = np.array(list(itertools.product(range(2), repeat=n)))
    p = joint.reshape(-1)
    sel = (p > 0) & np.all(states[:, known] == np.asarray(known_idx, dtype=int), axis=1)
    x = np.asarray(values)[states]
    out = {}
    for t in (0, 1):
        rows = sel & (states[:, target] == t)
        if p[rows].sum() > 0:
            lk = log_k(ys[:, None, :], x[None, rows, :]).sum(axis=2) + np.log(p[rows])[None]
            peak = lk.max(axis=1, keepdims=True)
            out[t] = np.log(np.exp(lk - peak).sum(axis=1)) + peak[:, 0] - math.log(p[rows].sum())
    return out


def _brute_leak(joint, values, mechanism, target, known, outputs=None) -> float:
    """leak(target, known) (DESIGN §1): max over x_K with P(x_K) > 0, t != t' with P(t, x_K) > 0
    and every y in the product of per-coordinate outputs of log L(y|t,x_K) - log L(y|t',x_K)."""
    n, known = joint.ndim, sorted(known)
    axes = outputs or [_outputs(mechanism, values)] * n
    ys = np.array(list(itertools.product(*axes)))
    best = 0.0
    for known_idx in itertools.product(range(2), repeat=len(known)):
        ll = _likelihoods(joint, values, _log_kernel(mechanism), ys, target, known, known_idx)
        if len(ll) == 2:
            best = max(best, float(np.max(ll[1] - ll[0])), float(np.max(ll[0] - ll[1])))
    return best


def _check_witness(joint, values, mechanism, result) -> None:
    """The witness attains the value: x_K of positive probability, t and t' possible given it,
    and log L(y|t,x_K) - log L(y|t',x_K) at the witness's y equals the leakage."""
    w = result.witness
    known = sorted(result.adversary.known)
    assert sorted(w.known_values) == known
    idx = [values.index(w.known_values[k]) for k in known]
    ys = np.array([w.y])
    assert np.all(np.isfinite(ys))
    ll = _likelihoods(joint, values, _log_kernel(mechanism), ys, result.adversary.target, known, idx)
    t, t_prime = values.index(w.t), values.index(w.t_prime)
    assert t in ll and t_prime in ll
    at_witness = 0.0 if t == t_prime else float(ll[t][0] - ll[t_prime][0])
    assert at_witness == pytest.approx(result.value, abs=1e-12)


# --------------------------------------------------------------------------- (1) brute force


MECHANISMS = [
    (RandomizedResponse(0.7), (0.0, 1.0)),
    (RandomizedResponse(1.9), (0.0, 1.0)),
    (Laplace(0.8), (0.0, 1.0)),
    (Laplace(1.7), (2.5, -1.0)),
    (Geometric(1.2), (0.0, 1.0)),
    (Geometric(0.6), (3.0, 1.0)),
]


@pytest.mark.parametrize("seed", range(42))
def test_random_chains_match_bruteforce(seed):
    """Random binary chains (n = 2..8, random slot order, zeros and deterministic rows, broken
    links, unnormalised potentials), random targets and known sets: value to 1e-12 and witness."""
    rng = np.random.default_rng(seed)
    n = 2 + seed % 7
    mechanism, values = MECHANISMS[seed % len(MECHANISMS)]
    graph = _graph(n, _random_chain(rng, n), values)
    problem = _problem(_stand_in(n), mechanism, _random_adversaries(rng, n, 8))
    assert continual_reason(problem, graph) is None
    joint = _joint(graph)
    results = continual_leakage(problem, graph)
    assert [r.adversary for r in results] == list(problem.adversaries)
    for r in results:
        want = _brute_leak(joint, list(values), mechanism, r.adversary.target, r.adversary.known)
        assert r.value == pytest.approx(want, abs=1e-12), r.adversary
        _check_witness(joint, list(values), mechanism, r)


@pytest.mark.parametrize("seed", range(4))
def test_denser_output_grid_changes_nothing(seed):
    """Laplace: a grid with points between and beyond the values gives the same sup as {v0, v1}."""
    rng = np.random.default_rng(100 + seed)
    n, values, mechanism = 4, (-0.5, 1.5), Laplace(0.9)
    graph = _graph(n, _random_chain(rng, n), values)
    joint = _joint(graph)
    dense = [[-3.0, -0.5, 0.1, 0.5, 1.2, 1.5, 4.0]] * n
    for adv in _random_adversaries(rng, n, 4):
        coarse = _brute_leak(joint, list(values), mechanism, adv.target, adv.known)
        assert _brute_leak(joint, list(values), mechanism, adv.target, adv.known, dense) == pytest.approx(coarse, abs=1e-12)
        assert continual_leakage(_problem(_stand_in(n), mechanism, [adv]), graph)[0].value == pytest.approx(coarse, abs=1e-12)


def _scrambled_pymc_chain(days: list[int], init: float, up, stay):
    """Days d0..d_{n-1} a Markov chain in PyMC (P(d0 = 1) = init, P(d_k = 1 | d_{k-1} = 0) = up[k-1],
    P(d_k = 1 | d_{k-1} = 1) = stay[k-1]); slot k is day days[k], so the path is not slot order.
    Returns the model and its graph's joint over slots, built by hand."""
    n = len(days)
    with pm.Model() as m:
        prev = pm.Bernoulli("d0", init)
        for k in range(1, n):
            prev = pm.Bernoulli(f"d{k}", pm.math.switch(prev, stay[k - 1], up[k - 1]))
    model = DependenceModel(m, tuples=[f"d{day}" for day in days])
    by_day = np.zeros((2,) * n)
    for x in itertools.product(range(2), repeat=n):
        pr = init if x[0] else 1 - init
        for k in range(1, n):
            p1 = stay[k - 1] if x[k - 1] else up[k - 1]
            pr *= p1 if x[k] else 1 - p1
        by_day[x] = pr
    return model, np.transpose(by_day, days)


@pytest.mark.parametrize("days, init, up, stay", [
    ([2, 0, 4, 1, 3], 0.3, [0.2, 0.0, 0.5, 0.9], [0.7, 1.0, 0.4, 0.1]),
    ([3, 1, 0, 2], 1.0, [0.6, 1.0, 0.3], [0.0, 0.8, 0.5]),
])
def test_pymc_chain_in_scrambled_order_matches_exact_engine(days, init, up, stay):
    """The real factor graph of a PyMC chain whose tuples are listed out of path order: the exact
    engine (DESIGN §2.1) and the brute force agree with the recursion on every adversary."""
    model, joint = _scrambled_pymc_chain(days, init, up, stay)
    n = len(days)
    graph = factor_graph(model, LIMIT)
    advs = [Adversary(i, frozenset(k)) for i in range(n) for k in ((), ((i + 1) % n,), ((i + 2) % n, (i + 3) % n))]
    for mechanism in (RandomizedResponse(0.9), Laplace(1.1), Geometric(0.8)):
        problem = _problem(model, mechanism, advs)
        assert continual_reason(problem, graph) is None
        got, want = continual_leakage(problem, graph), ExactEngine().leakage(problem)
        for g, w in zip(got, want):
            assert g.value == pytest.approx(w.value, abs=1e-12), g.adversary
            assert g.value == pytest.approx(_brute_leak(joint, [0.0, 1.0], mechanism, g.adversary.target,
                                                        g.adversary.known), abs=1e-12)
            _check_witness(joint, [0.0, 1.0], mechanism, g)


# --------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("flip", [False, True])
def test_deterministic_chain(flip):
    """Every day equals day 0 (or alternates): y moves all n likelihood factors together, so
    idp = n eps for randomized response and n/b for Laplace on 0/1 values; a known day fixes the
    target (pdp 0, t = t')."""
    n, eps, b = 7, 0.8, 1.4
    step = [[0.0, 1.0], [1.0, 0.0]] if flip else [[1.0, 0.0], [0.0, 1.0]]
    order = [3, 0, 6, 1, 5, 2, 4]
    graph = _graph(n, _markov(order, [0.4, 0.6], [step] * (n - 1)))
    advs = [Adversary(i) for i in range(n)] + [Adversary(0, frozenset({4})), Adversary(2, frozenset({5, 6}))]
    for mechanism, full in ((RandomizedResponse(eps), n * eps), (Laplace(b), n / b)):
        got = continual_leakage(_problem(_stand_in(n), mechanism, advs), graph)
        assert [r.value for r in got[:n]] == pytest.approx([full] * n, abs=1e-12)
        for r in got[n:]:
            assert r.value == 0.0 and r.witness.t == r.witness.t_prime


def test_independent_tuples_leak_eps():
    """No links at all (n separate paths): every notion gives the mechanism's own eps (003 Thm. 1)."""
    n = 5
    graph = _graph(n, [_unary(k, [0.3 + 0.1 * k, 0.7 - 0.1 * k]) for k in range(n)])
    advs = [Adversary(i) for i in range(n)] + [Adversary(1, frozenset({0, 3}))]
    got = continual_leakage(_problem(_stand_in(n), RandomizedResponse(1.3), advs), graph)
    assert [r.value for r in got] == pytest.approx([1.3] * (n + 1), abs=1e-12)


# --------------------------------------------------------------------------- (2) Cao et al.'s TPL


def _loss(alpha: float, rows: np.ndarray) -> float:
    """Cao et al.'s L^B (L^F with the forward matrix) for two states: the max over ordered pairs
    of distinct rows q, d of the transition matrix and a state j of
    log((q_j e^alpha + 1 - q_j) / (d_j e^alpha + 1 - d_j))."""
    return max(math.log((q[j] * math.exp(alpha) + 1 - q[j]) / (d[j] * math.exp(alpha) + 1 - d[j]))
               for q, d in itertools.permutations(rows, 2) for j in range(2))


def _tpl(backward: list[np.ndarray], forward: list[np.ndarray], eps: float) -> list[float]:
    """Cao et al. (ICDE 2017): BPL_0 = eps, BPL_t = L^B(BPL_{t-1}) + eps with backward[t-1] =
    P^B_t = P(x_{t-1} | x_t) (rows x_t); FPL_{n-1} = eps, FPL_t = L^F(FPL_{t+1}) + eps with
    forward[t] = P^F_t = P(x_{t+1} | x_t); TPL_t = BPL_t + FPL_t - eps."""
    bpl, fpl = [eps], [eps]
    for back in backward:
        bpl.append(_loss(bpl[-1], back) + eps)
    for ahead in forward[::-1]:
        fpl.append(_loss(fpl[-1], ahead) + eps)
    return [b + f - eps for b, f in zip(bpl, fpl[::-1])]


def _backward(init, transitions) -> list[np.ndarray]:
    """P^B_t[x_t, x_{t-1}] = P(x_{t-1}) P(x_t | x_{t-1}) / P(x_t), from the marginals (Bayes)."""
    marginal, out = np.asarray(init, dtype=float), []
    for trans in transitions:
        pair = marginal[:, None] * trans  # P(x_{t-1}, x_t)
        marginal = pair.sum(axis=0)
        out.append((pair / marginal[None, :]).T)
    return out


@pytest.mark.parametrize("n", [4, 5, 6, 7, 8])
@pytest.mark.parametrize("stay", [0.9, 0.6, 0.25])
def test_tpl_anchor_symmetric(n, stay):
    """Symmetric chain, uniform start (so P^B = P^F = P): idp of every day equals Cao et al.'s
    TPL, for randomized response with eps and Laplace(1/eps) on 0/1 values alike; the brute force
    agrees."""
    eps = 0.6
    trans = np.array([[stay, 1 - stay], [1 - stay, stay]])
    order = list(range(n))[::-1] if n % 2 else list(range(n))
    graph = _graph(n, _markov(order, [0.5, 0.5], [trans] * (n - 1)))
    tpl = _tpl([trans] * (n - 1), [trans] * (n - 1), eps)
    want = [tpl[order.index(i)] for i in range(n)]
    for mechanism in (RandomizedResponse(eps), Laplace(1 / eps)):
        got = continual_leakage(_problem(_stand_in(n), mechanism, [Adversary(i) for i in range(n)]), graph)
        assert [r.value for r in got] == pytest.approx(want, abs=1e-12)
    joint = _joint(graph)
    assert want[n // 2] == pytest.approx(_brute_leak(joint, [0.0, 1.0], RandomizedResponse(eps), n // 2, ()), abs=1e-12)


def test_tpl_bounds_inhomogeneous_chains():
    """Transitions that change from day to day: Cao's L^B and L^F take the worst ratio on each side
    separately over a symmetric range [e^-BPL, e^BPL], so TPL is an upper bound on the exact idp
    (the brute force), strict for some chains."""
    rng, eps, gaps = np.random.default_rng(7), 0.7, []
    for _ in range(12):
        n = 5
        init, transitions = rng.dirichlet([1.0, 1.0]), [rng.dirichlet([1.0, 1.0], size=2) for _ in range(n - 1)]
        graph = _graph(n, _markov(list(range(n)), init, transitions))
        joint, mechanism = _joint(graph), RandomizedResponse(eps)
        got = continual_leakage(_problem(_stand_in(n), mechanism, [Adversary(i) for i in range(n)]), graph)
        for r, bound in zip(got, _tpl(_backward(init, transitions), transitions, eps)):
            assert r.value == pytest.approx(_brute_leak(joint, [0.0, 1.0], mechanism, r.adversary.target, ()), abs=1e-12)
            assert r.value <= bound + 1e-12
            gaps.append(bound - r.value)
    assert max(gaps) > 0.1


def test_tpl_anchor_thousand_days():
    """T = 1000 symmetric days, every target (the interval recursions run once for all)."""
    n, eps, stay = 1000, 0.3, 0.85
    trans = np.array([[stay, 1 - stay], [1 - stay, stay]])
    graph = _graph(n, _markov(list(range(n)), [0.5, 0.5], [trans] * (n - 1)))
    got = continual_leakage(_problem(_stand_in(n), RandomizedResponse(eps), [Adversary(i) for i in range(n)]), graph)
    assert [r.value for r in got] == pytest.approx(_tpl([trans] * (n - 1), [trans] * (n - 1), eps), abs=1e-9)
    assert all(len(r.witness.y) == n for r in got)


def test_witness_outputs_are_produced_when_read():
    """A continual release's y is an `Outputs`: produced once, when first read, equal to (and hashed,
    pickled and written to JSON as) the tuple; the witness still attains the leakage (brute force)."""
    calls = []

    def make():
        calls.append(1)
        return (0.0, 1.0, -2.5)

    y = Outputs(make)
    assert not calls and "not yet" in repr(y)
    assert y == (0.0, 1.0, -2.5) and (0.0, 1.0, -2.5) == y and hash(y) == hash((0.0, 1.0, -2.5))
    assert len(y) == 3 and y[2] == -2.5 and list(y) == [0.0, 1.0, -2.5] and len(calls) == 1
    assert pickle.loads(pickle.dumps(y)) == (0.0, 1.0, -2.5) and type(pickle.loads(pickle.dumps(y))) is tuple
    assert Witness(Adversary(0), {}, 0.0, 1.0, Outputs(make)).to_dict()["y"] == [0.0, 1.0, -2.5]
    assert Outputs(lambda a, b: (a, b), 1.5, 2.0) == (1.5, 2.0)
    w = Witness(Adversary(2, frozenset({1})), {1: 0.0}, 1.0, 0.0, (1.0,))
    quick, plain = AdversaryLeakage.exact(w.adversary, 0.5, w), AdversaryLeakage(w.adversary, 0.5, w)
    assert quick == plain and repr(quick) == repr(plain)
    assert pickle.loads(pickle.dumps(quick)) == plain and replace(quick, value=0.7) == replace(plain, value=0.7)
    assert (quick.ci, quick.reason, quick.diagnostics, quick.score, quick.profile) == (None,) * 5
    rng = np.random.default_rng(7)
    graph = _graph(6, _random_chain(rng, 6))
    joint, mechanism = _joint(graph), RandomizedResponse(0.7)
    got = continual_leakage(_problem(_stand_in(6), mechanism, [Adversary(i) for i in range(6)]), graph)
    assert all(isinstance(r.witness.y, Outputs) for r in got)
    for r in got:
        _check_witness(joint, [0.0, 1.0], mechanism, r)


def test_known_days_cut_a_long_chain():
    """T = 1000 days: the nearest known day on each side cuts the chain, so the leakage equals the
    brute force on the segment between them (its first day drawn from the stationary law)."""
    n, p01, p10 = 1000, 0.15, 0.35
    trans = np.array([[1 - p01, p01], [p10, 1 - p10]])
    stationary = [p10 / (p01 + p10), p01 / (p01 + p10)]
    graph = _graph(n, _markov(list(range(n)), stationary, [trans] * (n - 1)))
    segment = _joint(_graph(6, _markov(list(range(6)), stationary, [trans] * 5)))
    advs = [Adversary(600, frozenset({597, 602})), Adversary(600, frozenset({3, 597, 602, 990}))]
    for mechanism in (RandomizedResponse(0.5), Laplace(1.5)):
        want = _brute_leak(segment, [0.0, 1.0], mechanism, 3, (0, 5))
        got = continual_leakage(_problem(_stand_in(n), mechanism, advs), graph)
        assert [r.value for r in got] == pytest.approx([want, want], abs=1e-12)
        assert sorted(got[1].witness.known_values) == [3, 597, 602, 990]


# --------------------------------------------------------------------------- (3) refusals


def _star() -> FactorGraph:
    """x0 linked to x1, x2 and x3: a tree, not a chain."""
    return _graph(4, [_unary(0, [0.5, 0.5])] + [_pair(0, k, [[0.8, 0.2], [0.3, 0.7]]) for k in (1, 2, 3)])


def _cycle() -> FactorGraph:
    return _graph(3, [_pair(a, b, [[2.0, 1.0], [1.0, 2.0]]) for a, b in ((0, 1), (1, 2), (2, 0))])


def _triple() -> FactorGraph:
    """x2 depends on x0 and x1 through one factor."""
    table = np.full((2, 2, 2, 1), -math.log(2.0))
    return _graph(3, [_unary(0, [0.5, 0.5]), _unary(1, [0.5, 0.5]), Potential((2, 0, 1), table, 0)])


@pytest.mark.parametrize("graph, reason", [
    (_star, "'x[0]' interacts with 3 others (x[1], x[2], x[3]): not a chain"),
    (_cycle, "has a cycle"),
    (_triple, "a factor couples 3 tuples"),
])
def test_non_chains_are_refused(graph, reason):
    graph = graph()
    problem = _problem(_stand_in(graph.slots), RandomizedResponse(1.0), [Adversary(0)])
    assert reason in continual_reason(problem, graph)
    with pytest.raises(InputError, match="cannot be solved"):
        continual_leakage(problem, graph)


def test_latent_household_is_refused(models_dir):
    model = ddpbayes.load_model(models_dir / "household.py", {"n": 3})
    problem = _problem(model, RandomizedResponse(1.0), [Adversary(0)])
    assert "latent slot" in continual_reason(problem, factor_graph(model, LIMIT))


def test_three_state_chain_is_refused(models_dir):
    model = ddpbayes.load_model(models_dir / "categorical_chain.py", {"n": 3, "k": 3})
    problem = _problem(model, Laplace(1.0), [Adversary(0)])
    assert "takes 3 values: continual release is solved exactly for two-valued tuples only" in continual_reason(
        problem, factor_graph(model, LIMIT))


@pytest.mark.parametrize("query", ["count", "linear:1,2,3", "histogram:0,1"])
def test_other_queries_are_refused(query):
    graph = _graph(3, _markov([0, 1, 2], [0.5, 0.5], [[[0.9, 0.1], [0.2, 0.8]]] * 2))
    problem = _problem(_stand_in(3), Laplace(1.0), [Adversary(0)], query)
    assert "is not identity" in continual_reason(problem, graph)


def test_sweeps_stop_computing_at_a_fixed_point_bit_for_bit(monkeypatch):
    """Days that repeat the day before, once the message repeats too, are not computed again
    (`chainpath._sweep`): the messages and choices stay the one-day recursion's (`chainpath._step` applied
    day after day, written here) bit for bit, on both sides and on a pinned bridge, across days that change,
    an impossible transition and a second stretch of repeats; and the repeats were skipped."""
    from ddpbayes.engines.structured import chainpath

    rng = np.random.default_rng(5)
    n = 400
    flip = [[-math.log1p(math.e), -math.log1p(1 / math.e)], [-math.log1p(1 / math.e), -math.log1p(math.e)]]
    own = np.array([flip[1], flip[0], [0.0, 0.0]] * n).reshape(n, 3, 2)  # randomized response at LO, HI; prior
    own[:3] = rng.normal(size=(3, 3, 2))
    own[150:, :2] *= 2.0  # a larger epsilon from day 150
    edges = np.tile(np.log([[0.6, 0.4], [0.3, 0.7]]), (n - 1, 1, 1))
    with np.errstate(divide="ignore"):
        edges[200] = np.log([[1.0, 0.0], [0.5, 0.5]])
    edges[300:] = np.log([[0.6, 0.4], [0.5, 0.5]])
    front = chainpath.Side(list(range(n)), own, edges, [(0.0, 1.0)] * n)

    def recursion(side, start, base, stop):
        messages, choices, inclusive = [(0.0,) * 6], [], start
        for k in range(base, stop):
            m = chainpath._step(inclusive, side.edge_rows[k])
            messages.append(m[:6])
            choices.append(m[6])
            inclusive = [m[j] + side.own_rows[k + 1][j] for j in range(6)]
        return messages, choices

    steps = []
    step = chainpath._step
    monkeypatch.setattr(chainpath, "_step", lambda *args: steps.append(1) or step(*args))
    for side in (front, front.reversed()):
        for base, start, pinned in ((0, side.own_rows[0], False), (160, [0.0, -math.inf] * 3, True)):
            steps.clear()
            path = chainpath.Path(side, base, n - 1, start, pinned)
            with monkeypatch.context() as plain:
                plain.setattr(chainpath, "_step", step)
                want = recursion(side, start, base, n - 1)
            assert repr(path.messages) == repr(want[0]) and path.choices == want[1]
            assert len(steps) < (n - 1 - base) / 2, len(steps)  # most days repeat the one before
