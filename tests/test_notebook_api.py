"""The Python API in a notebook (issue #24): `AuditResult`'s short repr, HTML table, DataFrame and
JSON (the CLI's document), `DependenceModel`'s repr, `dir(ddpbayes)`, and the API computing
seed 004's information measures by default as the CLI does. Expected leakages are derived by
hand in each test from the Laplace density, never read from an engine."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from html.parser import HTMLParser
from pathlib import Path

import pymc as pm
import pytest

import ddpbayes
from ddpbayes import DependenceModel, Interval
from ddpbayes.auditing import AuditResult
from ddpbayes.cli.main import main
from ddpbayes.engines import AdversaryLeakage, Witness
from ddpbayes.problem import Adversary

ROOT = Path(__file__).resolve().parent.parent
HOUSEHOLD = str(ROOT / "models" / "household.py")
B = 2.0  # the Laplace scale of the hand derivations


def _laplace(y: float, b: float) -> float:
    return math.exp(-abs(y) / b) / (2 * b)


@pytest.fixture(scope="module")
def independent_pair() -> DependenceModel:
    """Two independent fair bits: the count moves by 1 with either, so every notion leaks 1/b."""
    with pm.Model() as m:
        pm.Bernoulli("x0", 0.5)
        pm.Bernoulli("x1", 0.5)
    return DependenceModel(m, ["x0", "x1"])


@pytest.fixture(scope="module")
def copied_pair() -> DependenceModel:
    """x1 = x0, a fair bit: the count is 2·x0, so idp leaks 2/b (L(y | t) = Lap_b(y − 2t))."""
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", 0.5)
        pm.Bernoulli("x1", pm.math.switch(x0, 1.0, 0.0))
    return DependenceModel(m, ["x0", "x1"])


def test_repr_is_one_short_line_of_plain_numbers(independent_pair):
    r = ddpbayes.audit(independent_pair, "count", "laplace", "idp", scale=B, claim=1.0)
    text = repr(r)
    assert "\n" not in text and len(text) < 200, text
    assert "np.float64" not in text and "float64" not in text
    assert text.startswith(f"AuditResult(idp leakage={1 / B:g} engine=exact verdict=pass claim=1; witness: target x")
    assert "known {}" in text and "t=" in text and "t'=" in text and "y=" in text


def test_repr_of_a_profile_a_lower_bound_and_an_estimate(independent_pair):
    gauss = ddpbayes.audit(independent_pair, "count", "gaussian", "idp", scale=1.0, delta=1e-5)
    assert "(epsilon at delta=1e-05)" in repr(gauss) and "np.float64" not in repr(gauss)
    assert "(epsilon at delta)" in gauss._repr_html_()
    greedy = ddpbayes.audit(independent_pair, "count", "laplace", "pdp", scale=B, pdp_greedy=1)
    assert f"pdp leakage>={1 / B:g} (a lower bound: greedy search)" in repr(greedy)
    assert "leakage (lower bound)" in greedy._repr_html_() and "&ge;" in greedy._repr_html_()
    est = _estimate()
    assert "ci=[1.2, 1.8] engine=sampling" in repr(est)
    assert "<th>interval</th>" in est._repr_html_() and "[1.2, 1.8]" in est._repr_html_()


class _Table(HTMLParser):
    """The rows of data cells and every start tag of an HTML fragment."""

    def __init__(self):
        super().__init__()
        self.rows: list[list[str]] = []
        self.tags: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td":
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _html_rows(text: str) -> tuple[list[list[str]], list[str]]:
    parser = _Table()
    parser.feed(text)
    parser.close()
    return [row for row in parser.rows if row], parser.tags


def test_html_has_one_row_per_target_and_escapes_names():
    evil = "<img src=x onerror=alert('x')>&"
    with pm.Model() as m:
        pm.Bernoulli(evil, 0.5)
        pm.Bernoulli("x1", 0.5)
        pm.Bernoulli("x2", 0.5)
    r = ddpbayes.audit(DependenceModel(m, [evil, "x1", "x2"]), "count", "laplace", "idp", scale=B,
                       targets=[0, 2])
    text = r._repr_html_()
    rows, tags = _html_rows(text)
    assert tags.count("img") == 0 and "&lt;img src=x onerror=alert(&#x27;x&#x27;)&gt;&amp;" in text
    assert [row[:3] for row in rows] == [["0", evil, f"{1 / B:g}"], ["2", "x2", f"{1 / B:g}"]]
    assert rows[0][-1].startswith(f"target {evil}, known {{}}")


def test_html_elides_the_middle_of_many_targets():
    n = 100
    r = AuditResult(notion="dp", leakage=1.0, per_target=[1.0] * n, witness=None, engine="analytic",
                    verdict=None, claim=None, seconds=0.0, tuples=[f"x{k}" for k in range(n)])
    rows, _ = _html_rows(r._repr_html_())
    assert len(rows) == 41 and "60 more targets" in rows[20][0]
    assert rows[0][0] == "0" and rows[-1][0] == str(n - 1)


def _hand_idp(prior_other: dict[float, float], shift: float, t: float, t_prime: float, y: float, b: float) -> float:
    """log L(y | t) / L(y | t') for the count t + X_1 (independent pair, X_1 ~ prior_other) or, with
    shift = 2, for the count 2t (copied pair): the idp log-ratio at the witness by hand."""
    if shift == 2:
        return math.log(_laplace(y - 2 * t, b) / _laplace(y - 2 * t_prime, b))
    like = [sum(p * _laplace(y - v - s, b) for s, p in prior_other.items()) for v in (t, t_prime)]
    return math.log(like[0] / like[1])


@pytest.mark.parametrize("pair, shift", [("independent_pair", 1), ("copied_pair", 2)])
def test_dataframe_columns_and_values(pair, shift, request):
    """One row per target; the leakage is shift/b, and the hand log-ratio at each row's witness
    (t, t', y) attains it."""
    r = ddpbayes.audit(request.getfixturevalue(pair), "count", "laplace", "idp", scale=B)
    frame = r.to_dataframe()
    assert list(frame.columns) == ["target", "name", "leakage", "lower", "upper", "known", "known_values", "t",
                                   "t_prime", "y"]
    assert list(frame["target"]) == [0, 1] and list(frame["name"]) == ["x0", "x1"]
    assert frame["leakage"].tolist() == pytest.approx([shift / B] * 2, abs=1e-12)
    assert frame["lower"].isna().all() and frame["upper"].isna().all()
    for row in frame.itertuples():
        assert row.known == [] and row.known_values == []
        assert {row.t, row.t_prime} == {0.0, 1.0}
        assert _hand_idp({0.0: 0.5, 1.0: 0.5}, shift, row.t, row.t_prime, row.y, B) == pytest.approx(shift / B,
                                                                                                     abs=1e-12)
    assert frame.attrs["notion"] == "idp" and frame.attrs["delta"] is None and frame.attrs["lower_bound"] is False


def test_dataframe_per_target_witness_ddp(independent_pair):
    """ddp knows the rest (x1 for target 0): the row's known set and values are its own witness's."""
    frame = ddpbayes.audit(independent_pair, "count", "laplace", "ddp", scale=B).to_dataframe()
    assert frame["known"].tolist() == [[1], [0]]
    assert all(len(values) == 1 and values[0] in (0.0, 1.0) for values in frame["known_values"])
    assert frame["leakage"].tolist() == pytest.approx([1 / B] * 2, abs=1e-12)


def test_dataframe_of_an_estimate_has_its_interval():
    frame = _estimate().to_dataframe()
    assert frame["lower"].tolist() == [1.2, 1.0] and frame["upper"].tolist() == [1.8, 1.4]


def test_each_targets_worst_estimate_is_picked_as_the_notions():
    """Folded over two batches, a target's worst estimate is the one with the best selection-half
    score (its held-out lower bound stays valid), with the largest value and upper bound of all
    (DESIGN §2.3): A (1.0, score 0.9, [0.8, 1.1]) and B (1.2, score 0.7, [0.6, 1.5]) give A's
    witness, value 1.2 and interval [0.8, 1.5]; target 1's only estimate is kept as it is."""
    from ddpbayes.notions import fold_targets as _fold_targets

    def est(i: int, known: frozenset, value: float, score: float, ci: tuple[float, float]) -> AdversaryLeakage:
        adversary = Adversary(i, known)
        return AdversaryLeakage(adversary, value, Witness(adversary, {}, 1.0, 0.0, None), ci,
                                diagnostics={"ok": True}, score=score)

    a, b = est(0, frozenset({1}), 1.0, 0.9, (0.8, 1.1)), est(0, frozenset(), 1.2, 0.7, (0.6, 1.5))
    c = est(1, frozenset(), 0.5, 0.5, (0.4, 0.6))
    by_target = _fold_targets([b, c], {})
    _fold_targets([a], by_target)
    assert by_target[0].witness is a.witness and by_target[0].value == 1.2 and by_target[0].ci == (0.8, 1.5)
    assert by_target[1].witness is c.witness and by_target[1].ci == (0.4, 0.6)


def test_dataframe_without_pandas_says_how_to_get_it(independent_pair, monkeypatch):
    r = ddpbayes.audit(independent_pair, "count", "laplace", "dp", scale=B)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install 'ddpbayes\[dataframe\]'") as caught:
        r.to_dataframe()
    assert "\n" not in str(caught.value)


def test_to_json_is_the_cli_document(capsys):
    """json.loads(to_json()) equals `ddpbayes audit --format json` for the same audit but for
    `seconds`; to_dict is the same dict; the API computed the information block, as the CLI."""
    model = ddpbayes.load_model(HOUSEHOLD, {"n": 3})
    r = ddpbayes.audit(model, "count", "laplace", "pdp", scale=1.0, claim=2.0)
    code = main(["audit", HOUSEHOLD, "-p", "n=3", "--query", "count", "--mechanism", "laplace", "--scale", "1",
                 "--notion", "pdp", "--claim", "2", "--format", "json"])
    cli = json.loads(capsys.readouterr().out)
    api = json.loads(r.to_json())
    assert code == 0 and api == r.to_dict()
    cli.pop("seconds"), api.pop("seconds")
    assert api == cli
    assert api["information"]["unit"] == "nats"


def test_information_by_default_as_on_the_command_line(independent_pair):
    default = ddpbayes.audit(independent_pair, "count", "laplace", "idp", scale=B)
    asked = ddpbayes.audit(independent_pair, "count", "laplace", "idp", scale=B, information="nats")
    skipped = ddpbayes.audit(independent_pair, "count", "laplace", "idp", scale=B, information=None)
    assert default.information is not None and default.information == asked.information
    assert skipped.information is None and "information" not in skipped.to_dict()


def test_information_by_default_warns_nothing_on_huge_levels(contagious):
    """The query at 0 or 2e300 (linear:1e300,1e300; test_exact's edge just below the overflow):
    the default measures group the mixtures by levels rounded to 12 decimals, which overflowed
    (a RuntimeWarning on stderr); a double that large has no decimals to round."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = ddpbayes.audit(contagious(2), "linear:1e300,1e300", "laplace", "idp", scale=1.0)
    assert r.information["holds"]["kl_max_le_idp"] and r.information["bounds"]["idp"] == pytest.approx(2e300)


def test_dependence_model_repr():
    with pm.Model() as m:
        h = pm.Bernoulli("h", 0.5)
        pm.Bernoulli("x0", pm.math.switch(h, 0.8, 0.1))
        pm.Normal("x1", 0.0, 1.0)
    text = repr(DependenceModel(m, ["x0", "x1"], {"x1": Interval(-1, 1)}))
    assert text == "DependenceModel(2 tuples: x0 in {0, 1}, x1 in [-1, 1]; latent: h)"
    loaded = repr(ddpbayes.load_model(HOUSEHOLD, {"n": 3}))
    assert loaded.startswith("DependenceModel(3 tuples: x0, x1, x2 in {0, 1}; latent: h; from ")
    assert loaded.endswith("household.py with n=3)")
    with pm.Model() as m:
        pm.Normal("v", 0.0, 1.0, shape=500)
    long = repr(DependenceModel(m, "v", Interval(-3, 3)))
    assert long.startswith("DependenceModel(500 tuples: v[0], v[1]") and "(488 more)" in long and len(long) < 200


def test_dir_shows_the_public_api_only_and_imports_nothing():
    """`dir(ddpbayes)` in a fresh interpreter: the public names, and still no PyMC loaded."""
    code = ("import sys, ddpbayes; names = dir(ddpbayes); "
            "print(names); print('pymc' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    names, loaded = out.splitlines()
    names = eval(names)
    assert "audit" in names and "AuditResult" in names and "DependenceModel" in names and "__version__" in names
    assert not {"annotations", "importlib"} & set(names)
    assert all(not n.startswith("_") for n in names if n != "__version__")
    assert loaded == "False"
    assert all(hasattr(ddpbayes, n) for n in names)


def _estimate() -> AuditResult:
    """An estimate's result as the sampling engine would give it: per-target intervals."""
    def leak(i: int, value: float, ci: tuple[float, float]) -> AdversaryLeakage:
        adversary = Adversary(i)
        return AdversaryLeakage(adversary, value, Witness(adversary, {}, 1.0, 0.0, (0.5,)), ci)

    worst = {0: leak(0, 1.5, (1.2, 1.8)), 1: leak(1, 1.2, (1.0, 1.4))}
    return AuditResult(notion="idp", leakage=1.5, per_target=[1.5, 1.2], witness=worst[0].witness,
                       engine="sampling", verdict=None, claim=None, seconds=0.1, ci=(1.2, 1.8), tuples=["a", "b"],
                       target_worst=worst)
