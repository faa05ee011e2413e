"""What a reader meets first on the command line (issue #24): --version, help on every flag,
values that start with a minus sign, the per-target table of an audit restricted to --target,
papers named by author rather than by seed number, and no RuntimeWarning from quadrature.

Expected numbers come from the formulas written here: the Gaussian closed form
|w_i + Σ_U w_j C_ji / C_ii| · width / b (DESIGN §2.2) and the Normal law's own moments."""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import math
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import ddpbayes
from ddpbayes.cli import main as cli_main
from ddpbayes.cli.main import build_parser, main
from ddpbayes.errors import InputError
from test_quadrature import _laplace_idp, _logit_household_law  # adaptive-quadrature references

ROOT = Path(__file__).resolve().parent.parent

SEED_NUMBER = re.compile(r"\b00[0-4]\b|seeds? 00")  # "seed 000", "004's", "seeds 000/001"


def _parsers(parser: argparse.ArgumentParser, path: str = "ddpbayes"):
    """(path, parser) for the parser and every subparser below it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


# --- --version ------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_distribution_version_without_pymc(flag):
    code = ("import sys\nfrom ddpbayes.cli.main import main\ntry:\n    main([%r])\nexcept SystemExit as e:\n"
            "    assert e.code in (0, None), e.code\nassert 'pymc' not in sys.modules, 'pymc imported'\n" % flag)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"ddpbayes {importlib.metadata.version('ddpbayes')}\n"
    assert done.stderr == ""


def test_version_falls_back_to_the_package_version(monkeypatch):
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(cli_main.importlib.metadata, "version", missing)
    assert cli_main.version() == ddpbayes.__version__


# --- help on every flag -----------------------------------------------------------------------


def test_every_flag_of_every_subcommand_has_help():
    missing = []
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if not (action.help or "").strip():
                missing.append(f"{path}: {'/'.join(action.option_strings) or action.dest}")
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{path} {c.dest}" for c in action._choices_actions if not (c.help or "").strip()]
    assert missing == []


def test_help_names_papers_not_seed_numbers():
    seen = []
    for path, parser in _parsers(build_parser()):
        texts = [parser.description or ""] + [a.help or "" for a in parser._actions]
        texts += [c.help or "" for a in parser._actions if isinstance(a, argparse._SubParsersAction)
                  for c in a._choices_actions]
        seen += [f"{path}: {t}" for t in texts if SEED_NUMBER.search(t)]
    assert seen == []


def test_messages_and_output_name_papers_not_seed_numbers():
    """Every string the package can print (an error, a note, a table's text: any literal that is not a
    docstring) names the paper; docstrings keep the seed numbers (DESIGN, top), `papers.py` maps them."""
    paper = re.compile(r"[Ss]eeds? 00[0-4]|(?<![\w.,+\-/–])00[0-4](?!\w|[.,/–-]\d)")  # not "1,000", "0.004"
    seen = []
    for path in sorted((ROOT / "ddpbayes").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name == "papers.py" or not paper.search(text):
            continue
        tree = ast.parse(text)
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        seen += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                 if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                 and paper.search(node.value)]
    assert seen == []


# --- values that start with a minus sign ------------------------------------------------------

AUDIT = ["audit", "m.py", "--query", "sum", "--mechanism", "laplace", "--scale", "1", "--notion", "pdp"]


@pytest.mark.parametrize("argv, field, expected", [
    (["derive", "gaussian", "--cov", "[[1]]", "--weights", "-1,2"], "weights", "-1,2"),
    (["derive", "gaussian", "--cov", "[[1]]", "--mean", "-1,0.5"], "mean", "-1,0.5"),
    (["derive", "gaussian", "--cov", "[[1]]", "--mean", "-.5,1"], "mean", "-.5,1"),
    (["derive", "gaussian", "--cov", "[[1]]", "--weights", "-2e-1,3"], "weights", "-2e-1,3"),
    (["derive", "gaussian", "--cov", "[[1]]", "--known", "-1,2"], "known", [-1, 2]),
    (["derive", "gaussian-rho", "--cov", "[[1]]", "--widths", "-1,2"], "widths", "-1,2"),
    ([*AUDIT, "-p", "shift=-1", "-p", "n=-3"], "param", ["shift=-1", "n=-3"]),
    ([*AUDIT, "--target", "-1"], "target", [-1]),
    ([*AUDIT, "--target", "-1,2"], "target", [-1, 2]),
    ([*AUDIT, "--known", "-2,3"], "known", [-2, 3]),
    ([*AUDIT, "--claim", "-1e-3"], "claim", -1e-3),
    ([*AUDIT[:2], "--query", "linear:-1,1", *AUDIT[4:]], "query", "linear:-1,1"),
    (["attack", "--epsilons", "-1,2"], "epsilons", (-1.0, 2.0)),
])
def test_values_starting_with_a_minus_sign_parse(argv, field, expected):
    assert getattr(build_parser().parse_args(argv), field) == expected


@pytest.mark.parametrize("argv", [
    [*AUDIT, "--bogus", "1"],
    [*AUDIT, "--target", "-x"],
    ["derive", "gaussian", "--cov", "[[1]]", "--weights", "--mean"],
])
def test_unknown_options_are_still_errors(argv):
    with pytest.raises(InputError):
        build_parser().parse_args(argv)


def test_derive_with_a_negative_weight(capsys):
    """w = (-1, 3), C = [[1, 0.5], [0.5, 2]], target 0, nobody known, width 1, b = 1:
    |w_0 + w_1 C_10 / C_00| = |-1 + 3 · 0.5| = 0.5."""
    code = main(["derive", "gaussian", "--cov", "[[1,0.5],[0.5,2]]", "--weights", "-1,3", "--width", "1",
                 "--scale", "1", "--format", "json"])
    out = capsys.readouterr()
    assert code == 0 and out.err == ""
    import json

    assert float(json.loads(out.out)["value"]) == pytest.approx(0.5, abs=1e-12)


# --- the audit's text output --------------------------------------------------------------------


def test_audit_text_lists_only_the_targets_asked_for(models_dir, capsys):
    code = main(["audit", str(models_dir / "markov_chain.py"), "-p", "n=40", "--query", "count", "--mechanism",
                 "laplace", "--epsilon", "1", "--notion", "idp", "--target", "20"])
    out = capsys.readouterr()
    assert code == 0 and out.err.strip().count("\n") <= 2  # at most progress lines, no warnings
    lines = out.out.splitlines()
    head = next(k for k, line in enumerate(lines) if line.split() == ["tuple", "leakage"])
    rows = []
    for line in lines[head + 1:]:
        if not line.strip() or line.startswith("note:"):
            break
        rows.append(line.split())
    assert [r[0] for r in rows] == ["x20"]
    assert not SEED_NUMBER.search(out.out)  # the information block names Wu et al., not seed 004


def test_calibrate_text_names_papers(models_dir, capsys):
    code = main(["calibrate", str(models_dir / "independent.py"), "-p", "n=2", "--query", "sum", "--notion", "idp",
                 "--epsilon", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "Wu et al." in out and not SEED_NUMBER.search(out)


# --- quadrature: no RuntimeWarning where an underflowed weight is meant -------------------------


@pytest.mark.parametrize("m", [512, 1024])
def test_hermite_rule_with_underflowed_weights_warns_nothing(m):
    """From 512 nodes Gauss–Hermite's outer weights underflow to 0; the rule must still
    integrate the Normal(0.3, 2) density's moments: ∫ φ(z) dz = 1, E[z] = 0.3, E[z²] = 4.09."""
    import pymc as pm

    from ddpbayes.engines.structured.quadrature import rule

    mu, sigma = 0.3, 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = rule(pm.Normal.dist(mu, sigma), m)
        density = np.exp(-((r.nodes - mu) ** 2) / (2 * sigma**2) + r.log_weights) / (math.sqrt(2 * math.pi) * sigma)
    assert np.isneginf(r.log_weights).any()  # the case in question: some weights did underflow
    assert [float(np.sum(density * r.nodes**k)) for k in range(3)] == pytest.approx([1.0, mu, mu**2 + sigma**2],
                                                                                      rel=1e-10)


def test_logistic_normal_latent_audit_warns_nothing():
    """A Normal effect on the logit scale that needs 512 nodes to settle (n = 20, sigma = 2): the
    audit runs with every warning an error."""
    import pymc as pm

    with pm.Model() as m:
        u = pm.Normal("u", 0.0, 2.0)
        for k in range(20):
            pm.Bernoulli(f"x{k}", pm.math.sigmoid(u))
    model = ddpbayes.DependenceModel(m, tuples=[f"x{k}" for k in range(20)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ddpbayes.audit(model, "count", "laplace", "idp", epsilon=1, targets=[0], information=None)
    assert got.engine == "structured"
    assert any("512 nodes" in note for note in got.notes)
    expected = _laplace_idp({t: _logit_household_law(20, 0.0, 2.0, 0.0, t) for t in (0, 1)}, 1.0)  # scipy's quad
    assert got.leakage == pytest.approx(expected, abs=1e-9)


# --- failed MCMC diagnostics: said on the mcmc line, and never a silent pass --------------------


@pytest.mark.parametrize("claim, code", [pytest.param(None, 0, marks=pytest.mark.slow), ("10", 4)])  # one in the default run
def test_failed_diagnostics_are_said_and_a_claim_is_inconclusive(models_dir, capsys, claim, code):
    """2 chains x 20 draws untuned (4 chains on the bounding runs): bulk ESS far below the 400 the
    diagnostics ask (docs/getting-started.md, Exit codes): no claim, exit 0 with the failure on the mcmc line; a
    claim, exit 4 (inconclusive). The Beta-Bernoulli model, whose rate is continuous, is sampled
    (by MCMC, its records summed; a model with every variable discrete is summed exactly, issue #27),
    and the next line says which runs chose the witness and which bounded it."""
    argv = ["audit", str(models_dir / "beta_bernoulli.py"), "-p", "n=4", "--query", "count", "--mechanism", "laplace",
            "--scale", "1", "--notion", "idp", "--target", "0", "--engine", "sampling", "--seed", "3", "--draws", "20",
            "--tune", "0", "--information", "none", *(["--claim", claim] if claim else [])]
    assert main(argv) == code
    lines = capsys.readouterr().out.splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith("mcmc"))
    mcmc = lines[at]
    assert "diagnostics FAILED" in mcmc and "raise --draws/--tune" in mcmc
    assert re.search(r"samplers (nuts|slice)\+summed 8\b", mcmc), mcmc  # the rate sampled, the 3 other records summed
    assert ("a claim would be inconclusive" in mcmc) == (claim is None)
    assert re.fullmatch(r"\s+chose the witness on the choosing runs \(seed 3, .*\); bounded it on fresh runs .*",
                        lines[at + 1]), lines[at + 1]
