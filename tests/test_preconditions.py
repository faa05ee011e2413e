"""Honest preconditions (issue 15 part 6): DPM's fixed point wherever it lies, and a note when
some rho_ij > 1 breaks seeds 000/001's assumption; seed 004's Prop. 3 / Thm. 4 shown only when
their premises hold; the gaussian engine's note on declared domains narrower than the model.

Every expected value is derived here from the Gaussian formulas of DESIGN §2.2 (with K = {},
U = the other tuples: leak(i, {}) = width_i / b * |sum_j w_j Sigma_ji / Sigma_ii|)."""

from __future__ import annotations

import json

import numpy as np
import pymc as pm
import pytest

import ddpbayes
from ddpbayes import DependenceModel, Finite, Interval
from ddpbayes.cli.main import main
from ddpbayes.ddp import calibrate, dependence_coefficients, dpm_scale, idp_bounds
from ddpbayes.engines.gaussian.graph import tuple_covariance
from ddpbayes.model.supports import wider_than_declared
from ddpbayes.queries import parse_query

RHO_ABOVE_ONE = [[1.0, 2.0], [2.0, 5.0]]  # the example: rho_01 = 2 / 1 = 2 > 1
UNEQUAL = [[1.0, 1.35], [1.35, 9.0]]  # the example: idp 2.35 above the group bound 2


def gaussian(cov, widths=None) -> DependenceModel:
    """X ~ N(0, cov) as a linear-Gaussian chain of named tuples x0, x1, ... (x_k = sum_{j<k} B_kj x_j
    + e_k, e_k ~ N(0, D_k), from cov = L D L^T: B = I - L^{-1}), tuple k declared on [0, widths[k]]."""
    cov = np.asarray(cov, dtype=float)
    n = len(cov)
    widths = np.ones(n) if widths is None else np.asarray(widths, dtype=float)
    chol = np.linalg.cholesky(cov)
    unit = chol / np.diag(chol)  # L, unit lower triangular; D = diag(chol)^2
    b = np.eye(n) - np.linalg.inv(unit)
    with pm.Model() as m:
        xs = []
        for k in range(n):
            mean = sum((b[k, j] * xs[j] for j in range(k)), 0.0)
            xs.append(pm.Normal(f"x{k}", mean, chol[k, k]))
    return DependenceModel(m, tuples=[f"x{k}" for k in range(n)],
                           domains={f"x{k}": Interval(0, w) for k, w in enumerate(widths)})


def idp_by_hand(cov, widths, weights, b: float) -> list[float]:
    """leak(i, {}) = width_i / b * |sum_j w_j Sigma_ji / Sigma_ii| (DESIGN §2.2, K = {})."""
    cov = np.asarray(cov, dtype=float)
    return [widths[i] / b * abs(sum(weights[j] * cov[j, i] / cov[i, i] for j in range(len(cov))))
            for i in range(len(cov))]


def dpm_by_hand(cov, widths, epsilon: float) -> float:
    """DPM's fixed point for `sum`: rho_ij = leak_i(e_j, sigma) sigma / dD_j = width_i |Sigma_ij| /
    (Sigma_ii width_j), free of sigma, and dQ_j = width_j, so DS = max_i sum_j width_i |Sigma_ij| /
    Sigma_ii and sigma = DS / epsilon."""
    cov = np.asarray(cov, dtype=float)
    return max(widths[i] * sum(abs(cov[i, j]) for j in range(len(cov))) / cov[i, i] for i in range(len(cov))) / epsilon


# ----------------------------------------------------------------------------- DPM with rho > 1


def test_the_chain_has_the_covariance_it_was_built_from():
    model = gaussian(UNEQUAL)
    assert tuple_covariance(model) == pytest.approx(np.array(UNEQUAL), rel=1e-12)


def test_dpm_fixed_point_above_the_old_bracket():
    """Sigma = [[1, 2], [2, 5]], domains [0, 1], sum, eps = 1: rho = [[1, 2], [0.4, 1]], DS = 3,
    sigma = 3 (the old bracket stopped at 2, which leaks 1.5). At sigma = 3 the idp leakage is
    (1 + 2) / 3 = 1 for x0 and (1 + 0.4) / 3 for x1."""
    model = gaussian(RHO_ABOVE_ONE)
    dpm = dpm_scale(model, parse_query("sum"), 1.0)
    assert dpm.coefficients.rho == pytest.approx(np.array([[1.0, 2.0], [0.4, 1.0]]), rel=1e-12)
    assert dpm.dependent_sensitivity == pytest.approx(3.0, rel=1e-12)
    assert dpm.scale == pytest.approx(3.0, rel=1e-9) and dpm.scale >= dpm.dependent_sensitivity / 1.0
    assert dpm.coefficients.above_one == [(0, 1)]
    r = ddpbayes.audit(model, "sum", "laplace", "idp", scale=dpm.scale)
    assert r.per_target == pytest.approx([1.0, 1.4 / 3], rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_dpm_fixed_point_on_random_gaussian_models(seed):
    """Random covariances with widths 0.2..3 (rho_ij up to about 15): sigma = DS / eps by hand."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 5))
    a = rng.normal(size=(n, n))
    cov = a @ a.T / n + 0.2 * np.eye(n)
    widths = rng.uniform(0.2, 3.0, size=n)
    epsilon = float(rng.uniform(0.3, 3.0))
    dpm = dpm_scale(gaussian(cov, widths), parse_query("sum"), epsilon)
    assert dpm.scale == pytest.approx(dpm_by_hand(cov, widths, epsilon), rel=1e-9)


def test_dpm_fixed_point_far_above_the_first_guess():
    """rho_01 = 10: DS = 11 and sigma = 11 / eps, found by doubling the bracket from 2 / eps."""
    cov = [[1.0, 10.0], [10.0, 101.0]]
    assert dpm_scale(gaussian(cov), parse_query("sum"), 0.5).scale == pytest.approx(22.0, rel=1e-9)


def test_calibrate_says_rho_above_one_breaks_the_assumption_and_audits_the_scale():
    c = calibrate(gaussian(RHO_ABOVE_ONE), "sum", "ddp", 1.0, method="dpm")
    assert c.scale == pytest.approx(3.0, rel=1e-9)
    assert c.leakage_at_scale == pytest.approx(1.0, rel=1e-9) and c.audit.verdict == "pass"
    [note] = [n for n in c.notes if "rho_ij > 1" in n]
    assert "rho[x0, x1] = 2" in note and "assume 0 <= rho_ij <= 1" in note
    assert "ddp leakage 1, which meets epsilon = 1" in note
    doc = c.to_dict()
    assert doc["dpm"]["coefficients"]["above_one"] == [[0, 1]] and doc["notes"] == c.notes


@pytest.mark.slow  # the default run's budget: a sampled rho matrix, the slowest test of its module
def test_an_estimated_rho_above_one_is_not_capped():
    """The sampling engine on the same pair: rho_01 = 2 (derived above) is estimated with an
    interval whose upper end is not capped at 1 (it was, below the interval's own lower end),
    because x1's support is wider than its declared domain."""
    settings = ddpbayes.RunSettings(engine="sampling", draws=200, tune=200, seed=1)
    c = dependence_coefficients(gaussian(RHO_ABOVE_ONE), 1.0, settings)
    lower, upper = c.ci[0, 1]
    assert 1 < lower <= 2 <= upper and c.above_one == [(0, 1)]


def test_no_note_when_every_rho_is_at_most_one(household):
    c = dependence_coefficients(household(n=3), 1.0)
    assert c.above_one == [] and c.assumption_note() is None


def test_rho_command_prints_the_note(tmp_path, capsys):
    path = tmp_path / "pair.py"
    path.write_text("import numpy as np\nimport pymc as pm\nfrom ddpbayes import DependenceModel, Interval\n\n"
                    "def build():\n    with pm.Model() as m:\n"
                    f"        pm.MvNormal('x', mu=np.zeros(2), cov=np.array({RHO_ABOVE_ONE}))\n"
                    "    return DependenceModel(m, tuples='x', domains=Interval(0, 1))\n")
    assert main(["rho", str(path), "--scale", "1"]) == 0
    assert "note: rho_ij > 1 (rho[x[0], x[1]] = 2)" in capsys.readouterr().out
    assert main(["calibrate", str(path), "--query", "sum", "--notion", "idp", "--epsilon", "1", "--method", "dpm",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scale"] == pytest.approx(3.0, rel=1e-9)
    assert any("rho_ij > 1" in n for n in out["notes"])
    bounds = out["comparison"]["group"]["idp_bounds"]
    assert bounds["prop3"] is None and bounds["prop3_reason"].startswith("premise: M is dQ/b-DP only over data")


# ----------------------------------------------------------------------------- seed 004's premises


def test_prop3_is_not_shown_when_tuples_can_leave_their_domains():
    """The issue's case: at the group scale 2 (L dQ / eps, L = 2) Prop. 3 would say 2 * 1 / 2 = 1,
    next to an idp of (1 + 2) / 2 = 1.5: its premise (M is eps/k-DP for the model's data) fails."""
    model = gaussian(RHO_ABOVE_ONE)
    bounds = idp_bounds(model, parse_query("sum"), 2.0)
    assert ddpbayes.audit(model, "sum", "laplace", "idp", scale=2.0).leakage == pytest.approx(1.5, rel=1e-12)
    assert bounds.prop3 is None and bounds.thm4 is None
    assert "x0, x1 can leave them" in bounds.prop3_premise
    doc = bounds.to_dict()
    assert doc["prop3"] is None and doc["prop3_reason"] == "premise: " + bounds.prop3_premise


def test_prop3_and_thm4_hold_on_a_discrete_model(household):
    """household n = 3, count, b = 2: the members are dependent through h (k = 3), dQ = 1, so
    Prop. 3 gives k dQ / b = 1.5; Thm. 4 needs eta, known from the enumerated joint."""
    bounds = idp_bounds(household(n=3), parse_query("count"), 2.0)
    assert bounds.prop3 == pytest.approx(1.5) and bounds.prop3_premise is None
    assert bounds.thm4 is not None and bounds.thm4_premise is None


def test_thm4_needs_eta(models_dir):
    """markov_chain n = 4 on the structured engine: every day depends on every other (k = 4),
    Prop. 3 gives k dQ / b = 4; eta needs the enumerated joint, which that engine does not hold."""
    model = ddpbayes.load_model(models_dir / "markov_chain.py", {"n": 4})
    bounds = idp_bounds(model, parse_query("count"), 1.0, settings=ddpbayes.RunSettings(engine="structured"))
    assert bounds.prop3 == pytest.approx(4.0) and bounds.thm4 is None
    assert "eta needs the enumerated joint" in bounds.thm4_premise


def test_calibrate_text_shows_n_a_with_the_premise(tmp_path, capsys):
    path = tmp_path / "pair.py"
    path.write_text("import numpy as np\nimport pymc as pm\nfrom ddpbayes import DependenceModel, Interval\n\n"
                    "def build():\n    with pm.Model() as m:\n"
                    f"        pm.MvNormal('x', mu=np.zeros(2), cov=np.array({RHO_ABOVE_ONE}))\n"
                    "    return DependenceModel(m, tuples='x', domains=Interval(0, 1))\n")
    assert main(["calibrate", str(path), "--query", "sum", "--notion", "idp", "--epsilon", "1"]) == 0
    out = capsys.readouterr().out
    group = next(line for line in out.splitlines() if line.startswith("group"))
    assert group.split()[-2:] == ["n/a", "n/a"]
    assert "Prop.3, Thm.4 n/a (premise: M is dQ/b-DP only over data within the declared domains" in out


def test_declared_domains_against_supports():
    """Bernoulli on {0, 1}: within; Binomial(3) declared {0, 1}: wider; a Normal on [0, 1]: wider;
    a Beta on [0, 1]: within."""
    with pm.Model() as m:
        pm.Bernoulli("a", 0.5)
        pm.Binomial("b", 3, 0.5)
        pm.Normal("c", 0, 1)
        pm.Beta("d", 2, 2)
    model = DependenceModel(m, tuples=["a", "b", "c", "d"],
                            domains={"b": Finite([0, 1]), "c": Interval(0, 1), "d": Interval(0, 1)})
    assert wider_than_declared([s.rv for s in model.slots], model.domains) == [1, 2]


# ----------------------------------------------------------------------------- the gaussian engine's note


def test_gaussian_note_on_domains_narrower_than_the_model():
    """Sigma = [[1, 1.35], [1.35, 9]], widths 1, sum, b = 1: idp of x0 is 1 + 1.35 / 1 = 2.35, above
    the group bound L dQ / b = 2 that a reader of the declared domains would expect; the note says
    the answer is for the untruncated model."""
    model = gaussian(UNEQUAL)
    r = ddpbayes.audit(model, "sum", "laplace", "idp", scale=1.0)
    assert r.per_target == pytest.approx(idp_by_hand(UNEQUAL, [1, 1], [1, 1], 1.0), rel=1e-12)
    assert r.leakage == pytest.approx(2.35, rel=1e-12) and r.leakage > 2
    [note] = [n for n in r.notes if "untruncated" in n]
    assert "x0, x1" in note and "the answer is for the untruncated model" in note
    assert note in calibrate(model, "sum", "idp", 1.0).notes


def test_no_gaussian_note_without_dependence():
    """Independent tuples: truncating the others changes nothing for a target, so no note."""
    r = ddpbayes.audit(gaussian([[1.0, 0.0], [0.0, 4.0]]), "sum", "laplace", "idp", scale=1.0)
    assert r.leakage == pytest.approx(1.0, rel=1e-12) and not any("untruncated" in n for n in r.notes)
