"""`calibrate` for Gaussian noise (issue #16): the smallest σ whose profile meets (ε, δ).

Expected values come from the analytic Gaussian mechanism's condition written here (Balle &
Wang 2018, Thm. 8): two Gaussians of one variance whose means are μ standard deviations apart
meet (ε, δ) iff Φ(μ/2 - ε/μ) - e^ε Φ(-μ/2 - ε/μ) <= δ; μ* solves it with equality (brentq). On
a jointly Gaussian model the adversary A(i, K) compares N(q0 + c t, V + σ²) with its shift by
c (t - t'), so μ = width |c| / sqrt(σ² + V) (DESIGN §2.2, §3.5) and σ = sqrt((width |c| / μ*)² - V).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pymc as pm
import pytest
from scipy import optimize, stats

import ddpbayes
from ddpbayes import DependenceModel, Interval
from ddpbayes.auditing import audit
from ddpbayes.cli.main import main
from ddpbayes.ddp import calibrate, exact_scale
from ddpbayes.ddp.calibration import BETA
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Gaussian
from ddpbayes.queries import parse_query

MODELS = Path(__file__).resolve().parents[1] / "models"


def gdp_delta(eps: float, mu: float) -> float:
    """Balle & Wang's δ(ε) for means μ standard deviations apart."""
    return stats.norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * stats.norm.cdf(-mu / 2 - eps / mu)


def mu_star(eps: float, delta: float) -> float:
    """The μ at which δ(ε) = δ (δ(ε) increases in μ)."""
    return optimize.brentq(lambda m: gdp_delta(eps, m) - delta, 1e-6, 50.0, xtol=1e-15, rtol=1e-15)


def gaussian_model(cov, lo: float = 0.0, hi: float = 1.0) -> DependenceModel:
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(len(cov)), cov=np.asarray(cov, dtype=float))
    return DependenceModel(m, "x", domains=Interval(lo, hi))


def closed_form_sigma(cov: np.ndarray, w: np.ndarray, width: float, mu: float, adversaries) -> float:
    """max over (i, K) of sqrt((width |c| / μ*)² - V), c and V from the Gaussian conditioned on x_K."""
    best = 0.0
    for i, known in adversaries:
        rest = [j for j in range(len(cov)) if j not in known]
        s = cov[np.ix_(rest, rest)]
        if known:
            s = s - cov[np.ix_(rest, known)] @ np.linalg.inv(cov[np.ix_(known, known)]) @ cov[np.ix_(known, rest)]
        k = rest.index(i)
        c = float(w[rest] @ s[:, k] / s[k, k])
        v = float(w[rest] @ (s - np.outer(s[:, k], s[k, :]) / s[k, k]) @ w[rest])
        best = max(best, math.sqrt(max((width * abs(c) / mu) ** 2 - v, 0.0)))
    return best


def lattice(n: int):
    return [(i, list(k)) for i in range(n) for r in range(n)
            for k in itertools.combinations([j for j in range(n) if j != i], r)]


@pytest.mark.parametrize("notion", ["ddp", "pdp", "dp"])
def test_independent_tuples_exact_is_balle_wang(notion):
    """Independent tuples: the adversary knowing every other tuple compares two Gaussians Δ₂ = width
    apart, so the exact σ is the analytic σ = width / μ*, and so are the dp and group rows' bases."""
    cov, width, eps, delta = np.diag([1.0, 2.0, 0.5]), 2.0, 0.8, 1e-5
    c = calibrate(gaussian_model(cov, 0.0, width), "sum", notion, eps, mechanism="gaussian", delta=delta)
    expected = width / mu_star(eps, delta)
    assert c.engine == "gaussian"
    assert c.scale == pytest.approx(expected, rel=1e-9)
    assert c.row("dp").scale == pytest.approx(expected, rel=1e-9)
    assert c.row("group").scale == pytest.approx(c.dependence_size * expected, rel=1e-9)
    assert c.leakage_at_scale == pytest.approx(eps, rel=1e-9)


def test_independent_tuples_idp_integrates_the_others():
    """idp knows nothing: V = the others' variance, σ = sqrt((width / μ*)² - V) for the worst target."""
    cov, width, eps, delta = np.diag([0.3, 0.5, 0.2]), 4.0, 1.0, 1e-6
    c = calibrate(gaussian_model(cov, 0.0, width), "sum", "idp", eps, mechanism="gaussian", delta=delta)
    mu = mu_star(eps, delta)
    assert c.scale == pytest.approx(max(math.sqrt((width / mu) ** 2 - (cov.trace() - cov[i, i]))
                                        for i in range(3)), rel=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_random_jointly_gaussian_equals_closed_form(seed):
    """Random 3-tuple covariances and weights: idp and pdp's σ against the closed form above."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(3, 3))
    cov = a @ a.T + 0.3 * np.eye(3)
    w = np.round(rng.uniform(-2, 2, size=3), 2)
    width, eps, delta = 1.5, float(rng.uniform(0.3, 2.0)), 10.0 ** -rng.integers(3, 8)
    model = gaussian_model(cov, 0.0, width)
    query = "linear:" + ",".join(f"{x:g}" for x in w)
    mu = mu_star(eps, delta)
    for notion, advs in (("idp", [(i, []) for i in range(3)]), ("pdp", lattice(3))):
        c = calibrate(model, query, notion, eps, mechanism="gaussian", delta=delta)
        assert c.scale == pytest.approx(closed_form_sigma(cov, w, width, mu, advs), rel=1e-8)


def test_leakage_non_increasing_in_sigma():
    """Post-processing (module docstring): ε at δ falls as σ grows, every notion."""
    cov = np.array([[1.0, 0.6, -0.3], [0.6, 1.2, 0.2], [-0.3, 0.2, 0.8]])
    model = gaussian_model(cov, 0.0, 2.0)
    for notion in ("dp", "idp", "pdp", "ddp"):
        leaks = [audit(model, "sum", Gaussian(s, 1e-6), notion).leakage for s in (0.3, 0.7, 1.5, 3.0, 8.0)]
        assert all(b <= a + 1e-12 for a, b in itertools.pairwise(leaks))


def test_alpha_is_gaussian_quantile():
    c = calibrate(gaussian_model(np.eye(2)), "sum", "idp", 1.0, mechanism="gaussian", delta=1e-6)
    r = c.row("exact")
    assert 2 * stats.norm.sf(r.alpha / r.scale) == pytest.approx(BETA, rel=1e-12)


def test_json_adds_delta_and_dpm_is_na(capsys):
    code = main(["calibrate", str(MODELS / "galton_families.py"), "-p", "k=2", "--query", "mean", "--notion", "idp",
                 "--mechanism", "gaussian", "--epsilon", "1", "--delta", "1e-6", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["delta"] == 1e-6 and out["mechanism"] == "gaussian"
    assert out["comparison"]["dpm"]["scale"] is None and "Laplace" in out["comparison"]["dpm"]["reason"]
    assert out["comparison"]["exact"]["idp_bounds"] is None
    assert out["leakage_at_scale"] == pytest.approx(1.0, rel=1e-9)


def test_laplace_json_has_no_delta(capsys):
    main(["calibrate", str(MODELS / "correlated_pair.py"), "--query", "sum", "--notion", "idp", "--epsilon", "1",
          "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert "delta" not in out and "mechanism" not in out and out["dpm"]["scale"] > 0


@pytest.mark.parametrize(("extra", "message"), [
    (["--delta", "1e-6"], "--delta is meaningless for laplace noise"),
    (["--mechanism", "gaussian"], "needs --delta"),
    (["--mechanism", "gaussian", "--delta", "1.5"], "delta must lie strictly between 0 and 1"),
    (["--mechanism", "gaussian", "--delta", "1e-6", "--method", "dpm"], "Laplace"),
    (["--mechanism", "discrete_gaussian", "--delta", "1e-6"], "must be laplace or gaussian"),
])
def test_bad_input_exit_2(extra, message, capsys):
    code = main(["calibrate", str(MODELS / "correlated_pair.py"), "--query", "sum", "--notion", "idp",
                 "--epsilon", "1", *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_household_exact_engine_meets_epsilon_at_delta():
    """A finite model (exact engine): ε at δ equals E at the calibrated σ and exceeds it at 0.999 σ."""
    model = ddpbayes.load_model(MODELS / "household.py", {"n": 3})
    query = parse_query("count").bind(model)
    eps, delta = 1.0, 1e-6
    sigma, notes = exact_scale(model, query, "idp", eps, mechanism=Gaussian(1.0, delta))
    assert not notes
    at = audit(model, query, Gaussian(sigma, delta), "idp")
    assert at.engine == "exact"
    assert at.leakage == pytest.approx(eps, abs=1e-9) and at.leakage <= eps + 1e-12
    assert audit(model, query, Gaussian(0.999 * sigma, delta), "idp").leakage > eps


def test_exact_scale_rejects_nothing_silently():
    with pytest.raises(InputError, match="delta"):
        calibrate(gaussian_model(np.eye(2)), "sum", "idp", 1.0, mechanism="gaussian")
