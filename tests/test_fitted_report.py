"""Reports from a spec naming a fit (issue #41 item 4): bad `[fit]` specs are one line and exit 2 before any
fitting; a small table is fitted, audited three ways, calibrated, and its fit reused on the next build."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ddpbayes.cli.main import main

SPEC = """
query = "cluster"
notions = ["idp"]
target = 0
claim = 1.0
parameters = ["mean", "draws:2"]
{extra}
[fit]
data = "villages.csv"
template = "{template}"
options = {options}
seed = 1
draws = {draws}
chains = 2

[mechanism]
kind = "{kind}"
scale = 1.0
"""
GOOD = {"extra": "", "template": "clustered", "options": '{ cluster = "village", outcome = "pos" }', "kind": "laplace",
        "draws": 1000}


def village_table(path: Path) -> None:
    """Six villages of five children, the villages' rates far apart (a village effect the fit can see)."""
    rng = np.random.default_rng(7)
    rows = [f"v{v},{int(rng.random() < p)}" for v, p in enumerate((0.1, 0.8, 0.3, 0.9, 0.2, 0.6)) for _ in range(5)]
    path.write_text("village,pos\n" + "\n".join(rows) + "\n")


def write_spec(folder: Path, **changes) -> Path:
    village_table(folder / "villages.csv")
    spec = folder / "survey.toml"
    spec.write_text(SPEC.format(**(GOOD | changes)))
    return spec


@pytest.mark.parametrize("changes, says", [
    ({"template": "gaussian"}, "'fit.template' must be 'clustered'"),
    ({"options": '{ cluster = "village" }'}, "'fit.options' must give 'outcome'"),
    ({"options": '{ cluster = "village", outcome = "pos", radius = "x" }'}, "unknown option 'radius'"),
    ({"kind": "geometric"}, "'mechanism.kind' must be 'laplace'"),
    ({"extra": 'calibrate = ["ddp"]'}, "'calibrate' must name notions of 'notions'"),
    ({"draws": 0}, "'fit.draws' must be an integer of at least 1"),
    ({"options": '{ cluster = "village", outcome = "pos", ordered = "yes" }'}, "'fit.options.ordered' must be true or"),
])
def test_a_bad_fit_spec_is_one_line_and_exit_2_before_fitting(tmp_path, capsys, changes, says):
    spec = write_spec(tmp_path, **changes)
    code = main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and says in err, err
    assert not (tmp_path / "out").exists()


def test_coords_reach_the_fit(tmp_path, capsys):
    """`coords` is the fit's own option: one column is refused by `ddpbayes fit`'s reading of the table (its
    message, so the option got there), before any sampling and without a half-written report."""
    spec = write_spec(tmp_path, options='{ cluster = "village", outcome = "pos", coords = "village" }')
    code = main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--coords names two columns X,Y, got 1: village" in err, err
    assert not (tmp_path / "out").exists()


def test_a_missing_data_file_and_a_draw_are_named_together(tmp_path, capsys):
    spec = write_spec(tmp_path)
    spec.write_text(spec.read_text().replace('"villages.csv"', '"nowhere.csv"').replace('"draws:2"', '"draw:2"'))
    code = main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "2 problems" in err
    assert "'fit.data' must be an existing data file" in err and "draw:K is one draw" in err


@pytest.mark.slow  # two NUTS fits (2 chains x 1,000 draws) and the audits: ~40 s
def test_a_fit_is_reported_three_ways_and_reused(tmp_path):
    spec = write_spec(tmp_path)
    spec.write_text(spec.read_text().replace('"draws:2"', '"draws:2", "integrated:2"'))
    out = tmp_path / "out"
    assert main(["report", str(spec), "--out", str(out), "--quiet"]) == 0
    first = json.loads((out / "results.json").read_text())
    assert first["fit"]["reused"] is False and (out / "fit" / "survey.py").is_file()
    assert not list((out / "fit").glob("*.nc"))  # the whole posterior is not kept
    cells = {c["parameters"]: c for c in first["cells"]}
    assert set(cells) == {"mean", "draws:2", "integrated:2"} and first["release"]["cluster_size"] == 5
    for c in cells.values():  # each calibrated scale meets the claim, and is above classic DP's 1
        assert c["leakage_at_scale"] <= 1.0 + 1e-9 and c["scale"] > 1.0
    assert cells["draws:2"]["leakage"] == pytest.approx(cells["draws:2"]["plausible"]["max"])
    assert first["classic_dp"] == {"epsilon_at_scale": 1.0, "scale_for_claim": 1.0}
    assert main(["report", str(spec), "--out", str(out), "--quiet"]) == 0
    second = json.loads((out / "results.json").read_text())
    assert second["fit"]["reused"] is True
    assert [c["leakage"] for c in second["cells"]] == [c["leakage"] for c in first["cells"]]
    assert "PSIS-LOO" in (out / "report.md").read_text()


def test_known_is_indices_or_the_rest_of_the_cluster(tmp_path, capsys):
    from ddpbayes.reports.input.fitted_spec import CLUSTER_KNOWN, load_fitted_spec
    import tomllib

    spec = write_spec(tmp_path, extra='known = "cluster"')
    assert load_fitted_spec(tomllib.loads(spec.read_text()), spec).known == CLUSTER_KNOWN
    spec = write_spec(tmp_path, extra='known = "village"')
    code = main(["report", str(spec), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "'known' must be" in err, err


@pytest.mark.slow  # one NUTS fit (2 chains x 1,000 draws) and the audits: ~30 s
def test_pdp_knowing_the_rest_of_the_cluster_is_classic_dp(tmp_path):
    """Given the rest of the village, the village's count moves by the target's record alone: pdp's leakage is
    exactly 1/b = 1 under every parameter setting (a hand derivation: the Laplace ratio of two counts 1 apart)."""
    spec = write_spec(tmp_path, extra='known = "cluster"')
    spec.write_text(spec.read_text().replace('notions = ["idp"]', 'notions = ["pdp"]'))
    out = tmp_path / "out"
    assert main(["report", str(spec), "--out", str(out), "--quiet"]) == 0
    cells = json.loads((out / "results.json").read_text())["cells"]
    assert [c["parameters"] for c in cells] == ["mean", "draws:2"]
    for c in cells:
        assert c["leakage"] == pytest.approx(1.0, abs=1e-9)
    assert "the rest of the target's cluster (4 records" in (out / "report.md").read_text()


def graded_table(path: Path) -> None:
    """Eight schools of ten pupils graded low < mid < high (as 1, 2, 3), the schools' grades far apart."""
    rng = np.random.default_rng(11)
    rows = [f"s{g},{1 + min(2, int(rng.poisson(m)))}" for g, m in enumerate((0.2, 1.8, 0.5, 2.5, 0.1, 1.2, 0.8, 1.5))
            for _ in range(10)]
    path.write_text("school,grade\n" + "\n".join(rows) + "\n")


@pytest.mark.slow  # one NUTS fit of the ordered logit (2 chains x 2,000 draws) and the audits: ~90 s
def test_a_categorical_fit_is_reported_end_to_end(tmp_path):
    """`ordered = true` fits the cumulative logit; query = "cluster:3" releases the count of grade 3 in the target's
    school. Given the rest of the school that count moves by the target's record alone, by 1 between grade 3 and
    another: pdp's leakage is exactly 1/b = 1 (the Laplace ratio of two counts 1 apart) under every setting."""
    graded_table(tmp_path / "grades.csv")
    spec = tmp_path / "grades.toml"
    spec.write_text(SPEC.format(**(GOOD | {"options": '{ cluster = "school", outcome = "grade", ordered = true }',
                                           "extra": 'known = "cluster"', "draws": 2000}))
                    .replace('"villages.csv"', '"grades.csv"').replace('query = "cluster"', 'query = "cluster:3"')
                    .replace('notions = ["idp"]', 'notions = ["idp", "pdp"]'))
    out = tmp_path / "out"
    assert main(["report", str(spec), "--out", str(out), "--quiet"]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert json.loads((out / "fit" / "grades.fit.json").read_text())["data"]["link"] == "cumulative logit"
    cells = {(c["notion"], c["parameters"]): c for c in doc["cells"]}
    for mode in ("mean", "draws:2"):
        assert cells["pdp", mode]["leakage"] == pytest.approx(1.0, abs=1e-9)
        assert cells["idp", mode]["leakage"] > 1.0  # the school's grades move together
    text = (out / "report.md").read_text()
    assert "--ordered" in text and "level 3: intra-cluster correlation" in text


def test_a_spatial_fits_checks_are_in_the_check_table():
    """Moran's I joins the check table (its last columns: the fit without the field), and the two LOOs against
    that fit follow with leave-one-cluster-out's reliability flag; a fit without the field shows neither."""
    from types import SimpleNamespace

    from ddpbayes.reports.render.document import Para, Table
    from ddpbayes.reports.render.fitted_doc import _checks

    def check(data, mean, p):
        return {"data": data, "replicated": {"mean": mean, "hdi": [mean - 0.1, mean + 0.1]}, "p_value": p}

    plain = {"draws": 1000, "icc": check(0.16, 0.17, 0.6) | {"independent": check(0.16, 0.0, 0.0)},
             "cluster_total_sd": check(6.4, 8.4, 0.9) | {"independent": check(6.4, 4.9, 0.0)},
             "loo": {"elpd_diff": 141.7, "se_diff": 15.8}, "dependence_supported": True}
    spatial = plain | {
        "morans_i": check(0.31, 0.15, 0.02) | {"without_field": check(0.31, 0.2, 0.004)},
        "loo_spatial": {"elpd_diff": -2.5, "se_diff": 1.5},
        "loo_cluster": {"clusters": 65, "elpd_diff": 3.25, "se_diff": 2.5, "pareto_k_max": 0.81,
                        "pareto_k_over_0_7": 2, "pareto_k_over_0_7_without_field": 0, "reliable": False},
        "spatial_supported": True}
    blocks = _checks(SimpleNamespace(fit={"checks": spatial})).blocks
    table = next(b for b in blocks if isinstance(b, Table))
    moran = table.rows[-1]
    assert moran[0].startswith("Moran's I") and moran[1:] == ["0.31", "0.15 [0.05, 0.25]", "0.02",
                                                              "0.2 [0.1, 0.3]", "0.004"]
    text = " ".join(b.text for b in blocks if isinstance(b, Para))
    assert "elpd difference −2.5 (se 1.5)" in text and "3.25 (se 2.5)" in text
    assert "NOT reliable: Pareto k-hat over 0.7 for 2 of 65 clusters with the field, 0 without it" in text
    assert "Spatial field supported (Moran's I without it, p < 0.01): yes" in text
    blocks = _checks(SimpleNamespace(fit={"checks": plain})).blocks
    assert len(next(b for b in blocks if isinstance(b, Table)).rows) == 2
    assert not any("spatial" in b.text for b in blocks if isinstance(b, Para))
