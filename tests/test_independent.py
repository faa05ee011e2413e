"""Independent tuples: dp = idp = pdp = ddp (003 Thm. 1, 004 Prop. 2).

Hand derivation. With independent tuples and a linear query w·x released with Laplace(b),
for any adversary A(i, K) and any x_K,

    L(y | t, x_K) = E_U[ exp(-|y - w_i t - c - S_U| / b) ] / (2b),   c = w_K·x_K, S_U = w_U·X_U,

(X_U independent of X_i, so its law does not depend on t). By |a| - |a'| <= |a - a'| the
log-ratio for t, t' is at most |w_i| |t - t'| / b, and as y -> +inf (or -inf) it equals
w_i (t - t') / b exactly (the common factor E[e^{(c + S_U)/b}] e^{-y/b} cancels). So

    leak(i, K) = |w_i| (max dom_i - min dom_i) / b   for every K,

which is also classic DP's sensitivity / b. Every notion gives it for every target.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytest
from bruteforce import independent_joint, leak_bruteforce

import ddpbayes
from ddpbayes import DependenceModel

NOTIONS = ["dp", "idp", "pdp", "ddp"]


@pytest.fixture(scope="module")
def bernoulli3():
    with pm.Model() as m:
        pm.Bernoulli("x0", 0.2)
        pm.Bernoulli("x1", 0.5)
        pm.Bernoulli("x2", 0.9)
    return DependenceModel(m, tuples=["x0", "x1", "x2"])


# Non-0/1 domains: DiscreteUniform(-1, 3) = {-1..3} (width 4), Categorical over 3 values {0,1,2}
# (width 2), Binomial(3, 0.3) = {0..3} (width 3).
CAT_P = [0.2, 0.5, 0.3]
BIN_N, BIN_P = 3, 0.3


@pytest.fixture(scope="module")
def mixed3():
    with pm.Model() as m:
        pm.DiscreteUniform("a", -1, 3)
        pm.Categorical("c", p=CAT_P)
        pm.Binomial("d", BIN_N, BIN_P)
    return DependenceModel(m, tuples=["a", "c", "d"])


MIXED_VALUES = [np.arange(-1, 4), np.arange(3), np.arange(BIN_N + 1)]
MIXED_WIDTHS = [4.0, 2.0, 3.0]
MIXED_MARGINALS = [
    np.full(5, 0.2),
    np.asarray(CAT_P),
    np.asarray([math.comb(BIN_N, k) * BIN_P**k * (1 - BIN_P) ** (BIN_N - k) for k in range(BIN_N + 1)]),
]


@pytest.mark.parametrize("notion", NOTIONS)
@pytest.mark.parametrize(
    ("query", "weights"), [("count", [1, 1, 1]), ("sum", [1, 1, 1]), ("linear:2,-1,0.5", [2, -1, 0.5])]
)
def test_bernoulli_every_notion(bernoulli3, notion, query, weights):
    b = 0.8
    r = ddpbayes.audit(bernoulli3, query, "laplace", notion, scale=b)
    expected = [abs(w) * 1.0 / b for w in weights]  # width of {0,1} is 1
    assert r.per_target == pytest.approx(expected, abs=1e-9)
    assert r.leakage == pytest.approx(max(expected), abs=1e-9)


@pytest.mark.parametrize("notion", NOTIONS)
def test_non_binary_domains_every_notion(mixed3, notion):
    b = 1.7
    w = [1.0, -2.0, 0.5]
    r = ddpbayes.audit(mixed3, "linear:1,-2,0.5", "laplace", notion, scale=b)
    expected = [abs(wi) * width / b for wi, width in zip(w, MIXED_WIDTHS)]  # [4/b, 4/b, 1.5/b]
    assert r.per_target == pytest.approx(expected, abs=1e-9)
    assert r.leakage == pytest.approx(max(expected), abs=1e-9)


def test_inferred_domains(mixed3):
    assert [list(d.values) for d in mixed3.domains] == [list(map(float, v)) for v in MIXED_VALUES]


def test_bruteforce_reference_agrees_with_closed_form():
    """The numpy reference itself reproduces |w_i| width_i / b on the independent joint (so that
    the property tests below compare the engine with something that is right)."""
    joint = independent_joint(MIXED_MARGINALS)
    b, w = 1.7, [1.0, -2.0, 0.5]
    for i in range(3):
        for known in [(), tuple(j for j in range(3) if j != i)]:
            got = leak_bruteforce(joint, MIXED_VALUES, w, b, i, known)
            assert got == pytest.approx(abs(w[i]) * MIXED_WIDTHS[i] / b, abs=1e-9)


def test_pdp_lattice_is_flat(mixed3):
    """Every node of the lattice (every K) gives |w_i| width_i / b (derivation above)."""
    b = 0.9
    r = ddpbayes.audit(mixed3, "sum", "laplace", "pdp", scale=b, lattice=True)
    assert len(r.lattice) == 3 * 4  # 3 targets x 2^2 known sets
    for node in r.lattice:
        i = node.adversary.target
        assert node.value == pytest.approx(MIXED_WIDTHS[i] / b, abs=1e-9), str(node.adversary)


def test_ddp_dependence_sets_empty(mixed3, bernoulli3):
    for model in (mixed3, bernoulli3):
        r = ddpbayes.audit(model, "sum", "laplace", "ddp", scale=1.0)
        assert r.dependence_sets == [[], [], []]


def test_epsilon_sets_scale_from_global_sensitivity(mixed3):
    """--epsilon e: scale = max_k |w_k| width_k / e = max(4, 4, 1.5) / e = 4/e, so
    leak_i = |w_i| width_i e / 4: [e, e, 0.375 e]."""
    e = 0.6
    r = ddpbayes.audit(mixed3, "linear:1,-2,0.5", "laplace", "idp", epsilon=e)
    assert r.per_target == pytest.approx([e, e, 0.375 * e], abs=1e-9)
    assert r.mechanism["scale"] == pytest.approx(4 / e)


def test_mean_query(mixed3):
    """mean = (1/3) sum: leak_i = width_i / (3 b)."""
    b = 0.5
    r = ddpbayes.audit(mixed3, "mean", "laplace", "idp", scale=b)
    assert r.per_target == pytest.approx([w / (3 * b) for w in MIXED_WIDTHS], abs=1e-9)


def test_geometric_on_independent_bernoulli(bernoulli3):
    """Two-sided geometric, P(y|q) ∝ alpha^{|y-q|}, alpha = e^{-1/b}: for y >= 3 (integer) the ratio
    for t = 1 vs 0 is alpha^{-1} = e^{1/b}, and by the triangle inequality no integer y does better."""
    b = 1.3
    r = ddpbayes.audit(bernoulli3, "count", "geometric", "idp", scale=b)
    assert r.per_target == pytest.approx([1 / b] * 3, abs=1e-9)


def test_vector_tuple_variable():
    """tuples='x' names the elements of one vector variable as the tuples x[0], x[1], x[2]."""
    with pm.Model() as m:
        pm.Bernoulli("x", p=[0.2, 0.5, 0.7])
    model = DependenceModel(m, tuples="x")
    assert model.names == ["x[0]", "x[1]", "x[2]"]
    b = 0.5
    r = ddpbayes.audit(model, "linear:1,3,-1", "laplace", "idp", scale=b)
    assert r.per_target == pytest.approx([1 / b, 3 / b, 1 / b], abs=1e-9)


def test_zero_weight_leaks_nothing(bernoulli3):
    """w_1 = 0: the release does not depend on X_1 and the tuples are independent: 0."""
    r = ddpbayes.audit(bernoulli3, "linear:1,0,1", "laplace", "idp", scale=1.0)
    assert r.per_target == pytest.approx([1.0, 0.0, 1.0], abs=1e-9)


@pytest.mark.parametrize("notion", ["dp", "idp", "pdp"])
@pytest.mark.parametrize(
    ("edges", "expected_sens"),
    [
        # 3 bins [0,1), [1,2), [2,3]: a change of one tuple moves one count down and another up: L1 = 2
        ("0,1,2,3", [2.0, 2.0, 2.0]),
        # one bin [0.5, 2.5] holding 1 and 2; 0 falls outside: a change adds or removes one count: L1 = 1
        ("0.5,2.5", [1.0, 1.0, 1.0]),
    ],
)
def test_histogram_independent_tuples(notion, edges, expected_sens):
    """Independent tuples, histogram with Laplace(b) on every bin. For the target moving from bin j to
    bin k (others fixed or independent), the log-ratio is sum_c (|y_c - q_c| - |y_c - q'_c|)/b
    <= ||q - q'||_1 / b by the triangle inequality, with equality in the limit y_j -> +inf,
    y_k -> -inf (independence lets the other tuples' factor cancel). So every notion gives L1/b."""
    with pm.Model() as m:
        for k in range(3):
            pm.Categorical(f"x{k}", p=[0.2, 0.3, 0.5])
    b = 0.7
    r = ddpbayes.audit(DependenceModel(m, ["x0", "x1", "x2"]), "histogram:" + edges, "laplace", notion, scale=b)
    assert r.per_target == pytest.approx([s / b for s in expected_sens], abs=1e-9)


def test_histogram_epsilon_scale():
    """--epsilon e on a histogram whose tuples can change bins: scale = 2/e, so dp = e."""
    with pm.Model() as m:
        pm.Categorical("x0", p=[0.5, 0.5])
        pm.Categorical("x1", p=[0.5, 0.5])
    r = ddpbayes.audit(DependenceModel(m, ["x0", "x1"]), "histogram:0,1,2", "laplace", "dp", epsilon=0.3)
    assert r.mechanism["scale"] == pytest.approx(2 / 0.3)
    assert r.leakage == pytest.approx(0.3)
