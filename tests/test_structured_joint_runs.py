"""pdp over every known set for the joint laws on a chain (`engines/structured/joint_runs.py`, DESIGN §2.1b): the
pruned run search against every run solved without pruning, the exact engine's whole lattice, and the bound itself
checked on every pair of runs (the diameters written here from their definition)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.integrate import quad

from test_structured_joint import brute_leak, markov_chain, random_chain, svt_law
from test_structured_joint import rnm_law as rnm_outputs

from ddpbayes.auditing import audit
from ddpbayes.engines.structured import joint, joint_runs
from ddpbayes.engines.structured.graph import factor_graph
from ddpbayes.mechanisms.selection import ReportNoisyMax
from ddpbayes.mechanisms.sparse_vector import SparseVector
from ddpbayes.problem import Adversary, Problem
from ddpbayes.queries import parse_query


def mechanisms(rng, k: int):
    threshold, s = float(rng.uniform(-0.5, k)), float(rng.uniform(0.3, 2.0))
    return [SparseVector(s, 1, threshold, 1), ReportNoisyMax(2 * s)]


def every_run(model, mech) -> dict[tuple[int, int, int], float]:
    """leak(i, [s, e]) of every run adversary, by `joint_leakage` (no pruning; each known set enumerated)."""
    n = model.n
    runs = [(i, s, e) for i in range(n) for s in range(i + 1) for e in range(i, n)]
    advs = [Adversary(i, frozenset(j for j in range(n) if not s <= j <= e)) for i, s, e in runs]
    problem = Problem(model, parse_query("identity"), mech, tuple(advs))
    found, _ = joint.joint_leakage(problem, factor_graph(model, problem.settings.max_states))
    return {run: leak.value for run, leak in zip(runs, found)}


def searched(model, mech) -> list[float]:
    result = audit(model, "identity", mech, "pdp", engine="structured", information=None)
    assert any("runs solved" in note for note in result.notes)
    return result.per_target


def log_diameter(g: np.ndarray) -> float:
    """max over rows x, x' and columns t, t' of log g[x,t] g[x',t'] / (g[x,t'] g[x',t]), by the four loops."""
    rows, cols = g.shape
    return max(math.log(g[x, t] * g[y, u] / (g[x, u] * g[y, t]))
               for x, y in itertools.product(range(rows), repeat=2)
               for t, u in itertools.product(range(cols), repeat=2))


def kernels(p0: np.ndarray, steps: np.ndarray, i: int):
    """Δ of P(X_i | X_m) for m < i (rows x_m) and of P(X_m | X_i) for m > i (rows x_i), from the chain's transition
    matrices: P(X_i = t | X_m = x) is the product steps[m+1] ··· steps[i]; P(X_m | X_i = t) that of steps[i+1] ···
    steps[m] (a diameter is free of row and column scales, so these are the engine's kernels' diameters)."""
    n = steps.shape[0]
    left = {m: log_diameter(np.linalg.multi_dot([np.eye(len(p0)), *steps[m + 1:i + 1]])) for m in range(i)}
    right = {m: log_diameter(np.linalg.multi_dot([np.eye(len(p0)), *steps[i + 1:m + 1]])) for m in range(i + 1, n)}
    return left, right


@pytest.mark.parametrize("seed,n,k,counts", [(40, 3, 2, False), pytest.param(41, 5, 2, False, marks=pytest.mark.slow),
                                             pytest.param(42, 6, 3, False, marks=pytest.mark.slow),
                                             pytest.param(43, 7, 2, False, marks=pytest.mark.slow),
                                             pytest.param(51, 10, 2, True, marks=pytest.mark.slow),
                                             pytest.param(52, 9, 3, True, marks=pytest.mark.slow)])
def test_the_search_equals_every_run_solved(seed, n, k, counts, monkeypatch):
    """Random positive chains, SVT at a random threshold and RNM: each target's searched pdp equals the largest leak
    over all its runs, each solved with no pruning: by enumerating its known configurations (up to seven days), or
    by the count route forced (`joint_counts`, `counts`: nine and ten days)."""
    if counts:
        monkeypatch.setattr(joint, "ENUMERATE_UP_TO", 0)
    rng = np.random.default_rng(seed)
    model, _ = random_chain(seed, n, k, zeros=False)
    for mech in mechanisms(rng, k):
        runs = every_run(model, mech)
        expected = [max(v for (i, _, _), v in runs.items() if i == target) for target in range(n)]
        assert searched(model, mech) == pytest.approx(expected, abs=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("seed,n,k", [(61, 5, 2), (62, 4, 3)])
def test_the_search_equals_the_exact_engines_lattice(seed, n, k):
    """The exact engine's pdp over every known set of every target (its lattice listed) on random positive chains."""
    rng = np.random.default_rng(seed)
    model, _ = random_chain(seed, n, k, zeros=False)
    for mech in mechanisms(rng, k):
        exact = audit(model, "identity", mech, "pdp", engine="exact", information=None).per_target
        assert searched(model, mech) == pytest.approx(exact, abs=1e-9)


@pytest.mark.parametrize("seed,n,k", [(70, 4, 2), pytest.param(71, 6, 2, marks=pytest.mark.slow),
                                      pytest.param(72, 6, 3, marks=pytest.mark.slow)])
def test_the_bound_holds_on_every_pair_of_runs_and_needs_its_slack(seed, n, k):
    """DESIGN §2.1b's bound, leak(s, e) ≤ leak(s', e) + Δ(P(X_i | X_{s'−1})) for s < s' ≤ i (and on the right),
    on every pair of runs of random positive chains, the diameters from the transition matrices by their definition;
    and the slack is needed: some longer run leaks more than a shorter one (a search without it would stop early)."""
    p0, steps = chain_tables(seed, n, k)
    model, _ = random_chain(seed, n, k, zeros=False)
    rng = np.random.default_rng(seed + 1)
    grew = 0.0
    for mech in mechanisms(rng, k):
        runs = every_run(model, mech)
        for i in range(n):
            left, right = kernels(p0, steps, i)
            engine_left, engine_right = joint_runs.side_diameters(*_tables(model), i)
            by_definition = [left[m] for m in range(i - 1, -1, -1)], [right[m] for m in range(i + 1, n)]
            for engine_side, side in zip((engine_left, engine_right), by_definition):
                assert engine_side - joint_runs.ROUNDING == pytest.approx(side, rel=1e-9, abs=1e-12)
                assert (engine_side >= np.array(side)).all()
            for e in range(i, n):
                for s, s2 in itertools.combinations(range(i + 1), 2):
                    assert runs[(i, s, e)] <= runs[(i, s2, e)] + left[s2 - 1] + 1e-12
                    grew = max(grew, runs[(i, s, e)] - runs[(i, s2, e)])
            for s in range(i + 1):
                for e2, e in itertools.combinations(range(i, n), 2):
                    assert runs[(i, s, e)] <= runs[(i, s, e2)] + right[e2 + 1] + 1e-12
                    grew = max(grew, runs[(i, s, e)] - runs[(i, s, e2)])
    assert grew > 1e-6


@pytest.mark.parametrize("seed,n,k,name", [(80, 4, 2, "svt"), pytest.param(80, 4, 2, "rnm", marks=pytest.mark.slow),
                                           pytest.param(81, 5, 2, "svt", marks=pytest.mark.slow),
                                           pytest.param(82, 4, 3, "svt", marks=pytest.mark.slow)])
def test_late_outputs_against_the_brute_force(seed, n, k, name):
    """What the search bounds past a box's right edge (DESIGN §2.1b), on every run of random positive chains: the
    count route's late value (SVT: the outputs after the target and none; RNM: every output) equals the brute force's
    leak over those outputs only; SVT's outputs up to the target leak the same whatever the run's end (the brute
    force over those outputs); the bound holds for the late outputs alone on every pair of runs, the diameters from
    the transition matrices by their definition; and some run's outputs up to the target leak more than its late
    ones (so the split is seen)."""
    model, joint_p = random_chain(seed, n, k, zeros=False)
    p0, steps = chain_tables(seed, n, k)
    rng = np.random.default_rng(seed + 1)
    threshold, s = float(rng.uniform(-0.5, k)), float(rng.uniform(0.3, 2.0))
    runs = [(i, lo, hi) for i in range(n) for lo in range(i + 1) for hi in range(i, n)]
    advs = [Adversary(i, frozenset(j for j in range(n) if not lo <= j <= hi)) for i, lo, hi in runs]
    mech, law = {"svt": (SparseVector(s, 1, threshold, 1), lambda a: svt_law(a, threshold, s)),
                 "rnm": (ReportNoisyMax(2 * s), lambda a: rnm_outputs(a, 2 * s))}[name]
    problem = Problem(model, parse_query("identity"), mech, tuple(advs))
    late: dict[Adversary, float] = {}
    found = joint.JointSolver.of(problem, factor_graph(model, 10 ** 7)).solve(problem, advs, counts_first=True,
                                                                              late=late)
    outputs = _law_by_state(joint_p, law)
    early, later = {}, {}
    for run, adv in zip(runs, advs):
        i, known = run[0], tuple(sorted(adv.known))
        first = i + 1 if name == "svt" else 0
        later[run] = brute_leak(joint_p, lambda a: outputs[tuple(a.astype(int))][first:], i, known)
        early[run] = brute_leak(joint_p, lambda a: outputs[tuple(a.astype(int))][:first], i, known) if first else 0.0
        assert late[adv] == pytest.approx(later[run], abs=1e-9)
        assert found[adv].value == pytest.approx(max(early[run], later[run]), abs=1e-9)
    for i in range(n):
        left, right = kernels(p0, steps, i)
        for lo in range(i + 1):
            ends = [early[(i, lo, hi)] for hi in range(i, n)]
            assert ends == pytest.approx([ends[0]] * len(ends), abs=1e-9)
            for hi2, hi in itertools.combinations(range(i, n), 2):
                assert later[(i, lo, hi)] <= later[(i, lo, hi2)] + right[hi2 + 1] + 1e-12
        for hi in range(i, n):
            for lo, lo2 in itertools.combinations(range(i + 1), 2):
                assert later[(i, lo, hi)] <= later[(i, lo2, hi)] + left[lo2 - 1] + 1e-12
    if name == "svt":
        assert max(early[run] - later[run] for run in runs) > 1e-3


@pytest.mark.slow
def test_the_late_split_keeps_the_shipped_chains_boxes_short():
    """The shipped chain on 24 days, SVT: days deep in it leak the same at every run end (their worst output a first
    TRUE on the target), so with every output bounded past the box's right edge the boxes widen further (16 days
    deep, 1,701 of the 2,600 runs solved); with only the late outputs bounded the search stays within 12 days of
    each target (11: 1,384 runs), and each day's pdp equals the largest leak over all its runs, each solved by the
    count route with no pruning."""
    n = 24
    model = markov_chain(n)
    runs = [(i, lo, hi) for i in range(n) for lo in range(i + 1) for hi in range(i, n)]
    advs = [Adversary(i, joint_runs.run_known(n, lo, hi)) for i, lo, hi in runs]
    problem = Problem(model, parse_query("identity"), SparseVector(1.0, 1, 0.5, 1), tuple(advs))
    graph = factor_graph(model, problem.settings.max_states)
    every = joint.JointSolver.of(problem, graph).solve(problem, advs, counts_first=True)
    expected = [max(every[adv].value for adv in advs if adv.target == i) for i in range(n)]
    found, search, _ = joint_runs.pdp_over_runs(problem, graph, list(range(n)))
    assert [f.value for f in found] == pytest.approx(expected, abs=1e-12)
    assert search.deepest <= 12 and search.solved < 1500


def _law_by_state(joint_p: np.ndarray, law) -> dict[tuple[int, ...], np.ndarray]:
    """Each state's output law (the brute force's, `test_structured_joint`), computed once."""
    return {x: law(np.array(x, dtype=float)) for x in itertools.product(*[range(m) for m in joint_p.shape])}


def chain_tables(seed: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """`random_chain`'s initial law and transition matrices with zeros=False (its draws, in its order)."""
    rng = np.random.default_rng(seed)
    p0 = rng.dirichlet(np.ones(k))
    steps = rng.uniform(0.05, 1, size=(n, k, k))
    rng.uniform(size=(n, k, k))
    return p0, steps / steps.sum(axis=-1, keepdims=True)


def _tables(model):
    graph = factor_graph(model, 10 ** 7)
    chain = joint._chain(graph, model.n)
    return chain.unary, chain.pair


@pytest.mark.slow
def test_without_the_slack_the_search_stops_short(monkeypatch):
    """The shipped chain on 12 days, SVT: with every diameter 0 (no slack) the search stops at its first box and
    misses longer runs that leak more (day 0: 0.2913 found with the slack, 0.2873 without), so the slack is what
    makes it exact."""
    model = markov_chain(12)
    mech = SparseVector(1.0, 1, 0.5, 1)
    exact = searched(model, mech)
    monkeypatch.setattr(joint_runs, "side_diameters",
                        lambda unary, pair, i: (np.zeros(i), np.zeros(unary.shape[0] - 1 - i)))
    short = searched(model, mech)
    assert max(a - b for a, b in zip(exact, short)) > 1e-3
    assert all(a >= b - 1e-12 for a, b in zip(exact, short))


def rnm_law(x: np.ndarray, j: int, b: float) -> float:
    """P(argmax = j | x) = ∫ f_b(v − x_j) Π_{m≠j} F_b(v − x_m) dv for answers x in {0, 1} (Dwork & Roth 2014, §3.3),
    by scipy's adaptive quadrature cut at 0, 1 and through the noisy maximum's bulk (v near b log n)."""
    ones = int(np.delete(x, j).sum())
    zeros = len(x) - 1 - ones

    def cdf(z):
        return 0.5 * math.exp(z / b) if z < 0 else 1 - 0.5 * math.exp(-z / b)

    def f(v):
        return math.exp(-abs(v - x[j]) / b) / (2 * b) * cdf(v) ** zeros * cdf(v - 1) ** ones
    cuts = [-np.inf, 0.0, 1.0, 5.0, 10.0, 15.0, 20.0, 30.0, 50.0, np.inf]
    return sum(quad(f, lo, hi, epsabs=0, epsrel=1e-13, limit=200)[0] for lo, hi in zip(cuts[:-1], cuts[1:]))


@pytest.mark.slow
def test_the_years_rnm_pdp_witness_from_the_definition():
    """The 365-day chain's report-noisy-max pdp (Laplace(2), Δ = 1; reports/mechanisms_under_dependence, DESIGN
    §2.1b): 0.5 = Δ/b at day 0 against the adversary who knows every other day. Its witness's two likelihoods at
    its output, from the definition with every day but day 0 known (no mixture left: P(j | t, x_K) is the law at
    x with x_0 = t), by scipy's adaptive quadrature: their log-ratio equals the engine's to 1e-8, and the engine's
    is Δ/b. No output or known values can exceed Δ/b for this known set (a hand bound): x_0 enters the integrand
    through one factor, f_b(v − x_0) or F_b(v − x_0), each moving by at most e^{|t − t'|/b} = e^{Δ/b} pointwise in v,
    so the ratio of the integrals does too; checked here on outputs at the target and elsewhere, several counts."""
    n, b = 365, 2.0
    model = markov_chain(n)
    adv = Adversary(0, frozenset(range(1, n)))
    problem = Problem(model, parse_query("identity"), ReportNoisyMax(b), (adv,))
    (found,), _ = joint.joint_leakage(problem, factor_graph(model, problem.settings.max_states))
    w = found.witness
    j = int(w.y[0])
    x = np.array([0.0] + [w.known_values[m] for m in range(1, n)])
    laws = {}
    for t in (w.t, w.t_prime):
        x[0] = t
        laws[t] = rnm_law(x, j, b)
    assert math.log(laws[w.t]) - math.log(laws[w.t_prime]) == pytest.approx(found.value, abs=1e-8)
    assert found.value == pytest.approx(1 / b, abs=1e-8)
    rng = np.random.default_rng(365)
    for ones, out in itertools.product((0, 1, 100, 364), (0, 1, 200)):
        x = (np.arange(n) <= ones).astype(float)
        rng.shuffle(x[1:])
        ratio = [rnm_law(np.concatenate([[t], x[1:]]), out, b) for t in (0.0, 1.0)]
        assert abs(math.log(ratio[0] / ratio[1])) <= 1 / b + 1e-12
