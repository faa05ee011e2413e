"""Bad report specs are rejected up front: exit 2, one stderr line naming the spec file and the key,
nothing written, before any model is built (errors found later are prefixed with the spec file);
and the sampling engine's interval is named "90% interval" in the text output."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from forked import run_cli
from test_report import GOOD  # a spec that builds a report: each bad case changes one key

import ddpbayes.reports as reports
from ddpbayes.auditing import AuditResult
from ddpbayes.cli.main import main
from ddpbayes.cli.rho_cmd import rho_text
from ddpbayes.cli.text import audit_text
from ddpbayes.ddp import Coefficients
from ddpbayes.settings import MIN_DRAWS

ROOT = Path(__file__).resolve().parent.parent
CONTAGIOUS = ROOT / "models" / "contagious_family.py"

def _with(line: str) -> str:
    """GOOD with `line` added to its top-level keys."""
    return GOOD.replace("seed = 0", f"seed = 0\n{line}")


# case -> (spec text, the key its error names)
BAD = {
    "too few draws": (_with(f"draws = {MIN_DRAWS - 1}"), "draws"),
    "draws not an integer": (_with("draws = 1.5"), "draws"),
    "negative tune": (_with("tune = -1"), "tune"),
    "no chains": (_with("chains = 0"), "chains"),
    "negative seed": (GOOD.replace("seed = 0", "seed = -1"), "seed"),
    "seed of 2**32": (GOOD.replace("seed = 0", "seed = 4294967296"), "seed"),
    "negative claim": (GOOD.replace("claim = 1.0", "claim = -0.5"), "claim"),
    "infinite claim": (GOOD.replace("claim = 1.0", "claim = inf"), "claim"),
    "nan epsilon": (GOOD.replace("epsilon = 1.0", "epsilon = nan"), "mechanism.epsilon"),
    "zero scale": (GOOD.replace("epsilon = 1.0", "scale = 0.0"), "mechanism.scale"),
    "neither scale nor epsilon": (GOOD.replace("epsilon = 1.0", ""), "scale"),
    "unknown mechanism": (GOOD.replace('kind = "laplace"', 'kind = "gaussian"'), "mechanism.kind"),
    "randomized response with a scale": (
        GOOD.replace('kind = "laplace"', 'kind = "randomized_response"').replace("epsilon = 1.0", "scale = 1.0"),
        "mechanism.scale"),
    "randomized response of a count": (GOOD.replace('kind = "laplace"', 'kind = "randomized_response"'), "query"),
    "unparsable query": (GOOD.replace('query = "count"', 'query = "linear:1,x"'), "query"),
    "no notions": (GOOD.replace('notions = ["dp", "idp", "pdp", "ddp"]', "notions = []"), "notions"),
    "repeated notion": (GOOD.replace('notions = ["dp", "idp", "pdp", "ddp"]', 'notions = ["idp", "idp"]'), "notions"),
    "unknown engine": (_with('engine = "magic"'), "engine"),
    "sweep of one value": (_with("sweep = [1]"), "sweep"),
    "negative sweep value": (_with("sweep = [1, -2]"), "sweep"),
    "negative target": (_with("target = -1"), "target"),
    "empty target": (_with("target = []"), "target"),
    "known tuple is the target": (_with("target = 0\nknown = [0]"), "known"),
    "known without pdp": (GOOD.replace('"pdp", ', "").replace("seed = 0", "seed = 0\nknown = [1]"), "known"),
    "model is a directory": (GOOD.replace(str(CONTAGIOUS), str(ROOT / "models")), "model"),
    "params not a table": (GOOD.replace("params = { k = 2, p = 0.1 }", "params = 3"), "params"),
    "derive_cov does not parse": (_with('derive_cov = "[[1, rho], [rho"'), "derive_cov"),
    "derive_cov not square": (_with('derive_cov = "[[1, 2, 3], [4, 5, 6]]"'), "derive_cov"),
}

# errors only the model can reveal, found once it is built: prefixed with the spec file
LATE = {
    "target out of range": (_with("target = 5"), "target 5"),
    "unknown build parameter": (GOOD.replace("k = 2", "q = 2"), "'q'"),
}


def _spec(directory: Path, text: str) -> Path:
    path = directory / "spec.toml"
    path.write_text(textwrap.dedent(text))
    return path


def _entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _one_line(err: str, spec: Path, fragment: str) -> None:
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: {spec}: ") and fragment in err, err


@pytest.mark.parametrize("case", list(BAD))
def test_bad_spec_rejected_before_any_work(case, tmp_path, monkeypatch, capsys):
    """The spec is refused before the model is built or --out is touched."""
    def never(*args, **kwargs):
        raise AssertionError("the spec was not validated up front")

    monkeypatch.setattr(reports, "_model", never)
    monkeypatch.setattr(reports, "write_directory", never)
    text, key = BAD[case]
    spec = _spec(tmp_path, text)
    code = main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, (case, err)
    _one_line(err, spec, f"'{key}")
    assert _entries(tmp_path) == ["spec.toml"]


@pytest.mark.parametrize("case", list(LATE))
def test_late_errors_name_the_spec(case, tmp_path, capsys):
    text, fragment = LATE[case]
    spec = _spec(tmp_path, text)
    code = main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, (case, err)
    _one_line(err, spec, fragment)
    assert _entries(tmp_path) == ["spec.toml"]


def test_bad_specs_in_real_processes(tmp_path):
    """Real `ddpbayes report` processes (forked after the imports: tests/forked.py): exit 2, one line,
    no --out, no temporary directory. Progress is on for the bad value, so its single line also shows
    that no step began."""
    cases = {"'draws'": (BAD["too few draws"][0], []), "target 5": (LATE["target out of range"][0], ["--quiet"])}
    start = time.perf_counter()
    for k, (fragment, (text, flags)) in enumerate(cases.items()):
        d = tmp_path / str(k)
        d.mkdir()
        spec = _spec(d, text)
        code, out, err = run_cli(["report", str(spec), "--out", str(d / "out"), *flags])
        assert code == 2, err
        _one_line(err, spec, fragment)
        assert out == "" and _entries(d) == ["spec.toml"]
    assert time.perf_counter() - start < 120  # an import each, no audit: seconds, not minutes


def test_text_names_the_interval():
    """The sampling engine's `ci` (two one-sided 95% bounds) is a 90% interval in the text output."""
    r = AuditResult(notion="idp", leakage=1.5, per_target=[1.5, 1.2], witness=None, engine="sampling",
                    verdict="inconclusive", claim=1.5, seconds=1.0, ci=(1.4, 1.6),
                    verdict_reason="the claim lies inside the interval [1.4, 1.6]; raise --draws",
                    mechanism={"kind": "laplace", "scale": 1.0}, query="sum", tuples=["x0", "x1"])
    text = audit_text(r)
    assert "90% interval (two one-sided 95% bounds) [1.4, 1.6]" in text
    assert "95% CI" not in text and "95% interval" not in text
    ci = np.array([[[1, 1], [0.4, 0.6]], [[0.4, 0.6], [1, 1]]])
    rho = rho_text(Coefficients(np.array([[1, 0.5], [0.5, 1]]), ci, [frozenset({1}), frozenset({0})], 1.0,
                                "sampling", ["x0", "x1"], {"ok": True}))
    assert "90% interval (two one-sided 95% bounds)" in rho and "95% lower bound," not in rho


# --- several mistakes at once (issue #40 item 12) --------------------------------------------------

# case -> (spec text, the keys its one line must name, in the order the checks find them)
SEVERAL = {
    "audit: types, values, an unknown key and the mechanism": (
        GOOD.replace("seed = 0", 'seed = -1\ndraws = "many"\nengine = "magic"\ncolour = "red"')
            .replace('kind = "laplace"', 'kind = "gaussian"').replace("claim = 1.0", "claim = -2.0"),
        ["'colour'", "'draws'", "'mechanism.kind'", "'engine'", "'claim'", "'seed'"]),
    "audit: a missing key beside bad values": (
        GOOD.replace('query = "count"\n', "")
            .replace('notions = ["dp", "idp", "pdp", "ddp"]', 'notions = ["idp", "idp"]')
            .replace("epsilon = 1.0", "epsilon = 0.0"),
        ["'query'", "'mechanism.epsilon'", "'notions'"]),
    "audit: the model, the profile and the search": (
        GOOD.replace(str(CONTAGIOUS), "nowhere.py").replace("seed = 0", 'seed = 0\nsearch = "sideways"')
        + '\n[profile]\nkind = "gaussian"\nrho = -1\n', ["'model'", "'search'", "'profile.rho'"]),
    "composition": (
        f'model = "{CONTAGIOUS}"\nreleases = ["sum:laplace:1"]\nnotions = ["xdp"]\nseed = -1\ndraws = 1\n',
        ["'releases'", "'notions'", "'seed'", "'draws'"]),
    "mechanisms: two cases": (
        f'notions = ["idp"]\n[[case]]\nmodel = "{CONTAGIOUS}"\nquery = "count"\nmechanism = "nope"\nepsilon = -1\n'
        f'[[case]]\nmodel = "{CONTAGIOUS}"\nquery = "linear:1,x"\nmechanism = "laplace"\nengine = "magic"\n',
        ["'case[0].mechanism'", "'case[0].epsilon'", "'case[1].query'", "'case[1].engine'"]),
    "attack": ("[attack]\nk = 0\ngrid = 0\nregions = [\"mars\"]\ncolour = 1\n",
               ["'attack.colour'", "'attack.k'", "'attack.grid'", "'attack.regions'"]),
}


@pytest.mark.parametrize("case", list(SEVERAL))
def test_every_mistake_of_a_spec_is_reported_at_once(case, tmp_path, monkeypatch, capsys):
    """One line, exit 2, nothing built or written: `SPEC: N problems: ...` naming every key once,
    in the order the checks meet them."""
    def never(*args, **kwargs):
        raise AssertionError("the spec was not validated up front")

    monkeypatch.setattr(reports, "_model", never)
    monkeypatch.setattr(reports, "write_directory", never)
    text, keys = SEVERAL[case]
    spec = _spec(tmp_path, text)
    assert main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    _one_line(err, spec, f"{len(keys)} problems: ")
    where = [err.find(key) for key in keys]
    assert -1 not in where and where == sorted(where), (keys, err)
    assert err.count("; ") == len(keys) - 1, err
    assert _entries(tmp_path) == ["spec.toml"]


def test_one_mistake_is_said_as_before(tmp_path, capsys):
    spec = _spec(tmp_path, GOOD.replace("seed = 0", "seed = -1"))
    assert main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {spec}: key 'seed' must be an integer from 0 to {2**32 - 1}, got -1\n"
