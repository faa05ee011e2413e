"""Results from Python (issue #40, items 7, 8 and 16): `to_dict()` is a document as Python
objects and `to_json()` its text on every result, calibration, spec and settings object; a
`Calibration` shows itself in a notebook (repr, HTML, DataFrame) as an `AuditResult` does; the
JSON records the model file and its parameters; and `plot()` draws what the numbers say.

Expected values are derived by hand. Two independent fair bits released as a count with
Laplace(b): every adversary of every notion leaks 1/b (the count moves by one with either bit),
so every recipe of `calibrate` at epsilon gives the scale 1/epsilon, and the idp witness curve is
r(y) = log E Lap_b(y - 1 - X1) - log E Lap_b(y - X1), X1 a fair bit."""

from __future__ import annotations

import hashlib
import json
import math
import sys
from html.parser import HTMLParser
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
import pytest  # noqa: E402

import ddpbayes  # noqa: E402
from ddpbayes import DependenceModel, InputError, RunSettings  # noqa: E402
from ddpbayes.cli.main import main  # noqa: E402
from ddpbayes.reports.input.load import load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HOUSEHOLD = ROOT / "models" / "household.py"
B = 2.0
EPSILON = 0.5


def _laplace(y: np.ndarray, b: float) -> np.ndarray:
    return np.exp(-np.abs(y) / b) / (2 * b)


@pytest.fixture(scope="module")
def pair() -> DependenceModel:
    with pm.Model() as m:
        pm.Bernoulli("x0", 0.5)
        pm.Bernoulli("x1", 0.5)
    return DependenceModel(m, ["x0", "x1"])


@pytest.fixture(scope="module")
def calibration(pair):
    return ddpbayes.calibrate(pair, "count", "idp", EPSILON, engine="exact")


@pytest.fixture(scope="module")
def household():
    return ddpbayes.load_model("household", {"n": 3})


def test_to_json_is_the_text_of_to_dict_everywhere(pair, calibration, tmp_path):
    """One meaning: to_json() is text, json.loads of it is to_dict()."""
    spec_path = tmp_path / "s.toml"
    spec_path.write_text(f'model = "{HOUSEHOLD}"\nquery = "count"\nnotions = ["idp"]\n'
                         '[mechanism]\nkind = "laplace"\nscale = 1.0\n')
    objects = [ddpbayes.audit(pair, "count", "laplace", "idp", scale=B), calibration, ddpbayes.rho(pair, B),
               ddpbayes.derive("gaussian-rho", "[[1, 0.5], [0.5, 1]]"), RunSettings(seed=3), load_spec(spec_path)]
    for thing in objects:
        text = thing.to_json()
        assert isinstance(text, str) and isinstance(thing.to_dict(), dict), type(thing).__name__
        assert json.loads(text) == json.loads(json.dumps(thing.to_dict())), type(thing).__name__
    assert json.loads(RunSettings(seed=3).to_json())["seed"] == 3


def test_calibration_to_json_is_the_cli_document(household, capsys):
    c = ddpbayes.calibrate(household, "count", "idp", 1.0)
    assert main(["calibrate", str(HOUSEHOLD), "-p", "n=3", "--query", "count", "--notion", "idp", "--epsilon", "1",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(c.to_json())


def test_calibration_views(calibration):
    """Every recipe's scale is 1/epsilon, and every notion leaks epsilon there (1/b at b = 1/epsilon)."""
    text = repr(calibration)
    assert "\n" not in text and len(text) < 200
    assert text.startswith(f"Calibration(idp epsilon={EPSILON:g}: exact scale={1 / EPSILON:g} (laplace)")
    frame = calibration.to_dataframe()
    assert list(frame["method"]) == ["exact", "dpm", "group", "dp"]
    assert frame["scale"].to_numpy() == pytest.approx([1 / EPSILON] * 4, rel=1e-9)
    assert frame["alpha"].to_numpy() == pytest.approx([math.log(20) / EPSILON] * 4, rel=1e-9)
    for notion in ("dp", "idp", "pdp", "ddp"):
        assert frame[notion].to_numpy() == pytest.approx([EPSILON] * 4, rel=1e-9), notion
    assert frame.attrs["verdict"] == "pass" and frame.attrs["scale"] == pytest.approx(1 / EPSILON, rel=1e-9)
    cells = _cells(calibration._repr_html_())
    assert len(cells) == 5 and cells[0][:3] == ["method", "scale", "alpha"] and cells[1][0] == "exact"
    assert all(float(x) == pytest.approx(EPSILON, rel=1e-4) for row in cells[1:] for x in row[3:])


def test_calibration_dataframe_without_pandas_says_how_to_get_it(calibration, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install 'ddpbayes\[dataframe\]'"):
        calibration.to_dataframe()


def test_json_records_the_model_file_and_parameters(household, pair, capsys):
    """The shipped file by its documented name, the parameters as given, the digest of its text."""
    expected = {"file": "models/household.py", "params": {"n": 3},
                "sha256": hashlib.sha256(HOUSEHOLD.read_bytes()).hexdigest()}
    assert ddpbayes.audit(household, "count", "laplace", "idp", scale=B).to_dict()["model"] == expected
    assert main(["audit", str(HOUSEHOLD), "-p", "n=3", "--query", "count", "--mechanism", "laplace", "--scale", "2",
                 "--notion", "idp", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == expected
    assert main(["rho", "household", "-p", "n=3", "--scale", "2", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == expected
    assert ddpbayes.calibrate(household, "count", "idp", 1.0, method="dp").to_dict()["model"] == expected
    assert ddpbayes.audit(pair, "count", "laplace", "idp", scale=B).to_dict()["model"] is None


def test_json_records_a_user_file_by_its_path(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import numpy as np, pymc as pm\nfrom ddpbayes import DependenceModel\n"
                    "def build(p=0.5, table=None):\n    with pm.Model() as m:\n        pm.Bernoulli('x0', p)\n"
                    "    return DependenceModel(m, ['x0'])\n")
    model = ddpbayes.load_model(path, {"p": 0.25, "table": np.array([[0.5, 0.5]])})
    doc = json.loads(ddpbayes.audit(model, "count", "laplace", "dp", scale=B).to_json())
    assert doc["model"]["file"] == str(path.resolve())
    assert doc["model"]["params"] == {"p": 0.25, "table": [[0.5, 0.5]]}


def test_plot_per_target_draws_each_targets_leakage(household):
    r = ddpbayes.audit(household, "count", "laplace", "idp", scale=B, claim=1.0, information=None)
    ax = r.plot()
    line = ax.get_lines()[0]
    assert list(line.get_xdata()) == [0, 1, 2] and list(line.get_ydata()) == r.per_target
    assert any(list(h.get_ydata()) == [1.0, 1.0] for h in ax.get_lines())  # the claim
    plt.close(ax.figure)


def test_plot_witness_is_the_log_ratio(pair):
    """r(y) for the idp witness t = 1 vs t' = 0 (or the reverse) of target 0, by hand."""
    r = ddpbayes.audit(pair, "count", "laplace", "idp", scale=B, target=0, claim=0.4, information=None)
    ax = r.plot()
    assert ax is not None and r.witness.adversary.target == 0
    y, drawn = (np.asarray(v, dtype=float) for v in (ax.get_lines()[0].get_xdata(), ax.get_lines()[0].get_ydata()))
    t, u = r.witness.t, r.witness.t_prime
    given = lambda value: 0.5 * _laplace(y - value, B) + 0.5 * _laplace(y - value - 1, B)  # noqa: E731
    assert drawn == pytest.approx(np.log(given(t)) - np.log(given(u)), abs=1e-9)
    assert np.max(np.abs(drawn)) <= 1 / B + 1e-9  # the leakage is its supremum
    heights = {round(float(h.get_ydata()[0]), 9) for h in ax.get_lines()[1:] if len(set(h.get_ydata())) == 1}
    assert {round(1 / B, 9), 0.4} <= heights  # the leakage and the claim drawn
    plt.close(ax.figure)


def test_plot_refuses_what_it_cannot_draw(pair):
    dp = ddpbayes.audit(pair, "count", "laplace", "dp", scale=B, information=None)
    with pytest.raises(InputError, match="model-free"):
        dp.plot(kind="witness")
    with pytest.raises(InputError, match="unknown plot 'curve'"):
        dp.plot(kind="curve")


def test_plot_of_unbounded_targets_says_so(recwarn):
    """An unbounded leakage is said in the title, not drawn; nothing warns (no empty legend)."""
    from ddpbayes.auditing import AuditResult

    r = AuditResult(notion="idp", leakage=math.inf, per_target=[math.inf, None, math.inf], witness=None,
                    engine="exact", verdict=None, claim=None, seconds=0.0)
    ax = r.plot()
    assert ax.get_title().endswith("2 target(s) leak inf (not drawn)") and not ax.get_lines()
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]
    plt.close(ax.figure)


def test_calibration_plot_is_the_leakage_against_the_scale(calibration):
    """At every scale s drawn, each notion's leakage is 1/s; the extra scales are audited."""
    fig, ax = plt.subplots()
    assert calibration.plot(ax=ax, scales=[1.0, 4.0]) is ax
    lines = {h.get_label(): h for h in ax.get_lines()}
    for notion in ("dp", "idp", "pdp", "ddp"):
        xs, ys = (np.asarray(v, dtype=float) for v in lines[notion].get_data())
        assert set(np.round(xs, 6)) == {1.0, 1 / EPSILON, 4.0}, notion  # the recipes' scales agree to rounding
        assert ys == pytest.approx(1 / xs, rel=1e-9), notion
    assert list(lines[f"epsilon {EPSILON:g}"].get_ydata()) == [EPSILON, EPSILON]
    plt.close(fig)


def _cells(text: str) -> list[list[str]]:
    """The HTML table's rows of cell texts."""

    class Rows(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.cell = [], None

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.cell = ""

        def handle_endtag(self, tag):
            if tag in ("td", "th"):
                self.rows[-1].append(self.cell)
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

    parser = Rows()
    parser.feed(text)
    return parser.rows
