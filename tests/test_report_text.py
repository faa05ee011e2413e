"""What a report's reader sees (issue #24): papers named, not seed numbers; both levels of Thm 3 in
the composition summary; at least two labelled ticks on every log axis; no attack curve hidden
under another; every shipped report rebuilt from a spec, the attack's too; results.json records
no stale setting."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ddpbayes.attack.run import AttackData, AttackResult, AttackSettings, run_attack
from ddpbayes.geo.data import US_BOX
from ddpbayes.geo.near import NearFit
from ddpbayes.geo.regions import region
from ddpbayes.reports import load_spec
from ddpbayes.reports.input import AttackSpec
from ddpbayes.reports.render import attack_figures, composition_doc
from ddpbayes.reports.render import figures as report_figures
from ddpbayes.reports.render.attack import build_document as attack_document
from ddpbayes.reports.render.document import Document, Figure, Notes, Para, Section, Table, render_html, render_markdown
from ddpbayes.reports.render.information import figures_information, information_section
from ddpbayes.papers import cite
from ddpbayes.cli.regenerate import regenerate, spec_files
from ddpbayes.reports.views.information import InformationView
from ddpbayes.reports.views.sweep import Sweep
from ddpbayes.settings import RunSettings

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports"
# "seed 004", and a bare paper number: "004's integrals", "(004 §1, Example 2)", "000/001's range"; not "1,000"
SEED = re.compile(r"\b[Ss]eeds? 00[0-4]\b|(?<![\w.,+\-/–])00[0-4](?!\w|[.,/–-]\d)")


# --------------------------------------------------------------------------- papers, not seeds


@pytest.mark.parametrize("text, named", [
    ("Seed 004's contagious family", "Wu et al.'s contagious family"),
    ("seed 000 Thm 3", "Liu et al. 2016, Thm 3"),
    ("Theorem 2 (seed 000) bounds", "Theorem 2 (Liu et al. 2016) bounds"),
    ("(seed 001, Eqs. 11-16)", "(Liu et al. 2016, Eqs. 11-16)"),
    ("Seed 003's counterexample", "Li et al. 2019's counterexample"),
    ("seed 002 §IV-B: K-means", "Liu et al. 2016, §IV-B: K-means"),
    ("seeds 000/002/004 say", "Liu et al. 2016 and Wu et al. say"),
    ("seed 0 and --seed 1", "seed 0 and --seed 1"),  # a random seed is not a paper
    ("(004 §1, Example 2)", "(Wu et al., §1, Example 2)"),
    ("004's integrals", "Wu et al.'s integrals"),
    ("(003 §I Example 1, §IV-B Table II)", "(Li et al. 2019, §I Example 1, §IV-B Table II)"),
    ("outside 000/001's range", "outside Liu et al. 2016's range"),
    ("(004 Thms 2–3, Prop. 4; DESIGN §3.4)", "(Wu et al., Thms 2–3, Prop. 4; DESIGN §3.4)"),
    ("Wu et al. (seed 004), Thm 2", "Wu et al., Thm 2"),  # the name is not said twice
    ("Liu et al. 2016 (seed 000), §V-A", "Liu et al. 2016, §V-A"),
    ("seed\n004's bounds", "Wu et al.'s bounds"),  # a docstring's line break
    ("1,000 draws, 0.004 and 1e-004 at 2004 §2", "1,000 draws, 0.004 and 1e-004 at 2004 §2"),  # numbers, not papers
])
def test_cite_names_the_paper(text, named):
    assert cite(text) == named


def test_rendered_text_names_papers_but_commands_stay():
    """Text from elsewhere (a model's docstring, an engine's note) is cited in both renderings;
    a command is left as it is."""
    from ddpbayes.reports.render.document import Code

    doc = Document("Seed 004's family", ["seed 000 Thm 3 bounds it"], [Section("Model", "model", [
        Para("Seed 003's two-tuple database"), Notes(["idp: seed 004 Prop. 2"]),
        Table(["seed 003 Thm. 1"], [["seed 002 Eq. 11", ("seed 000 Def. 3", "pass")]], "see seed 001"),
        Figure("f.png", b"", "Seed 002 Fig. 5(a)", "seed 002"), Code("grep 'seed 000' x")])])
    for text in (render_html(doc), render_markdown(doc)):
        assert "grep 'seed 000' x" in text or "grep &#x27;seed 000&#x27; x" in text
        assert not SEED.search(text.replace("seed 000' x", "").replace("seed 000&#x27; x", "")), text
        assert "Wu et al.'s family" in text.replace("&#x27;", "'") and "Liu et al. 2016, Thm 3" in text


def test_information_section_reads_once():
    """The measures' method starts with "the": the sentence must not say "from the the"."""
    block = {"target_name": "x0", "method": "the engine's exact mixture weights", "kl_max": 0.1,
             "mutual_information": 0.05, "conditional_mutual_information": 0.01, "bounds": {"idp": 1.0, "dp": 1.0},
             "holds": {"kl_max_le_idp": True, "mutual_information_le_idp": True,
                       "conditional_mutual_information_le_idp": True}, "notes": ["n"]}
    view = InformationView(None, block, "scale", [0.5, 1.0, 2.0], [2.0, 1.0, 0.5],
                           {"kl_max": [0.3, 0.1, 0.05], "mutual_information": [0.1, 0.05, 0.02],
                            "conditional_mutual_information": [0.02, 0.01, 0.0]})
    text = render_markdown(Document("t", [], [information_section(view, ["x0"])]))
    assert "from the engine's exact" in text and not re.search(r"\b(\w+) \1\b", text.split("![")[0])
    assert not SEED.search(text)


SHIPPED = sorted(p.parent for p in REPORTS.glob("*/results.json"))


@pytest.mark.parametrize("report", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_reports_name_papers_and_read_once(report):
    """No seed number and no doubled word ("the the") in a shipped report's text or index row."""
    text = (report / "report.md").read_text(encoding="utf-8")
    data = json.loads((report / "results.json").read_text(encoding="utf-8"))
    for what in (text, data["title"], data["finding"]):
        assert not SEED.search(what), SEED.search(what)
        doubled = re.search(r"\b(the|a|an|of|to|in|and|is|from|for|with)\s+\1\b", what, re.IGNORECASE)
        assert doubled is None, doubled


def test_hmm_regimes_says_six_days():
    """The model has n = 6 days: its report must not call them a week."""
    spec = load_spec(REPORTS / "specs" / "hmm_regimes.toml")
    assert spec.params["n"] == 6
    assert "week" not in (spec.title + spec.description).lower() and "six days" in spec.title.lower()


# --------------------------------------------------------------------------- composition: both levels of Thm 3


def _composed(per_target_over: bool) -> SimpleNamespace:
    """Two releases, two targets. Release 0 leaks 1.0 to x0 and 0.2 to x1, release 1 0.2 to x0 and
    1.0 to x1: Σ ε_t = 1 + 1 = 2. The joint leaks 1.5 to each target: 1.5 ≤ 2 notion-wide, yet
    1.5 > 1.0 + 0.2 = 1.2 for each target (or 1.1 ≤ 1.2 when `per_target_over` is False)."""
    joint = 1.5 if per_target_over else 1.1
    releases = [{"release": "a", "leakage": 1.0, "ci": None, "per_target": [1.0, 0.2], "touched": ["x0"]},
                {"release": "b", "leakage": 1.0, "ci": None, "per_target": [0.2, 1.0], "touched": ["x1"]}]
    over = [{"target": n, "joint": joint, "sequential_bound": 1.2} for n in ("x0", "x1")] if joint > 1.2 else []
    composition = {"releases": releases, "joint": joint, "sequential_bound": 2.0, "sequential_ci": None,
                   "sequential_respected": joint <= 2.0, "ratio_to_sequential": joint / 2.0,
                   "targets_over_sequential": over, "disjoint": True, "parallel_bound": 1.0, "parallel_ci": None,
                   "parallel_respected": joint <= 1.0, "ratio_to_parallel": joint, "dependent_pairs": [],
                   "parallel_premise": "p"}
    result = SimpleNamespace(composition=composition, per_target=[joint, joint], ci=None, lower_bound=False,
                             engine="exact")
    spec = SimpleNamespace(releases=("a", "b"), title="t", model_ref="m.py", description=None)
    return SimpleNamespace(spec=spec, results={"idp": result}, model=SimpleNamespace(names=["x0", "x1"]))


def test_composition_states_both_levels_of_theorem_3():
    c = _composed(per_target_over=True)
    line = composition_doc.finding(c)
    assert "Thm 3 holds notion-wide but fails for 2 of 2 targets" in line and "Thm 4 violated" in line
    table = next(b for b in composition_doc._summary(c).blocks if isinstance(b, Table))
    row = dict(zip(table.header, table.rows[0]))
    wide = next(v for k, v in row.items() if k.startswith("Thm 3 notion-wide"))
    per = next(v for k, v in row.items() if k.startswith("Thm 3 per target"))
    assert wide == ("holds", "pass") and per == ("fails for 2 of 2 targets", "fail")
    assert "Notion-wide" in table.caption and "Per target" in table.caption


def test_composition_silent_when_theorem_3_holds_at_both_levels():
    c = _composed(per_target_over=False)
    assert "Thm 3" not in composition_doc.finding(c)
    table = next(b for b in composition_doc._summary(c).blocks if isinstance(b, Table))
    assert ("holds for every target (2)", "pass") in table.rows[0]


# --------------------------------------------------------------------------- figures


@pytest.fixture
def drawn(monkeypatch) -> list:
    """The matplotlib figures the figure functions make, kept open (their PNG is not written)."""
    figs: list = []

    def keep(fig) -> bytes:
        figs.append(fig)
        return b""

    monkeypatch.setattr(report_figures, "png", keep)
    monkeypatch.setattr(attack_figures, "png", keep)
    yield figs
    for fig in figs:
        report_figures.plt.close(fig)


def _labels(ax, which: str) -> list[str]:
    """The non-empty tick labels drawn inside the axis's view."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    lo, hi = sorted(axis.get_view_interval())
    k = 0 if which == "x" else 1
    return [t.get_text() for t in axis.get_ticklabels()
            if t.get_visible() and t.get_text() and lo * (1 - 1e-9) <= t.get_position()[k] <= hi * (1 + 1e-9)]


def _log_axes(fig) -> list[tuple]:
    fig.canvas.draw()
    return [(ax, w) for ax in fig.axes if ax.get_visible() for w in "xy"
            if (ax.get_xscale() if w == "x" else ax.get_yscale()) == "log"]


def _profile(deltas: list[float]) -> SimpleNamespace:
    return SimpleNamespace(pairs=lambda: [[0.1 * k, d] for k, d in enumerate(deltas)])


def test_every_log_axis_has_two_labelled_ticks(drawn):
    """Each figure with a log axis, on small data: noise levels 0.25..4 (no decade but 1 inside),
    δ from 1e-12 to 1, δ within one decade, and two close levels."""
    levels = list(2.0 ** np.linspace(-2, 2, 9))
    report_figures.sweep_figure(Sweep("scale", 1.0, levels, {"idp": [1 / v for v in levels]},
                                      {"idp": [None] * 9}), claim=1.0)
    report_figures.sweep_figure(Sweep("scale", 1.0, [1.0, 1.1], {"idp": [1.0, 0.9]}, {"idp": [None] * 2}), None)
    report_figures.profile_figure({"idp": _profile([1.0, 1e-3, 1e-8, 1e-12])}, _profile([0.5, 1e-4, 1e-9]), 1e-6)
    report_figures.profile_figure({"idp": _profile([0.0012, 0.005, 0.009])}, _profile([0.002, 0.003]), 0.004)
    info = InformationView(None, {}, "scale", levels, [1 / v for v in levels],
                           {"kl_max": levels, "mutual_information": levels, "conditional_mutual_information": levels})
    figures_information(report_figures, info)
    points = [{"factor": f, "joint": 1 / f, "sequential_bound": 1.2 / f, "parallel_bound": 0.8 / f,
               "sequential_respected": True, "parallel_respected": False} for f in (0.25, 0.5, 1, 2, 4)]
    composition_doc._sweep_figure(SimpleNamespace(sweep={"idp": points}))
    attack_figures.leaked_figure(_attack_result(same=False))
    checked = 0
    for fig in drawn:
        for ax, which in _log_axes(fig):
            labels = _labels(ax, which)
            assert len(set(labels)) >= 2, (ax.get_title(), which, labels)
            checked += 1
    assert checked == 9  # two sweeps, two profiles, both panels of the information and composition figures, attack


def _attack_result(same: bool) -> AttackResult:
    """Made-up rows for 2 known-set sizes, 3 ε and both adversaries; with `same`, every curve of a
    figure has the same data (leaked = release-only = 0.01·ε bits; the same errors for all)."""
    epsilons, sizes = [0.5, 1.0, 2.0], [9, 4]
    rows, errors = [], {}
    for n in sizes:
        for e in epsilons:
            for j, a in enumerate(("independent", "dependent")):
                bits = 0.01 * e if same else 0.01 * e * (1 + j) * (1 + n / 10)
                rows.append({"epsilon": e, "adversary": a, "n_prior": n, "leaked_bits": bits - (0 if same else j),
                             "release_bits": bits, "bound_bits": e / np.log(2)})
                errors[(n, e, a)] = np.linspace(10, 100, 10) * (1 if same else 1 + j + e)
    meta = {"epsilons": epsilons, "n_priors": sizes}
    return AttackResult(rows, meta, errors, np.zeros(10, bool), None, {}, None, np.linspace(5, 50, 10))


def _hidden(top, below) -> bool:
    """Does the line drawn on top hide the other (same data)? Not when its markers are hollow and
    of another shape or smaller, or, without markers, when it is thinner."""
    if top.get_marker() not in (None, "None", "", " "):
        hollow = top.get_markerfacecolor() == "none"
        return not (hollow and (top.get_marker() != below.get_marker()
                                or top.get_markersize() < below.get_markersize()))
    return not top.get_linewidth() < below.get_linewidth()


def test_curves_stay_visible_when_they_coincide(drawn):
    """Fig. 5(a) and (b) with every curve on the same data, and the composition sweep with idp and
    ddp equal: within a panel, two labelled curves differ in colour, line style or marker, and the
    one on top does not hide the other."""
    result = _attack_result(same=True)
    attack_figures.error_cdf_figure(result, [0.5, 1.0])
    attack_figures.leaked_figure(result)
    points = [{"factor": f, "joint": 1 / f, "sequential_bound": 1.2 / f, "parallel_bound": 0.8 / f}
              for f in (0.5, 1, 2)]
    composition_doc._sweep_figure(SimpleNamespace(sweep={"idp": points, "ddp": points}))
    pairs = 0
    for fig in drawn:
        for ax in fig.axes:
            lines = [(k, line) for k, line in enumerate(ax.get_lines()) if not line.get_label().startswith("_")]
            for i, (k, a) in enumerate(lines):
                for m, b in lines[i + 1:]:
                    xy_a, xy_b = np.asarray(a.get_xydata()), np.asarray(b.get_xydata())
                    if xy_a.shape != xy_b.shape or not np.allclose(xy_a, xy_b):
                        continue
                    pairs += 1
                    assert (a.get_color(), a.get_linestyle(), a.get_marker()) != \
                        (b.get_color(), b.get_linestyle(), b.get_marker()), (a.get_label(), b.get_label())
                    top, below = (b, a) if (b.get_zorder(), m) > (a.get_zorder(), k) else (a, b)
                    assert not _hidden(top, below), (top.get_label(), below.get_label())
    assert pairs >= 6 + 6 + 6 + 2  # the CDF's 4 curves pairwise, each panel's 4 of Fig. 5(b), idp = ddp


def test_attack_report_names_the_paper():
    """The attack's page on a small synthetic run: no seed number anywhere a reader looks."""
    rng = np.random.default_rng(0)
    points = np.clip(np.array([[0.2, 0.3], [0.7, 0.6]])[np.arange(30) % 2] + rng.normal(0, 0.05, (30, 2)), 0.01, 0.99)
    lat, lon = US_BOX.denormalise(points[:, 0], points[:, 1])
    fit = SimpleNamespace(box=US_BOX, mu=(0.45, 0.45), alpha=0.9, tau=(8.0, 8.0))
    near = NearFit(US_BOX, 40.0, (0.7, 0.3), (200.0,))
    data = AttackData(lat, lon, points, np.array([(0, 2), (1, 3), (4, 6)]), 0, 0, fit, near, region("us", US_BOX),
                      paths={"locations": "u.csv", "edges": "e.csv", "fit": "f.json", "near": "n.json"})
    result = run_attack(data, AttackSettings(k=2, epsilons=(1.0,), grid=5), progress=False)
    doc = attack_document(result, "ddpbayes attack --k 2")
    for text in (render_html(doc), render_markdown(doc), doc.title):
        assert not SEED.search(text), SEED.search(text)
    assert "Liu et al. 2016" in doc.title


# --------------------------------------------------------------------------- every report from a spec


def test_every_shipped_report_has_a_spec():
    """`regenerate` rebuilds every report directory, the Gowalla attack's included."""
    names = {p.stem for p in spec_files(REPORTS)}
    assert "gowalla_attack" in names
    assert {p.name for p in SHIPPED} <= names
    spec = load_spec(REPORTS / "specs" / "gowalla_attack.toml")
    assert isinstance(spec, AttackSpec)
    data = json.loads((REPORTS / "gowalla_attack" / "results.json").read_text(encoding="utf-8"))
    assert (data["k"], data["grid"], data["seed"], data["epsilons"]) == \
        (spec.settings.k, spec.settings.grid, spec.settings.seed, list(spec.settings.epsilons))
    assert data["reproducibility"]["command"] == \
        "ddpbayes report reports/specs/gowalla_attack.toml --out reports/gowalla_attack"


def test_regenerate_builds_an_attack_spec(tmp_path):
    """An `[attack]` spec in specs/ becomes a report and a row of the index, like any other."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "small_attack.toml").write_text(textwrap.dedent("""
        [attack]
        k = 8
        epsilons = [0.5, 2]
        grid = 10
        n_prior = ["all"]
        targets = 40
        seed = 3
        """))
    regenerate(tmp_path, progress=False, where=RunSettings(workers=1))
    data = json.loads((tmp_path / "small_attack" / "results.json").read_text(encoding="utf-8"))
    assert data["targets"] == 40 and data["seed"] == 3 and len(data["rows"]) == 2 * 3
    assert sorted(p.name for p in (tmp_path / "small_attack" / "figures").iterdir()) == [
        "error_cdf.png", "leaked_information.png", "release.png"]
    index = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "(small_attack/index.html)" in index and data["finding"] in index


@pytest.mark.parametrize("text, key", [
    ("grid = 0", "attack.grid"), ("epsilons = [0.5, -1]", "attack.epsilons"), ('n_prior = ["some"]', "attack.n_prior"),
    ("k = 5000", "attack.k"), ("n_prior = [99999]", "attack.n_prior"), ("colour = 1", "attack.colour"),
    ('fit = "gone.json"', "attack.fit"),
])
def test_bad_attack_spec_names_its_key(tmp_path, capsys, text, key):
    from ddpbayes.cli.main import main

    spec = tmp_path / "a.toml"
    spec.write_text(f"[attack]\n{text}\n")
    assert main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and key in err and str(spec) in err, err
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- results.json


@pytest.mark.parametrize("report", SHIPPED, ids=[p.name for p in SHIPPED])
def test_results_record_the_settings_of_today(report):
    """Each audit's `settings` are today's RunSettings record (no `cores`, gone with --workers)."""
    text = (report / "results.json").read_text(encoding="utf-8")
    assert '"cores"' not in text
    keys = set(RunSettings().to_dict())
    for audit in json.loads(text).get("audits", {}).values():
        assert set(audit["settings"]) == keys
