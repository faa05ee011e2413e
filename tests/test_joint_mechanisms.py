"""Mechanisms with a joint output law (DESIGN §5.2), audited by the exact and structured engines.

Two mechanisms are written here, outside the package, through the extension point (`Mechanism.joint`):
`SoftmaxChoice`, the exponential mechanism on the answers as utilities (a candidate index), and
`TruncatedGeometric`, Ghosh et al.'s geometric on {0..m} with the tails folded onto the ends (not
shift-invariant: a known tuple that only shifts the count still moves its law). The expected leakages come
from a brute force written here from the definition: every state x of the joint (from the model's own
tables, not from PyMC) and every output y, L(y | t, x_K) = Σ_x P(x) p(y | q(x)) / P(t, x_K), the largest
log-ratio over x_K, t, t' and y.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy.special import log_softmax

from ddpbayes import DependenceModel
from ddpbayes.auditing import audit
from ddpbayes.mechanisms import Mechanism
from ddpbayes.model.domains import Finite


@dataclass(frozen=True)
class SoftmaxChoice(Mechanism):
    """P(r | a) ∝ exp(ε a_r / 2): the exponential mechanism on utilities of sensitivity 1 (McSherry–Talwar)."""

    epsilon: float
    kind: str = "softmax_choice"
    joint = True

    def output_space(self, answers: np.ndarray) -> np.ndarray:
        return np.arange(answers.shape[1], dtype=float)[:, None]

    def output_count(self, answers: np.ndarray) -> int:
        return answers.shape[1]

    def log_prob(self, outputs: np.ndarray, answers: np.ndarray) -> np.ndarray:
        law = log_softmax(self.epsilon * answers / 2, axis=1)  # (R, K)
        return law[:, outputs[:, 0].astype(int)].T

    def log_kernel(self, q):  # pragma: no cover - a joint law has no per-coordinate kernel
        raise NotImplementedError

    def grid_size(self, levels: int) -> int:  # pragma: no cover
        raise NotImplementedError

    def dp_leakage(self, sensitivity: float) -> float:
        return self.epsilon * sensitivity

    def describe(self) -> dict:
        return {"kind": self.kind, "epsilon": self.epsilon}


@dataclass(frozen=True)
class TruncatedGeometric(Mechanism):
    """P(y | a) ∝ α^|y − a| on 0 < y < m, P(0 | a) = α^a / (1 + α), P(m | a) = α^(m − a) / (1 + α) (Ghosh et al.)."""

    epsilon: float
    m: int
    kind: str = "folded_geometric"
    joint = True

    def output_space(self, answers: np.ndarray) -> np.ndarray:
        return np.arange(self.m + 1, dtype=float)[:, None]

    def output_count(self, answers: np.ndarray) -> int:
        return self.m + 1

    def log_prob(self, outputs: np.ndarray, answers: np.ndarray) -> np.ndarray:
        return np.log(folded_geometric(self.epsilon, self.m, answers[:, 0]))[outputs[:, 0].astype(int)]

    def log_kernel(self, q):  # pragma: no cover
        raise NotImplementedError

    def grid_size(self, levels: int) -> int:  # pragma: no cover
        raise NotImplementedError

    def dp_leakage(self, sensitivity: float) -> float:
        return self.epsilon * sensitivity

    def describe(self) -> dict:
        return {"kind": self.kind, "epsilon": self.epsilon, "m": self.m}


def folded_geometric(eps: float, m: int, a: np.ndarray) -> np.ndarray:
    """The pmf (m + 1, len(a)), written from the definition: the two-sided geometric (1−α)/(1+α) α^|y−a| with every
    y < 0 folded onto 0 and every y > m onto m (the folded tails sum to α^(a+1)/(1+α) + ...)."""
    alpha = math.exp(-eps)
    y = np.arange(m + 1)[:, None]
    a = np.asarray(a, dtype=float)[None, :]
    p = (1 - alpha) / (1 + alpha) * alpha ** np.abs(y - a)
    p[0] += alpha ** (a[0] + 1) / (1 + alpha)  # Σ_{y<0} (1−α)/(1+α) α^(a−y)
    p[m] += alpha ** (m - a[0] + 1) / (1 + alpha)
    return p


def latent_model(seed: int, n: int, k: int):
    """h ~ Cat(w), x_j | h ~ Cat(P_j[h]) on {0..k−1} with random tables (some zeros): the PyMC model and the joint
    P(x) computed here from the same tables."""
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.ones(2))
    tables = rng.uniform(0.05, 1, size=(n, 2, k)) * (rng.uniform(size=(n, 2, k)) > 0.2)
    tables[..., 0] += tables.sum(axis=-1) == 0
    tables /= tables.sum(axis=-1, keepdims=True)
    with pm.Model() as m:
        h = pm.Categorical("h", p=w)
        for j in range(n):
            pm.Categorical(f"x{j}", p=pt.as_tensor_variable(tables[j])[h])
    joint = sum(w[c] * _outer([tables[j, c] for j in range(n)]) for c in range(2))
    return DependenceModel(m, tuples=[f"x{j}" for j in range(n)], domains={f"x{j}": Finite(range(k)) for j in range(n)}), joint


def chain_model(seed: int, n: int):
    """A binary chain with random start and transition probabilities (one per day)."""
    rng = np.random.default_rng(seed)
    p0, stay = rng.uniform(0.2, 0.8), rng.uniform(0.55, 0.95, size=(n, 2))
    with pm.Model() as m:
        prev = pm.Bernoulli("x0", p0)
        for j in range(1, n):
            prev = pm.Bernoulli(f"x{j}", pt.switch(prev, stay[j, 1], 1 - stay[j, 0]))
    joint = np.zeros((2,) * n)
    for x in itertools.product((0, 1), repeat=n):
        p = p0 if x[0] else 1 - p0
        for j in range(1, n):
            up = stay[j, 1] if x[j - 1] else 1 - stay[j, 0]
            p *= up if x[j] else 1 - up
        joint[x] = p
    return DependenceModel(m, tuples=[f"x{j}" for j in range(n)]), joint


def _outer(vectors) -> np.ndarray:
    out = np.array(1.0)
    for v in vectors:
        out = np.multiply.outer(out, v)
    return out


def brute_leak(joint: np.ndarray, answer, law, target: int, known: tuple[int, ...]) -> float:
    """leak(i, K) from the definition: `answer(x)` the query's answers, `law(a)` the vector of P(y | a) over every
    output y; every state and every output enumerated."""
    xs = [x for x in itertools.product(*[range(s) for s in joint.shape]) if joint[x] > 0]
    px = np.array([joint[x] for x in xs])
    lik = np.array([law(answer(x)) for x in xs]).T  # (Y, X)
    best = 0.0
    for x_known in {tuple(x[k] for k in known) for x in xs}:
        match = np.array([all(x[k] == v for k, v in zip(known, x_known)) for x in xs])
        curves = []
        for t in range(joint.shape[target]):
            rows = match & np.array([x[target] == t for x in xs])
            if px[rows].sum() > 0:
                curves.append(lik[:, rows] @ px[rows] / px[rows].sum())
        for a, b in itertools.permutations(curves, 2):
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.log(a) - np.log(b)
            best = max(best, float(np.max(np.where(np.isnan(ratio), -np.inf, ratio))))  # 0/0: an output neither gives
    return best


def softmax_law(eps: float):
    return lambda a: np.exp(eps * np.asarray(a, float) / 2) / np.exp(eps * np.asarray(a, float) / 2).sum()


@pytest.mark.parametrize("seed,n,k,eps", [(1, 3, 3, 1.0), (2, 4, 2, 0.5), (3, 3, 2, 2.0)])
def test_exponential_mechanism_on_the_tuples_exactly(seed, n, k, eps):
    """Every adversary of the pdp lattice against the brute force: the answers are the tuples (identity)."""
    model, joint = latent_model(seed, n, k)
    mech = SoftmaxChoice(eps)
    pdp = audit(model, "identity", mech, "pdp", engine="exact", lattice=True, information=None)
    assert len(pdp.lattice) == n * 2 ** (n - 1)
    for node in pdp.lattice:
        known = tuple(sorted(node.adversary.known))
        expected = brute_leak(joint, lambda x: x, softmax_law(eps), node.adversary.target, known)
        assert node.value == pytest.approx(expected, abs=1e-9)
    idp = audit(model, "identity", mech, "idp", engine="exact", information=None)
    w = idp.witness
    assert w.y is not None and len(w.y) == 1 and 0 <= w.y[0] < n  # the witness is a candidate index


def test_exponential_mechanism_on_counts_of_two_groups():
    """The answers are two linear counts, so a tuple outside the target's count still moves the law: the coordinate
    a known tuple fixes is not dropped (it competes in the softmax)."""
    model, joint = latent_model(4, 4, 2)
    mech = SoftmaxChoice(1.5)
    result = audit(model, "linear:1,1,0,0;0,0,1,1", mech, "pdp", engine="exact", lattice=True, information=None)
    answer = lambda x: (x[0] + x[1], x[2] + x[3])  # noqa: E731
    for node in result.lattice:
        known = tuple(sorted(node.adversary.known))
        expected = brute_leak(joint, answer, softmax_law(1.5), node.adversary.target, known)
        assert node.value == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_truncated_geometric_on_a_chain_structured_and_exact(seed):
    """A count released with a folded geometric: the structured engine (variable elimination) and the exact engine
    against the brute force, idp and pdp with known sets away from the target (a shift-only known tuple matters)."""
    n, eps = 5, 0.7
    model, joint = chain_model(seed, n)
    mech = TruncatedGeometric(eps, n)
    law = lambda a: folded_geometric(eps, n, np.array([a]))[:, 0]  # noqa: E731
    for engine in ("structured", "exact"):
        idp = audit(model, "count", mech, "idp", engine=engine, information=None)
        assert idp.engine == engine
        for i in range(n):
            assert idp.per_target[i] == pytest.approx(brute_leak(joint, sum, law, i, ()), abs=1e-9)
        for known in ((3, 4), (4,), (1, 2, 3, 4)):
            pdp = audit(model, "count", mech, "pdp", engine=engine, targets=[0], known=list(known), information=None)
            assert pdp.leakage == pytest.approx(brute_leak(joint, sum, law, 0, known), abs=1e-9)


def test_structured_witness_is_an_output_of_the_law():
    model, _ = chain_model(3, 4)
    result = audit(model, "count", TruncatedGeometric(1.0, 4), "idp", engine="structured", information=None)
    assert result.witness.y is not None and result.witness.y[0] in range(5)


# ----------------------------------------------------------------------------- the built-in joint laws


def full_space(mech, answers: np.ndarray) -> np.ndarray:
    """Every output a mechanism of the kind could give, written here (not its output_space): indices for
    report-noisy-max and the exponential mechanism, {1, 0, -1}^K for the sparse vector technique, {0, 1}^m for
    RAPPOR, 0..n for the truncated geometric."""
    k = answers.shape[1]
    kind = mech.kind
    if kind in ("report_noisy_max", "exponential"):
        return np.arange(k, dtype=float)[:, None]
    if kind == "sparse_vector":
        return np.array(list(itertools.product((1.0, 0.0, -1.0), repeat=k)))
    if kind in ("rappor", "one_time_rappor"):
        return np.array(list(itertools.product((0.0, 1.0), repeat=mech.filter_size)))
    return np.arange(mech.n + 1, dtype=float)[:, None]


@pytest.mark.parametrize("kind,query,noise,params", [
    ("report_noisy_max", "identity", {"scale": 1.5}, {"noise": "laplace"}),
    ("report_noisy_max", "linear:1,1,0;0,1,1", {"scale": 0.7}, {"noise": "exponential"}),
    ("exponential", "identity", {"epsilon": 1.2}, {}),
    ("sparse_vector", "identity", {"epsilon": 2.0}, {"variant": "1", "threshold": "0.5", "cutoff": "1"}),
    ("sparse_vector", "identity", {"epsilon": 2.0}, {"variant": "2", "threshold": "0.5", "cutoff": "2"}),
    ("sparse_vector", "identity", {"epsilon": 1.0}, {"variant": "5", "threshold": "0.5"}),
    ("one_time_rappor", "count", {}, {"f": "0.4", "filter_size": "6", "hashes": "2"}),
    ("truncated_geometric", "count", {"epsilon": 0.8}, {"n": "3"}),
])
def test_built_in_laws_on_random_models(kind, query, noise, params):
    """Each built-in joint law through the exact engine (every pdp adversary) against a brute force over every
    state and EVERY output of the kind (`full_space`, not the mechanism's output_space), the law read from the
    mechanism's log_prob (checked against closed forms and sampling in test_mechanism_laws.py)."""
    from ddpbayes.mechanisms import make_mechanism
    from ddpbayes.queries import parse_query

    model, joint = latent_model(11, 3, 2)
    q = parse_query(query).bind(model)
    mech = make_mechanism(kind, q, model.domains, params=params, **noise)
    states = np.array(list(itertools.product((0, 1), repeat=3)), dtype=float)
    answers = np.unique(q.values(states), axis=0)
    space = full_space(mech, answers)
    table = np.exp(mech.log_prob(space, answers))  # (Y, R)

    def law(a):
        return table[:, int(np.flatnonzero(np.all(answers == np.asarray(a, float), axis=1))[0])]

    answer = lambda x: q.values(np.array([x], dtype=float))[0]  # noqa: E731
    pdp = audit(model, query, kind, "pdp", lattice=True, engine="exact", params=params, information=None, **noise)
    for node in pdp.lattice:
        known = tuple(sorted(node.adversary.known))
        assert node.value == pytest.approx(brute_leak(joint, answer, law, node.adversary.target, known), abs=1e-9)


@pytest.mark.parametrize("kind,query,noise,params", [
    ("report_noisy_max", "identity", {"scale": 1.5}, {"noise": "laplace"}),
    ("sparse_vector", "identity", {"epsilon": 2.0}, {"variant": "1", "threshold": "0.5", "cutoff": "1"}),
    ("sparse_vector", "identity", {"epsilon": 1.0}, {"variant": "5", "threshold": "0.5"}),
    ("truncated_geometric", "count", {"epsilon": 0.8}, {"n": "3"}),
])
def test_classic_dp_of_a_joint_law_is_exact_on_finite_domains(kind, query, noise, params):
    """dp (model-free): max over every x_{-i} of the product of the domains, t ≠ t' and every output of the kind,
    written here; the textbook level is only an upper bound of it."""
    from ddpbayes.mechanisms import make_mechanism
    from ddpbayes.queries import parse_query

    model, _ = latent_model(11, 3, 2)
    q = parse_query(query).bind(model)
    mech = make_mechanism(kind, q, model.domains, params=params, **noise)
    states = np.array(list(itertools.product((0, 1), repeat=3)), dtype=float)
    answers = np.unique(q.values(states), axis=0)
    table = mech.log_prob(full_space(mech, answers), answers)
    row = {tuple(a): r for r, a in enumerate(answers)}
    result = audit(model, query, kind, "dp", params=params, information=None, **noise)
    for i in range(3):
        best = 0.0
        for x in states:
            for t, u in itertools.permutations((0.0, 1.0), 2):
                a, b = x.copy(), x.copy()
                a[i], b[i] = t, u
                la = table[:, row[tuple(q.values(a[None])[0])]]
                lb = table[:, row[tuple(q.values(b[None])[0])]]
                with np.errstate(invalid="ignore"):
                    d = la - lb
                best = max(best, float(np.max(np.where(np.isnan(d), -np.inf, d))))
        assert result.per_target[i] == pytest.approx(best, abs=1e-9)


def test_shipped_household_report_cases_against_the_household_joint():
    """Two cases of reports/mechanisms_under_dependence on the household (n = 6), from the household's joint written
    in tests/bruteforce.py: the truncated geometric on the count (ε = 1, counts 0..6) and the exponential mechanism
    choosing between the healthy and infected counts (histogram bins, scale 2Δ/ε = 2)."""
    from pathlib import Path

    from bruteforce import household_joint

    from ddpbayes import load_model

    model = load_model(Path(__file__).resolve().parent.parent / "models" / "household.py", {"n": 6})
    joint = household_joint(6)
    geometric = audit(model, "count", "truncated_geometric", "idp", epsilon=1.0, params={"n": "6"}, information=None)
    law = lambda a: folded_geometric(1.0, 6, np.array([a]))[:, 0]  # noqa: E731
    expected = brute_leak(joint, sum, law, 0, ())
    assert geometric.leakage == pytest.approx(expected, abs=1e-9) and expected == pytest.approx(3.13, abs=0.005)
    choice = audit(model, "histogram:-0.5,0.5,1.5", "exponential", "idp", epsilon=1.0, params={"sensitivity": "1"},
                   information=None)
    answer = lambda x: (6 - sum(x), sum(x))  # noqa: E731  (the healthy and the infected count)
    expected = brute_leak(joint, answer, softmax_law(1.0), 0, ())
    assert choice.leakage == pytest.approx(expected, abs=1e-9) and expected == pytest.approx(1.636, abs=0.0005)
