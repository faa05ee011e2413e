"""The structured engine's count route for joint laws (`joint_counts`, issue #43 item 4, DESIGN §2.1b): its
witnesses under ddp evaluated from the definition.

Chains of binary days whose links at `cuts` are independent (equal rows): the dependence set of a day is its
block, so ddp's adversary knows every day outside it. The count route is forced (`ENUMERATE_UP_TO` 0, the
enumeration removed). The expected values come from the definition written here: the output laws of sparse
vector (Lyu et al. 2017, Alg. 1, c = 1) and report-noisy-max (Laplace, the index) by scipy's adaptive
quadrature, each integral once per pattern of the values it reads, and P(y | t, x_K) by summing the chain's
joint over every state. A tree is refused in one line: the law and its count route need a chain.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy.integrate import quad

from ddpbayes import DependenceModel
from ddpbayes.auditing import audit
from ddpbayes.engines.structured import joint
from ddpbayes.errors import InputError
from ddpbayes.mechanisms.selection import ReportNoisyMax
from ddpbayes.mechanisms.sparse_vector import SparseVector
from ddpbayes.model.domains import Finite

LAW_ERROR = 2e-12  # the engine's stated error on a leakage (its notes: "within 2e-12 of the exact value")


def blocks_chain(seed: int, n: int, cuts: tuple[int, ...], sticky: bool):
    """x_0 ~ Cat(p0), x_j | x_{j−1} ~ P_j[x_{j−1}] on {0, 1}, entries in [0.05, 1] (`sticky`: the changes 1/100 of
    that), P_j's rows equal for j in `cuts` (x_j independent of the days before it): the model, its joint
    (2,) * n and each day's block."""
    rng = np.random.default_rng(seed)
    p0 = rng.dirichlet(np.ones(2))
    steps = rng.uniform(0.05, 1, size=(n, 2, 2)) * (1 - 0.99 * sticky * (1 - np.eye(2)))
    steps[list(cuts)] = steps[list(cuts), :1]
    steps /= steps.sum(axis=-1, keepdims=True)
    with pm.Model() as m:
        prev = pm.Categorical("x0", p=p0)
        for j in range(1, n):
            prev = pm.Categorical(f"x{j}", p=pt.as_tensor_variable(steps[j])[prev])
    joint_p = np.zeros((2,) * n)
    for x in itertools.product(range(2), repeat=n):
        joint_p[x] = p0[x[0]] * math.prod(steps[j, x[j - 1], x[j]] for j in range(1, n))
    edges = [0, *cuts, n]
    blocks = [frozenset(range(lo, hi)) for lo, hi in zip(edges[:-1], edges[1:])]
    names = [f"x{j}" for j in range(n)]
    model = DependenceModel(m, tuples=names, domains={v: Finite(range(2)) for v in names})
    return model, joint_p, [next(b for b in blocks if i in b) for i in range(n)]


def cdf(z: float, b: float) -> float:
    return 0.5 * math.exp(z / b) if z < 0 else 1 - 0.5 * math.exp(-z / b)


def pdf(z: float, b: float) -> float:
    return math.exp(-abs(z) / b) / (2 * b)


class Laws:
    """P(y = j | x) of every output j of a binary state x (`of`), each integral by adaptive quadrature cut at the
    kinks, each tail mapped onto (0, 1] by v = end ∓ scale·log u (`scale` the integrand's slowest decay), once
    per pattern of the values it reads; `error` the largest relative error estimate among them."""

    def __init__(self, integrand, kinks, scale: float, patterns):
        self.integrand, self.kinks, self.scale, self.patterns = integrand, sorted(set(kinks)), scale, patterns
        self.memo, self.error = {}, 0.0

    def of(self, x: tuple[int, ...]) -> list[float]:
        return [self.integral(p) for p in self.patterns(x)]

    def integral(self, pattern: tuple) -> float:
        if pattern not in self.memo:
            f, cuts, b = self.integrand(*pattern), self.kinks, self.scale
            pieces = [(f, lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:])]
            pieces += [(lambda u, end=end, sign=sign: f(end + sign * b * math.log(u)) * b / u, 0.0, 1.0)
                       for end, sign in ((cuts[0], 1.0), (cuts[-1], -1.0))]
            parts = [quad(g, lo, hi, epsabs=0, epsrel=1e-13, limit=200) for g, lo, hi in pieces]
            value = sum(p[0] for p in parts)
            self.error = max(self.error, sum(p[1] for p in parts) / value)
            self.memo[pattern] = value
        return self.memo[pattern]


def svt_laws(threshold: float, s: float) -> Laws:
    """Alg. 1 (c = 1): ρ ~ Lap(2s), ν ~ Lap(4s); the first TRUE at j reads the zeros and ones before j and x_j,
    every answer FALSE (x_j None) reads them all."""
    b_rho, b_nu = 2 * s, 4 * s

    def integrand(zeros, ones, x_j):
        def f(r):
            false = cdf(threshold + r, b_nu) ** zeros * cdf(threshold + r - 1, b_nu) ** ones
            return pdf(r, b_rho) * false * (1.0 if x_j is None else 1 - cdf(threshold + r - x_j, b_nu))
        return f

    def patterns(x):
        n, ones = len(x), np.cumsum((0, *x))
        return [(j - ones[j], ones[j], x[j]) for j in range(n)] + [(n - ones[n], ones[n], None)]

    return Laws(integrand, [0.0, -threshold, 1 - threshold], b_rho, patterns)


def rnm_laws(b: float) -> Laws:
    """argmax_j (x_j + Lap(b)): ∫ f(v − x_j) F(v)^zeros F(v − 1)^ones dv over the other days."""

    def integrand(x_j, zeros, ones):
        return lambda v: pdf(v - x_j, b) * cdf(v, b) ** zeros * cdf(v - 1, b) ** ones

    def patterns(x):
        n, total = len(x), sum(x)
        return [(x[j], n - 1 - (total - x[j]), total - x[j]) for j in range(n)]

    return Laws(integrand, [0.0, 1.0], b, patterns)


def conditional_laws(joint_p: np.ndarray, lik: np.ndarray, target: int, known: list[int]) -> dict:
    """P(y | X_i = t, x_K) (Y,) for every x_K and t of positive probability, from the joint over every state."""
    out = {}
    for x_known in itertools.product(range(2), repeat=len(known)):
        for t in range(2):
            index = [slice(None)] * joint_p.ndim
            for k, v in zip(known, x_known):
                index[k] = v
            index[target] = t
            weights = np.zeros_like(joint_p)
            weights[tuple(index)] = joint_p[tuple(index)]
            if weights.sum() > 0:
                out[x_known, t] = lik @ weights.ravel() / weights.sum()
    return out


def output_index(y: tuple[float, ...], n: int, svt: bool) -> int:
    """j from the output as the mechanism writes it: SVT's pattern (FALSE, then TRUE, then -1), RNM's index."""
    if not svt:
        return int(y[0])
    j = y.index(1.0) if 1.0 in y else n
    assert list(y) == [0.0] * j + ([1.0] + [-1.0] * (n - j - 1) if j < n else [])
    return j


def window_class(j: int, n: int, block: frozenset[int]) -> str:
    """Where the output's index lies against the window (the block and its borders): `joint_counts`' classes."""
    return "none" if j == n else "inside" if min(block) - 1 <= j <= max(block) + 1 else "known day"


@pytest.mark.parametrize("seed,n,cuts,sticky,classes", [(41, 10, (3, 7), False, {"inside"}),
                                                        (48, 10, (2, 8), True, {"inside", "known day"})])
def test_ddp_witnesses_of_the_count_route_evaluated_from_the_definition(seed, n, cuts, sticky, classes, monkeypatch):
    """Each target's reported witness (known values, t, t', output): its log-ratio evaluated here equals the
    reported leakage to the stated law error; the adversary's sup over every x_K, t ≠ t' and output equals it;
    the audit's witness is the largest, and no adversary of the brute force exceeds it. The sticky chain's
    witnesses include outputs at a known day (report-noisy-max: the window's days move together with t)."""
    monkeypatch.setattr(joint, "ENUMERATE_UP_TO", 0)
    monkeypatch.setattr(joint, "_known_set", None)  # the enumeration must not be reached
    model, joint_p, blocks = blocks_chain(seed, n, cuts, sticky)
    rng = np.random.default_rng(seed)
    threshold, s = float(rng.uniform(-0.5, 1.5)), float(rng.uniform(0.3, 1.0))
    states = list(itertools.product(range(2), repeat=n))
    seen = set()
    for mech, laws, svt in ((SparseVector(s, 1, threshold, 1), svt_laws(threshold, s), True),
                            (ReportNoisyMax(2 * s), rnm_laws(2 * s), False)):
        found = audit(model, "identity", mech, "ddp", engine="structured", information=None)
        assert any(f"within {LAW_ERROR:g} of the exact value" in note for note in found.notes)
        lik = np.array([laws.of(x) for x in states]).T  # (Y, 2^n)
        tol = LAW_ERROR + 4 * laws.error + 1e-13
        sups = []
        for i in range(n):
            worst = found.target_worst[i]
            known = sorted(set(range(n)) - blocks[i])
            assert sorted(worst.adversary.known) == known  # ddp's adversary: every day outside i's block
            cond = conditional_laws(joint_p, lik, i, known)
            w = worst.witness
            x_known = tuple(int(w.known_values[k]) for k in known)
            j = output_index(w.y, n, svt)
            seen.add(window_class(j, n, blocks[i]))
            at_witness = math.log(cond[x_known, int(w.t)][j]) - math.log(cond[x_known, int(w.t_prime)][j])
            assert at_witness == pytest.approx(worst.value, abs=tol)
            sup = max(float(np.max(np.log(cond[x, t]) - np.log(cond[x, u]))) for x, t in cond for u in range(2)
                      if u != t and (x, u) in cond)
            assert sup == pytest.approx(worst.value, abs=tol)
            assert found.per_target[i] == worst.value
            sups.append(sup)
        assert found.witness == found.target_worst[found.witness.adversary.target].witness
        assert found.leakage == max(found.per_target)
        assert max(sups) <= found.leakage + tol
    assert seen == classes


def test_a_tree_is_refused_in_one_line():
    """The joint law and its count route need a chain of the tuples in their own order (DESIGN §2.1b): a tree
    (x0 the parent of x1..x3, x1 of x4) under ddp and idp, sparse vector and report-noisy-max, is refused by the
    structured engine in one line naming the shape."""
    rng = np.random.default_rng(7)
    with pm.Model() as m:
        root = pm.Categorical("x0", p=[0.3, 0.7])
        kids = [pm.Categorical(f"x{j}", p=pt.as_tensor_variable(rng.dirichlet(np.ones(2), size=2))[root])
                for j in range(1, 4)]
        pm.Categorical("x4", p=pt.as_tensor_variable(rng.dirichlet(np.ones(2), size=2))[kids[0]])
    model = DependenceModel(m, tuples=[f"x{j}" for j in range(5)])
    for mech, notion in itertools.product((SparseVector(1.0, 1, 0.5, 1), ReportNoisyMax(2.0)), ("ddp", "idp")):
        with pytest.raises(InputError) as refused:
            audit(model, "identity", mech, notion, engine="structured", information=None)
        assert "\n" not in str(refused.value)
        assert "the model is not a chain of its tuples in their own order" in str(refused.value)


@pytest.mark.parametrize("seed,n,k", [(81, 5, 2), pytest.param(82, 7, 2, marks=pytest.mark.slow),
                                      pytest.param(83, 5, 3, marks=pytest.mark.slow)])
def test_kernels_kept_across_windows_equal_the_enumeration(seed, n, k, monkeypatch):
    """Every run adversary of every target of random positive chains (SVT at a random threshold, RNM), solved by one
    solver whose count route keeps each count total's kernels across windows (`joint_counts.Kernels`), equals each
    known set enumerated (no counts, no kernels); so does that route with nothing kept (budget 0) and with every
    integral recomputed term by term in logs (the underflow fallback forced by _TINY = 1e300)."""
    from test_structured_joint import random_chain

    from ddpbayes.engines.structured import joint_counts
    from ddpbayes.engines.structured.graph import factor_graph
    from ddpbayes.problem import Adversary, Problem
    from ddpbayes.queries import parse_query

    model, _ = random_chain(seed, n, k, zeros=False)
    rng = np.random.default_rng(seed)
    threshold, s = float(rng.uniform(-0.5, k)), float(rng.uniform(0.3, 2.0))
    advs = [Adversary(i, frozenset(j for j in range(n) if not lo <= j <= hi))
            for i in range(n) for lo in range(i + 1) for hi in range(i, n)]
    for mech in (SparseVector(s, 1, threshold, 1), ReportNoisyMax(2 * s)):
        problem = Problem(model, parse_query("identity"), mech, tuple(advs))
        graph = factor_graph(model, problem.settings.max_states)
        enumerated = joint.JointSolver.of(problem, graph).solve(problem, advs)
        expected = [enumerated[a].value for a in advs]
        for budget, tiny in ((joint_counts.KERNEL_BYTES, joint_counts._TINY), (0, joint_counts._TINY),
                             (joint_counts.KERNEL_BYTES, 1e300)):
            monkeypatch.setattr(joint_counts, "KERNEL_BYTES", budget)
            monkeypatch.setattr(joint_counts, "_TINY", tiny)
            solver = joint.JointSolver.of(problem, graph)
            counted = solver.solve(problem, advs, counts_first=True)
            assert [counted[a].value for a in advs] == pytest.approx(expected, abs=1e-12)
            assert bool(solver.kernels[True].blocks) == (budget > 0)
