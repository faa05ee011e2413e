"""The engine interface is the only door to engine mathematics (issue 12): no module outside
`ddpbayes/engines/` imports an engine's own modules or asks which engine ran. Read from the
source with `ast`, so a new import or comparison anywhere fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ddpbayes.vocabulary import ENGINES

PACKAGE = Path(__file__).resolve().parent.parent / "ddpbayes"
OUTSIDE = sorted(p for p in PACKAGE.rglob("*.py") if "engines" not in p.relative_to(PACKAGE).parts)
ALLOWED = {"ddpbayes.engines", "ddpbayes.engines.base"}  # the package's exports and the interface


def _imports(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
    return out


def _engine_name_comparisons(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Constant) and side.value in ENGINES:
                    found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", OUTSIDE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_engine_internals_outside_engines(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    leaks = [m for m in _imports(tree) if m.startswith("ddpbayes.engines") and m not in ALLOWED]
    assert leaks == [], f"{path.name} imports engine internals: {leaks}"
    assert _engine_name_comparisons(tree) == [], f"{path.name} compares engine names"


def test_the_checks_see_a_violation():
    """The two checks are not vacuous: they flag an import of an engine module and a comparison."""
    tree = ast.parse("from ddpbayes.engines.exact.joint import joint_table\nif r.engine == 'sampling': pass\n")
    assert _imports(tree) == ["ddpbayes.engines.exact.joint"]
    assert _engine_name_comparisons(tree) == ["line 2: r.engine == 'sampling'"]
    assert len(OUTSIDE) > 30


# The command line is the top layer: nothing below it imports it. `__main__` is the command line's
# own entry point; `reports/regenerate.py` is a command too and moves under cli/ with issue #26.
CLI_USERS = {"__main__.py", "reports/regenerate.py"}
BELOW_CLI = [p for p in PACKAGE.rglob("*.py")
             if p.relative_to(PACKAGE).parts[0] != "cli" and str(p.relative_to(PACKAGE)) not in CLI_USERS]


@pytest.mark.parametrize("path", BELOW_CLI, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_nothing_below_the_command_line_imports_it(path):
    """A model's repr or an audit's table once imported `ddpbayes.cli.text` (an upward import, and
    a circle through the CLI): formatting for people lives in `ddpbayes/formatting.py`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    assert [m for m in _imports(tree) if m == "ddpbayes.cli" or m.startswith("ddpbayes.cli.")] == []
