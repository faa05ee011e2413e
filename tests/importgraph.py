"""The package's import graph, read from the source with `ast` (issue #26): every import, at the
top of a module or inside a function, resolved to the ddpbayes module it loads.

`python tests/importgraph.py [ROOT]` prints the measures the closing notes quote: modules, lines,
floors (the longest chain of imports once circles are condensed; between modules, and between
the top-level packages), circles, imports inside
functions, upward imports (against the layer table of docs/design.md §1, when ROOT has one) and
the largest module and function.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the ddpbayes module it loads
    line: int
    inside_function: bool


def modules(package: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package (a package is its __init__)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


@functools.cache
def imports(package: Path) -> tuple[Import, ...]:
    """Every import of a ddpbayes module by a ddpbayes module; `from a import b` is a.b when
    a.b is a module, else a. Read once per package and process (the graph and the layer check share it)."""
    known = modules(package)
    out = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, inside in _walk(tree, False):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, path.name == "__init__.py", node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            for target in dict.fromkeys(targets):
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    out.append(Import(name, target, node.lineno, inside))
    return tuple(out)


def _walk(node: ast.AST, inside: bool) -> Iterator[tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, inside
        yield from _walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))


def graph(package: Path) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in modules(package)}
    for imp in imports(package):
        edges[imp.source].add(imp.target)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        work = [(root, iter(sorted(edges[root])))]
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    break
                if child in on:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def packages(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between the top-level modules and packages of ddpbayes (`ddpbayes.reports`, ...)."""
    def top(module: str) -> str:
        return ".".join(module.split(".")[:2])

    out: dict[str, set[str]] = {}
    for m, targets in edges.items():
        out.setdefault(top(m), set()).update(top(t) for t in targets if top(t) != top(m))
    return out


def floors(edges: dict[str, set[str]]) -> int:
    """The longest chain of imports, counted in modules, each circle counted as one module."""
    owner = {m: m for m in edges}
    for circle in circles(edges):
        for m in circle:
            owner[m] = circle[0]
    condensed: dict[str, set[str]] = {}
    for m, targets in edges.items():
        condensed.setdefault(owner[m], set()).update(owner[t] for t in targets if owner[t] != owner[m])
    height: dict[str, int] = {}
    for m in sorted(condensed):  # iterative post-order: the graph is acyclic once condensed
        work = [m]
        while work:
            top = work[-1]
            pending = [t for t in condensed[top] if t not in height]
            if pending:
                work += pending
            else:
                work.pop()
                height[top] = 1 + max((height[t] for t in condensed[top]), default=0)
    return max(height.values())


LAYER_ROW = re.compile(r"^\|\s*(\d+)\s*\|([^|]*)\|", re.M)


def layer_order(design: Path) -> dict[str, int]:
    """docs/design.md §1's layer table ("### Layers"): module or package under ddpbayes/ -> layer."""
    text = design.read_text() if design.exists() else ""
    start = text.find("### Layers")
    if start < 0:
        return {}
    end = text.find("\n\n", text.find("| ---", start))
    out = {}
    for number, cell in LAYER_ROW.findall(text[start:end]):
        for name in re.findall(r"`([\w./]+)`", cell):
            out["ddpbayes." + name.strip("/").removesuffix(".py").replace("/", ".")] = int(number)
    return out


def layer_of(module: str, order: dict[str, int]) -> int | None:
    while module:
        if module in order:
            return order[module]
        module = module.rpartition(".")[0]
    return None


def upward(package: Path, order: dict[str, int]) -> list[Import]:
    """Imports from a module to a module of a higher layer."""
    out = []
    for imp in imports(package):
        low, high = layer_of(imp.source, order), layer_of(imp.target, order)
        if low is not None and high is not None and high > low:
            out.append(imp)
    return out


def largest_function(package: Path) -> tuple[int, str]:
    best = (0, "")
    for name, path in modules(package).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                best = max(best, (node.end_lineno - node.lineno + 1, f"{name}.{node.name}"))
    return best


def measures(root: Path) -> dict[str, object]:
    package = root / "ddpbayes"
    edges = graph(package)
    lines = {name: len(path.read_text().splitlines()) for name, path in modules(package).items()}
    order = layer_order(root / "docs" / "design.md")
    return {
        "modules": len(edges),
        "lines": sum(lines.values()),
        "floors": floors(edges),
        "floors between packages": floors(packages(edges)),
        "circles": [" <-> ".join(c) for c in circles(edges)],
        "circles between packages": [" <-> ".join(c) for c in circles(packages(edges))],
        "imports inside functions": sum(imp.inside_function for imp in imports(package)),
        "upward imports": [f"{i.source}:{i.line} -> {i.target}" for i in upward(package, order)]
        if order else "no layer table",
        "largest module": max((n, m) for m, n in lines.items()),
        "largest function": largest_function(package),
    }


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    for key, value in measures(root).items():
        if isinstance(value, list):
            print(f"{key}: {len(value)}")
            for item in value:
                print(f"  {item}")
        else:
            print(f"{key}: {value}")
