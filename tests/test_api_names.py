"""One name for one thing between the command line and Python (issue #40, item 5): `audit`
takes `target`, `mechanism_params`, `search`/`top_k`, `sigma` and `sensitivity` as the flags
spell them (the older spellings still work, never both), and `calibrate`, `rho` and `derive`
are importable from `ddpbayes` without loading PyMC. Expected values are derived by hand: for
two independent fair bits released as a count with Laplace(b), every adversary's leakage is
1/b (the count moves by 1 with either bit), and rho_01 = 0; for a copied bit it is 1."""

from __future__ import annotations

import json
import subprocess
import sys

import pymc as pm
import pytest

import ddpbayes
from ddpbayes import DependenceModel, InputError, Interval
from ddpbayes.cli.main import main

B = 2.0  # the Laplace scale of the hand derivations


@pytest.fixture(scope="module")
def independent_pair() -> DependenceModel:
    with pm.Model() as m:
        pm.Bernoulli("x0", 0.5)
        pm.Bernoulli("x1", 0.5)
    return DependenceModel(m, ["x0", "x1"])


@pytest.fixture(scope="module")
def copied_pair() -> DependenceModel:
    """x1 = x0, a fair bit: D_1 released with Laplace(b) leaks 1/b about D_0, so rho_01 = 1."""
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", 0.5)
        pm.Bernoulli("x1", pm.math.switch(x0, 1.0, 0.0))
    return DependenceModel(m, ["x0", "x1"])


def test_target_as_the_flag_spells_it(independent_pair):
    one = ddpbayes.audit(independent_pair, "count", "laplace", "idp", scale=B, target=1, information=None)
    assert one.per_target == [None, pytest.approx(1 / B)] and one.leakage == pytest.approx(1 / B)
    old = ddpbayes.audit(independent_pair, "count", "laplace", "idp", scale=B, targets=[1], information=None)
    assert old.per_target == one.per_target
    with pytest.raises(InputError, match="targets is the older spelling of target"):
        ddpbayes.audit(independent_pair, "count", "laplace", "idp", scale=B, target=0, targets=[0])


def test_mechanism_params_and_the_older_params(independent_pair):
    """The truncated geometric on counts 0..2 at epsilon: both spellings give the same law."""
    new = ddpbayes.audit(independent_pair, "count", "truncated_geometric", "idp", epsilon=1.0,
                         mechanism_params={"n": "2"}, information=None)
    old = ddpbayes.audit(independent_pair, "count", "truncated_geometric", "idp", epsilon=1.0, params={"n": "2"},
                         information=None)
    assert new.leakage == old.leakage and new.mechanism == old.mechanism
    with pytest.raises(InputError, match="params is the older spelling of mechanism_params"):
        ddpbayes.audit(independent_pair, "count", "truncated_geometric", "idp", epsilon=1.0,
                       mechanism_params={"n": "2"}, params={"n": "2"})


def test_search_greedy_top_k_is_pdp_greedy(independent_pair):
    """Independent bits: every pdp adversary leaks 1/b, so the greedy search's lower bound is 1/b."""
    greedy = ddpbayes.audit(independent_pair, "count", "laplace", "pdp", scale=B, search="greedy", top_k=1,
                            information=None)
    assert greedy.lower_bound and greedy.problem.settings.pdp_greedy == 1
    assert greedy.leakage == pytest.approx(1 / B)
    old = ddpbayes.audit(independent_pair, "count", "laplace", "pdp", scale=B, pdp_greedy=1, information=None)
    assert old.problem.settings == greedy.problem.settings
    full = ddpbayes.audit(independent_pair, "count", "laplace", "pdp", scale=B, search="full", information=None)
    assert not full.lower_bound
    with pytest.raises(InputError, match="use it with --search greedy"):
        ddpbayes.audit(independent_pair, "count", "laplace", "pdp", scale=B, top_k=2)
    with pytest.raises(InputError, match="give one of them"):
        ddpbayes.audit(independent_pair, "count", "laplace", "pdp", scale=B, search="greedy", pdp_greedy=2)


def test_sigma_is_the_gaussian_scale(independent_pair):
    by_sigma = ddpbayes.audit(independent_pair, "count", "gaussian", "dp", sigma=B, delta=1e-5, information=None)
    by_scale = ddpbayes.audit(independent_pair, "count", "gaussian", "dp", scale=B, delta=1e-5, information=None)
    assert by_sigma.leakage == by_scale.leakage and by_sigma.mechanism["sigma"] == B
    with pytest.raises(InputError, match="sigma is the standard deviation of Gaussian noise"):
        ddpbayes.audit(independent_pair, "count", "laplace", "dp", sigma=B)


def test_sensitivity_keyword_is_the_flag():
    """expr:x0+x1 on [0, 1]^2 with the sensitivity given as 1: epsilon = 1/b sets Laplace(b), and
    dp (model-free) leaks sensitivity / b = 1/b."""
    with pm.Model() as m:
        pm.Uniform("x0", 0.0, 1.0)
        pm.Uniform("x1", 0.0, 1.0)
    model = DependenceModel(m, ["x0", "x1"], {"x0": Interval(0, 1), "x1": Interval(0, 1)})
    r = ddpbayes.audit(model, "expr:x0+x1", "laplace", "dp", epsilon=1 / B, sensitivity=1.0, information=None)
    assert r.leakage == pytest.approx(1 / B) and r.mechanism["scale"] == pytest.approx(B)


def test_unknown_keyword_names_audits_own(independent_pair):
    with pytest.raises(InputError, match=r"unknown setting 'mechanism_param' \(audit's keywords: .*mechanism_params"):
        ddpbayes.audit(independent_pair, "count", "laplace", "idp", scale=B, mechanism_param={})


def test_calibrate_rho_derive_import_lazily():
    """From `ddpbayes`, listed by dir(), and importing the package still loads neither PyMC nor sympy."""
    code = ("import sys, ddpbayes; names = dir(ddpbayes); "
            "print(all(n in names for n in ('calibrate', 'rho', 'derive', 'Calibration'))); "
            "print('pymc' in sys.modules or 'sympy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False"]


def test_rho_from_python(independent_pair, copied_pair):
    """rho_ij = leak_i(D_j with Laplace(b)) b / dD_j: 0 for independent bits, 1 for a copy."""
    apart, copied = ddpbayes.rho(independent_pair, B, seed=3), ddpbayes.rho(copied_pair, B)
    assert apart.rho[0, 1] == pytest.approx(0.0, abs=1e-12) and copied.rho[0, 1] == pytest.approx(1.0, rel=1e-9)


def test_calibrate_from_python(independent_pair):
    """Leakage 1/b under idp: the smallest scale meeting epsilon is 1/epsilon."""
    c = ddpbayes.calibrate(independent_pair, "count", "idp", 0.5, engine="exact")
    assert c.scale == pytest.approx(2.0, rel=1e-9) and c.audit.verdict == "pass"


def test_derive_from_python_is_the_cli(capsys):
    """Liu et al.'s rho_ij = |Sigma_ij / Sigma_ii| width_i / width_j = 0.5 / 1 * 2 / 1."""
    d = ddpbayes.derive("gaussian-rho", "[[1, 0.5], [0.5, 2]]", widths=(2.0, 1.0))
    assert d.value == pytest.approx(1.0)
    assert main(["derive", "gaussian-rho", "--cov", "[[1, 0.5], [0.5, 2]]", "--widths", "2,1", "--format",
                 "json"]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == pytest.approx(1.0)
    laplace = ddpbayes.derive("gaussian", "[[1, 0.5], [0.5, 1]]", width=1.0, scale=B)
    assert laplace.value == pytest.approx(1.5 / B)  # width / b * |w_0 + w_1 C_10 / C_00|
    with pytest.raises(InputError, match="sigma once"):  # Gaussian noise's sigma is --sigma or --scale
        ddpbayes.derive("gaussian", "[[1]]", mechanism="gaussian", sigma=1.0, scale=1.0)
    with pytest.raises(InputError, match="--sigma is for --mechanism gaussian"):
        ddpbayes.derive("gaussian", "[[1]]", sigma=1.0)
    for bad, says in ((dict(pair=(0, 1, 2)), "--pair takes two"), (dict(target=1), "not target")):
        with pytest.raises(InputError, match=says):
            ddpbayes.derive("gaussian-rho", "[[1, 0.5], [0.5, 1]]", **bad)
    with pytest.raises(InputError, match="unknown derivation"):
        ddpbayes.derive("laplace", "[[1]]")
