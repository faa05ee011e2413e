"""A user's mechanism, written outside the package, audited by the exact engine (DESIGN §5.1).

`KaryResponse` is k-ary randomized response on a categorical identity query: each tuple is
reported truthfully with probability e^ε / (e^ε + k - 1), else as one of the other k - 1
categories uniformly. Its output space is finite, so the supremum over y of DESIGN §2.1 is a
maximum over every output: the mechanism hands the engine all k categories per coordinate.

The expected leakages come from a brute force written here, from the definition: enumerate
every x (the joint from the model's own tables, not from PyMC) and every y in {0..k-1}^n,
L(y | t, x_K) = Σ_x P(x) Π_j K(y_j | x_j) / P(t, x_K), and take the largest log-ratio.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from ddpbayes import DependenceModel
from ddpbayes.auditing import audit
from ddpbayes.errors import InputError
from ddpbayes.engines.gaussian import GaussianEngine
from ddpbayes.engines.structured import StructuredEngine
from ddpbayes.mechanisms import Laplace, Mechanism
from ddpbayes.model.domains import Domain, Finite, Interval
from ddpbayes.problem import Problem
from ddpbayes.queries import Identity, Query, parse_query
from ddpbayes.reports.views.calibrated import calibrated_scales

# ----------------------------------------------------------------------------- the user's mechanism


@dataclass(frozen=True)
class KaryResponse(Mechanism):
    """k-ary randomized response on categories 0..k-1: keep with probability e^ε/(e^ε + k - 1)."""

    epsilon: float
    k: int
    kind: str = "kary_response"

    def log_kernel(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        grid = np.arange(self.k, dtype=float)  # every output: the sup over y is a max over them
        log_norm = math.log(math.exp(self.epsilon) + self.k - 1)
        same = grid[:, None] == np.asarray(q, dtype=float)[None, :]
        return grid, np.where(same, self.epsilon - log_norm, -log_norm)

    def grid_size(self, levels: int) -> int:
        return self.k

    def dp_leakage(self, sensitivity: float) -> float:
        return self.epsilon if sensitivity > 0 else 0.0

    def check(self, query: Query, domains: Sequence[Domain]) -> None:
        if not isinstance(query, Identity):
            raise InputError("k-ary response perturbs the tuples themselves: use the identity query")
        for j, d in enumerate(domains):
            if not (isinstance(d, Finite) and set(d.values) <= set(range(self.k))):
                raise InputError(f"tuple {j} has domain {d}, not within the categories 0..{self.k - 1}")

    def describe(self) -> dict:
        return {"kind": self.kind, "epsilon": self.epsilon, "categories": self.k}


@dataclass(frozen=True)
class WideLaplace(Laplace):
    """A user's kernel built on Laplace under its own kind: Laplace of twice `scale`, so no closed
    form of Laplace(scale) is its leakage."""

    kind: str = "wide_laplace"

    def log_kernel(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return Laplace(2 * self.scale).log_kernel(q)


# ----------------------------------------------------------------------------- models and brute force


def latent_class_model(seed: int, n: int, k: int, classes: int = 2):
    """h ~ Cat(w), x_j | h ~ Cat(P_j[h]) with random tables (some zeros): the PyMC model, and
    the joint P(x) (k,)*n computed here from the same tables."""
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.ones(classes))
    tables = rng.uniform(0.05, 1, size=(n, classes, k)) * (rng.uniform(size=(n, classes, k)) > 0.25)
    tables[..., 0] += tables.sum(axis=-1) == 0
    tables /= tables.sum(axis=-1, keepdims=True)
    with pm.Model() as m:
        h = pm.Categorical("h", p=w)
        for j in range(n):
            pm.Categorical(f"x{j}", p=pt.as_tensor_variable(tables[j])[h])
    joint = np.zeros((k,) * n)
    for c in range(classes):
        term = np.array(w[c])
        for j in range(n):
            term = np.multiply.outer(term, tables[j, c])
        joint += term
    domains = {f"x{j}": Finite(range(k)) for j in range(n)}  # every category, even one of probability 0
    return DependenceModel(m, tuples=[f"x{j}" for j in range(n)], domains=domains), joint


def brute_leak(joint: np.ndarray, eps: float, i: int, known: tuple[int, ...]) -> float:
    """leak(i, K) of k-ary response from the definition, every x and every y enumerated."""
    n, k = joint.ndim, joint.shape[0]
    keep = math.exp(eps) / (math.exp(eps) + k - 1)
    kernel = np.where(np.eye(k, dtype=bool), keep, (1 - keep) / (k - 1))  # K[y, x]
    xs = list(itertools.product(range(k), repeat=n))
    ys = list(itertools.product(range(k), repeat=n))
    px = np.array([joint[x] for x in xs])
    lik = np.array([[math.prod(kernel[y[j], x[j]] for j in range(n)) for x in xs] for y in ys])  # (Y, X)
    best = 0.0
    for x_known in itertools.product(range(k), repeat=len(known)):
        match = np.array([all(x[a] == v for a, v in zip(known, x_known)) for x in xs])
        curves = []
        for t in range(k):
            rows = match & np.array([x[i] == t for x in xs])
            mass = px[rows].sum()
            if mass > 0:
                curves.append(lik[:, rows] @ px[rows] / mass)
        for a, b in itertools.permutations(curves, 2):
            best = max(best, float(np.max(np.log(a) - np.log(b))))
    return best


# ----------------------------------------------------------------------------- tests


def test_kernel_is_a_distribution_with_ratio_e_eps():
    mech = KaryResponse(0.7, 4)
    grid, log_k = mech.log_kernel(np.array([0.0, 2.0, 3.0]))
    assert list(grid) == [0, 1, 2, 3]
    assert np.allclose(np.exp(log_k).sum(axis=0), 1.0)
    assert np.max(log_k[:, :, None] - log_k[:, None, :]) == pytest.approx(0.7, abs=1e-12)


@pytest.mark.parametrize("seed,n,k,eps", [(1, 3, 3, 1.0), (2, 3, 3, 0.3), (3, 2, 4, 2.0), (4, 3, 2, 0.8)])
def test_user_mechanism_audited_exactly(seed, n, k, eps):
    """idp, pdp (every adversary of the lattice) and dp against the brute force, to 1e-9."""
    model, joint = latent_class_model(seed, n, k)
    mech = KaryResponse(eps, k)
    idp = audit(model, "identity", mech, "idp", engine="exact")
    assert idp.engine == "exact"
    for i in range(n):
        assert idp.per_target[i] == pytest.approx(brute_leak(joint, eps, i, ()), abs=1e-9)
    pdp = audit(model, "identity", mech, "pdp", engine="exact", lattice=True)
    assert len(pdp.lattice) == n * 2 ** (n - 1)
    for node in pdp.lattice:
        known = tuple(sorted(node.adversary.known))
        assert node.value == pytest.approx(brute_leak(joint, eps, node.adversary.target, known), abs=1e-9)
    assert audit(model, "identity", mech, "dp").leakage == pytest.approx(eps, abs=1e-12)
    assert idp.mechanism == {"kind": "kary_response", "epsilon": eps, "categories": k}


def test_independent_tuples_leak_exactly_eps():
    """With independent tuples every notion is classic DP: K(t|t) / K(t|t') = e^ε (hand derivation)."""
    with pm.Model() as m:
        for j in range(3):
            pm.Categorical(f"x{j}", p=[0.2, 0.5, 0.3])
    model = DependenceModel(m, tuples=["x0", "x1", "x2"])
    for notion in ("idp", "pdp", "ddp"):
        assert audit(model, "identity", KaryResponse(1.3, 3), notion).leakage == pytest.approx(1.3, abs=1e-9)


def test_profile_capabilities_default_to_not_available():
    """A pure-ε mechanism has no privacy profile: `delta` None, no δ grid, and the profile
    questions an engine asks of a `profile` mechanism are refused with a reason naming it."""
    mech = KaryResponse(1.0, 3)
    assert not mech.profile and mech.delta is None and mech.deltas == ()
    levels, logw = np.array([0.0, 1.0]), np.log([[0.5, 0.5]])
    for ask in (lambda: mech.pair_profiles(logw, logw, levels), lambda: mech.pair_rho(logw[0], logw[0], levels),
                lambda: mech.classic_profile(1.0)):
        with pytest.raises(InputError, match="kary_response noise has no privacy profile"):
            ask()


def test_user_check_refuses_what_it_cannot_release():
    model, _ = latent_class_model(5, 2, 3)
    with pytest.raises(InputError, match="identity"):
        audit(model, "sum", KaryResponse(1.0, 3), "idp")
    with pytest.raises(InputError, match="categories 0..1"):
        audit(model, "identity", KaryResponse(1.0, 2), "idp")


def test_a_laplace_subclass_under_its_own_kind_is_not_taken_for_laplace():
    """The Gaussian and structured engines and the report's calibration read Laplace's closed forms
    and scale: they take the built-in kind only (as they compared kinds before #26), and refuse a
    subclass with its own kind and kernel with a reason naming it."""
    with pm.Model() as m:  # a binary chain (structured) and a Gaussian pair (gaussian engine)
        x0 = pm.Bernoulli("x0", 0.3)
        pm.Bernoulli("x1", pt.switch(x0, 0.8, 0.2))
    chain = DependenceModel(m, tuples=["x0", "x1"])
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(2), cov=np.array([[1.0, 0.5], [0.5, 1.0]]))
    pair = DependenceModel(m, tuples="x", domains=Interval(0, 1))
    spec = SimpleNamespace(claim=1.0, epsilon=None, calibrate=True)
    for mech in (Laplace(1.0), WideLaplace(1.0), Laplace(1.0, kind="wide_laplace")):
        refused = mech.kind == "wide_laplace"
        assert mech.laplace is not refused and mech.calibratable is not refused
        assert (mech.laplace_scales(2) is None) is refused
        for engine, model, reason in ((GaussianEngine(), pair, "not wide_laplace"),
                                      (StructuredEngine(), chain, "wide_laplace mechanism is not Laplace")):
            found = engine.supports(Problem(model, parse_query("sum").bind(model), mech))
            assert (found is not None and reason in found) is refused, (engine.name, mech, found)
        if refused:
            scales, notes = calibrated_scales(spec, Problem(chain, parse_query("sum").bind(chain), mech), [], print)
            assert scales == {} and notes == ["no calibration: calibrate sets Laplace scales, and the mechanism is "
                                              "wide_laplace"]


def test_a_laplace_subclass_under_its_own_kind_is_audited_with_its_own_kernel():
    """Laplace's running sums and information integrals at `scale` are not a subclass's kernel.
    A perfectly dependent pair of bits released as a count through Laplace(B): idp = 2/B (004
    Example 2); WideLaplace(b) is Laplace(2b), so idp = 1/b. Its mixtures are its own kernel's
    (those of Laplace(2b)), and 004's integrals, written for Laplace(b), are not available."""
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", 0.4)
        pm.Bernoulli("x1", pt.switch(x0, 1.0, 0.0))
    twins = DependenceModel(m, tuples=["x0", "x1"])
    rng = np.random.default_rng(7)
    for b in (0.5, 1.0, 3.0):
        r = audit(twins, "count", WideLaplace(b), "idp", engine="exact", information="nats")
        assert r.leakage == pytest.approx(1 / b, rel=1e-12)
        assert r.information is None and r.information_reason == "no integral for the wide_laplace mechanism"
        laplace = audit(twins, "count", Laplace(b), "idp", engine="exact", information=None)
        assert laplace.leakage == pytest.approx(2 / b, rel=1e-12)
        q, logw = np.sort(rng.uniform(-3, 3, 6)), np.log(rng.dirichlet(np.ones(6), size=4))
        grid, mixtures = WideLaplace(b).log_mixtures(logw, q, 10**6)
        wide_grid, wide = Laplace(2 * b).log_mixtures(logw, q, 10**6)
        np.testing.assert_array_equal(grid, wide_grid)
        np.testing.assert_allclose(mixtures, wide, rtol=1e-12)
