"""What the structured engine solves (DESIGN §2.1b): an integer linear release with Laplace,
geometric or Gaussian noise, on a factor graph whose elimination fits the state limit."""

from __future__ import annotations

import math

import numpy as np

from ddpbayes.engines.structured.graph import FactorGraph, tree
from ddpbayes.engines.structured.pathsum import path_of
from ddpbayes.engines.structured.rows import row_matrix
from ddpbayes.model.domains import Finite, distinct
from ddpbayes.problem import Problem


def linear_reason(problem: Problem) -> str | None:
    """Why the query or mechanism is not an integer release the engine solves: a sum of one integer term per tuple
    (`Query.contributions`: w·x, `level:L`), or several linear rows with independent noise on each, with Laplace,
    geometric or Gaussian noise or a mechanism with a joint output law on its one answer (truncated geometric,
    RAPPOR: DESIGN §5.2)."""
    w = row_matrix(problem)
    if w is None and problem.query.contributions(np.zeros((problem.model.n, 1))) is None:
        return (f"the query '{problem.query.spec}' is not linear (use count, sum, level:L or linear: with integer "
                "weights; identity on a chain)")
    if w is not None and (w.shape[1] != problem.model.n or not np.all(np.isfinite(w)) or np.any(np.mod(w, 1) != 0)):
        return f"the query '{_short(problem.query.spec)}' needs integer weights, one per tuple"
    reason = _non_integer_reason(problem)
    if reason:
        return reason
    if w is None and not all(np.all(np.mod(t, 1) == 0) for t in row_terms(problem)):
        return f"the query '{_short(problem.query.spec)}' needs integer weights, one per tuple"
    if not (problem.mechanism.laplace or problem.mechanism.gaussian or problem.mechanism.joint):
        return (f"the {problem.mechanism.kind} mechanism is not Laplace, geometric or Gaussian noise, nor a mechanism "
                "with an output law")
    rows = 1 if w is None else len(w)
    if rows > 1 and problem.mechanism.joint:
        return f"the {problem.mechanism.kind} mechanism's output law is on one answer, and the query has {rows} rows"
    return None


def _non_integer_reason(problem: Problem) -> str | None:
    """The first tuple whose domain is not a finite set of integers, as a reason; cached on the model (each
    distinct domain checked once)."""
    model = problem.model
    return model.memo("structured", "integer domains", lambda: _first_non_integer(model.domains, model.names))


def _first_non_integer(domains: list, names: list[str]) -> str | None:
    integer: dict = {}
    for k, d in enumerate(domains):
        if id(d) not in integer:  # a shared domain object (`supports._integers`) checked once
            integer[id(d)] = isinstance(d, Finite) and all(float(v).is_integer() for v in d.values)
        if not integer[id(d)]:
            return f"tuple '{names[k]}' is not integer-valued (domain {d})"
    return None


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def row_terms(problem: Problem) -> list[np.ndarray]:
    """Each output row's term table over the tuples' domains, (n, widest domain): row k holds tuple k's term at
    each of its values, padded with its term at its first value (a linear row's a_k·v; else `contributions`)."""
    domains = problem.model.domains
    shared, which = distinct(domains)  # each distinct domain object's row once
    width = max(len(d.values) for d in shared)
    values = np.array([d.values + (d.values[0],) * (width - len(d.values)) for d in shared], dtype=float)[which]
    w = row_matrix(problem)
    return [problem.query.contributions(values)] if w is None else [row[:, None] * values for row in w]


def query_span(problem: Problem) -> int:
    """How many partial sums the query can take: 1 + Σ_k (max - min of tuple k's term over its domain), for its
    widest row (a several-row release is solved one row at a time: `rows`); cached on the model per query."""
    key = ("query span", type(problem.query).__name__, problem.query.spec)
    return problem.model.memo("structured", key, lambda: _span(problem))


def _span(problem: Problem) -> int:
    return 1 + int(max((t.max(axis=1) - t.min(axis=1)).sum() for t in row_terms(problem)))


def width_reason(graph: FactorGraph, span: int, limit: int) -> str | None:
    """Why the elimination is too large, or None: `clique_reason`, or the cells one pass touches
    (slots times the widest clique's) above WORK_PER_STATE · `limit`."""
    reason = clique_reason(graph, span, limit)
    if reason:
        return reason
    work = pass_cells(graph, span)
    if work > WORK_PER_STATE * limit:
        return (f"one pass of its elimination would touch about {work:.2g} table cells ({_eliminated(graph):,} slots x "
                f"{_widest(graph)[1] * span:,}), over {WORK_PER_STATE} x --max-states = {WORK_PER_STATE * limit:.2g} "
                "(raise --max-states)")
    return None


def clique_reason(graph: FactorGraph, span: int, limit: int) -> str | None:
    """Why one table of the elimination is too large to allocate, or None: its widest clique times the query's
    `span` (a bound on its largest table) above `limit`."""
    slots, cells = _widest(graph)
    cells *= span
    if cells > limit:
        return (f"its widest elimination clique ({slots} slots) times the query's {span:,} partial sums has "
                f"{cells:,} cells, over the limit of {limit:,} (raise --max-states): the model's treewidth or the "
                "query's range is too large")
    return None


def pass_cells(graph: FactorGraph, span: int) -> int:
    """A bound on the table cells one elimination pass touches: its slots times its widest clique times `span`."""
    return _widest(graph)[1] * span * _eliminated(graph)


def _widest(graph: FactorGraph) -> tuple[int, int]:
    """The widest elimination clique's slots and cells (its slots' sizes multiplied); cached with the graph's
    trees. A path (`pathsum`) is eliminated from an end, each clique a slot and the next: min-fill's order, which
    takes an end (no fill) while there is one, read off the path without running it."""
    if "widest" not in graph.trees:
        path = path_of(graph)
        if path is not None:
            sizes = [graph.sizes[v] for v in path.order]
            graph.trees["widest"] = max([(2, a * b) for a, b in zip(sizes, sizes[1:])] or [(1, sizes[0])],
                                        key=lambda c: c[1])
        else:
            order = tree(graph, frozenset())
            cliques = [(v, *order.separator[v]) for v in order.order]
            clique = max(cliques, key=lambda c: math.prod(graph.sizes[u] for u in c))
            graph.trees["widest"] = (len(clique), math.prod(graph.sizes[u] for u in clique))
    return graph.trees["widest"]


def _eliminated(graph: FactorGraph) -> int:
    """How many slots one pass eliminates: those some factor holds."""
    path = path_of(graph)
    return len(path.order) if path is not None else len(tree(graph, frozenset()).order)


def seconds_per_pass(graph: FactorGraph, span: int) -> float:
    """A rough cost of one adversary's elimination pass (`Engine.seconds_per_adversary`): about
    5 ms + 0.5 ms per slot + 20 ns per table cell the pass touches (measured, one core shared:
    household n = 10, 40, 80 at 16, 49, 81 ms; markov_chain n = 20, 100 at 19, 40 ms)."""
    slots = _eliminated(graph)
    return 5e-3 + 5e-4 * slots + 2e-8 * _widest(graph)[1] * span * slots


def seconds_per_target(span: int) -> float:
    """A rough cost of one target's law and sup once its known set's pass is done: about 0.2 ms + 0.15 ns per
    square partial sum (its convolution; measured: binary chains of 1,000 and 5,000 days, every target, 0.43 ms
    and 4.6 ms a target on an idle core)."""
    return 2e-4 + 1.5e-10 * span * span


WORK_PER_STATE = 256  # a pass may touch this many table cells per --max-states (the default: about 1e9)


def quick_work_reason(problem: Problem) -> str | None:
    """The work bound of `_width_reason` with the smallest clique (two cells), read off the
    domains and weights before any table is built (10^5 exchangeable records: refused at once)."""
    span = query_span(problem)
    work, budget = 2 * span * problem.model.n, WORK_PER_STATE * problem.settings.max_states
    if work > budget:
        return (f"one pass of its elimination would touch at least {work:.2g} table cells ({problem.model.n:,} tuples x "
                f"the query's {span:,} partial sums x 2), over {WORK_PER_STATE} x --max-states = {budget:.2g} "
                "(raise --max-states)")
    return None
