"""The gaussian engine, the fast pdp lattice and the symbolic derivation (DESIGN §2.2, §3.1–3.2).

Expectations come from independent derivations written here: hand-made covariances, the
equicorrelation closed form, numpy Schur complements over every subset, and a numerical
convolution of the Gaussian and Laplace densities; never from the engine's own code.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math

import numpy as np
import pymc as pm
import pytest
import sympy
from scipy import integrate, stats

from ddpbayes import DependenceModel, InputError, Interval, Laplace, Problem, audit, load_model, parse_query
from ddpbayes.cli.main import main
from ddpbayes.engines import ENGINES
from ddpbayes.symbolic import derive_gaussian, derive_gaussian_rho

GAUSSIAN = ENGINES["gaussian"]


def mvnormal(cov, domain=Interval(0, 1), mean=None) -> DependenceModel:
    cov = np.asarray(cov, dtype=float)
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(len(cov)) if mean is None else mean, cov=cov)
    return DependenceModel(m, tuples="x", domains=domain)


def equicorrelation(n: int, rho: float, var: float = 1.0) -> np.ndarray:
    return var * ((1 - rho) * np.eye(n) + rho * np.ones((n, n)))


def random_spd(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, n))
    return a @ a.T / n + 0.3 * np.eye(n)


def schur_leak(cov, w, i, known, width, b) -> float:
    """leak(i, K) from DESIGN §2.2 by plain numpy: C = Sigma_SS - Sigma_SK Sigma_KK^-1 Sigma_KS."""
    n = len(w)
    s = [i] + [j for j in range(n) if j != i and j not in known]
    k = sorted(known)
    c = cov[np.ix_(s, s)]
    if k:
        c = c - cov[np.ix_(s, k)] @ np.linalg.inv(cov[np.ix_(k, k)]) @ cov[np.ix_(k, s)]
    beta = c[0] / c[0, 0]
    return width / b * abs(w[i] + sum(w[j] * beta[p] for p, j in enumerate(s) if p > 0))


# --- closed forms -------------------------------------------------------------------------


@pytest.mark.parametrize("rho", [0.3, -0.2, 0.0])
@pytest.mark.parametrize("query", ["sum", "mean"])
def test_equicorrelation(rho, query):
    n, lo, hi, b = 5, -1.0, 2.0, 0.5
    model = mvnormal(equicorrelation(n, rho, var=2.0), Interval(lo, hi))
    w = 1.0 if query == "sum" else 1.0 / n
    r = audit(model, query, "laplace", "idp", scale=b)
    assert r.engine == "gaussian"
    assert r.leakage == pytest.approx(w * abs(1 + (n - 1) * rho) * (hi - lo) / b, rel=1e-12)
    # knowing m others leaves the rest equicorrelated with rho / (1 + m rho)
    for m in range(n):
        cond = rho / (1 + m * rho)
        expected = w * abs(1 + (n - 1 - m) * cond) * (hi - lo) / b
        got = audit(model, query, "laplace", "pdp", scale=b, targets=[0], known=list(range(1, m + 1)))
        assert got.leakage == pytest.approx(expected, rel=1e-12)


def test_independent_tuples_every_notion_agrees():
    model = mvnormal(np.diag([1.0, 4.0, 0.5]), Interval(0, 2))
    for notion in ("dp", "idp", "pdp", "ddp"):
        assert audit(model, "sum", "laplace", notion, scale=1.0).leakage == pytest.approx(2.0)


def test_design_counterexample_stronger_adversary_leaks_more():
    model = mvnormal([[1, 1, -1], [1, 1.5, -1], [-1, -1, 1.5]], Interval(0, 1))
    assert audit(model, "sum", "laplace", "pdp", scale=1.0, targets=[0], known=[]).leakage == pytest.approx(1.0)
    assert audit(model, "sum", "laplace", "pdp", scale=1.0, targets=[0], known=[2]).leakage == pytest.approx(2.0)
    worst = audit(model, "sum", "laplace", "pdp", scale=1.0)
    assert worst.leakage == pytest.approx(2.0)
    assert (worst.witness.adversary.target, worst.witness.adversary.known) == (0, frozenset({2}))


def test_witness_and_json():
    model = mvnormal([[1, -0.8], [-0.8, 1]], Interval(60, 80))
    r = audit(model, "linear:1,2", "laplace", "idp", scale=4.0, targets=[0])
    assert r.leakage == pytest.approx(20 / 4 * abs(1 - 2 * 0.8))
    w = r.to_dict()["witness"]
    assert w["known_values"] is None and w["y"] == "inf"
    assert (w["t"], w["t_prime"]) == (60, 80)  # negative coefficient: t = lo beats t' = hi as y -> +inf
    assert r.to_dict()["engine"] == "gaussian"


def test_unbounded_target_gives_inf_with_reason_unless_coefficient_zero():
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(2), cov=np.array([[1.0, 0.5], [0.5, 1.0]]))
    model = DependenceModel(m, tuples="x")
    r = audit(model, "sum", "laplace", "idp", scale=1.0)
    assert math.isinf(r.leakage) and "unbounded" in r.reason
    assert r.to_dict()["leakage"] == "inf"
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(2), cov=np.eye(2))
    zero = audit(DependenceModel(m, tuples="x"), "linear:0,1", "laplace", "idp", scale=1.0, targets=[0])
    assert zero.leakage == 0.0


# --- reading the PyMC graph ---------------------------------------------------------------


def chain_model():
    """x0 -> x1 -> x2 (also from x0); latent z -> x3 (also from x2) and z -> x4."""
    with pm.Model() as m:
        x0 = pm.Normal("x0", 0.0, 1.0)
        x1 = pm.Normal("x1", 0.8 * x0 + 1.0, 0.6)
        x2 = pm.Normal("x2", -0.5 * x1 + 0.3 * x0, 0.7)
        z = pm.Normal("z", 2.0, 1.0)
        pm.Normal("x3", z + x2, 0.5)
        pm.Normal("x4", -z, 1.0)
    return DependenceModel(m, tuples=["x0", "x1", "x2", "x3", "x4"], domains=Interval(-1, 1))


def chain_covariance() -> np.ndarray:
    # x = A e with e = (e0, e1, e2, ez, e3, e4) independent, sds (1, .6, .7, 1, .5, 1), by hand
    a = np.array(
        [
            [1, 0, 0, 0, 0, 0],
            [0.8, 1, 0, 0, 0, 0],
            [-0.1, -0.5, 1, 0, 0, 0],  # -0.5 (0.8 e0 + e1) + 0.3 e0 + e2
            [-0.1, -0.5, 1, 1, 1, 0],
            [0, 0, 0, -1, 0, 1],
        ]
    )
    return a @ np.diag(np.array([1, 0.6, 0.7, 1, 0.5, 1]) ** 2) @ a.T


def test_chain_of_normals_equals_the_mvnormal():
    chain, joint = chain_model(), mvnormal(chain_covariance(), Interval(-1, 1))
    for query in ("sum", "linear:1,-2,0.5,3,-1"):
        a = audit(chain, query, "laplace", "pdp", scale=0.7, lattice=True)
        b = audit(joint, query, "laplace", "pdp", scale=0.7, lattice=True)
        assert a.engine == b.engine == "gaussian"
        assert [r.adversary for r in a.lattice] == [r.adversary for r in b.lattice]
        np.testing.assert_allclose([r.value for r in a.lattice], [r.value for r in b.lattice], rtol=1e-10)
        fast = audit(chain, query, "laplace", "pdp", scale=0.7)
        assert fast.leakage == pytest.approx(a.leakage, rel=1e-10)
    ddp = audit(chain, "sum", "laplace", "ddp", scale=1.0)
    assert ddp.dependence_sets[4] == [3]  # x4 shares only the latent z with x3
    assert ddp.dependence_sets[0] == [1, 2, 3]


def test_latent_gaussian_is_marginalised_to_equicorrelation():
    with pm.Model() as m:
        z = pm.Normal("z", 0.0, 1.0)
        pm.Normal("x", z, 1.0, shape=4)
    model = DependenceModel(m, tuples="x", domains=Interval(0, 1))
    assert audit(model, "sum", "laplace", "idp", scale=1.0).leakage == pytest.approx(1 + 3 * 0.5)


def test_non_gaussian_structures_fall_back():
    problem = lambda model, q="sum", mech=Laplace(1.0): Problem(model, parse_query(q), mech)  # noqa: E731
    with pm.Model() as m:
        x0 = pm.Normal("x0", 0.0, 1.0)
        pm.Normal("x1", x0**2, 1.0)
    assert "not affine" in GAUSSIAN.supports(problem(DependenceModel(m, ["x0", "x1"], Interval(0, 1))))
    with pm.Model() as m:
        s = pm.HalfNormal("s", 1.0)
        pm.Normal("x0", 0.0, s)
    assert "HalfNormal" in GAUSSIAN.supports(problem(DependenceModel(m, ["x0"], Interval(0, 1))))
    with pm.Model() as m:
        x0 = pm.Normal("x0", 0.0, 1.0)
        pm.Normal("x1", x0, pm.math.exp(x0))
    assert "sigma" in GAUSSIAN.supports(problem(DependenceModel(m, ["x0", "x1"], Interval(0, 1))))
    gauss = mvnormal(np.eye(2))
    assert GAUSSIAN.supports(problem(gauss)) is None
    assert "linear" in GAUSSIAN.supports(problem(gauss, "histogram:0,0.5,1"))


def test_non_positive_definite_and_singular_covariances_are_input_errors(tmp_path, capsys):
    with pytest.raises(InputError, match="not positive semi-definite"):
        audit(mvnormal([[1, 2], [2, 1]]), "sum", "laplace", "idp", scale=1.0)
    with pytest.raises(InputError, match="singular"):
        audit(mvnormal([[1, 1], [1, 1]]), "sum", "laplace", "idp", scale=1.0)
    with pytest.raises(InputError, match="singular conditional covariance"):
        derive_gaussian("[[1,1],[1,1]]", known=[1])
    with pytest.raises(InputError, match="not positive semi-definite"):
        derive_gaussian("[[1,2],[2,1]]")
    model_file = tmp_path / "bad.py"
    model_file.write_text(
        "import numpy as np, pymc as pm\nfrom ddpbayes import DependenceModel, Interval\n"
        "def build():\n    with pm.Model() as m:\n"
        "        pm.MvNormal('x', mu=np.zeros(2), cov=np.array([[1.0, 2.0], [2.0, 1.0]]))\n"
        "    return DependenceModel(m, tuples='x', domains=Interval(0, 1))\n"
    )
    assert main(["audit", str(model_file), "--query", "sum", "--mechanism", "laplace", "--scale", "1", "--notion", "idp"]) == 2
    assert main(["derive", "gaussian", "--cov", "[[1,1],[1,1]]", "--known", "1"]) == 2
    assert main(["derive", "gaussian", "--cov", "[[1,2],[2,1]]"]) == 2
    assert main(["derive", "gaussian", "--cov", "[[1,__import__('os')],[1,1]]"]) == 2
    assert capsys.readouterr().err.count("error:") == 4


# --- the closed form against a numerical convolution ----------------------------------------


def _log_likelihood(y: float, mean: float, sd: float, b: float) -> float:
    """log of ∫ N(u; mean, sd^2) Lap(y - u; b) du by quadrature."""
    lo, hi = mean - 15 * sd, mean + 15 * sd
    f = lambda u: stats.norm.pdf(u, mean, sd) * math.exp(-abs(y - u) / b) / (2 * b)  # noqa: E731
    pts = [y] if lo < y < hi else None
    value, _ = integrate.quad(f, lo, hi, points=pts, limit=400, epsabs=0, epsrel=1e-12)
    return math.log(value)


@pytest.mark.parametrize("known", [(), (2,)])
def test_closed_form_against_numerical_convolution(known):
    cov = np.array([[1.0, 0.6, 0.2], [0.6, 1.0, 0.3], [0.2, 0.3, 1.0]])
    lo, hi, b, x_known = 0.0, 1.0, 1.0, 0.7
    # q = X0 + X1 + X2 given X_A = a, A = {0} + K: Gaussian with the textbook conditional moments
    a_idx = [0, *known]
    u_idx = [j for j in range(3) if j not in a_idx]
    gain = cov[np.ix_(u_idx, a_idx)] @ np.linalg.inv(cov[np.ix_(a_idx, a_idx)])
    sd = math.sqrt((cov[np.ix_(u_idx, u_idx)] - gain @ cov[np.ix_(a_idx, u_idx)]).sum())

    def mean(t):
        a = np.array([t, *[x_known] * len(known)])
        return a.sum() + (gain @ a).sum()

    ratios = [_log_likelihood(y, mean(hi), sd, b) - _log_likelihood(y, mean(lo), sd, b) for y in (0, 2, 4, 8, 12)]
    model = mvnormal(cov, Interval(lo, hi))
    formula = audit(model, "sum", "laplace", "pdp", scale=b, targets=[0], known=list(known)).leakage
    assert formula == pytest.approx((mean(hi) - mean(lo)) / b, rel=1e-12)
    assert all(r <= formula + 1e-9 for r in ratios)  # the formula bounds every y
    assert ratios == sorted(ratios)  # and is approached as y grows
    assert ratios[-1] == pytest.approx(formula, abs=1e-6)
    assert ratios[0] < formula - 0.1  # a grid near the data would under-report


# --- the fast pdp lattice ------------------------------------------------------------------


def test_pdp_lattice_max_equals_brute_force_n8():
    n, b, width = 8, 0.5, 3.0
    cov = random_spd(n, seed=11)
    rng = np.random.default_rng(5)
    w = rng.normal(size=n)
    model = mvnormal(cov, Interval(-1, 2))
    query = "linear:" + ",".join(repr(float(v)) for v in w)
    brute = {}
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for size in range(n):
            for known in itertools.combinations(others, size):
                brute[(i, frozenset(known))] = schur_leak(cov, w, i, known, width, b)
    fast = audit(model, query, "laplace", "pdp", scale=b)
    assert fast.leakage == pytest.approx(max(brute.values()), rel=1e-10)
    adv = fast.witness.adversary
    assert brute[(adv.target, adv.known)] == pytest.approx(fast.leakage, rel=1e-10)
    for i in range(n):
        assert fast.per_target[i] == pytest.approx(max(v for (t, _), v in brute.items() if t == i), rel=1e-10)
    listed = audit(model, query, "laplace", "pdp", scale=b, lattice=True)
    assert len(listed.lattice) == n * 2 ** (n - 1)
    for r in listed.lattice:
        assert r.value == pytest.approx(brute[(r.adversary.target, r.adversary.known)], rel=1e-9, abs=1e-12)


def test_greedy_search_is_a_lower_bound_and_exact_with_a_wide_beam():
    cov = random_spd(7, seed=3)
    model = mvnormal(cov, Interval(0, 1))
    problem = Problem(model, parse_query("linear:1,-1,2,0.5,-2,1,1"), Laplace(1.0))
    exact = GAUSSIAN.pdp_worst(problem, range(7))
    narrow = GAUSSIAN.pdp_worst(problem, range(7), top_k=1)
    wide = GAUSSIAN.pdp_worst(problem, range(7), top_k=20)  # C(6, 3) = 20: every known set kept
    for e, g, full in zip(exact, narrow, wide):
        assert g.value <= e.value * (1 + 1e-12)
        assert full.value == pytest.approx(e.value, rel=1e-12)


# --- symbolic derivation -------------------------------------------------------------------


def test_symbolic_equicorrelation_closed_form():
    d = derive_gaussian("[[1,rho,rho,rho],[rho,1,rho,rho],[rho,rho,1,rho],[rho,rho,rho,1]]")
    rho, width, b = sympy.Symbol("rho", real=True), sympy.Symbol("width", positive=True), sympy.Symbol("b", positive=True)
    assert sympy.simplify(d.expression - width * sympy.Abs(1 + 3 * rho) / b) == 0
    assert d.value is None


def test_symbolic_equals_numeric_at_random_substitutions():
    names = [[f"s{min(i, j)}{max(i, j)}" for j in range(4)] for i in range(4)]
    text = "[" + ",".join("[" + ",".join(row) + "]" for row in names) + "]"
    rng = np.random.default_rng(7)
    for trial in range(4):
        cov = random_spd(4, seed=100 + trial)
        w = np.round(rng.normal(size=4), 3)
        target = int(rng.integers(4))
        known = sorted(int(k) for k in rng.choice([k for k in range(4) if k != target], size=trial % 3, replace=False))
        d = derive_gaussian(text, target=target, known=known, weights=",".join(map(str, w)))
        values = {sympy.Symbol(names[i][j], real=True): cov[i, j] for i in range(4) for j in range(i, 4)}
        values.update({sympy.Symbol("width", positive=True): 2.5, sympy.Symbol("b", positive=True): 0.8})
        symbolic = float(d.expression.subs(values))
        numeric = audit(mvnormal(cov, Interval(-0.5, 2.0)), "linear:" + ",".join(map(str, w)), "laplace", "pdp",
                        scale=0.8, targets=[target], known=known).leakage
        assert symbolic == pytest.approx(numeric, rel=1e-9)


def test_derive_cli_json_parses_back(capsys):
    assert main(["derive", "gaussian", "--cov", "[[1,rho],[rho,1]]", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"expression", "latex", "value", "assumptions"} and out["value"] is None
    expr = sympy.sympify(out["expression"])
    assert expr.subs({"rho": 0.5, "width": 2, "b": 4}) == pytest.approx(0.75)
    assert main(["derive", "gaussian", "--cov", "[[1,1,-1],[1,1.5,-1],[-1,-1,1.5]]", "--known", "2",
                 "--width", "1", "--scale", "1", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == 2.0


def test_dependence_coefficient_of_a_gaussian_pair():
    # 000 Example 1's slope 0.5 with unit widths gives rho = 0.5, whatever the Laplace scale
    assert derive_gaussian_rho([[1, 0.5], [0.5, 1.25]], width_i=1, width_j=1).value == pytest.approx(0.5)
    d = derive_gaussian_rho("[[s,c],[c,t]]")
    c, s = sympy.Symbol("c", real=True), sympy.Symbol("s", real=True)
    wi, wj = sympy.Symbol("width_i", positive=True), sympy.Symbol("width_j", positive=True)
    assert sympy.simplify(d.expression - sympy.Abs(c / s) * wi / wj) == 0
    # the definition: sup over y of the log-ratio of Laplace-smoothed conditionals, far in the tail
    beta, v, sigma, d1, d2 = 0.5, 1.0, 0.7, 1.0, 0.0
    log_ratio = _log_likelihood(12.0, beta * d1, math.sqrt(v), sigma) - _log_likelihood(12.0, beta * d2, math.sqrt(v), sigma)
    assert log_ratio == pytest.approx(0.5 * (d1 - d2) / sigma, abs=1e-6)


# --- speed and the Galton model ------------------------------------------------------------


def test_pdp_fast_path_does_not_list_the_lattice():
    n = 14  # 14 * 2^13 = 114,688 adversaries
    cov = random_spd(n, seed=2)
    r = audit(mvnormal(cov, Interval(0, 1)), "sum", "laplace", "pdp", scale=1.0)
    assert r.seconds < 10 and r.lattice is None
    w = np.ones(n)
    for i in range(n):  # at least the weakest and the strongest adversary
        others = [j for j in range(n) if j != i]
        assert r.per_target[i] >= max(schur_leak(cov, w, i, k, 1, 1) for k in ([], others)) * (1 - 1e-12)
    adv = r.witness.adversary
    assert schur_leak(cov, w, adv.target, adv.known, 1, 1) == pytest.approx(r.leakage, rel=1e-10)


def test_galton_family_mean_height(models_dir):
    fit = json.loads((models_dir / "data" / "galton_fit.json").read_text())
    data = (models_dir / "data" / "galton_families.csv").read_bytes()
    assert hashlib.sha256(data).hexdigest() == "6a6151d65a9f527d21ce06640320cedd22380d79d1b2bd0c1b92a33de2d1db85"
    rho = fit["tau2"] / (fit["tau2"] + fit["sigma2"])
    assert 0.2 < rho < 0.6 and fit["rhat_max"] < 1.01
    for k in (2, 4):
        model = load_model(models_dir / "galton_families.py", {"k": k})
        assert model.domains[0] == Interval(56, 79)
        idp = audit(model, "mean", "laplace", "idp", epsilon=1.0)
        pdp = audit(model, "mean", "laplace", "pdp", epsilon=1.0)
        assert idp.leakage == pytest.approx(1 + (k - 1) * rho, rel=1e-12)
        assert pdp.leakage == pytest.approx(idp.leakage, rel=1e-12) and pdp.witness.adversary.known == frozenset()


# --- identity: A = I in the multi-row formula (issue #15 part 4) ----------------------------


def identity_leak(cov, i, known, width, b) -> float:
    """Identity released with Lap(b) per tuple, by hand: given X_i = t and x_K, the free tuple j
    moves with slope beta_j = C_ji / C_ii (C = Cov given X_K, a Schur complement) and the known
    ones not at all, so c(i, K) = e_i + sum_j beta_j e_j and leak = width (1 + sum_j |beta_j|) / b."""
    n = len(cov)
    s = [i] + [j for j in range(n) if j != i and j not in known]
    k = sorted(known)
    c = cov[np.ix_(s, s)]
    if k:
        c = c - cov[np.ix_(s, k)] @ np.linalg.inv(cov[np.ix_(k, k)]) @ cov[np.ix_(k, s)]
    return width / b * (1 + np.abs(c[0, 1:] / c[0, 0]).sum())


def test_identity_two_tuples_by_hand():
    """Sigma = [[1, 0.6], [0.6, 2]], domain [0, 3], b = 2: target 0 moves X_1 with slope
    beta = 0.6 / 1, so leak = 3 (1 + 0.6) / 2 = 2.4; target 1: beta = 0.6 / 2 = 0.3, leak =
    3 (1.3) / 2 = 1.95; knowing the other tuple leaves only the own coordinate: 3 / 2."""
    model = mvnormal([[1.0, 0.6], [0.6, 2.0]], Interval(0, 3))
    r = audit(model, "identity", "laplace", "idp", scale=2.0)
    assert r.engine == "gaussian"
    assert r.per_target == pytest.approx([2.4, 1.95], rel=1e-12)
    for i in (0, 1):
        pdp = audit(model, "identity", "laplace", "pdp", scale=2.0, targets=[i], known=[1 - i])
        assert pdp.leakage == pytest.approx(1.5, rel=1e-12)
    assert audit(model, "identity", "laplace", "dp", scale=2.0).leakage == pytest.approx(1.5)
    assert r.witness.y == (math.inf, math.inf)  # both coefficients positive


@pytest.mark.parametrize("seed", range(4))
def test_identity_three_tuples_against_schur(seed):
    cov = random_spd(3, seed)
    cov[0, 2] = cov[2, 0] = -abs(cov[0, 2])  # a negative slope: its y coordinate goes to -inf
    cov += np.eye(3) * max(0.0, -np.linalg.eigvalsh(cov).min() + 0.1)
    model = mvnormal(cov, Interval(-1, 1))
    for i in range(3):
        for known in ([], [j for j in range(3) if j != i][:1]):
            got = audit(model, "identity", "laplace", "pdp", scale=0.5, targets=[i], known=known)
            assert got.engine == "gaussian"
            assert got.leakage == pytest.approx(identity_leak(cov, i, known, 2.0, 0.5), rel=1e-10)


def test_identity_with_randomized_response_keeps_its_engine():
    """Identity is now linear (A = I) but the Gaussian engine takes Laplace noise only: randomized
    response on binary tuples stays with the exact engine (its leakage is checked in test_dependent)."""
    with pm.Model() as m:
        pm.Bernoulli("x", 0.3, shape=2)
    r = audit(DependenceModel(m, tuples="x"), "identity", "randomized_response", "idp", epsilon=1.0)
    assert r.engine == "exact" and r.leakage == pytest.approx(1.0)
