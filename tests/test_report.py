"""`ddpbayes report`: files, a self-contained HTML page, numbers equal to `audit`'s, atomic writes,
and bad specs rejected on one line (exit 2)."""

from __future__ import annotations

import json
import math
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import ddpbayes
from ddpbayes.cli.main import main
from ddpbayes.reports import build_report, load_spec
from ddpbayes.reports.input import AttackSpec, FittedSpec, MechanismsSpec
from ddpbayes.reports.render import document as document_module

ROOT = Path(__file__).resolve().parent.parent
CONTAGIOUS = ROOT / "models" / "contagious_family.py"

GOOD = f"""
title = "contagious pair"
model = "{CONTAGIOUS}"
params = {{ k = 2, p = 0.1 }}
query = "count"
notions = ["dp", "idp", "pdp", "ddp"]
claim = 1.0
seed = 0

[mechanism]
kind = "laplace"
epsilon = 1.0
"""


def _spec(directory: Path, text: str, name: str = "spec.toml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("report")
    spec = _spec(d, GOOD)
    assert main(["report", str(spec), "--out", str(d / "out"), "--quiet"]) == 0
    return d / "out"


class _Refs(HTMLParser):
    """Every URL-bearing attribute and every <style> text of a page."""

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []
        self.styles: list[str] = []
        self.tags: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._in_style = tag == "style"
        self.urls += [v or "" for k, v in attrs if k in ("src", "href", "srcset", "data", "poster", "action")]

    def handle_endtag(self, tag):
        self._in_style = False if tag == "style" else self._in_style

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)


def test_report_files(report):
    for name in ("index.html", "report.md", "results.json"):
        assert (report / name).is_file(), name
    pngs = sorted(p.name for p in (report / "figures").glob("*.png"))
    assert {"lattice.png", "witness.png", "sweep.png"} <= set(pngs)
    for p in (report / "figures").glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (report / "report.md").read_text()
    for name in pngs:
        assert f"](figures/{name})" in md


def test_html_is_self_contained(report):
    page = (report / "index.html").read_text()
    refs = _Refs()
    refs.feed(page)
    refs.close()
    assert "html" in refs.tags and "table" in refs.tags and "img" in refs.tags
    assert "script" not in refs.tags and "link" not in refs.tags
    images = [u for u in refs.urls if not u.startswith("#")]
    assert images and all(u.startswith("data:image/png;base64,") for u in images), images
    assert not any(u.lower().startswith(("http://", "https://", "//")) for u in refs.urls)
    assert refs.styles and not any("@import" in s or "url(" in s for s in refs.styles)


def test_numbers_equal_audit(report):
    """results.json holds, per notion, what `audit` returns on the same spec."""
    data = json.loads((report / "results.json").read_text())
    model = ddpbayes.load_model(CONTAGIOUS, {"k": 2, "p": 0.1})
    assert list(data["audits"]) == ["dp", "idp", "pdp", "ddp"]
    for notion, got in data["audits"].items():
        want = ddpbayes.audit(model, "count", "laplace", notion, epsilon=1.0, claim=1.0, seed=0,
                              information=None).to_json()  # a report's audits skip 004's measures
        got, want = dict(got), json.loads(want)
        got.pop("seconds"), want.pop("seconds")
        assert got == want, notion
    assert data["audits"]["idp"]["leakage"] == pytest.approx(2.0)  # 004 Example 2: 2 eps
    assert data["lattice"]["complete"] and len(data["lattice"]["points"]) == 4
    assert data["sweep"]["calibrated"]["exact (idp)"] == pytest.approx(2.0, rel=1e-9)  # leak 2/b = 1 at b = 2
    curve = data["witness_curves"][0]
    assert max(abs(curve["limit_plus_inf"]), abs(curve["limit_minus_inf"]), *map(abs, curve["log_ratio"])) \
        == pytest.approx(data["audits"]["idp"]["leakage"])


def _entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_failure_midway_leaves_nothing(tmp_path, capsys):
    """known = [5] is only checked when pdp is audited, after idp succeeded."""
    text = GOOD.replace('notions = ["dp", "idp", "pdp", "ddp"]', 'notions = ["idp", "pdp"]\nknown = [5]')
    spec = _spec(tmp_path, text)
    out_parent = tmp_path / "reports"
    out_parent.mkdir()
    assert main(["report", str(spec), "--out", str(out_parent / "r"), "--quiet"]) == 2
    assert _entries(out_parent) == []
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "5" in err


def test_failure_while_writing_keeps_old_report(tmp_path, monkeypatch, report):
    """A failure after the pages started to be written: the old report stays, no temp dirs."""
    out = tmp_path / "r"
    out.mkdir()
    for p in report.rglob("*"):
        target = out / p.relative_to(report)
        target.mkdir(exist_ok=True) if p.is_dir() else target.write_bytes(p.read_bytes())
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def boom(doc):
        raise RuntimeError("disk full")

    monkeypatch.setattr("ddpbayes.reports.render.pages.render_markdown", boom)
    with pytest.raises(RuntimeError):
        build_report(_spec(tmp_path, GOOD), out, progress=False)
    assert _entries(tmp_path) == ["r", "spec.toml"]
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_replaces_old_report(tmp_path, report):
    out = tmp_path / "r"
    (out / "figures").mkdir(parents=True)
    (out / "results.json").write_text("{}")
    (out / "figures" / "stale.png").write_bytes(b"x")
    build_report(_spec(tmp_path, GOOD), out, progress=False)
    assert not (out / "figures" / "stale.png").exists() and (out / "index.html").is_file()
    assert _entries(tmp_path) == ["r", "spec.toml"]


def test_refuses_to_replace_other_directory(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert main(["report", str(_spec(tmp_path, GOOD)), "--out", str(out), "--quiet"]) == 2
    assert (out / "notes.txt").read_text() == "keep me" and _entries(out) == ["notes.txt"]
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


BAD = {
    "unknown key": (GOOD.replace("seed = 0", 'seed = 0\ncolour = "red"'), "'colour'"),
    "unknown mechanism key": (GOOD.replace('kind = "laplace"', 'kind = "laplace"\nnoise = 2'), "mechanism.noise"),
    "missing query": (GOOD.replace('query = "count"', ""), "query"),
    "missing mechanism kind": (GOOD.replace('kind = "laplace"', ""), "mechanism.kind"),
    "seed is a string": (GOOD.replace("seed = 0", 'seed = "zero"'), "seed"),
    "claim is a bool": (GOOD.replace("claim = 1.0", "claim = true"), "claim"),
    "notions not a list": (GOOD.replace('notions = ["dp", "idp", "pdp", "ddp"]', 'notions = "idp"'), "notions"),
    "bad notion after a good one": (GOOD.replace('notions = ["dp", "idp", "pdp", "ddp"]', 'notions = ["idp", "edp"]'),
                                    "edp"),
    "scale and epsilon": (GOOD.replace("epsilon = 1.0", "epsilon = 1.0\nscale = 1.0"), "scale"),
    "negative epsilon": (GOOD.replace("epsilon = 1.0", "epsilon = -1.0"), "epsilon"),
    "unknown engine": (GOOD.replace("seed = 0", 'seed = 0\nengine = "magic"'), "magic"),
    "model file missing": (GOOD.replace(str(CONTAGIOUS), "nowhere.py"), "nowhere.py"),
    "not toml": ("model = \n", "TOML"),
    "bad param": (GOOD.replace("k = 2", "q = 2"), "q"),
    "bad query": (GOOD.replace('query = "count"', 'query = "median"'), "median"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_spec_exit_2_one_line(case, tmp_path, capsys):
    text, fragment = BAD[case]
    spec = _spec(tmp_path, text)
    code = main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 2, (case, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert fragment in err, (case, err)
    assert _entries(tmp_path) == ["spec.toml"]


def test_missing_spec_file(tmp_path, capsys):
    assert main(["report", str(tmp_path / "none.toml"), "--out", str(tmp_path / "out")]) == 2
    assert "none.toml" in capsys.readouterr().err


def test_shipped_specs_are_valid():
    specs = sorted((ROOT / "reports" / "specs").glob("*.toml"))
    assert specs
    for path in specs:
        spec = load_spec(path)
        if isinstance(spec, AttackSpec):  # the attack's: its settings, on the shipped data
            assert spec.settings.k >= 1 and all(p is None for p in spec.inputs.values())
            continue
        if isinstance(spec, MechanismsSpec):  # several cases, each with its model (issue #28)
            assert spec.cases and spec.title and all(Path(c.model).is_file() for c in spec.cases)
            continue
        if isinstance(spec, FittedSpec):  # a model fitted from a data table (issue #41)
            assert spec.fit.data.is_file() and spec.title
            continue
        assert spec.model.is_file() and spec.title


def test_document_escapes_text():
    doc = document_module.Document("a <b>", ["x & y"], [document_module.Section(
        "s", "s", [document_module.Para("`<i>`"), document_module.Table(["h"], [["<td>"]])])])
    page = document_module.render_html(doc)
    assert "<b>" not in page and "&lt;i&gt;" in page and "&lt;td&gt;" in page


MIXED = f"""
model = "{ROOT / 'models' / 'mixed_correlation.py'}"
query = "sum"
notions = ["idp", "pdp"]
claim = 1.0
sweep = [0.5, 1, 2]

[mechanism]
kind = "laplace"
scale = 1.0
"""


def test_gaussian_report(tmp_path):
    """Li et al.'s mixed correlations (DESIGN §3.2): K = {} leaks 1, K = {2} leaks 2 for target 0;
    the closed form, the witness curve's limits and the calibrated pdp scale (2/b = 1 at b = 2) agree."""
    data = build_report(_spec(tmp_path, MIXED), tmp_path / "out", progress=False)
    lattice = {(p["target"], tuple(p["known"])): p["leakage"] for p in data["lattice"]["points"]}
    assert lattice[(0, ())] == pytest.approx(1.0) and lattice[(0, (2,))] == pytest.approx(2.0)
    assert data["audits"]["pdp"]["leakage"] == pytest.approx(2.0)
    forms = {tuple(f["notions"]): f for f in data["closed_forms"]}
    assert forms[("pdp",)]["expression"] == "2*width/b" and forms[("pdp",)]["value"] == pytest.approx(2.0)
    curves = {c["notion"]: c for c in data["witness_curves"]}
    assert abs(curves["pdp"]["limit_plus_inf"]) == pytest.approx(2.0)
    ratio = np.abs(curves["pdp"]["log_ratio"])
    assert ratio.max() == pytest.approx(2.0) and ratio.min() < 0.1  # from -2 through 0 to 2 (tails saturate)
    assert data["sweep"]["calibrated"]["exact (pdp)"] == pytest.approx(2.0, rel=1e-6)
    assert (tmp_path / "out" / "figures" / "closed_form.png").is_file()


def test_laplace_gaussian_convolution():
    """The gaussian curve's log density against numerical integration of Laplace(b) * N(0, v)."""
    from scipy import integrate, stats

    from ddpbayes.engines.gaussian.engine import _log_laplace_normal

    b, v = 0.7, 1.3
    u = [-6.0, -1.0, 0.0, 0.4, 5.0]

    def density(x):
        return integrate.quad(lambda z: stats.laplace.pdf(x - z, scale=b) * stats.norm.pdf(z, scale=v**0.5),
                              -30, 30, points=[x], limit=200)[0]

    want = [math.log(density(x)) for x in u]
    got = _log_laplace_normal(np.array(u), b, v)
    assert np.allclose(got - got[2], np.array(want) - want[2], atol=1e-7)


def test_structured_ddp_report_lists_every_dependence_set(tmp_path):
    """The structured engine computes each N(i) when first read (`DependenceSets`); the report's JSON still holds
    every tuple's set: on a 4-day chain each day depends on every other (P(X_j | X_i) moves with X_i)."""
    spec = _spec(tmp_path, GOOD.replace(str(CONTAGIOUS), str(ROOT / "models" / "markov_chain.py"))
                 .replace("{ k = 2, p = 0.1 }", "{ n = 4 }").replace('["dp", "idp", "pdp", "ddp"]', '["ddp"]')
                 .replace("seed = 0", 'seed = 0\nengine = "structured"'))
    assert main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["model"]["dependence_sets"] == [[j for j in range(4) if j != i] for i in range(4)]
