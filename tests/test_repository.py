"""The repository root holds only what belongs there (issue #24): the tracked top-level entries
are exactly an allow-list, so no stray wheels, archives or outputs get committed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

ALLOWED = {
    ".ci",  # the CI script
    ".gitignore",
    "README.md",  # what ddpbayes is, the set-up commands, links into the site
    "pyproject.toml",  # metadata, dependencies, packaging
    "benchmarks",
    "ddpbayes",  # the package
    "docs",  # design notes and references
    "models",  # the example model files and their data (shipped in the package too)
    "reports",  # generated reports and their specs
    "tests",
}


def _tracked_top_level() -> set[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a checkout: the tracked files are what git lists")
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    return {name.split("/", 1)[0] for name in out.decode().split("\0") if name}


def test_root_holds_only_the_allowed_entries():
    entries = _tracked_top_level()
    assert entries - ALLOWED == set(), "unexpected entries tracked at the repository root"
    assert ALLOWED - entries == set(), "expected entries missing from the repository root"


def test_wheels_are_ignored():
    """A wheel built or downloaded into the checkout is not picked up by `git add`."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a checkout")
    probe = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "--no-index", "dask-1.0-py3-none-any.whl"])
    assert probe.returncode == 0
