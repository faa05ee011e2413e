"""Command line: bad inputs (exit 2, one line, no traceback), exit codes, JSON output."""

from __future__ import annotations

import gc
import json
import math
import textwrap
from pathlib import Path

import pymc as pm
import pytest

import ddpbayes
from ddpbayes import DependenceModel, InputError
from ddpbayes.cli.main import main
from forked import run_cli, run_code

ROOT = Path(__file__).resolve().parent.parent
HOUSEHOLD = str(ROOT / "models" / "household.py")
CONTAGIOUS = str(ROOT / "models" / "contagious_family.py")
COUNT = ["--query", "count", "--mechanism", "laplace", "--scale", "1"]


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("models")
    files = {
        "nobuild": "x = 1\n",
        "raises": "def build(**params):\n    raise RuntimeError('boom')\n",
        "syntax": "def build(:\n",
        "badname": """
            import pymc as pm
            from ddpbayes import DependenceModel

            def build():
                with pm.Model() as m:
                    pm.Bernoulli("x0", 0.5)
                return DependenceModel(m, tuples=["x0", "missing"])
            """,
        "normal": """
            import pymc as pm
            from ddpbayes import DependenceModel

            def build():
                with pm.Model() as m:
                    pm.Normal("x0", 0, 1)
                    pm.Bernoulli("x1", 0.5)
                return DependenceModel(m, tuples=["x0", "x1"])
            """,
        "notamodel": "def build():\n    return 42\n",
    }
    out = {}
    for name, src in files.items():
        path = d / f"{name}.py"
        path.write_text(textwrap.dedent(src))
        out[name] = str(path)
    out["missing"] = str(d / "does_not_exist.py")
    return out


BAD = {
    "missing file": lambda f: ["audit", f["missing"], *COUNT, "--notion", "idp"],
    "no build": lambda f: ["audit", f["nobuild"], *COUNT, "--notion", "idp"],
    "build raises": lambda f: ["audit", f["raises"], *COUNT, "--notion", "idp"],
    "syntax error in model": lambda f: ["audit", f["syntax"], *COUNT, "--notion", "idp"],
    "build returns non-model": lambda f: ["audit", f["notamodel"], *COUNT, "--notion", "idp"],
    "unknown tuple name": lambda f: ["audit", f["badname"], *COUNT, "--notion", "idp"],
    "-p without =": lambda f: ["audit", HOUSEHOLD, "-p", "n4", *COUNT, "--notion", "idp"],
    "-p non-literal": lambda f: ["audit", HOUSEHOLD, "-p", "n=abc", *COUNT, "--notion", "idp"],
    "-p unknown key": lambda f: ["audit", HOUSEHOLD, "-p", "m=3", *COUNT, "--notion", "idp"],
    # a parameter the model's distributions reject (Bernoulli p = 1.5 / -0.1): bad input, not a crash
    "invalid model parameter p=1.5": lambda f: ["audit", CONTAGIOUS, "-p", "p=1.5", *COUNT, "--notion", "idp"],
    "invalid model parameter p=-0.1": lambda f: ["audit", CONTAGIOUS, "-p", "p=-0.1", *COUNT, "--notion", "idp"],
    "scale 0": lambda f: ["audit", HOUSEHOLD, "--query", "count", "--mechanism", "laplace", "--scale", "0", "--notion", "idp"],
    "scale negative": lambda f: ["audit", HOUSEHOLD, "--query", "count", "--mechanism", "laplace", "--scale", "-1", "--notion", "idp"],
    "scale nan": lambda f: ["audit", HOUSEHOLD, "--query", "count", "--mechanism", "laplace", "--scale", "nan", "--notion", "idp"],
    "scale inf": lambda f: ["audit", HOUSEHOLD, "--query", "count", "--mechanism", "laplace", "--scale", "inf", "--notion", "idp"],
    "scale not a number": lambda f: ["audit", HOUSEHOLD, "--query", "count", "--mechanism", "laplace", "--scale", "x", "--notion", "idp"],
    "epsilon 0": lambda f: ["audit", HOUSEHOLD, "--query", "count", "--mechanism", "laplace", "--epsilon", "0", "--notion", "idp"],
    "scale and epsilon": lambda f: ["audit", HOUSEHOLD, *COUNT, "--epsilon", "1", "--notion", "idp"],
    "unknown query": lambda f: ["audit", HOUSEHOLD, "--query", "median", "--mechanism", "laplace", "--scale", "1", "--notion", "idp"],
    "bad linear weights": lambda f: ["audit", HOUSEHOLD, "--query", "linear:1,a", "--mechanism", "laplace", "--scale", "1", "--notion", "idp"],
    "wrong number of weights": lambda f: ["audit", HOUSEHOLD, "--query", "linear:1,2", "--mechanism", "laplace", "--scale", "1", "--notion", "idp"],
    "unknown mechanism": lambda f: ["audit", HOUSEHOLD, "--query", "count", "--mechanism", "cauchy", "--scale", "1", "--notion", "idp"],
    "rr with scale": lambda f: ["audit", HOUSEHOLD, "--query", "identity", "--mechanism", "randomized_response", "--scale", "1", "--notion", "idp"],
    "rr on a count": lambda f: ["audit", HOUSEHOLD, "--query", "count", "--mechanism", "randomized_response", "--epsilon", "1", "--notion", "idp"],
    "unknown notion": lambda f: ["audit", HOUSEHOLD, *COUNT, "--notion", "edp"],
    "known contains target": lambda f: ["audit", HOUSEHOLD, *COUNT, "--notion", "pdp", "--target", "0", "--known", "0,1"],
    "known out of range": lambda f: ["audit", HOUSEHOLD, *COUNT, "--notion", "pdp", "--target", "0", "--known", "1,9"],
    "known not an index": lambda f: ["audit", HOUSEHOLD, *COUNT, "--notion", "pdp", "--target", "0", "--known", "a"],
    "known with idp": lambda f: ["audit", HOUSEHOLD, *COUNT, "--notion", "idp", "--target", "0", "--known", "1"],
    "target out of range": lambda f: ["audit", HOUSEHOLD, *COUNT, "--notion", "idp", "--target", "4"],
    "target negative": lambda f: ["audit", HOUSEHOLD, *COUNT, "--notion", "idp", "--target", "-1"],
    "lattice with idp": lambda f: ["audit", HOUSEHOLD, *COUNT, "--notion", "idp", "--lattice"],
    "negative claim": lambda f: ["audit", HOUSEHOLD, *COUNT, "--notion", "idp", "--claim", "-1"],
    "continuous tuple, engine exact": lambda f: ["audit", f["normal"], "--query", "sum", "--mechanism", "laplace", "--scale", "1", "--notion", "idp", "--engine", "exact"],
    "unknown engine": lambda f: ["audit", HOUSEHOLD, *COUNT, "--notion", "idp", "--engine", "magic"],
    "state space over the limit": lambda f: ["audit", HOUSEHOLD, "-p", "n=4", *COUNT, "--notion", "idp", "--max-states", "4", "--engine", "exact"],
    "treewidth over the limit": lambda f: ["audit", HOUSEHOLD, "-p", "n=4", *COUNT, "--notion", "idp", "--max-states", "4", "--engine", "structured"],
    "continuous tuple, engine structured": lambda f: ["audit", f["normal"], "--query", "sum", "--mechanism", "laplace", "--scale", "1", "--notion", "idp", "--engine", "structured"],
    "non-integer weights, engine structured": lambda f: ["audit", HOUSEHOLD, "--query", "linear:0.5,1,1,1", "--mechanism", "laplace", "--scale", "1", "--notion", "idp", "--engine", "structured"],
    "max-states 0": lambda f: ["audit", HOUSEHOLD, *COUNT, "--notion", "idp", "--max-states", "0"],
    "missing --notion": lambda f: ["audit", HOUSEHOLD, *COUNT],
    "unknown format": lambda f: ["audit", HOUSEHOLD, *COUNT, "--notion", "idp", "--format", "xml"],
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_exit_2_one_line(case, model_files, capsys):
    code = main(BAD[case](model_files))
    out, err = capsys.readouterr()
    assert code == 2, (case, err)
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].strip(), err
    assert out == ""


def test_error_messages_name_the_problem(model_files, capsys):
    """Spot-check that the one line says what is wrong (not only that something is)."""
    checks = {
        "missing file": "does_not_exist.py",
        "unknown tuple name": "missing",
        "-p unknown key": "m",
        "target out of range": "4",
        "known contains target": "0",
        "state space over the limit": "4",
        "treewidth over the limit": "treewidth",
        "continuous tuple, engine structured": "continuous",
        "non-integer weights, engine structured": "integer weights",
    }
    for case, fragment in checks.items():
        main(BAD[case](model_files))
        err = capsys.readouterr().err
        assert fragment in err, (case, err)


def test_unbounded_domain_dp_is_inf_with_reason(model_files, capsys):
    """dp is model-free: a tuple with domain (-inf, inf) under additive Laplace noise has infinite
    sensitivity, so leak = inf for it (with a reason), and 1/b for the Bernoulli tuple."""
    code = main(["audit", model_files["normal"], "--query", "sum", "--mechanism", "laplace", "--scale", "2",
                 "--notion", "dp", "--format", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    assert out["leakage"] == "inf"
    assert out["per_target"][0] == "inf"
    assert out["per_target"][1] == pytest.approx(0.5)
    assert isinstance(out["reason"], str) and out["reason"]


def test_unbounded_domain_dp_python_api():
    with pm.Model() as m:
        pm.Normal("x0", 0, 1)
        pm.Bernoulli("x1", 0.5)
    r = ddpbayes.audit(DependenceModel(m, ["x0", "x1"]), "sum", "laplace", "dp", scale=1.0, claim=10.0)
    assert math.isinf(r.leakage) and r.leakage > 0
    assert r.verdict == "fail"
    assert r.reason
    assert r.to_dict()["leakage"] == "inf"


def test_bounded_continuous_domain_dp():
    """An Interval domain bounds the target values: width 3, Laplace(b): 3/b (model-free)."""
    with pm.Model() as m:
        pm.Normal("x0", 0, 1)
        pm.Bernoulli("x1", 0.5)
    model = DependenceModel(m, ["x0", "x1"], domains={"x0": ddpbayes.Interval(-1, 2)})
    r = ddpbayes.audit(model, "sum", "laplace", "dp", scale=0.5)
    assert r.per_target == pytest.approx([6.0, 2.0])


# --------------------------------------------------------------------------- exit codes


def test_claim_exit_codes_in_process(capsys):
    """contagious pair, count, Laplace(1/eps) with eps = 0.5: idp = 2 eps = 1 (004 Example 2)."""
    base = ["audit", CONTAGIOUS, "--query", "count", "--mechanism", "laplace", "--epsilon", "0.5", "--notion", "idp"]
    assert main([*base, "--claim", "0.9"]) == 1
    assert main([*base, "--claim", "1.0"]) == 0
    assert main(base) == 0
    capsys.readouterr()


def _forked(args: list[str]) -> tuple[str, str, int]:
    """The program in a process forked after the imports (tests/forked.py): it ends as `_run`'s does."""
    code, out, err = run_cli(args)
    return out, err, code


def test_subprocess_bad_input(model_files):
    """A real process: bad input exits 2 with one line on stderr and no traceback."""
    out, err, code = _forked(["audit", model_files["raises"], *COUNT, "--notion", "idp"])
    assert code == 2
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_subprocess_end_runs_exit_handlers_and_flushes(tmp_path):
    """The program ends with os._exit after its last line (`main._end`): the exit handlers run (here
    one the model file registers), the JSON on stdout is whole and the exit code is the verdict's. Forked
    after the imports (the same `main()` reading sys.argv; the installed script runs in tests/test_installed.py)."""
    marker = tmp_path / "handler-ran"
    model = tmp_path / "model.py"
    model.write_text(textwrap.dedent(f"""
        import atexit
        import pathlib

        import pymc as pm
        from ddpbayes import DependenceModel

        atexit.register(pathlib.Path({str(marker)!r}).write_text, "yes")


        def build():
            with pm.Model() as m:
                pm.Bernoulli("x0", 0.5)
                pm.Bernoulli("x1", 0.5)
            return DependenceModel(m, tuples=["x0", "x1"])
    """))
    out, err, code = _forked(["audit", str(model), *COUNT, "--notion", "idp", "--claim", "0.5", "--format", "json"])
    assert code == 1, err
    assert json.loads(out)["leakage"] == pytest.approx(1.0, abs=1e-12)  # independent bits: 1/b
    assert marker.read_text() == "yes"


def test_the_collector_freeze_is_the_programs_or_the_callers(tmp_path, capsys):
    """DESIGN §2.4: the program freezes what it holds once the model is loaded (still frozen when its exit
    handlers run); `main([...])` from Python unfreezes what it froze (a caller with nothing frozen gets nothing
    frozen back), and under a caller's own freeze (this session's: conftest) freezes and unfreezes nothing."""
    marker = tmp_path / "frozen-at-exit"
    model = tmp_path / "model.py"
    model.write_text(textwrap.dedent(f"""
        import atexit
        import gc
        import pathlib

        import pymc as pm
        from ddpbayes import DependenceModel

        atexit.register(lambda: pathlib.Path({str(marker)!r}).write_text(str(gc.get_freeze_count())))


        def build():
            with pm.Model() as m:
                pm.Bernoulli("x0", 0.5)
                pm.Bernoulli("x1", 0.5)
            return DependenceModel(m, tuples=["x0", "x1"])
    """))
    argv = ["audit", str(model), *COUNT, "--notion", "dp"]  # model-free: loaded, nothing compiled
    assert run_cli(argv)[0] == 0
    assert int(marker.read_text()) > 0
    code, out, err = run_code(f"import gc\nfrom ddpbayes.cli.main import main\nassert gc.get_freeze_count() == 0\n"
                              f"print(main({argv!r}), gc.get_freeze_count())")
    assert (code, out.splitlines()[-1]) == (0, "0 0"), err
    frozen = gc.get_freeze_count()
    assert frozen > 0 and main(argv) == 0 and 0 < gc.get_freeze_count() <= frozen  # (frozen objects freed leave)
    capsys.readouterr()


def test_subprocess_claim_exit_codes():
    """Real processes: a failed claim exits 1, a passed one 0. dp (model-free, no compilation,
    so the processes stay fast): count with --epsilon 0.5 has scale 2 and leak 1/2 = 0.5."""
    base = ["audit", CONTAGIOUS, "--query", "count", "--mechanism", "laplace", "--epsilon", "0.5", "--notion", "dp"]
    out, err, code = _forked([*base, "--claim", "0.4"])
    assert code == 1, err
    out, err, code = _forked([*base, "--claim", "0.5", "--format", "json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["verdict"] == "pass"
    assert doc["leakage"] == pytest.approx(0.5, abs=1e-12)


# --------------------------------------------------------------------------- JSON


JSON_KEYS = {"notion", "leakage", "per_target", "witness", "engine", "verdict", "ci", "seconds"}


def test_json_keys_and_null_for_non_targets(capsys):
    code = main(["audit", HOUSEHOLD, "-p", "n=3", *COUNT, "--notion", "idp", "--target", "1", "--claim", "5",
                 "--format", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    assert JSON_KEYS <= set(out)
    assert out["notion"] == "idp"
    assert out["engine"] == "exact"
    assert out["verdict"] == "pass"
    assert out["ci"] is None  # exact: no interval
    assert isinstance(out["seconds"], (int, float)) and out["seconds"] >= 0
    assert len(out["per_target"]) == 3
    assert out["per_target"][0] is None and out["per_target"][2] is None
    assert out["per_target"][1] == pytest.approx(out["leakage"])
    w = out["witness"]
    assert w["target"] == 1 and w["known"] == []
    assert {w["t"], w["t_prime"]} == {0, 1}


def _strict_json(doc: dict) -> dict:
    """The document through strict JSON (no NaN / Infinity literals) and back."""
    return json.loads(json.dumps(doc, allow_nan=False))


def test_json_witness_inf_encoding_and_lists(capsys):
    """Infinite witness coordinates are the strings 'inf' / '-inf', an unbounded leakage is the
    string 'inf', a vector output is a list, and every document is strict JSON.

    (a) Unbounded: x ~ MvNormal(0, [[1, .5], [.5, 1]]) with no domain bounds, sum, Laplace(1).
        Given X_0 = t, X_1 ~ N(t/2, 3/4), so the sum is N(1.5 t, 3/4): a location family in t,
        whose log-ratio tends to 1.5 (t - t') sign(y) / b as |y| -> inf. Over t, t' in R that is
        unbounded: leak = inf for both targets (by symmetry) under idp, pdp and ddp, and under dp
        (the sensitivity of the sum to an unbounded tuple is infinite), each with a reason. The
        witness: t, t' at the domain's ends, +inf and -inf, and y at the end that t is on (the
        coefficient 1.5 is positive: y -> +inf favours the larger t).
    (b) A finite leakage attained at y -> +inf: dp on a Bernoulli pair, count, Laplace(1):
        e^{-|y - q - 1|} / e^{-|y - q|} = e^{1} for y >= q + 1 (e^{-1} for y <= q), so leak = 1 with
        t = 1, t' = 0 and y = +inf.
    (c) A vector output: the contagious pair (X_1 = X_0) with histogram:0,0.5,1 (bins [0, .5) and
        [.5, 1]) is (2, 0) when t = 0 and (0, 2) when t = 1. Laplace(1) on each coordinate:
        log L(y | 1) - log L(y | 0) = (|y_0 - 2| - |y_0|) + (|y_1| - |y_1 - 2|), each term at most 2,
        both 2 exactly when y_0 <= 0 and y_1 >= 2: leak = 4, and the witness y is a 2-list at
        which this formula gives 4 (through the CLI's JSON)."""
    with pm.Model() as m:
        pm.MvNormal("x", mu=[0.0, 0.0], cov=[[1.0, 0.5], [0.5, 1.0]])
    gauss = DependenceModel(m, tuples="x")
    for notion in ("dp", "idp", "pdp", "ddp"):
        r = ddpbayes.audit(gauss, "sum", "laplace", notion, scale=1.0, claim=5.0)
        doc = _strict_json(r.to_dict())
        assert doc["notion"] == notion
        assert doc["leakage"] == "inf" and doc["per_target"] == ["inf", "inf"], doc
        assert isinstance(doc["reason"], str) and doc["reason"]
        assert doc["verdict"] == "fail"
        w = doc["witness"]
        assert {w["t"], w["t_prime"]} == {"inf", "-inf"}, w
        assert w["y"] == w["t"], w  # y at t's end of the line

    with pm.Model() as m:
        pm.Bernoulli("x0", 0.5)
        pm.Bernoulli("x1", 0.5)
    doc = _strict_json(ddpbayes.audit(DependenceModel(m, ["x0", "x1"]), "count", "laplace", "dp", scale=1.0).to_dict())
    assert doc["leakage"] == pytest.approx(1.0, abs=1e-12)
    assert (doc["witness"]["t"], doc["witness"]["t_prime"], doc["witness"]["y"]) == (1, 0, "inf")

    code = main(["audit", CONTAGIOUS, "--query", "histogram:0,0.5,1", "--mechanism", "laplace", "--scale", "1",
                 "--notion", "idp", "--format", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    doc = _strict_json(json.loads(captured.out))
    assert doc["leakage"] == pytest.approx(4.0, abs=1e-12)
    w = doc["witness"]
    assert isinstance(w["y"], list) and len(w["y"]) == 2, w
    y0, y1 = (float(v) for v in w["y"])  # float() reads 'inf' / '-inf' too
    centre = {0: (2.0, 0.0), 1: (0.0, 2.0)}
    t, tp = centre[w["t"]], centre[w["t_prime"]]
    at_witness = sum(abs(v - c_tp) - abs(v - c_t) for v, c_t, c_tp in zip((y0, y1), t, tp))
    assert at_witness == pytest.approx(4.0, abs=1e-12), w


def test_json_ddp_and_lattice_fields(capsys):
    main(["audit", CONTAGIOUS, *COUNT, "--notion", "ddp", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert out["dependence_sets"] == [[1], [0]]
    main(["audit", CONTAGIOUS, *COUNT, "--notion", "pdp", "--lattice", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert sorted((e["target"], tuple(e["known"]), e["leakage"]) for e in out["lattice"]) == [
        (0, (), pytest.approx(2.0)), (0, (1,), 0.0), (1, (), pytest.approx(2.0)), (1, (0,), 0.0)
    ]


def test_text_output(capsys):
    code = main(["audit", CONTAGIOUS, *COUNT, "--notion", "idp"])
    out = capsys.readouterr().out
    assert code == 0
    # contagious pair, count, Laplace(1): 2/b = 2 (004 Example 2)
    line = next(ln for ln in out.splitlines() if ln.startswith("leakage"))
    assert float(line.split()[1]) == pytest.approx(2.0)


# --------------------------------------------------------------------------- Python API input errors


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),  # neither scale nor epsilon
        dict(scale=1.0, epsilon=1.0),
        dict(scale=1.0, lattice=True),  # lattice with idp
        dict(scale=1.0, known=[1]),  # known with idp
        dict(scale=1.0, claim=float("nan")),
        dict(scale=1.0, targets=[]),
        dict(scale=1.0, engine="nope"),
    ],
)
def test_api_input_errors(contagious, kwargs):
    with pytest.raises(InputError):
        ddpbayes.audit(contagious(2), "count", "laplace", "idp", **kwargs)
