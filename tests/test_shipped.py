"""Shipped files (issue #24, DESIGN §4): the example models, their data and the report specs are
found through `ddpbayes.shipped` from any working directory, and a file that exists from the
working directory always wins. (tests/test_installed.py checks the same from a wheel install.)"""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest

from ddpbayes import shipped
from ddpbayes.errors import InputError

ROOT = Path(__file__).resolve().parent.parent


def test_the_examples_folder_reaches_the_repository_files():
    """In a checkout, the package's examples/ holds the very files of models/ and reports/specs/."""
    for folder, pattern in (("models", "*.py"), ("models/data", "*"), ("reports/specs", "*.toml")):
        mine = sorted(p.name for p in (ROOT / folder).glob(pattern) if p.is_file())
        assert mine, folder
        assert sorted(p.name for p in (shipped.ROOT / folder).glob(pattern) if p.is_file()) == mine
        assert all(filecmp.cmp(ROOT / folder / n, shipped.ROOT / folder / n, shallow=False) for n in mine)


@pytest.mark.parametrize("given", ["models/household.py", "household", "./models/household.py"])
def test_a_missing_relative_model_is_the_shipped_one(tmp_path, monkeypatch, given):
    monkeypatch.chdir(tmp_path)
    assert shipped.resolve(given, shipped.MODELS) == shipped.ROOT / "models" / "household.py"


@pytest.mark.parametrize("given", ["reports/specs/contagious_family.toml", "contagious_family"])
def test_a_missing_relative_spec_is_the_shipped_one(tmp_path, monkeypatch, given):
    monkeypatch.chdir(tmp_path)
    assert shipped.resolve(given, shipped.SPECS) == shipped.ROOT / "reports" / "specs" / "contagious_family.toml"


@pytest.mark.parametrize("given", ["household.py", "other/household.py", "models/household.toml", "models/nope.py",
                                   "nope", "models/data/gowalla_fit.json"])
def test_other_paths_are_left_as_given(tmp_path, monkeypatch, given):
    monkeypatch.chdir(tmp_path)
    assert shipped.resolve(given, shipped.MODELS) == Path(given)


def test_a_file_in_the_working_directory_wins(tmp_path, monkeypatch):
    """The user's own models/household.py is loaded, not the shipped one of the same name."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "household.py").write_text(
        "import pymc as pm\nfrom ddpbayes import DependenceModel\n\n"
        "def build():\n    with pm.Model() as m:\n        pm.Bernoulli('mine', 0.5)\n"
        "    return DependenceModel(m, tuples=['mine'])\n")
    monkeypatch.chdir(tmp_path)
    import ddpbayes

    assert shipped.resolve("models/household.py", shipped.MODELS) == Path("models/household.py")
    assert ddpbayes.load_model("models/household.py").names == ["mine"]


def test_load_model_and_load_spec_take_the_shipped_files(tmp_path, monkeypatch):
    import ddpbayes
    from ddpbayes.reports.input import load_spec

    monkeypatch.chdir(tmp_path)
    assert ddpbayes.load_model("models/household.py", {"n": 3}).names == ["x0", "x1", "x2"]
    spec = load_spec("reports/specs/contagious_family.toml")
    assert spec.model.resolve() == (ROOT / "models" / "contagious_family.py").resolve()


def test_a_missing_model_names_the_shipped_ones(tmp_path, monkeypatch):
    import ddpbayes

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"model file 'models/nope.py' does not exist \(shipped example models.*"
                                         r"household.*markov_chain"):
        ddpbayes.load_model("models/nope.py")


def test_the_attack_reads_the_shipped_data_from_anywhere(tmp_path, monkeypatch):
    """The defaults are package data (the old code looked beside the installed package)."""
    from ddpbayes.attack.run import load_data

    monkeypatch.chdir(tmp_path)
    data = load_data()
    rows = (ROOT / "models" / "data" / "gowalla_us_user_locations.csv").read_text().splitlines()
    assert data.users == len(rows) - 1  # a header, then one located user per row
    assert data.paths == {"locations": "models/data/gowalla_us_user_locations.csv",
                          "edges": "models/data/gowalla_us_edges.csv", "fit": "models/data/gowalla_fit.json",
                          "near": "models/data/gowalla_near_fit.json"}


def test_missing_shipped_data_is_one_clear_line(tmp_path, monkeypatch):
    from ddpbayes.attack.run import load_data

    monkeypatch.setattr(shipped, "ROOT", tmp_path)
    with pytest.raises(InputError, match=r"^missing input file: locations .*\(the shipped Gowalla data is missing "
                                         r"from the installed package: reinstall ddpbayes, or pass --locations"):
        load_data()


# --- a spec's model (issue #40 item 2) ---------------------------------------------------------


@pytest.mark.parametrize("given", ["household", "models/household.py", "../../models/household.py",
                                   "./models/household.py"])
def test_a_spec_anywhere_may_name_a_shipped_model(tmp_path, given):
    assert shipped.resolve_from(tmp_path, given, shipped.MODELS) == (shipped.ROOT / "models" / "household.py").resolve()


def test_a_model_beside_the_spec_wins(tmp_path):
    (tmp_path / "models").mkdir()
    mine = tmp_path / "models" / "household.py"
    mine.write_text("def build():\n    pass\n")
    assert shipped.resolve_from(tmp_path, "models/household.py", shipped.MODELS) == mine.resolve()


@pytest.mark.parametrize("given", ["other/household.py", "household.py", "models/nope.py", "../models/household.toml"])
def test_other_spec_models_stay_beside_the_spec(tmp_path, given):
    assert shipped.resolve_from(tmp_path, given, shipped.MODELS) == (tmp_path / given).resolve()


def _spec_text(kind: str, model: str) -> str:
    """A small valid spec of `kind` (audit, composition, mechanisms) naming `model`."""
    if kind == "audit":
        return f'model = "{model}"\nquery = "count"\nnotions = ["idp"]\n[mechanism]\nkind = "laplace"\nepsilon = 1.0\n'
    if kind == "composition":
        return (f'model = "{model}"\nreleases = ["linear:1,1,0,0:laplace:1", "linear:0,0,1,1:laplace:2"]\n'
                'notions = ["idp"]\n')
    return f'[[case]]\nmodel = "{model}"\nquery = "count"\nmechanism = "laplace"\nepsilon = 1.0\nnotions = ["idp"]\n'


@pytest.mark.parametrize("kind", ["audit", "composition", "mechanisms"])
@pytest.mark.parametrize("model", ["household", "models/household.py"])
def test_load_spec_takes_a_shipped_model_from_outside_the_checkout(tmp_path, monkeypatch, kind, model):
    from ddpbayes.reports.input import load_spec

    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.toml").write_text(_spec_text(kind, model))
    spec = load_spec(tmp_path / "spec.toml")
    files = [c.model for c in spec.cases] if kind == "mechanisms" else [spec.model]
    assert files == [(ROOT / "models" / "household.py").resolve()]


@pytest.mark.parametrize("name", [n for n in shipped.names(shipped.SPECS) if n != "gowalla_attack"])
def test_a_shipped_spec_copied_out_finds_its_model(tmp_path, monkeypatch, name):
    """The copy's `../../models/NAME.py` names no file beside it: it is the shipped model NAME."""
    from ddpbayes.reports.input import load_spec

    text = (ROOT / "reports" / "specs" / f"{name}.toml").read_text()
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "copy.toml").write_text(text)
    monkeypatch.chdir(tmp_path)
    spec = load_spec("a/copy.toml")
    original = load_spec(ROOT / "reports" / "specs" / f"{name}.toml")
    files = (lambda s: [c.model for c in s.cases] if hasattr(s, "cases") else [s.fit.data] if hasattr(s, "fit")
             else [s.model])  # a spec naming a fit: its data file, shipped in models/data
    assert [f.resolve() for f in files(spec)] == [f.resolve() for f in files(original)]
    assert all(f.resolve().parent in {(ROOT / "models").resolve(), (ROOT / "models" / "data").resolve()}
               for f in files(spec))


def test_a_missing_spec_model_names_the_shipped_ones(tmp_path):
    from ddpbayes.reports.input import load_spec

    (tmp_path / "spec.toml").write_text(_spec_text("audit", "nope"))
    with pytest.raises(InputError, match=r"key 'model' must be an existing model file, relative to the spec, or a "
                                         r"shipped model \(.*household.*\), got 'nope'"):
        load_spec(tmp_path / "spec.toml")
