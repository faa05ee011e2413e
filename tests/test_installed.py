"""The installed package (issue #24): a wheel built from this checkout, installed non-editable into
a temporary target, runs the README's and the guide's commands from a directory outside the checkout; its data
and example files are package data (DESIGN §4, "Shipped files").

The wheel is built once for the module from a copy of the checkout (so the build writes nothing
into the checkout), with the running interpreter's setuptools when it can build wheels, else in
pip's isolated build environment (pyproject.toml's build requirements, from the package index).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import bruteforce
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
# build outputs and caches; docs/_build: the site, which tests/test_docs_site.py may be building meanwhile on the other
# pytest-xdist worker (a file gone mid-copy fails copytree)
NOT_BUILT = {".git", ".venv", "build", "dist", "_build", "__pycache__", ".pytest_cache", ".hypothesis"}


def _build_isolation() -> list[str]:
    """No isolation when this interpreter's setuptools satisfies pyproject.toml (>= 68) and can
    build a wheel (bdist_wheel is built in from 70.1, else it needs the `wheel` package)."""
    try:
        import setuptools
    except ImportError:  # a venv of Python >= 3.12 has none
        return []
    version = tuple(int(part) for part in setuptools.__version__.split(".")[:2] if part.isdigit())
    if version >= (70, 1) or (version >= (68, 0) and importlib.util.find_spec("wheel") is not None):
        return ["--no-build-isolation"]
    return []


def _pip(*args: str, cwd: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], cwd=cwd,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of a copy of the checkout (symbolic links kept: the build follows them)."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    shutil.copytree(ROOT, source, symlinks=True,
                    ignore=lambda folder, names: [n for n in names if n in NOT_BUILT or n.endswith(".egg-info")
                                                  or (Path(folder) == ROOT / "reports" and n != "specs")])
    _pip("wheel", "--no-deps", "--quiet", *_build_isolation(), "--wheel-dir", str(base / "dist"), str(source),
         cwd=base)
    (built,) = (base / "dist").glob("ddpbayes-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """The wheel installed (no dependencies: they come from this interpreter) into a target folder."""
    target = tmp_path_factory.mktemp("target")
    _pip("install", "--no-deps", "--quiet", "--no-index", "--target", str(target), str(wheel), cwd=target)
    return target


@pytest.fixture
def outside(tmp_path_factory) -> Path:
    """An empty working directory outside the checkout."""
    cwd = tmp_path_factory.mktemp("elsewhere")
    assert ROOT not in cwd.resolve().parents
    return cwd


def _run(installed: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(installed), "DDPBAYES_WORKERS": "1"}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _record(wheel: Path) -> dict[str, str]:
    """The wheel's RECORD: path -> sha256 (urlsafe base64, as wheels write it)."""
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        rows = csv.reader(z.read(name).decode().splitlines())
        return {row[0]: row[1] for row in rows}


def _digest(path: Path) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()


def test_the_wheel_ships_the_models_their_data_and_the_specs(wheel):
    """Every model file, data file and spec of the checkout is in the wheel, byte for byte, under
    ddpbayes/examples/; nothing lands outside the package (the old wheel had none of them)."""
    record = _record(wheel)
    expected = [p for folder, pattern in (("models", "*.py"), ("models/data", "*"), ("reports/specs", "*.toml"))
                for p in sorted((ROOT / folder).glob(pattern)) if p.is_file()]
    assert any(p.name == "gowalla_us_user_locations.csv" for p in expected)
    for path in expected:
        shipped = f"ddpbayes/examples/{path.relative_to(ROOT).as_posix()}"
        assert record.get(shipped) == _digest(path), shipped
    assert {name.split("/", 1)[0] for name in record} == {"ddpbayes", wheel.name.split("-py3")[0] + ".dist-info"}


def test_the_attack_runs_from_the_installed_package(installed, outside):
    """The issue's command: `ddpbayes attack --targets 50 --format json` from another directory
    (the old code looked for site-packages/models/data/ and exited 2)."""
    where = _run(installed, outside, "-c", "import ddpbayes; print(ddpbayes.__file__)")
    assert Path(where.stdout.strip()).resolve().is_relative_to(installed.resolve()), where.stdout
    run = _run(installed, outside, "-m", "ddpbayes", "attack", "--targets", "50", "--format", "json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    users = (ROOT / "models" / "data" / "gowalla_us_user_locations.csv").read_text().splitlines()
    assert (out["targets"], out["users"]) == (50, len(users) - 1)
    assert out["inputs"]["fit"] == "models/data/gowalla_fit.json"
    assert list(outside.iterdir()) == []  # nothing written where it ran


def test_the_readme_audit_runs_from_the_installed_package(installed, outside):
    """README's first command, `models/household.py` being the shipped model; its leakage is
    tests/bruteforce.py's, from the household joint written by hand (count, Laplace b = 1)."""
    run = _run(installed, outside, "-m", "ddpbayes", "audit", "models/household.py", "--query", "count",
               "--mechanism", "laplace", "--epsilon", "1", "--notion", "idp", "--format", "json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    n = 4
    expected = bruteforce.leak_bruteforce(bruteforce.household_joint(n), [[0, 1]] * n, np.ones(n), 1.0, target=0)
    assert out["leakage"] == pytest.approx(expected, rel=1e-9)
    assert out["leakage"] == pytest.approx(bruteforce.household_idp_closed_form(n, 1.0), rel=1e-12)


@pytest.mark.slow  # the default run's budget (~6 s idle): the wheel's contents and the README's audit stay
def test_a_report_spec_runs_from_the_installed_package(installed, outside):
    """`ddpbayes report reports/specs/X.toml --out DIR` with the shipped spec and its model:
    contagious_family (k = 2, count, Laplace at ε = 1): dp = ε, idp = 2ε (the count is 0 or 2)."""
    run = _run(installed, outside, "-m", "ddpbayes", "report", "reports/specs/contagious_family.toml", "--out",
               "report", "--quiet")
    assert run.returncode == 0, run.stderr
    results = json.loads((outside / "report" / "results.json").read_text())
    assert results["audits"]["dp"]["leakage"] == pytest.approx(1.0, rel=1e-12)
    assert results["audits"]["idp"]["leakage"] == pytest.approx(2.0, rel=1e-12)


def test_models_lists_the_installed_files(installed, outside):
    """`ddpbayes models` (issue #40 item 10) lists the wheel's models and specs, from anywhere."""
    run = _run(installed, outside, "-m", "ddpbayes", "models")
    assert run.returncode == 0, run.stderr
    names = {line.split()[0] for line in run.stdout.splitlines() if line.startswith("  ")}
    shipped = [*(ROOT / "models").glob("*.py"), *(ROOT / "reports" / "specs").glob("*.toml")]
    assert names == {p.stem for p in shipped}


@pytest.mark.slow
def test_a_shipped_spec_copied_out_finds_the_installed_model(installed, outside):
    """A shipped spec copied out of the package (`../../models/X.py` names nothing beside it) and a
    spec naming `household` both resolve to the installed copy's models (issue #40 item 2)."""
    (outside / "copy.toml").write_text((ROOT / "reports" / "specs" / "contagious_family.toml").read_text())
    (outside / "mine.toml").write_text('model = "household"\nquery = "count"\nnotions = ["idp"]\n'
                                       '[mechanism]\nkind = "laplace"\nepsilon = 1.0\n')
    code = ("from ddpbayes.reports.input import load_spec\n"
            "for s in ('copy.toml', 'mine.toml'): print(load_spec(s).model)")
    run = _run(installed, outside, "-c", code)
    assert run.returncode == 0, run.stderr
    models = (installed / "ddpbayes" / "examples" / "models").resolve()
    assert run.stdout.split() == [str(models / "contagious_family.py"), str(models / "household.py")]
