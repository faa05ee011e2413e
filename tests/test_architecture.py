"""The architecture, read from the source with `ast` so that a new import or comparison anywhere
fails here: the engine interface is the only door to engine mathematics (issue 12); the layers of
docs/design.md §1 hold, no circle spans two packages, and a notion's or mechanism kind's name lives
only in its home (issue 26)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import importgraph  # tests/ is on sys.path (conftest)
import pytest

from ddpbayes.vocabulary import ENGINES

PACKAGE = Path(__file__).resolve().parent.parent / "ddpbayes"
OUTSIDE = sorted(p for p in PACKAGE.rglob("*.py") if "engines" not in p.relative_to(PACKAGE).parts)
ALLOWED = {"ddpbayes.engines", "ddpbayes.engines.base"}  # the package's exports and the interface


@functools.cache
def _tree(path: Path) -> ast.AST:
    """The module's syntax tree, parsed once for the three checks that read every file."""
    return ast.parse(path.read_text(), filename=str(path))


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
    tree = _tree(path)
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
# own entry point.
CLI_USERS = {"__main__.py"}
BELOW_CLI = [p for p in PACKAGE.rglob("*.py")
             if p.relative_to(PACKAGE).parts[0] != "cli" and str(p.relative_to(PACKAGE)) not in CLI_USERS]


@pytest.mark.parametrize("path", BELOW_CLI, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_nothing_below_the_command_line_imports_it(path):
    """A model's repr or an audit's table once imported `ddpbayes.cli.text` (an upward import, and
    a circle through the CLI): formatting for people lives in `ddpbayes/formatting.py`."""
    tree = _tree(path)
    assert [m for m in _imports(tree) if m == "ddpbayes.cli" or m.startswith("ddpbayes.cli.")] == []


# One home per concept (issue #26). The layer table of docs/design.md §1 is the law: a module
# imports from its own layer or below, every module has a layer, and no import circle spans two
# packages. Names of a notion or a mechanism kind appear as string literals only in their home.
ROOT = PACKAGE.parent
ORDER = importgraph.layer_order(ROOT / "docs" / "design.md")


def test_every_module_has_a_layer():
    assert ORDER, "docs/design.md §1 has no '### Layers' table"
    homeless = [m for m in importgraph.modules(PACKAGE) if m != "ddpbayes" and importgraph.layer_of(m, ORDER) is None]
    assert homeless == [], f"modules missing from the layer table of docs/design.md §1: {homeless}"


def test_no_import_runs_up_a_layer():
    found = [f"{i.source}:{i.line} imports {i.target} (layer {importgraph.layer_of(i.target, ORDER)} > "
             f"{importgraph.layer_of(i.source, ORDER)})" for i in importgraph.upward(PACKAGE, ORDER)]
    assert found == []


def _package(module: str) -> str:
    return module if (PACKAGE.parent / module.replace(".", "/") / "__init__.py").exists() else module.rpartition(".")[0]


def test_no_import_circle_spans_two_packages():
    spanning = [c for c in importgraph.circles(importgraph.graph(PACKAGE)) if len({_package(m) for m in c}) > 1]
    assert spanning == []


def _homes() -> dict[str, set[str]]:
    """Each notion name and mechanism kind (aliases too) -> where it may be written as a literal:
    its package (and `vocabulary.py`, the names the command line offers without importing PyMC)."""
    from ddpbayes.mechanisms import REGISTRY
    from ddpbayes.vocabulary import CALIBRATION_METHODS, NOTIONS

    homes: dict[str, set[str]] = {name: {"notions", "vocabulary.py"} for name in NOTIONS}
    for cls in set(REGISTRY.values()):
        for name in (cls.kind, *cls.aliases):
            homes.setdefault(name, set()).update({"mechanisms", "engines", "vocabulary.py"} if name in ENGINES
                                                  else {"mechanisms"})
    for name in set(CALIBRATION_METHODS) & set(homes):  # `dp` is also a recipe of calibrate (DESIGN §3.1)
        homes[name].add("ddp")
    return homes


def _literals(node: ast.AST) -> list[ast.Constant]:
    """The string literals of an expression, looking into tuples, lists, sets and dict values."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [c for item in node.elts for c in _literals(item)]
    if isinstance(node, ast.Dict):
        return [c for item in node.values for c in _literals(item)]
    return []


def _names_a_command(call: ast.Call) -> bool:
    """`add_parser("gaussian")` names a subcommand (a model family for `derive`), not a mechanism."""
    return isinstance(call.func, ast.Attribute) and call.func.attr == "add_parser"


def _names_outside_home(tree: ast.AST, where: str, homes: dict[str, set[str]]) -> list[str]:
    """Literals equal to a notion name or a mechanism kind, in a file outside that name's home,
    where they select: compared (`kind == "laplace"`, `notion in ("pdp", "ddp")`), passed to a
    call (`audit(..., "idp")`, `choices=(...)`; a parameter's `default=` is not a selection) or used
    as a subscript (`bounds["idp"]`)."""
    used = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            used += [c for side in (node.left, *node.comparators) for c in _literals(side)]
        elif isinstance(node, ast.Call) and not _names_a_command(node):
            used += [c for arg in (*node.args, *(k.value for k in node.keywords if k.arg != "default"))
                     for c in _literals(arg)]
        elif isinstance(node, ast.Subscript):
            used += _literals(node.slice)
    return [f"line {c.lineno}: {c.value!r}" for c in used if c.value in homes and where not in homes[c.value]]


ALL = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_kind_and_notion_names_only_in_their_home(path):
    """`kind == "laplace"`, `notion in ("pdp", "ddp")`, `audit(..., "idp")` outside mechanisms/ or
    notions/ fail here: ask the Mechanism's capabilities or the Notion object instead."""
    rel = path.relative_to(PACKAGE)
    where = rel.parts[0]
    found = _names_outside_home(_tree(path), where, _homes())
    assert found == [], f"{rel} names a notion or mechanism kind outside its home: {found}"


def test_the_layer_checks_see_a_violation(tmp_path):
    """The checks are not vacuous: an upward import, a circle across two packages and a notion
    name in a selector are all found in a small package written here."""
    pkg = tmp_path / "ddpbayes"
    (pkg / "low").mkdir(parents=True)
    (pkg / "high").mkdir()
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "high" / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("def f():\n    from ddpbayes.high.b import g\n")
    (pkg / "high" / "b.py").write_text("from ddpbayes.low.a import f\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "design.md").write_text("### Layers\n\n| layer | home |\n| --- | --- |\n"
                                                 "| 0 | `low/` |\n| 1 | `high/` |\n\nafter\n")
    order = importgraph.layer_order(tmp_path / "docs" / "design.md")
    assert order == {"ddpbayes.low": 0, "ddpbayes.high": 1}
    assert [(i.source, i.target, i.inside_function) for i in importgraph.upward(pkg, order)] == [
        ("ddpbayes.low.a", "ddpbayes.high.b", True)]
    assert importgraph.circles(importgraph.graph(pkg)) == [["ddpbayes.high.b", "ddpbayes.low.a"]]
    tree = ast.parse('"""pdp in prose."""\nif n in ("pdp", "x"): audit(m, "idp")\nb["ddp"]\nlabel = "pdp"\n')
    assert sorted(_names_outside_home(tree, "reports", {n: {"notions"} for n in ("pdp", "idp", "ddp")})) == [
        "line 2: 'idp'", "line 2: 'pdp'", "line 3: 'ddp'"]


def test_the_vocabulary_names_what_the_homes_hold():
    """vocabulary.py lets the command line offer names without importing PyMC; they must be the
    names the notions' and mechanisms' registries hold."""
    from ddpbayes.mechanisms import REGISTRY as MECHANISMS
    from ddpbayes.notions import REGISTRY as NOTION_REGISTRY
    from ddpbayes.vocabulary import DERIVED_NOISES, NOTIONS

    assert tuple(NOTION_REGISTRY) == NOTIONS
    assert set(DERIVED_NOISES) <= set(MECHANISMS)
