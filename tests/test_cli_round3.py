"""First contact, round three (issue #40 items 10 and 21): `ddpbayes models` lists the shipped
files, bare `ddpbayes` prints its usage, help texts point into no source file and offer only the
flags a command takes, `ddpbayes mechanisms` says nothing meant for a reader of the source, every
exit code is in the CLI reference, and a report directory refused names the flag that gave it."""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ddpbayes import shipped
from ddpbayes.cli.main import build_parser, main
from ddpbayes.papers import cite

ROOT = Path(__file__).resolve().parent.parent
EXIT_CODES = (0, 1, 2, 3, 4, 130, 141, 143)


def _parsers(parser: argparse.ArgumentParser, path: str = "ddpbayes"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return next((a for a in parser._actions if flag in a.option_strings), None)


def _subparser(name: str) -> argparse.ArgumentParser:
    return dict(_parsers(build_parser()))[f"ddpbayes {name}"]


# --- ddpbayes models ------------------------------------------------------------------------------


def test_models_lists_every_shipped_model_and_spec_on_one_line(capsys):
    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in shipped.names(shipped.MODELS):
        doc = cite(ast.get_docstring(ast.parse((ROOT / "models" / f"{name}.py").read_text()))).split()
        mine = [line for line in lines if line.split()[:1] == [name] and line.startswith("  ")]
        assert len(mine) == 2 if name in shipped.names(shipped.SPECS) else len(mine) == 1, (name, mine)
        assert any(line.split()[1:5] == doc[:4] for line in mine), (name, mine)  # its docstring's words, papers named
        assert not re.search(r"\b00[0-4]\b", " ".join(mine)), mine
    for name in shipped.names(shipped.SPECS):
        assert any(line.split()[:1] == [name] and len(line.split()) > 2 for line in lines), name
    # the attack's spec has no title: its leading comment's sentence, without the command in parentheses
    attack = next(line for line in lines if line.split()[:1] == ["gowalla_attack"])
    assert "inference attack" in attack and "--seed" not in attack and attack.endswith("three cities.")


def test_models_imports_no_pymc():
    code = ("import sys\nfrom ddpbayes.cli.main import main\nassert main(['models']) == 0\n"
            "assert 'pymc' not in sys.modules, 'pymc imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "household" in done.stdout


# --- bare ddpbayes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [[], ["--debug"]])
def test_bare_ddpbayes_prints_the_usage_and_exits_2(capsys, argv):
    """No command: the whole usage (every command with its line) on stderr, not the one-line argument
    error of before; exit 2 as for any missing argument, so an empty command word never reads as a pass."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("usage: ddpbayes") and "Traceback" not in err
    for command in ("audit", "report", "models", "mechanisms"):
        assert re.search(rf"^\s+{command}\s", err, re.M), command  # each command with its one-line help


# --- help texts ----------------------------------------------------------------------------------


def test_help_points_into_no_source_file():
    found = []
    for path, parser in _parsers(build_parser()):
        for text in [parser.description or "", *(a.help or "" for a in parser._actions)]:
            found += [(path, m) for m in re.findall(r"ddpbayes/[\w/]+\.py", text)]
    assert found == []


@pytest.mark.parametrize("command", ["rho", "calibrate"])
def test_commands_without_programs_offer_no_program_flags(command, capsys):
    parser = _subparser(command)
    assert _option(parser, "--program-runs") is None
    assert "program" not in _option(parser, "--engine").choices
    assert "--program-runs" not in parser.format_help()
    argv = [command, "household", "--scale", "1"] if command == "rho" else \
        [command, "household", "--query", "count", "--notion", "idp", "--epsilon", "1"]
    assert main([*argv, "--program-runs", "5"]) == 2
    assert "unrecognized arguments: --program-runs" in capsys.readouterr().err
    assert main([*argv, "--engine", "program"]) == 2
    assert "invalid choice: 'program'" in capsys.readouterr().err


def test_audit_keeps_the_program_flags():
    parser = _subparser("audit")
    assert _option(parser, "--program-runs") is not None and "program" in _option(parser, "--engine").choices


def test_audit_help_names_every_mechanism():
    from ddpbayes.mechanisms import REGISTRY

    text = _option(_subparser("audit"), "--mechanism").help
    assert [kind for kind in REGISTRY if not re.search(rf"\b{kind}\b", text)] == []


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_mechanisms_output_says_nothing_meant_for_the_source(fmt, capsys):
    assert main(["mechanisms", "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert "module docstring" not in out and "`describe`" not in out
    assert "epsilon_permanent" in out  # what RAPPOR's sentence points to instead


# --- exit codes ----------------------------------------------------------------------------------


def test_the_cli_reference_lists_every_exit_code():
    import ddpbayes.cli.main as cli_main

    reference = (ROOT / "docs" / "reference" / "cli.md").read_text()
    guide = (ROOT / "docs" / "getting-started.md").read_text()
    for code in EXIT_CODES:
        assert re.search(rf"\b{code} [a-z]", reference), code
        assert f"| {code} |" in guide, code
        assert re.search(rf"\b{code} [a-z]", cli_main.__doc__), code


# --- a report directory refused names its flag (item 21) ---------------------------------------------


def _never(*args, **kwargs):
    raise AssertionError("the work started before the report directory was checked")


@pytest.mark.parametrize("kind", ["file", "unrelated directory"])
def test_attack_report_refused_names_report_before_the_attack(tmp_path, monkeypatch, capsys, kind):
    import ddpbayes.attack.run as attack_run

    target = tmp_path / "target"
    if kind == "file":
        target.write_text("not a report\n")
    else:
        target.mkdir()
        (target / "notes.txt").write_text("mine\n")
    monkeypatch.setattr(attack_run, "load_data", _never)
    assert main(["attack", "--report", str(target), "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --report {target} ") and "--out" not in err and len(err.splitlines()) == 1, err
    assert target.is_file() if kind == "file" else sorted(p.name for p in target.iterdir()) == ["notes.txt"]


def test_report_refused_names_out_before_the_attack(tmp_path, monkeypatch, capsys):
    """An attack spec's report checks --out before the attack runs (it takes minutes)."""
    import ddpbayes.reports as reports

    target = tmp_path / "target"
    target.write_text("not a report\n")
    monkeypatch.setattr(reports, "attack_results", _never)
    assert main(["report", "gowalla_attack", "--out", str(target), "--quiet", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --out {target} exists and is not a directory\n"
