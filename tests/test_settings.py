"""One settings object (issue 12): `RunSettings` is frozen, validated once, rejects unknown names,
and every command that runs engines builds it with the same flags."""

from __future__ import annotations

import dataclasses

import pytest

import ddpbayes
from ddpbayes import InputError, RunSettings
from ddpbayes.cli.args import run_settings
from ddpbayes.cli.main import build_parser

FLAG_VALUES = {"engine": "exact", "seed": 7, "draws": 40, "tune": 30, "chains": 3, "workers": 1, "max_runs": 9,
               "max_states": 123, "max_adversaries": 45, "program_runs": 500}


def test_unknown_setting_is_bad_input(household):
    with pytest.raises(InputError, match="unknown setting 'drawz'"):
        RunSettings.of(drawz=10)
    with pytest.raises(InputError, match="unknown setting 'drawz'"):
        ddpbayes.audit(household(n=2), "count", "laplace", "idp", scale=1.0, drawz=10)


def test_frozen_and_defaults():
    s = RunSettings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.seed = 3  # type: ignore[misc]
    assert RunSettings.of(s, seed=None, draws=50) == dataclasses.replace(s, draws=50)  # None keeps the value


@pytest.mark.parametrize("command", [
    ["audit", "m.py", "--query", "count", "--mechanism", "laplace", "--scale", "1", "--notion", "idp"],
    ["rho", "m.py", "--scale", "1"],
    ["calibrate", "m.py", "--query", "count", "--notion", "idp", "--epsilon", "1"],
])
def test_every_engine_command_takes_every_setting(command):
    """The same flags, through the same helper: defaults when absent, each value when given (the
    program engine's runs: audit's alone, the one command that takes a program; issue #40 item 10)."""
    parser = build_parser()
    plain = run_settings(parser.parse_args([*command, "--format", "json"]))
    assert dataclasses.replace(plain, progress=False) == RunSettings()
    taken = {k: v for k, v in FLAG_VALUES.items() if command[0] == "audit" or k != "program_runs"}
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in taken.items()]
    given = run_settings(parser.parse_args([*command, *flags, "--format", "json"]))
    assert {name: getattr(given, name) for name in taken} == taken
    # audit-only; test_parallel; force: test_bad_input_round2_memory; role: internal, no flag
    # (test_run_role_is_internal_and_validated)
    covered = set(FLAG_VALUES) | {"method", "pdp_greedy", "progress", "scheduler", "force", "role"}
    assert covered == {f.name for f in dataclasses.fields(RunSettings)}
    assert given.role == plain.role == "choose"


def test_run_role_is_internal_and_validated():
    """`role` (issue #27) tells the sampling engine's choosing runs from the fresh runs that bound
    the chosen witness: set by the engine, never by a flag; checked like every other setting."""
    assert RunSettings().role == "choose" and RunSettings.of(role="bound").role == "bound"
    with pytest.raises(InputError, match="unknown run role 'other'"):
        RunSettings.of(role="other")
    parser = build_parser()
    with pytest.raises(InputError, match="unrecognized arguments: --role"):
        parser.parse_args(["audit", "m.py", "--query", "count", "--mechanism", "laplace", "--scale", "1",
                           "--notion", "idp", "--role", "bound"])


def test_sampling_method_flag_is_audits_only():
    parser = build_parser()
    args = parser.parse_args(["audit", "m.py", "--query", "count", "--mechanism", "laplace", "--scale", "1",
                              "--notion", "idp", "--method", "posterior", "--format", "json"])
    assert run_settings(args).method == "posterior"
    args = parser.parse_args(["calibrate", "m.py", "--query", "count", "--notion", "idp", "--epsilon", "1",
                              "--method", "dpm", "--format", "json"])
    assert args.method == "dpm" and run_settings(args).method == "likelihood"  # calibrate's --method is its recipe
