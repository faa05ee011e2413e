"""The gaussian engine with Gaussian noise: the privacy loss is Gaussian (DESIGN §3.5).

Expectations are computed here, independently of the engine: the two laws of the output
Y = A X + N(0, diag σ²) given X_i = t (and t'), x_K, by conditioning the joint Gaussian with
plain numpy; μ as the Mahalanobis distance of their means; δ(ε) as the hockey-stick integral
∫ max(0, p − e^ε q) by scipy quadrature (1-D and 2-D); Balle–Wang's formula for classic DP;
every known set enumerated for pdp; sympy's output against the same numbers.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pymc as pm
import pytest
import sympy
from scipy import integrate, optimize, stats

from ddpbayes import DependenceModel, InputError, Interval, Problem, parse_query
from ddpbayes.auditing import audit
from ddpbayes.cli.main import main
from ddpbayes.engines.base import NoCurve
from ddpbayes.engines.gaussian import GaussianEngine, graph
from ddpbayes.mechanisms import DiscreteGaussian, Gaussian, Laplace
from ddpbayes.problem import Adversary
from ddpbayes.symbolic import derive_gaussian_gdp

ENGINE = GaussianEngine()


def mvnormal(cov, mean=None, domain=None) -> DependenceModel:
    cov = np.asarray(cov, dtype=float)
    domain = Interval(0, 1) if domain is None else domain
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(len(cov)) if mean is None else mean, cov=cov)
    return DependenceModel(m, tuples="x", domains=domain)


def random_spd(n: int, rng) -> np.ndarray:
    a = rng.normal(size=(n, n))
    return a @ a.T / n + 0.3 * np.eye(n)


def output_law(cov, mean, a, sigma, i, known, t, x_known):
    """Mean and covariance of Y = A X + N(0, diag σ²) given X_i = t and X_K = x_K (numpy conditioning)."""
    n = len(cov)
    given = [i, *sorted(known)]
    rest = [j for j in range(n) if j not in given]
    x = np.empty(n)
    x[given] = [t, *x_known]
    gain = cov[np.ix_(rest, given)] @ np.linalg.inv(cov[np.ix_(given, given)])
    x[rest] = mean[rest] + gain @ (x[given] - mean[given])
    cond = cov[np.ix_(rest, rest)] - gain @ cov[np.ix_(given, rest)]
    return a @ x, a[:, rest] @ cond @ a[:, rest].T + np.diag(np.broadcast_to(sigma, len(a)) ** 2)


def hand_mu(cov, a, sigma, i, known, width=1.0, rng=None) -> float:
    """μ = Mahalanobis distance between the output laws at t = width and t' = 0 (random x_K, mean)."""
    rng = rng or np.random.default_rng(0)
    mean, xk = rng.normal(size=len(cov)), list(rng.normal(size=len(known)))
    m1, w1 = output_law(cov, mean, a, sigma, i, known, width, xk)
    m2, w2 = output_law(cov, mean, a, sigma, i, known, 0.0, xk)
    assert np.allclose(w1, w2)
    return float(np.sqrt((m1 - m2) @ np.linalg.solve(w1, m1 - m2)))


def leak(model, query, mech, advs):
    return ENGINE.leakage(Problem(model, parse_query(query), mech, tuple(advs)))


def gdp_delta(eps: float, mu: float) -> float:
    """Balle & Wang 2018, Thm. 8."""
    return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


def normal_pdf(y: float, m: float, s: float) -> float:
    return math.exp(-0.5 * ((y - m) / s) ** 2) / (s * math.sqrt(2 * math.pi))


def hockey_1d(m1, m2, s, eps) -> float:
    f = lambda y: max(0.0, normal_pdf(y, m1, s) - math.exp(eps) * normal_pdf(y, m2, s))
    lo, hi = min(m1, m2) - 12 * s, max(m1, m2) + 12 * s
    return integrate.quad(f, lo, hi, points=[m1, m2], limit=400, epsabs=1e-15, epsrel=1e-12)[0]


def subsets(items):
    return itertools.chain.from_iterable(itertools.combinations(items, r) for r in range(len(items) + 1))


# ----------------------------------------------------------------------------- μ against conditioning by hand


@pytest.mark.parametrize("seed", range(6))
def test_mu_matches_conditioning_by_hand_random_models(seed):
    """Random covariance, weights, σ and known sets; one-row and three-row queries."""
    rng = np.random.default_rng(seed)
    n = 5
    cov = random_spd(n, rng)
    model = mvnormal(cov, domain=Interval(-0.5, 1.5))
    sigma = float(rng.uniform(0.3, 3))
    w = np.round(rng.normal(size=n), 3)
    rows = np.round(rng.normal(size=(3, n)), 3)
    advs = [Adversary(i, frozenset(k)) for i in range(n) for k in subsets([j for j in range(n) if j != i])
            if rng.random() < 0.4]
    for query, a in ((f"linear:{','.join(map(str, w))}", w[None]),
                     ("linear:" + ";".join(",".join(map(str, r)) for r in rows), rows)):
        for r in leak(model, query, Gaussian(sigma), advs):
            i, k = r.adversary.target, r.adversary.known
            mu = hand_mu(cov, a, sigma, i, k, width=2.0, rng=rng)
            assert r.profile.mu == pytest.approx(mu, rel=1e-9, abs=1e-12), (query, r.adversary)
            assert r.profile.rho == pytest.approx(mu**2 / 2, rel=1e-9, abs=1e-12)
            assert (r.witness.t, r.witness.t_prime, r.witness.y) == (1.5, -0.5, None)


def test_one_row_is_the_issues_formula():
    """μ = (hi − lo)|w_i + Σ_U w_j C_ji / C_ii| / sqrt(σ² + Var(w_U X_U | X_i, x_K)), written out."""
    cov = np.array([[2.0, 0.6, -0.3, 0.2], [0.6, 1.0, 0.4, 0.0], [-0.3, 0.4, 1.5, 0.5], [0.2, 0.0, 0.5, 1.2]])
    model = mvnormal(cov, domain=Interval(0, 3))
    w, sigma, i, known = np.array([1.0, -2.0, 0.5, 1.0]), 1.7, 0, [3]
    s = [0, 1, 2]
    c = cov[np.ix_(s, s)] - cov[np.ix_(s, known)] @ np.linalg.inv(cov[np.ix_(known, known)]) @ cov[np.ix_(known, s)]
    slope = w[0] + w[1] * c[1, 0] / c[0, 0] + w[2] * c[2, 0] / c[0, 0]
    u = [1, 2]
    var_u = w[u] @ (c[1:, 1:] - np.outer(c[1:, 0], c[0, 1:]) / c[0, 0]) @ w[u]
    expected = 3 * abs(slope) / math.sqrt(sigma**2 + var_u)
    (r,) = leak(model, "linear:1,-2,0.5,1", Gaussian(sigma), [Adversary(i, frozenset(known))])
    assert r.profile.mu == pytest.approx(expected, rel=1e-12)


# ----------------------------------------------------------------------------- the profile is the hockey-stick


def test_profile_is_the_hockey_stick_of_the_two_output_laws():
    """Every (ε, δ) on the engine's curve: δ = ∫ max(0, p − e^ε q) of the two Gaussians of Y (quad)."""
    cov = np.array([[1.0, 0.7, 0.3], [0.7, 1.0, 0.5], [0.3, 0.5, 1.0]])
    sigma, a = 0.8, np.ones((1, 3))
    (r,) = leak(mvnormal(cov), "sum", Gaussian(sigma, delta=1e-5), [Adversary(1, frozenset())])
    m1, w = output_law(cov, np.zeros(3), a, sigma, 1, (), 1.0, [])
    m2, _ = output_law(cov, np.zeros(3), a, sigma, 1, (), 0.0, [])
    s = math.sqrt(w[0, 0])
    pairs = r.profile.pairs()
    assert len(pairs) > 8
    for eps, delta in pairs:
        assert hockey_1d(m1[0], m2[0], s, eps) == pytest.approx(delta, rel=1e-6, abs=1e-13), eps
    assert r.value == pytest.approx(r.profile.epsilon_at(1e-5))
    assert hockey_1d(m1[0], m2[0], s, r.value) == pytest.approx(1e-5, rel=1e-6)


def test_vector_query_profile_against_a_two_dimensional_quadrature():
    """Two correlated output rows: the hockey-stick of two bivariate Gaussians by dblquad."""
    cov = np.array([[1.0, 0.6, 0.2], [0.6, 1.0, 0.4], [0.2, 0.4, 1.0]])
    a, sigma = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 2.0]]), 0.7
    (r,) = leak(mvnormal(cov), "linear:1,1,0;0,1,2", Gaussian(sigma), [Adversary(1, frozenset())])
    m1, w = output_law(cov, np.zeros(3), a, sigma, 1, (), 1.0, [])
    m2, _ = output_law(cov, np.zeros(3), a, sigma, 1, (), 0.0, [])
    inv, norm = np.linalg.inv(w).tolist(), 1 / (2 * math.pi * math.sqrt(np.linalg.det(w)))

    def pdf(y1, y2, m):  # the bivariate normal density N(m, w), written out
        u, v = y1 - m[0], y2 - m[1]
        return norm * math.exp(-0.5 * (inv[0][0] * u * u + 2 * inv[0][1] * u * v + inv[1][1] * v * v))

    spread = 9 * math.sqrt(w.max())
    for delta in (10**-1, 10**-1.5):
        eps = r.profile.epsilon_at(delta)
        f = lambda y2, y1, e=eps: max(0.0, pdf(y1, y2, m1) - math.exp(e) * pdf(y1, y2, m2))
        lo, hi = min(m1.min(), m2.min()) - spread, max(m1.max(), m2.max()) + spread
        found = integrate.dblquad(f, lo, hi, lo, hi, epsabs=1e-9, epsrel=1e-7)[0]
        assert found == pytest.approx(delta, rel=1e-4), delta


# ----------------------------------------------------------------------------- notions


def test_independent_tuples_pdp_ddp_are_classic_gaussian_dp_idp_counts_the_others_as_noise():
    """Independent tuples (variances v_j): pdp and ddp know every other tuple, μ = width |w_i| / σ
    (classic Gaussian DP, Balle–Wang); idp does not, μ = width |w_i| / sqrt(σ² + Σ_{j≠i} w_j² v_j)."""
    v, w, sigma, width, delta = np.array([0.5, 2.0, 1.0]), np.array([1.0, 2.0, -1.0]), 1.3, 2.0, 1e-6
    with pm.Model() as m:
        pm.Normal("x", mu=0.0, sigma=np.sqrt(v))
    model = DependenceModel(m, tuples="x", domains=Interval(-1, 1))
    classic_mu = width * np.abs(w).max() / sigma

    def epsilon(mu):
        return optimize.brentq(lambda e: gdp_delta(e, mu) - delta, 0, 100, xtol=1e-14)

    for notion in ("dp", "pdp", "ddp"):
        r = audit(model, "linear:1,2,-1", "gaussian", notion, scale=sigma)
        assert r.profile.mu == pytest.approx(classic_mu, rel=1e-12), notion
        assert r.leakage == pytest.approx(epsilon(classic_mu), rel=1e-8), notion
    idp = audit(model, "linear:1,2,-1", "gaussian", "idp", scale=sigma)
    per = [width * abs(w[i]) / math.sqrt(sigma**2 + sum(w[j] ** 2 * v[j] for j in range(3) if j != i)) for i in range(3)]
    assert idp.profile.mu == pytest.approx(max(per), rel=1e-12)
    assert idp.leakage == pytest.approx(epsilon(max(per)), rel=1e-8)


@pytest.mark.parametrize("seed", range(3))
def test_pdp_lattice_search_is_the_worst_known_set(seed):
    """The lattice search's μ per target is the largest hand μ over every known set (one and two rows)."""
    rng = np.random.default_rng(100 + seed)
    n = 5
    cov = random_spd(n, rng)
    model = mvnormal(cov)
    sigma = float(rng.uniform(0.2, 2))
    rows = np.round(rng.normal(size=(2, n)), 3)
    for query, a in (("sum", np.ones((1, n))),
                     ("linear:" + ";".join(",".join(map(str, r)) for r in rows), rows)):
        problem = Problem(model, parse_query(query), Gaussian(sigma))
        found = ENGINE.pdp_worst(problem, list(range(n)))
        for r in found:
            i = r.adversary.target
            every = {frozenset(k): hand_mu(cov, a, sigma, i, k) for k in subsets([j for j in range(n) if j != i])}
            top = max(every.values())
            assert r.profile.mu == pytest.approx(top, rel=1e-9)
            assert every[r.adversary.known] == pytest.approx(top, rel=1e-9)
        listed = audit(model, query, "gaussian", "pdp", scale=sigma, lattice=True)
        searched = audit(model, query, "gaussian", "pdp", scale=sigma)
        assert searched.profile.mu == pytest.approx(listed.profile.mu, rel=1e-9)


def test_unbounded_domain_gives_infinite_mu_with_the_reason():
    model = mvnormal([[1.0, 0.5], [0.5, 1.0]], domain=Interval(-math.inf, math.inf))
    (r,) = leak(model, "sum", Gaussian(1.0), [Adversary(0, frozenset())])
    assert r.value == math.inf and r.profile.mu == math.inf and "unbounded" in r.reason
    (z,) = leak(model, "linear:0,0", Gaussian(1.0), [Adversary(0, frozenset())])
    assert z.value == 0.0 and z.profile.mu == 0.0


def test_tiny_noise_keeps_its_digits():
    """σ far below the spread: 1 − d q is small and W is solved directly; μ still matches by hand."""
    cov = np.array([[1.0, 0.9, 0.5], [0.9, 1.0, 0.7], [0.5, 0.7, 1.0]])
    for sigma in (1e-3, 1e-4):  # the identity query: Var(X_0 | Y) / Var(X_0) is about σ², below `noise.DIRECT`
        (r,) = leak(mvnormal(cov), "identity", Gaussian(sigma), [Adversary(0, frozenset())])
        assert r.profile.mu == pytest.approx(hand_mu(cov, np.eye(3), sigma, 0, ()), rel=1e-6)
        assert r.profile.mu == pytest.approx(1 / sigma, rel=1e-2)  # about Y_0 alone: X_0 seen through σ


def test_supports_refuses_discrete_gaussian_with_a_reason():
    model = mvnormal([[1.0, 0.5], [0.5, 1.0]])
    discrete = ENGINE.supports(Problem(model, parse_query("sum"), DiscreteGaussian(1.0)))
    assert discrete and "discrete_gaussian" in discrete
    assert ENGINE.supports(Problem(model, parse_query("sum"), Gaussian(1.0))) is None
    assert ENGINE.supports(Problem(model, parse_query("sum"), Laplace(1.0))) is None
    with pytest.raises(InputError, match="greedy"):
        ENGINE.pdp_worst(Problem(model, parse_query("sum"), Gaussian(1.0)), [0], top_k=2)
    problem = Problem(model, parse_query("sum"), Gaussian(1.0), (Adversary(0, frozenset()),))
    (r,) = ENGINE.leakage(problem)
    with pytest.raises(NoCurve, match="linear in y"):
        ENGINE.witness_curve(problem, "idp", r.witness)


# ----------------------------------------------------------------------------- sparse path == dense path


def both_paths(build, monkeypatch):
    dense = build()
    assert not graph.use_sparse(dense)
    monkeypatch.setattr(graph, "SPARSE_SIZE", 0)
    monkeypatch.setattr(graph, "SPARSE_DENSITY", 1.0)
    sparse_model = build()
    assert graph.use_sparse(sparse_model)
    return dense, sparse_model


def components_precision(n: int, rng) -> np.ndarray:
    """A precision on a random graph with several components and isolated nodes (diagonally dominant)."""
    w = np.zeros((n, n))
    for _ in range(n // 2):
        i, j = rng.choice(n - 6, 2, replace=False)  # the last 6 nodes stay isolated
        w[i, j] = w[j, i] = rng.uniform(0.5, 1.5)
    return np.diag(w.sum(axis=1) + rng.uniform(0.3, 1.0, n)) - 0.9 * w


def precision_build(q):
    def build():
        with pm.Model() as m:
            pm.MvNormal("x", mu=np.zeros(len(q)), tau=q)
        return DependenceModel(m, tuples="x", domains=Interval(0, 1))

    return build


def latent_car_build(n: int, rng):
    w = np.zeros((n, n))
    for k in range(n - 1):
        w[k, k + 1] = w[k + 1, k] = 1.0

    def build():
        with pm.Model() as m:
            region = pm.Normal("region", 0.5, 0.4)
            pm.CAR("x", mu=region * np.ones(n), W=w, alpha=0.7, tau=2.0)
        return DependenceModel(m, tuples="x", domains=Interval(0, 1))

    return build


@pytest.mark.parametrize("case", ["components", "latent-car"])
def test_sparse_path_equals_dense_path(case, monkeypatch):
    """idp, ddp and random known sets (cutting components, covering them, touching few or many) for
    one and two rows: the per-component sums of the sparse path give the dense μ to 1e-9."""
    rng = np.random.default_rng(7)
    n = 24
    build = precision_build(components_precision(n, rng)) if case == "components" else latent_car_build(n, rng)
    dense, sparse_model = both_paths(build, monkeypatch)
    deps = ENGINE.dependence_sets(Problem(sparse_model, parse_query("sum"), Gaussian(1.0)))
    advs = [Adversary(i, frozenset()) for i in range(n)]
    advs += [Adversary(i, frozenset(range(n)) - deps[i] - {i}) for i in range(n)]
    for size in (1, 3, 8, 15, 22):
        for i in rng.choice(n, 3, replace=False):
            others = [j for j in range(n) if j != i]
            advs.append(Adversary(int(i), frozenset(int(j) for j in rng.choice(others, size, replace=False))))
    rows = np.round(rng.normal(size=(2, n)), 3)
    for query in ("sum", "linear:" + ";".join(",".join(map(str, r)) for r in rows)):
        got = leak(sparse_model, query, Gaussian(0.6), advs)
        want = leak(dense, query, Gaussian(0.6), advs)
        for g, w in zip(got, want):
            assert g.profile.mu == pytest.approx(w.profile.mu, rel=1e-9, abs=1e-12), (query, g.adversary)
            assert g.value == pytest.approx(w.value, rel=1e-9, abs=1e-12)
    if case == "components":  # ddp knows the other components, idp does not: more leakage
        idp = [r.profile.mu for r in leak(sparse_model, "sum", Gaussian(0.6), advs[:n])]
        ddp = [r.profile.mu for r in leak(sparse_model, "sum", Gaussian(0.6), advs[n : 2 * n])]
        assert all(d >= i for d, i in zip(ddp, idp)) and sum(ddp) > sum(idp) * 1.01


# ----------------------------------------------------------------------------- the CLI


def test_cli_audit_json_gives_the_gdp_mu(tmp_path, capsys):
    """`ddpbayes audit M --mechanism gaussian --sigma 1 --notion idp --format json`: μ by hand."""
    cov = [[1.0, 0.4, 0.1], [0.4, 1.0, 0.4], [0.1, 0.4, 1.0]]
    path = tmp_path / "pair.py"
    path.write_text("import numpy as np\nimport pymc as pm\nfrom ddpbayes import DependenceModel, Interval\n\n\n"
                    "def build():\n    with pm.Model() as m:\n"
                    f"        pm.MvNormal('x', mu=np.zeros(3), cov=np.array({cov}))\n"
                    "    return DependenceModel(m, tuples='x', domains=Interval(0, 2))\n")
    code = main(["audit", str(path), "--query", "sum", "--mechanism", "gaussian", "--sigma", "1", "--notion", "idp",
                 "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    want = max(hand_mu(np.array(cov), np.ones((1, 3)), 1.0, i, (), width=2.0) for i in range(3))
    assert out["gdp_mu"] == pytest.approx(want, rel=1e-9)
    assert out["zcdp_rho"] == pytest.approx(want**2 / 2, rel=1e-9)
    assert out["delta"] == 1e-6 and out["epsilon_at_delta"] == pytest.approx(out["leakage"])


# ----------------------------------------------------------------------------- derive --mechanism gaussian


def test_derive_equicorrelation_closed_form():
    """n tuples, unit variances, correlation r, sum, K = {}: Var(Σ_{j≠i} X_j | X_i) = (n−1)(1−r)(1+(n−1)r)
    by hand ((n−1)(1 + (n−2) r) − ((n−1) r)²), so μ = width |1 + (n−1) r| / sqrt(σ² + that); ρ = μ²/2."""
    r, width, sigma = sympy.symbols("r width sigma", positive=True)
    for n in (2, 3, 4):
        text = str([[1 if i == j else "r" for j in range(n)] for i in range(n)]).replace("'", "")
        d = derive_gaussian_gdp(text)
        rest = (n - 1) * (1 + (n - 2) * r) - ((n - 1) * r) ** 2
        want = width * sympy.Abs(1 + (n - 1) * r) / sympy.sqrt(sigma**2 + rest)
        got = d.expression.subs({s: sympy.Symbol(s.name, positive=True) for s in d.expression.free_symbols})
        assert sympy.simplify(got - want) == 0, n
        assert sympy.simplify(d.extras["zcdp_rho"].subs(
            {s: sympy.Symbol(s.name, positive=True) for s in d.extras["zcdp_rho"].free_symbols}) - want**2 / 2) == 0


@pytest.mark.parametrize("seed", range(3))
def test_derive_matches_the_engine(seed):
    """Numeric covariance, weights, known set, width and σ: sympy's μ and ε at δ equal the engine's."""
    rng = np.random.default_rng(300 + seed)
    n = 4
    cov = np.round(random_spd(n, rng), 2)
    w = rng.integers(-3, 4, size=n).astype(float)
    known, target, sigma = [int(rng.integers(1, n))], 0, float(np.round(rng.uniform(0.5, 2), 2))
    d = derive_gaussian_gdp(str(cov.tolist()), target=target, known=known, weights=",".join(map(str, w)),
                            width=2.0, sigma=sigma, delta=1e-6)
    model = mvnormal(cov, domain=Interval(-1, 1))
    (r,) = leak(model, "linear:" + ",".join(map(str, w)), Gaussian(sigma), [Adversary(target, frozenset(known))])
    assert d.value == pytest.approx(r.profile.mu, rel=1e-9)
    assert d.value == pytest.approx(hand_mu(cov, w[None], sigma, target, known, width=2.0), rel=1e-9)
    assert d.numbers["epsilon_at_delta"] == pytest.approx(r.value, rel=1e-9)
    assert d.extras["zcdp_rho"].evalf() == pytest.approx(r.profile.rho, rel=1e-9)


def test_derive_cli_gaussian_and_bad_input(capsys):
    assert main(["derive", "gaussian", "--cov", "[[1,0.5],[0.5,1]]", "--mechanism", "gaussian", "--sigma", "1",
                 "--width", "1", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["value"] == pytest.approx(1.5 / math.sqrt(1 + 0.75))  # |1 + 0.5| / sqrt(σ² + 1 − 0.5²)
    assert out["zcdp_rho"]["value"] == pytest.approx(1.5**2 / 1.75 / 2)
    for bad in (["--sigma", "1"], ["--delta", "0.1"], ["--mechanism", "gaussian", "--sigma", "1", "--scale", "1"],
                ["--mechanism", "gaussian", "--sigma", "-1"], ["--mechanism", "gaussian", "--delta", "1.5"]):
        assert main(["derive", "gaussian", "--cov", "[[1,0.5],[0.5,1]]", *bad]) == 2, bad
    assert main(["derive", "gaussian", "--cov", "[[1,sigma],[sigma,1]]", "--mechanism", "gaussian"]) == 2
    err = capsys.readouterr().err
    assert all(line.startswith("error:") for line in err.strip().splitlines())
