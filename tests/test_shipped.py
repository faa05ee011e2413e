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
