"""Joint laws over every answer of a chain on the structured engine (issue #43 item 4, DESIGN §5.2):
sparse vector (Lyu et al. 2017 Alg. 1, c = 1) and report-noisy-max (Laplace, the index) over the identity query.

The expected leakages come from a brute force written here: every state of random chains (random transition
matrices, two or three values a day), each output's probability given the answers by scipy's adaptive
quadrature of the integral over the threshold noise (SVT) or the noisy maximum (RNM) written from the
definition, and the largest log-ratio over x_K, t, t' and the outputs. The exact engine is checked on the
shipped chain, every target, under idp, pdp and ddp.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy.integrate import quad

from ddpbayes import DependenceModel
from ddpbayes.auditing import audit
from ddpbayes.engines.structured import joint
from ddpbayes.engines.structured.graph import factor_graph
from ddpbayes.errors import InputError
from ddpbayes.mechanisms.selection import ReportNoisyMax
from ddpbayes.mechanisms.sparse_vector import SparseVector
from ddpbayes.model.domains import Finite

ROOT = Path(__file__).resolve().parents[1]


def random_chain(seed: int, n: int, k: int, zeros: bool = True):
    """x_0 ~ Cat(p0), x_j | x_{j−1} ~ Cat(P_j[x_{j−1}]) on {0..k−1}, random tables (a few zeros unless `zeros` is
    False): the model and its joint computed here from the same tables."""
    rng = np.random.default_rng(seed)
    p0 = rng.dirichlet(np.ones(k))
    steps = rng.uniform(0.05, 1, size=(n, k, k)) * (rng.uniform(size=(n, k, k)) > (0.15 if zeros else -1.0))
    steps[..., 0] += steps.sum(axis=-1) == 0
    steps /= steps.sum(axis=-1, keepdims=True)
    with pm.Model() as m:
        prev = pm.Categorical("x0", p=p0)
        for j in range(1, n):
            prev = pm.Categorical(f"x{j}", p=pt.as_tensor_variable(steps[j])[prev])
    joint_p = np.zeros((k,) * n)
    for x in itertools.product(range(k), repeat=n):
        joint_p[x] = p0[x[0]] * math.prod(steps[j, x[j - 1], x[j]] for j in range(1, n))
    names = [f"x{j}" for j in range(n)]
    return DependenceModel(m, tuples=names, domains={v: Finite(range(k)) for v in names}), joint_p


def cdf(z: float, b: float) -> float:
    return 0.5 * math.exp(z / b) if z < 0 else 1 - 0.5 * math.exp(-z / b)


def pdf(z: float, b: float) -> float:
    return math.exp(-abs(z) / b) / (2 * b)


def integral(f, kinks) -> float:
    """∫ f over the line, cut at the kinks, each piece by scipy's adaptive quadrature."""
    cuts = sorted(set(kinks))
    pieces = [(-np.inf, cuts[0]), *zip(cuts[:-1], cuts[1:]), (cuts[-1], np.inf)]
    return sum(quad(f, lo, hi, epsabs=0, epsrel=1e-11, limit=200)[0] for lo, hi in pieces)


def svt_law(a, threshold: float, s: float) -> np.ndarray:
    """Lyu et al. Alg. 1 (c = 1): ρ ~ Lap(2s), ν ~ Lap(4s); P(first TRUE = j), then P(none)."""
    b_rho, b_nu = 2 * s, 4 * s
    n = len(a)

    def p(j):
        def f(r):
            false = math.prod(cdf(threshold + r - a[m], b_nu) for m in range(min(j, n)))
            return pdf(r, b_rho) * false * (1 - cdf(threshold + r - a[j], b_nu) if j < n else 1.0)
        return integral(f, [0.0, *(x - threshold for x in a)])
    return np.array([p(j) for j in range(n + 1)])


def rnm_law(a, b: float) -> np.ndarray:
    """argmax_j (a_j + Lap(b)): ∫ f(v − a_j) Π_{m≠j} F(v − a_m) dv."""
    n = len(a)
    return np.array([integral(lambda v, j=j: pdf(v - a[j], b) * math.prod(cdf(v - a[m], b) for m in range(n) if m != j),
                              list(a)) for j in range(n)])


def brute_leak(joint_p: np.ndarray, law, target: int, known: tuple[int, ...], laws: dict | None = None) -> float:
    """leak(i, K) from the definition over every state and output (`laws`: each state's output law, kept across
    calls)."""
    xs = [x for x in itertools.product(*[range(s) for s in joint_p.shape]) if joint_p[x] > 0]
    px = np.array([joint_p[x] for x in xs])
    laws = {} if laws is None else laws
    for x in xs:
        if x not in laws:  # (setdefault would evaluate the law every time)
            laws[x] = law(np.array(x, dtype=float))
    lik = np.array([laws[x] for x in xs]).T  # (Y, X)
    best = 0.0
    for x_known in {tuple(x[k] for k in known) for x in xs}:
        match = np.array([all(x[k] == v for k, v in zip(known, x_known)) for x in xs])
        curves = []
        for t in range(joint_p.shape[target]):
            rows = match & np.array([x[target] == t for x in xs])
            if px[rows].sum() > 0:
                curves.append(lik[:, rows] @ px[rows] / px[rows].sum())
        for c1, c2 in itertools.permutations(curves, 2):
            best = max(best, float(np.max(np.log(c1) - np.log(c2))))
    return best


@pytest.mark.parametrize("seed,n,k", [(11, 3, 2),
                                      pytest.param(12, 3, 3, marks=pytest.mark.slow),
                                      pytest.param(13, 4, 2, marks=pytest.mark.slow),
                                      pytest.param(14, 5, 2, marks=pytest.mark.slow)])
def test_random_chains_against_the_brute_force(seed, n, k):
    """SVT at a random threshold and RNM on random chains: idp of every target and pdp with random known sets."""
    rng = np.random.default_rng(seed)
    model, joint_p = random_chain(seed, n, k)
    threshold, s = float(rng.uniform(-0.5, k)), float(rng.uniform(0.3, 2.0))
    cases = [(SparseVector(s, 1, threshold, 1), lambda a: svt_law(a, threshold, s)),
             (ReportNoisyMax(2 * s), lambda a: rnm_law(a, 2 * s))]
    for mech, law in cases:
        laws: dict = {}
        idp = audit(model, "identity", mech, "idp", engine="structured", information=None)
        assert idp.engine == "structured"
        for i in range(n):
            assert idp.per_target[i] == pytest.approx(brute_leak(joint_p, law, i, (), laws), abs=1e-9)
        for target in (0, n - 1):
            known = tuple(sorted(rng.choice([j for j in range(n) if j != target], size=int(rng.integers(1, n)),
                                            replace=False).tolist()))
            pdp = audit(model, "identity", mech, "pdp", engine="structured", targets=[target], known=list(known),
                        information=None)
            assert pdp.leakage == pytest.approx(brute_leak(joint_p, law, target, known, laws), abs=1e-9)


@pytest.mark.parametrize("seed,n,k", [(21, 3, 2),
                                      pytest.param(22, 4, 3, marks=pytest.mark.slow),
                                      pytest.param(23, 5, 2, marks=pytest.mark.slow)])
def test_known_days_by_their_counts_against_the_brute_force(seed, n, k, monkeypatch):
    """The count reduction (`joint_counts`) forced on short chains with positive random transitions: every
    window adversary (every day outside a run around the target known, idp's included) of every target, SVT at a
    random threshold and RNM, against the brute force over every state and output."""
    monkeypatch.setattr(joint, "ENUMERATE_UP_TO", 0)
    monkeypatch.setattr(joint, "_known_set", None)  # the enumeration must not be reached
    rng = np.random.default_rng(seed)
    model, joint_p = random_chain(seed, n, k, zeros=False)
    threshold, s = float(rng.uniform(-0.5, k)), float(rng.uniform(0.3, 2.0))
    cases = [(SparseVector(s, 1, threshold, 1), lambda a: svt_law(a, threshold, s)),
             (ReportNoisyMax(2 * s), lambda a: rnm_law(a, 2 * s))]
    for mech, law in cases:
        laws: dict = {}
        for target in range(n):
            for lo, hi in itertools.product(range(target + 1), range(target, n)):
                known = tuple(j for j in range(n) if not lo <= j <= hi)
                found = audit(model, "identity", mech, "pdp", engine="structured", targets=[target],
                              known=list(known), information=None)
                assert found.leakage == pytest.approx(brute_leak(joint_p, law, target, known, laws), abs=1e-9)


def markov_chain(n: int):
    spec = importlib.util.spec_from_file_location("markov_chain", ROOT / "models" / "markov_chain.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build(n=n, p_stay=0.8)


@pytest.mark.parametrize("n,notions", [(4, ("idp", "pdp")),
                                       pytest.param(6, ("idp", "pdp", "ddp"), marks=pytest.mark.slow)])
@pytest.mark.parametrize("mech", [SparseVector(1.0, 1, 0.5, 1), ReportNoisyMax(2.0)], ids=["svt1", "rnm"])
def test_equal_to_the_exact_engine_on_the_shipped_chain(mech, n, notions):
    """Every target under idp, every adversary of the pdp lattice (the worst per target) and ddp: the same values
    and witnesses (six days marked slow)."""
    model = markov_chain(n)
    for notion in notions:
        found = {e: audit(model, "identity", mech, notion, engine=e, information=None) for e in ("exact", "structured")}
        assert found["structured"].per_target == pytest.approx(found["exact"].per_target, abs=1e-9)
        assert found["structured"].witness.y == found["exact"].witness.y
        assert found["structured"].witness.adversary == found["exact"].witness.adversary


def test_the_rule_is_within_its_bound_and_the_law_sums_to_one():
    """A 30-day chain: the tables on the chosen rule against a rule with twice the nodes on every piece (tails
    included), within the stated bound plus round-off; the outputs' probabilities sum to P(X_i = t)."""
    model = markov_chain(30)
    graph = factor_graph(model, 10 ** 8)
    chain = joint._chain(graph, 30)
    for mech in (SparseVector(1.0, 1, 0.5, 1), ReportNoisyMax(2.0)):
        law = joint._Law.of(mech)
        chosen = joint.rule(law, [graph.values[s] for s in chain.slots])
        assert chosen.bound <= 1e-13
        finer = _doubled(law, chain, graph)
        tables = joint.joint_tables(chain, chain.unary, law, chosen)
        assert np.max(np.abs(tables - joint.joint_tables(chain, chain.unary, law, finer))) < chosen.bound + 1e-12
        total = np.logaddexp.reduce(tables, axis=1)
        assert np.max(np.abs(total - joint._marginals(chain.unary, chain.pair))) < 1e-12


def _doubled(law, chain, graph) -> joint.Rule:
    """Twice the nodes on every piece and tail, from Gauss–Legendre written here."""
    cuts = law.breaks(np.unique(chain.answers))
    base = joint.rule(law, [graph.values[s] for s in chain.slots]).per_piece
    vs, lws = [], []
    for side, count in zip((-1, 1), base[:2]):
        x, w = np.polynomial.legendre.leggauss(2 * count)
        u = (x + 1) / 2
        vs.append(cuts[0] + law.scale * np.log(u) if side < 0 else cuts[-1] - law.scale * np.log(u))
        lws.append(np.log(w / 2) + math.log(law.scale) - np.log(u))
    for (lo, hi), count in zip(zip(cuts[:-1], cuts[1:]), base[2:]):
        x, w = np.polynomial.legendre.leggauss(2 * count)
        vs.append((lo + hi) / 2 + (hi - lo) / 2 * x)
        lws.append(np.log((hi - lo) / 2 * w))
    return joint.Rule(np.concatenate(vs), np.concatenate(lws), (), 0.0)


def test_other_laws_are_declined_in_one_line():
    model = markov_chain(4)
    with pytest.raises(InputError, match="sparse_vector variant 1 with cutoff 1"):
        audit(model, "identity", SparseVector(1.0, 2, 0.5, 1), "idp", engine="structured", information=None)
    with pytest.raises(InputError, match="every known tuple is enumerated.*not every day outside one run"):
        audit(markov_chain(30), "identity", ReportNoisyMax(2.0), "pdp", engine="structured", targets=[0],
              known=[1, *range(3, 30)], information=None)


@pytest.mark.slow
@pytest.mark.parametrize("mech", [SparseVector(0.8, 1, 0.3, 1), ReportNoisyMax(1.5)], ids=["svt1", "rnm"])
def test_counts_equal_the_enumeration_on_ten_days(mech, monkeypatch):
    """Ten days of a random chain with positive transitions, window adversaries knowing 5 to 8 days: the count
    reduction against the enumeration of every known configuration (2^|K| whole-chain passes, other code)."""
    model, _ = random_chain(31, 10, 2, zeros=False)
    windows = [(4, 2, 5), (4, 3, 4), (0, 0, 1), (9, 7, 9), (6, 5, 8)]
    for target, lo, hi in windows:
        known = [j for j in range(10) if not lo <= j <= hi]
        found = {}
        for route, up_to in (("counts", 0), ("enumerated", 1 << 12)):
            monkeypatch.setattr(joint, "ENUMERATE_UP_TO", up_to)
            found[route] = audit(model, "identity", mech, "pdp", engine="structured", targets=[target], known=known,
                                 information=None).leakage
        assert found["counts"] == pytest.approx(found["enumerated"], abs=1e-12)


def test_rows_normalised_every_few_days_as_every_day(monkeypatch):
    """80 days: the row passes normalised every `_every` days (31 here) give the tables of a
    normalisation every day, and the outputs' probabilities still sum to P(X_i = t)."""
    model = markov_chain(80)
    graph = factor_graph(model, 10 ** 8)
    chain = joint._chain(graph, 80)
    law = joint._Law.of(SparseVector(1.0, 1, 0.5, 1))
    quad = joint.rule(law, [graph.values[s] for s in chain.slots])
    tables = joint.joint_tables(chain, chain.unary, law, quad)
    assert np.max(np.abs(np.logaddexp.reduce(tables, axis=1) - joint._marginals(chain.unary, chain.pair))) < 1e-12
    monkeypatch.setattr(joint, "_every", lambda own, pair: 1)
    assert np.max(np.abs(tables - joint.joint_tables(chain, chain.unary, law, quad))) < 1e-12
