"""Reports with a `[profile]` section (Gaussian noise, issue #16): the spec's table is checked on
one line, the section builds, and its numbers are the audit's and the closed form's.

Closed form (DESIGN §2.2, §3.5) for Galton's family mean: k equicorrelated heights of variance
s² and correlation r on a domain of width 23; given X_i the mean is Gaussian with slope
c = (1 + (k - 1) r) / k and variance V = s² (1 + (k - 1) r)(k - 1)(1 - r) / k², so the idp
adversary (t, t' = the domain's ends) is μ-GDP with μ = 23 c / sqrt(σ² + V); at zCDP ρ = 1/2 for
one child, σ = Δ₂ / √(2ρ) = 23 / k.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest
from scipy import optimize, stats

import ddpbayes
from ddpbayes.cli.main import main
from ddpbayes.mechanisms import Gaussian
from ddpbayes.reports import build_report, load_spec

ROOT = Path(__file__).resolve().parent.parent
GALTON = ROOT / "models" / "galton_families.py"

SPEC = f"""
model = "{GALTON}"
params = {{ k = 2 }}
query = "mean"
notions = ["dp", "idp"]
seed = 0
calibrate = false

[mechanism]
kind = "laplace"
epsilon = 1.0

[profile]
kind = "gaussian"
rho = 0.5
delta = 1e-6
title = "Gaussian noise at zCDP 0.5"
text = "A reading.\\n\\nA second paragraph."
"""


def _spec(directory: Path, text: str) -> Path:
    path = directory / "spec.toml"
    path.write_text(textwrap.dedent(text))
    return path


def gdp_epsilon(delta: float, mu: float) -> float:
    """The ε at which Φ(μ/2 - ε/μ) - e^ε Φ(-μ/2 - ε/μ) = δ (Balle & Wang 2018, Thm. 8)."""
    f = lambda e: stats.norm.cdf(mu / 2 - e / mu) - math.exp(e) * stats.norm.cdf(-mu / 2 - e / mu) - delta
    return optimize.brentq(f, 0.0, 100.0, xtol=1e-14, rtol=1e-14)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("profile_report")
    data = build_report(_spec(d, SPEC), d / "out", progress=False)
    return d / "out", data


def test_section_built(report):
    out, data = report
    md = (out / "report.md").read_text()
    assert "## Gaussian noise at zCDP 0.5" in md and "A second paragraph." in md
    assert (out / "figures" / "profile.png").stat().st_size > 1000
    assert json.loads((out / "results.json").read_text())["profile"] == data["profile"]


def test_numbers_equal_audit_and_closed_form(report):
    _, data = report
    k, model = 2, ddpbayes.load_model(GALTON, {"k": 2})
    fit = json.loads((ROOT / "models" / "data" / "galton_fit.json").read_text())
    s2 = fit["tau2"] + fit["sigma2"]
    r = fit["tau2"] / s2
    sigma = 23 / k
    v = s2 * (1 + (k - 1) * r) * (k - 1) * (1 - r) / k**2
    mu = 23 * (1 + (k - 1) * r) / k / math.sqrt(sigma**2 + v)
    section = data["profile"]
    assert section["sigma"] == pytest.approx(sigma, rel=1e-12)
    idp = section["audits"]["idp"]
    assert idp["gdp_mu"] == pytest.approx(mu, rel=1e-9)
    assert idp["zcdp_rho"] == pytest.approx(mu**2 / 2, rel=1e-9)
    assert idp["epsilon_at_delta"] == pytest.approx(gdp_epsilon(1e-6, mu), rel=1e-9)
    assert section["classic"]["gdp_mu"] == pytest.approx(1.0, rel=1e-12)
    assert section["classic"]["epsilon_at_delta"] == pytest.approx(gdp_epsilon(1e-6, 1.0), rel=1e-9)
    direct = ddpbayes.audit(model, "mean", Gaussian(sigma, 1e-6), "idp")
    assert idp["leakage"] == direct.leakage and idp["profile"] == direct.to_dict()["profile"]


BAD = [
    ('foo = 1', "unknown key 'profile.foo'"),
    ('kind = "laplace"', "profile.kind"),
    ('kind = "gaussian"\nrho = 0.5\nepsilon = 1.0', "exactly one of the keys 'rho', 'epsilon' and 'sigma'"),
    ('kind = "gaussian"', "exactly one of the keys"),
    ('kind = "gaussian"\nrho = -1.0', "profile.rho"),
    ('kind = "gaussian"\nrho = 0.5\ndelta = 1.5', "profile.delta"),
    ('kind = "gaussian"\nrho = 0.5\nnotions = ["xdp"]', "profile.notions"),
    ('kind = "gaussian"\nrho = 0.5\ntext = 3', "profile.text"),
]


@pytest.mark.parametrize(("table", "message"), BAD)
def test_bad_profile_table_one_line(table, message, tmp_path, capsys):
    head = SPEC.split("[profile]")[0]
    spec = _spec(tmp_path, head + "[profile]\n" + table + "\n")
    assert main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and str(spec) in err and len(err.strip().splitlines()) == 1


def test_shipped_profile_specs_parse():
    for name in ("galton_families", "household_laplace_gaussian"):
        spec = load_spec(ROOT / "reports" / "specs" / f"{name}.toml")
        assert spec.profile is not None and spec.profile.kind == "gaussian"


def test_shipped_texts_match_their_results():
    """The numbers the shipped specs' texts quote are those in the regenerated results.json."""
    galton = json.loads((ROOT / "reports" / "galton_families" / "results.json").read_text())["profile"]
    fit = json.loads((ROOT / "models" / "data" / "galton_fit.json").read_text())
    s2, k = fit["tau2"] + fit["sigma2"], 4
    r = fit["tau2"] / s2
    v = s2 * (1 + (k - 1) * r) * (k - 1) * (1 - r) / k**2
    mu = (1 + (k - 1) * r) / math.sqrt(1 + k * k * v / 23**2)
    assert galton["audits"]["idp"]["gdp_mu"] == pytest.approx(mu, rel=1e-9) and round(mu, 3) == 2.116
    assert round(mu**2 / 2, 2) == 2.24 and round(1 + (k - 1) * r, 3) == 2.165
    house = json.loads((ROOT / "reports" / "household_laplace_gaussian" / "results.json").read_text())
    idp = house["profile"]["audits"]["idp"]
    assert round(house["audits"]["idp"]["leakage"], 2) == 2.45 and round(idp["epsilon_at_delta"], 2) == 2.58
    assert round(house["profile"]["classic"]["zcdp_rho"], 3) == 0.028 and round(idp["zcdp_rho"], 3) == 0.162
    ours = {d: e for e, d in idp["profile"]}
    classic = {d: e for e, d in house["profile"]["classic"]["profile"]}
    ratios = [ours[d] / classic[d] for d in classic if d <= 0.04 and classic[d] > 0]
    assert len(ratios) == 22 and 2.3 <= min(ratios) and max(ratios) <= 4.1
    assert round(ours[0.1], 2) == 0.35 and 0.1 not in classic  # classic ε = 0 at δ = 0.1: not a point of its curve


def test_gaussian_main_mechanism_points_to_profile(tmp_path, capsys):
    spec = _spec(tmp_path, SPEC.replace('kind = "laplace"', 'kind = "gaussian"'))
    assert main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "mechanism.kind" in err and "[profile]" in err and len(err.strip().splitlines()) == 1
