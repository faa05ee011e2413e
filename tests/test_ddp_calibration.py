"""Dependence coefficients, DPM and its group baseline, calibration, seed 004's IDP bounds
(DESIGN §3.1, §3.3). Expected numbers come from hand derivations and tests/bruteforce.py, never
from ddpbayes.ddp itself."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pymc as pm
import pytest
from bruteforce import household_idp_closed_form, household_joint, leak_bruteforce, markov_joint
from scipy.optimize import brentq

import ddpbayes
from ddpbayes import DependenceModel, Finite, Interval, RunSettings
from ddpbayes.cli.main import main
from ddpbayes.ddp import calibrate, dependence_coefficients, dependence_profile, dpm_scale, idp_bounds
from ddpbayes.queries import parse_query

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
BIN = np.array([0.0, 1.0])


def example1_discretised(m: int = 4) -> DependenceModel:
    """000 Example 1 on a grid, in integer units: A = m D_i ~ U{0..m}, X ~ U{0..m},
    B = 2m D_j = A + X, i.e. B | A ~ U{A..A+m}."""
    with pm.Model() as model:
        a = pm.DiscreteUniform("a", 0, m)
        pm.DiscreteUniform("b", a, a + m)
    return DependenceModel(model, ["a", "b"], domains={"a": Finite(range(m + 1)), "b": Finite(range(2 * m + 1))})


def independent_bernoulli(ps=(0.3, 0.6, 0.5)) -> DependenceModel:
    with pm.Model() as m:
        for k, p in enumerate(ps):
            pm.Bernoulli(f"x{k}", p)
    return DependenceModel(m, [f"x{k}" for k in range(len(ps))])


def gaussian_model(cov, lo=0.0, hi=1.0) -> DependenceModel:
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(len(cov)), cov=np.asarray(cov, dtype=float))
    return DependenceModel(m, "x", domains=Interval(lo, hi))


def pair_marginal(joint: np.ndarray, i: int, j: int) -> np.ndarray:
    """P(X_i, X_j) from a numpy joint, axes in the order (i, j)."""
    p = joint.sum(axis=tuple(k for k in range(joint.ndim) if k not in (i, j)))
    return p if i < j else p.T


# ----------------------------------------------------------------------------- rho


@pytest.mark.parametrize("sigma", [0.3, 1.0, 5.0, 40.0])
def test_rho_example1_discretised_is_half_at_every_sigma(sigma):
    """B | A = a is U{a..a+m}, a location family shifted by a in [0, m]: the mixture's log-ratio is
    at most m / sigma (Laplace log-Lipschitz) and equals it for y beyond every support point,
    so rho_AB = (m / sigma) * sigma / dB = m / 2m = 1/2 (000 Example 1). Conversely B = 0 forces
    A = 0 and B = 2m forces A = m: the ratio of Laplace densities centred m apart, m / sigma = dA /
    sigma, so rho_BA = 1."""
    c = dependence_coefficients(example1_discretised(), sigma)
    assert c.engine == "exact"
    assert c.rho == pytest.approx(np.array([[1.0, 0.5], [1.0, 1.0]]), abs=1e-12)
    assert c.ci is None and c.dependence_size == 2


@pytest.mark.parametrize("sigma", [0.5, 2.0])
def test_rho_perfectly_dependent_pair_is_one(contagious, sigma):
    """X_1 = X_0: E[Lap(y - X_1) | X_0 = t] = Lap(y - t), sup log-ratio 1/sigma = dD / sigma: rho = 1."""
    c = dependence_coefficients(contagious(k=2), sigma)
    assert c.rho == pytest.approx(np.ones((2, 2)), abs=1e-12)
    assert [sorted(s) for s in c.dependence_sets] == [[1], [0]]


def test_rho_independent_tuples_is_identity():
    c = dependence_coefficients(independent_bernoulli(), 0.7)
    assert np.array_equal(c.rho, np.eye(3))
    assert c.dependence_sets == [frozenset()] * 3 and c.dependence_size == 1


@pytest.mark.parametrize("sigma", [0.4, 1.0, 3.0])
def test_rho_household_equals_bruteforce(household, sigma):
    """rho_01 = leak_0(e_1) sigma / 1 from the hand-written pair marginal on a dense y grid."""
    pair = pair_marginal(household_joint(4), 0, 1)
    expected = leak_bruteforce(pair, [BIN, BIN], [0.0, 1.0], sigma, target=0) * sigma
    c = dependence_coefficients(household(n=4), sigma)
    off = c.rho[~np.eye(4, dtype=bool)]
    assert off == pytest.approx(np.full(12, expected), abs=1e-9)
    assert 0 < expected < 1


@pytest.mark.slow
def test_rho_example1_sampling_with_ci():
    """000 Example 1 itself (continuous): rho_ij = 0.5 at every sigma, within the CI (a one-sided
    95% lower bound and an approximate upper one, each about 0.015 from the estimate: the check
    allows 0.01 beyond either end, since a 95% bound misses now and then by design); rho_ji tends
    to 1 (D_j near 0 or 1 pins D_i there); the runs are reused across sigma."""
    model = ddpbayes.load_model(MODELS / "ddp_example1.py")
    for sigma in (1.0, 3.0):
        c = dependence_coefficients(model, sigma, RunSettings(seed=0))
        assert c.engine == "sampling"
        lower, upper = c.ci[0, 1]
        assert lower - 0.01 <= 0.5 <= upper + 0.01
        assert c.rho[0, 1] == pytest.approx(0.5, abs=0.03)
        assert c.rho[1, 0] == pytest.approx(1.0, abs=0.03)
        assert c.diagnostics["ok"]


# ----------------------------------------------------------------------------- DPM and the baselines


def test_dpm_independent_tuples_is_classic_dp():
    """rho = I, so DS_Q = max_j dQ_j = dQ: DPM = classic DP = the group baseline (L = 1)."""
    model = ddpbayes.load_model(MODELS / "independent.py", {"n": 3, "high": 3})
    c = calibrate(model, "sum", "ddp", 0.7)
    assert c.row("dpm").scale == pytest.approx(3 / 0.7, rel=1e-12)
    assert c.row("dp").scale == pytest.approx(3 / 0.7, rel=1e-12)
    assert c.row("group").scale == pytest.approx(3 / 0.7, rel=1e-12)
    assert c.row("exact").scale == pytest.approx(3 / 0.7, rel=1e-9)


def test_group_baseline_by_hand():
    """Two households of two (members dependent within, independent across): L = 2, so the
    baseline for a count is L dQ / eps = 2 * 1 / 0.5 = 4, classic DP 1 / 0.5 = 2."""
    with pm.Model() as m:
        for h in range(2):
            z = pm.Bernoulli(f"h{h}", 0.3)
            for k in range(2):
                pm.Bernoulli(f"x{2 * h + k}", pm.math.switch(z, 0.9, 0.2))
    model = DependenceModel(m, [f"x{k}" for k in range(4)])
    c = calibrate(model, "count", "ddp", 0.5)
    assert c.dependence_size == 2
    assert c.row("group").scale == pytest.approx(4.0, rel=1e-12)
    assert c.row("dp").scale == pytest.approx(2.0, rel=1e-12)


def test_dpm_example1_discretised_uses_both_directions():
    """DS_Q = max_i sum_j rho_ij dQ_j with rho = [[1, 1/2], [1, 1]] for the sum of D_i and D_j
    (weights 1/m, 1/2m in integer units, dQ = 1 each): max(1.5, 2) = 2, so sigma = 2 / eps.
    000 Example 1 quotes DS = 1.5 from rho_ij alone; target D_j then leaks 2 / 1.5 = 4/3 eps."""
    m = 4
    query = parse_query(f"linear:{1 / m},{1 / (2 * m)}")
    d = dpm_scale(example1_discretised(m), query, 0.8)
    assert d.scale == pytest.approx(2 / 0.8, rel=1e-9)
    assert d.dependent_sensitivity == pytest.approx(2.0, rel=1e-9)


def test_dpm_household_fixed_point_and_leakage_above_epsilon(household):
    """The DPM fixed point solved here from the brute-force rho, and the household's idp at it from
    the closed form: DPM leaks more than eps under this model (the dependence through h compounds
    across members beyond the sum of pairwise coefficients)."""
    n, eps = 4, 1.0
    pair = pair_marginal(household_joint(n), 0, 1)

    def excess(sigma):
        rho = leak_bruteforce(pair, [BIN, BIN], [0.0, 1.0], sigma, target=0) * sigma
        return (1 + (n - 1) * rho) / sigma - eps

    sigma = brentq(excess, 1 / eps, n / eps, xtol=1e-13)
    d = dpm_scale(household(n=n), parse_query("count"), eps)
    assert d.scale == pytest.approx(sigma, rel=1e-6)
    assert household_idp_closed_form(n, sigma) > eps * 1.03
    c = calibrate(household(n=n), "count", "idp", eps, method="dpm")
    assert c.scale == pytest.approx(sigma, rel=1e-6)
    assert c.audit.verdict == "fail"
    assert c.leakage_at_scale == pytest.approx(household_idp_closed_form(n, sigma), abs=1e-9)


# ----------------------------------------------------------------------------- calibration


def test_leakage_non_increasing_in_scale(household):
    """The property root-finding relies on (Lap(s2) = Lap(s1) + independent noise)."""
    scales = np.geomspace(0.2, 20, 13)
    negative = ddpbayes.load_model(MODELS / "correlated_pair.py", {"correlation": "negative"})
    for model, query, notion in ((household(n=4), "count", "idp"),
                                 (ddpbayes.load_model(MODELS / "markov_chain.py"), "count", "pdp"),
                                 (negative, "sum", "pdp")):
        # the information measures (KL, MI: 80% of the time) are not what this property is about
        leaks = [ddpbayes.audit(model, query, "laplace", notion, scale=s, information=None).leakage for s in scales]
        assert all(b <= a * (1 + 1e-12) for a, b in zip(leaks, leaks[1:]))


def test_calibrated_household_idp_equals_closed_form(household):
    eps = 0.8
    expected = brentq(lambda b: household_idp_closed_form(4, b) - eps, 0.1, 50, xtol=1e-14)
    c = calibrate(household(n=4), "count", "idp", eps)
    assert c.scale == pytest.approx(expected, rel=1e-8)
    assert c.leakage_at_scale == pytest.approx(eps, rel=1e-6)
    assert c.leakage_at_scale <= eps * (1 + 1e-9) and c.audit.verdict == "pass"
    worse = ddpbayes.audit(household(n=4), "count", "laplace", "idp", scale=c.scale * (1 - 1e-6)).leakage
    assert worse > eps


def test_calibrated_correlated_pair_equals_closed_form():
    """correlated_pair.py's symmetric table: idp = 1/b + log((1 - c + c e^{1/b}) / (c + (1 - c) e^{1/b})), c = 0.8."""
    def idp(b, c=0.8):
        e = math.exp(1 / b)
        return 1 / b + math.log((1 - c + c * e) / (c + (1 - c) * e))

    eps = 1.0
    expected = brentq(lambda b: idp(b) - eps, 0.1, 50, xtol=1e-14)
    c = calibrate(ddpbayes.load_model(MODELS / "correlated_pair.py"), "sum", "idp", eps)
    assert c.scale == pytest.approx(expected, rel=1e-8)
    assert c.leakage_at_scale == pytest.approx(eps, rel=1e-6)


def test_calibrated_markov_pdp_equals_bruteforce():
    """pdp at the calibrated scale, recomputed over the whole lattice by brute force, is eps."""
    with pm.Model() as m:
        prev = pm.Bernoulli("x0", 0.5)
        for t in range(1, 4):
            prev = pm.Bernoulli(f"x{t}", pm.math.switch(prev, 0.9, 0.2))
    model = DependenceModel(m, [f"x{t}" for t in range(4)])
    eps = 1.5
    c = calibrate(model, "count", "pdp", eps)
    joint = markov_joint()
    pdp = max(
        leak_bruteforce(joint, [BIN] * 4, [1.0] * 4, c.scale, target=i, known=known)
        for i in range(4)
        for size in range(4)
        for known in itertools.combinations([j for j in range(4) if j != i], size)
    )
    assert pdp == pytest.approx(eps, rel=1e-6)


def _schur_coefficient(cov, w, i, known):
    """c(i, K) = w_i + sum_{j in U} w_j Cov(X_j, X_i | X_K) / Var(X_i | X_K), written out with numpy."""
    n = len(w)
    s = [i] + [j for j in range(n) if j != i and j not in known]
    c = cov[np.ix_(s, s)]
    if known:
        c = c - cov[np.ix_(s, known)] @ np.linalg.inv(cov[np.ix_(known, known)]) @ cov[np.ix_(known, s)]
    return sum(w[j] * c[k, 0] / c[0, 0] for k, j in enumerate(s))


def test_gaussian_calibration_equals_closed_form():
    """DESIGN §3.2's mixed-sign covariance on [lo, hi] = [0, 2], sum: leak = (hi - lo)|c| / b, so the
    exact scale is (hi - lo) max |c| / eps over the notion's adversaries; DPM's rho_ij =
    |Sigma_ij / Sigma_ii| (equal widths) does not depend on sigma, so DS_Q / eps directly."""
    cov = np.array([[1.0, 1.0, -1.0], [1.0, 1.5, -1.0], [-1.0, -1.0, 1.5]])
    w, width, eps = np.ones(3), 2.0, 0.9
    model = gaussian_model(cov, 0.0, width)
    idp = max(abs(_schur_coefficient(cov, w, i, [])) for i in range(3))
    pdp = max(abs(_schur_coefficient(cov, w, i, list(k))) for i in range(3) for r in range(3)
              for k in itertools.combinations([j for j in range(3) if j != i], r))
    for notion, coef in (("idp", idp), ("pdp", pdp)):
        c = calibrate(model, "sum", notion, eps)
        assert c.engine == "gaussian"
        assert c.scale == pytest.approx(width * coef / eps, rel=1e-9)
        assert c.leakage_at_scale == pytest.approx(eps, rel=1e-9)
    assert pdp > idp  # the stronger adversary sets the scale here
    ds = max(sum(abs(cov[i, j] / cov[i, i]) * width for j in range(3)) for i in range(3))
    assert c.row("dpm").scale == pytest.approx(ds / eps, rel=1e-9)
    assert c.row("group").scale == pytest.approx(3 * width / eps, rel=1e-12)


def test_accuracy_alpha():
    c = calibrate(ddpbayes.load_model(MODELS / "correlated_pair.py"), "sum", "idp", 1.0)
    for r in c.rows:
        assert r.alpha == pytest.approx(r.scale * math.log(20), rel=1e-12)


# ----------------------------------------------------------------------------- 004's IDP bounds


def _largest_tv(joint: np.ndarray) -> float:
    """max over i, t, t' of TV(P(X_(i) | t), P(X_(i) | t')), written out with numpy."""
    best = 0.0
    for i in range(joint.ndim):
        rows = np.moveaxis(joint, i, 0).reshape(joint.shape[i], -1)
        cond = rows[rows.sum(axis=1) > 0] / rows[rows.sum(axis=1) > 0].sum(axis=1, keepdims=True)
        for a, b in itertools.combinations(range(len(cond)), 2):
            best = max(best, 0.5 * np.abs(cond[a] - cond[b]).sum())
    return best


@pytest.mark.parametrize("scale", [0.7, 2.5, 9.0])
def test_idp_bounds_household_by_hand(household, scale):
    """k = 4 (everyone depends on everyone through h); M is (1/b)-DP, so eps = 4/b: Prop. 3 gives
    4/b; Thm. 4 gives log 2 + max(eps/k, eps + log eta). Both bound the exact idp."""
    model = household(n=4)
    eta = _largest_tv(household_joint(4))
    b = idp_bounds(model, parse_query("count"), scale)
    eps = 4 / scale
    assert b.k == 4 and b.eta == pytest.approx(eta, abs=1e-12)
    assert b.prop3 == pytest.approx(eps, rel=1e-12)
    assert b.thm4 == pytest.approx(math.log(2) + max(eps / 4, eps + math.log(eta)), rel=1e-12)
    idp = household_idp_closed_form(4, scale)
    assert idp <= b.prop3 and idp <= b.thm4


def test_idp_bounds_perfect_pair_is_tight(contagious):
    """X_1 = X_0: eta = 1, k = 2; Prop. 3 gives 2/b, which is the exact idp (004 Example 2)."""
    model = contagious(k=2)
    b = idp_bounds(model, parse_query("count"), 1.25)
    assert b.k == 2 and b.eta == pytest.approx(1.0)
    assert b.prop3 == pytest.approx(2 / 1.25) and b.thm4 == pytest.approx(2 / 1.25 + math.log(2))
    assert ddpbayes.audit(model, "count", "laplace", "idp", scale=1.25).leakage == pytest.approx(b.prop3, rel=1e-12)


def test_idp_bounds_need_joint_independence():
    """X_2 = X_0 xor X_1: pairwise independent (empty dependence sets, L = 1) but X_0 is not
    independent of (X_1, X_2), so Prop. 3 needs k = 3; with k = 1 it would claim idp <= 1/b,
    while the sum given X_0 = 0 is 0 or 2 and given X_0 = 1 always 2: at b = 1 the y -> -inf
    limit gives log(1/2 e^2 + 1/2) = 1.4338 > 1."""
    with pm.Model() as m:
        x0, x1 = pm.Bernoulli("x0", 0.5), pm.Bernoulli("x1", 0.5)
        pm.Bernoulli("x2", pm.math.switch(pm.math.eq(x0, x1), 0.0, 1.0))
    model = DependenceModel(m, ["x0", "x1", "x2"])
    profile = dependence_profile(model)
    assert profile.k == 3 and "not jointly independent" in profile.notes[0]
    idp = ddpbayes.audit(model, "sum", "laplace", "idp", scale=1.0).leakage
    assert idp == pytest.approx(math.log(0.5 * math.e**2 + 0.5), rel=1e-9)
    assert idp <= idp_bounds(model, parse_query("sum"), 1.0, profile).prop3


# ----------------------------------------------------------------------------- command line


def test_rho_cli_json(capsys):
    assert main(["rho", str(MODELS / "contagious_family.py"), "--scale", "0.5", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"rho", "dependence_sets", "L", "scale"} <= set(out)
    assert out["rho"] == [[1.0, 1.0], [1.0, 1.0]] and out["L"] == 2 and out["scale"] == 0.5
    assert out["dependence_sets"] == [[1], [0]]


def test_calibrate_cli_json(capsys):
    code = main(["calibrate", str(MODELS / "household.py"), "--query", "count", "--mechanism", "laplace",
                 "--notion", "idp", "--epsilon", "1", "--format", "json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "exact"
    assert out["leakage_at_scale"] == pytest.approx(1.0, rel=1e-6)
    assert set(out["comparison"]) == {"exact", "dpm", "group", "dp"}
    for method, row in out["comparison"].items():
        assert set(row["leakage"]) == {"dp", "idp", "pdp", "ddp"}
        assert row["alpha"] == pytest.approx(row["scale"] * math.log(1 / row["beta"]))
    assert out["comparison"]["exact"]["scale"] == out["scale"]
    assert out["comparison"]["group"]["scale"] == pytest.approx(4.0)
    assert out["comparison"]["dp"]["leakage"]["idp"] > 1  # classic DP falls short under the model


def test_calibrate_cli_text_marks_shortfalls(capsys):
    code = main(["calibrate", str(MODELS / "household.py"), "--query", "count", "--notion", "idp",
                 "--epsilon", "1", "--method", "dpm"])
    text = capsys.readouterr().out
    assert code == 1  # DPM's scale fails eps under this model
    rows: dict[str, str] = {}
    for line in text.splitlines():  # the table's row of each method comes first
        if line.split() and line.split()[0] in ("exact", "dpm", "group", "dp"):
            rows.setdefault(line.split()[0], line)
    assert "*" in rows["dp"] and "*" in rows["dpm"] and "*" not in rows["exact"] and "*" not in rows["group"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--epsilon", "0"], "epsilon must be a positive"),
        (["--epsilon", "-1"], "epsilon must be a positive"),
        (["--epsilon", "1", "--mechanism", "geometric"], "must be laplace"),
        (["--epsilon", "1", "--engine", "gaussian"], "gaussian engine cannot solve"),
        (["--epsilon", "1", "--method", "bogus"], "invalid choice"),
    ],
)
def test_calibrate_bad_input_exit_2(argv, message, capsys):
    base = ["calibrate", str(MODELS / "household.py"), "--notion", "idp", "--query", "count"]
    assert main([*base, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_rho_unbounded_domain_exit_2(tmp_path, capsys):
    path = tmp_path / "normal_pair.py"
    path.write_text(
        "import numpy as np, pymc as pm\nfrom ddpbayes import DependenceModel\n\n"
        "def build():\n    with pm.Model() as m:\n        pm.MvNormal('x', mu=np.zeros(2), cov=[[1, .5], [.5, 1]])\n"
        "    return DependenceModel(m, 'x')\n"
    )
    assert main(["rho", str(path), "--scale", "1"]) == 2
    err = capsys.readouterr().err
    assert "bounded domains" in err and err.count("\n") == 1
