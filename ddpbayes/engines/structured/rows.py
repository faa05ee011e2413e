"""A several-row linear release reduced to the rows coupled with the target (DESIGN §2.1b, issue #41).

Each row of A x gets its own noise. Given x_K the factorised law splits over the connected
components of the factor graph on the unknown slots (global Markov property), so rows that
read no unknown tuple of a component coupled with the target are independent of X_i and of the
coupled rows: their factor of L(y | t, x_K) does not depend on t and cancels from every
log-ratio. The coupled rows are found by closure (the target's component, the rows reading it,
the components those rows read, ...); when one row remains, the leakage is that row's, a
one-row linear query the engine solves exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ddpbayes.engines.base import Declined
from ddpbayes.engines.structured.graph import FactorGraph
from ddpbayes.engines.structured.memo import BoundedMemo
from ddpbayes.problem import Adversary, Problem
from ddpbayes.queries import Linear, LinearRows

MASKS = 8  # the known sets whose masks an `Incidence` keeps


def row_matrix(problem: Problem) -> np.ndarray | None:
    """A, (rows, n): a `LinearRows` query's matrix, or the one row of a scalar linear query (`weights`); None for
    any other query (a sum of per-tuple terms such as `level:L` is read through its `contributions` alone)."""
    n = problem.model.n
    if isinstance(problem.query, LinearRows):
        return np.asarray(problem.query.matrix(n), dtype=float)
    w = problem.query.weights(n)
    return None if w is None else np.asarray(w, dtype=float)[None, :]


def components(graph: FactorGraph, known: frozenset[int]) -> np.ndarray:
    """The connected component of every slot in the factor graph without the `known` slots (-1 for a known slot;
    the labels only tell components apart), cached with the graph's trees. On a graph whose path is known
    (`pathsum.path_of`, cached with its trees) a component is a run of unknown slots between known ones along
    the path, read off one cumulative count; else by union–find over the factors."""
    if ("components", known) not in graph.trees:
        path = graph.trees.get("path")
        on_path = path is not None and len(path.order) == len(incidence(graph).present)
        graph.trees["components", known] = (_path_components if on_path else _joined)(graph, known)
    return graph.trees["components", known]


def _path_components(graph: FactorGraph, known: frozenset[int]) -> np.ndarray:
    """`components` of a path (`graph.trees["path"]`): positions between two known slots share a label (the
    slots + the count of known slots before them), a slot in no factor is its own (its index)."""
    order = np.asarray(graph.trees["path"].order)
    cut = incidence(graph).mask(known)
    label = np.arange(graph.slots)
    label[order] = graph.slots + np.cumsum(cut[order])
    label[cut] = -1
    return label


def _joined(graph: FactorGraph, known: frozenset[int]) -> np.ndarray:
    """`components` by union–find: each factor joins its unknown slots."""
    parent = list(range(graph.slots))

    def root(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for p in graph.factors:
        free = [v for v in p.scope if v not in known]
        for v in free[1:]:
            parent[root(v)] = root(free[0])
    return np.array([-1 if v in known else root(v) for v in range(graph.slots)])


@dataclass(frozen=True)
class Incidence:
    """Which slot lies in which factor, flattened over the factors' scopes (`slot[j]` in factor `factor[j]`):
    the per-known-set questions (which factors touch a set of slots, which slots share a factor with it) as a
    few NumPy calls instead of a scan of every factor's scope. `present`: the slots in some scope."""

    slot: np.ndarray
    factor: np.ndarray
    factors: int
    slots: int
    present: np.ndarray
    masks: BoundedMemo = field(default_factory=lambda: BoundedMemo(MASKS, lambda key, mask: 1), compare=False,
                               repr=False)

    def mask(self, slots) -> np.ndarray:
        """`slots` (an iterable of slot indices) as a boolean mask over the slots (read-only; a frozenset's kept
        for the next questions about the same known set)."""
        if isinstance(slots, frozenset):
            return self.masks.remember(slots, lambda: self._mask(slots))
        return self._mask(slots)

    def _mask(self, slots) -> np.ndarray:
        out = np.zeros(self.slots, dtype=bool)
        out[np.fromiter(slots, dtype=np.int64)] = True
        out.flags.writeable = False
        return out

    def touching(self, mask: np.ndarray) -> np.ndarray:
        """The factors (a mask over them) holding a slot of `mask`."""
        out = np.zeros(self.factors, dtype=bool)
        out[self.factor[mask[self.slot]]] = True
        return out

    def sharing(self, factors: np.ndarray) -> np.ndarray:
        """The slots (a mask) lying in a factor of the mask `factors`."""
        out = np.zeros(self.slots, dtype=bool)
        out[self.slot[factors[self.factor]]] = True
        return out


def incidence(graph: FactorGraph) -> Incidence:
    """The graph's `Incidence`, cached with its trees."""
    if "incidence" not in graph.trees:
        scopes = [p.scope for p in graph.factors]
        slot = np.fromiter((v for scope in scopes for v in scope), dtype=np.int64)
        factor = np.repeat(np.arange(len(scopes)), [len(scope) for scope in scopes])
        present = np.unique(slot)
        graph.trees["incidence"] = Incidence(slot, factor, len(scopes), graph.slots, present)
    return graph.trees["incidence"]


def row_reads(matrix: np.ndarray, label: np.ndarray, known: frozenset[int]) -> list[set[int]]:
    """The components of the unknown tuples each row reads."""
    unknown = np.array([k not in known for k in range(matrix.shape[1])])
    return [set(label[:matrix.shape[1]][unknown & (row != 0)].tolist()) for row in matrix]


def coupled_rows(reads: list[set[int]], label: np.ndarray, target: int) -> list[int]:
    """The rows whose noisy answers are dependent on X_i given x_K: the closure of the target's component under
    "a row reads an unknown tuple of a coupled component, and every component it reads is coupled"."""
    coupled, rows = {int(label[target])}, set()
    while True:
        more = {r for r, comps in enumerate(reads) if r not in rows and comps & coupled}
        if not more:
            return sorted(rows)
        rows |= more
        coupled |= set().union(*(reads[r] for r in more))


def row_problems(problem: Problem, graph: FactorGraph) -> list[tuple[int | None, Problem]]:
    """The adversaries grouped by their coupled row, each group as a one-row problem (None: no row is coupled with
    the target, whose leakage is 0, solved as the zero row); Declined when a target is coupled with several
    (`--engine auto` moves on)."""
    matrix = row_matrix(problem)
    reads: dict[frozenset[int], list[set[int]]] = {}
    groups: dict[int | None, list[Adversary]] = {}
    for adv in problem.adversaries:
        label = components(graph, adv.known)
        if adv.known not in reads:
            reads[adv.known] = row_reads(matrix, label, adv.known)
        rows = coupled_rows(reads[adv.known], label, adv.target)
        if len(rows) > 1:
            raise Declined(f"rows {rows[0]} and {rows[1]} of the query both read tuples dependent on tuple "
                             f"{adv.target}: the structured engine solves a several-row release only when one row "
                             "does (use the sampling engine)")
        groups.setdefault(rows[0] if rows else None, []).append(adv)
    out = []
    for row, advs in groups.items():
        weights = matrix[row] if row is not None else np.zeros(matrix.shape[1])
        query = Linear("linear", tuple(float(w) for w in weights))
        out.append((row, Problem(problem.model, query, problem.mechanism, tuple(advs), problem.settings)))
    return out


def widened(y: tuple[float, ...] | None, row: int | None, rows: int) -> tuple[float, ...] | None:
    """The witness output of a one-row problem as the full release's: its value at `row`, 0 elsewhere (the other
    rows' factors cancel, so any value attains the same log-ratio)."""
    if y is None:
        return None
    return tuple(y[0] if c == row else 0.0 for c in range(rows))
