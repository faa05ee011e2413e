"""Dependence sets from one calibration: P(X_j | X_i) for every pair, carried along the junction tree (DESIGN §2.1b).

N(i) = {j : P(X_j | X_i = t) changes with t} (`numerics.law_changes`, tolerance 1e-10). One calibration
without the partial sum gives every clique's belief; the tree's cliques, read from X_i's outward, give
P(C | X_i = t) from P(S | X_i = t) on the separator S to the previous clique and P(C | S) from C's belief,
since C's side of the tree is independent of X_i given X_S (running intersection and the global Markov
property of the factorised law, which needs no positivity). The walk stops at a separator whose law moves
with t by at most `STOP` in total variation: by data processing every X_j beyond it moves by at most that
much, and max_v |P(X_j = v | t) - P(X_j = v | t')| <= TV <= 2 · STOP, half the tolerance, so those j are
outside N(i) exactly as the numeric check would find them. On the default chain the walk from each day
covers the ~47 days on each side, not the year. A chain (the factor graph one path) takes the same walk for
every day at once, one batched matrix product a day each way (`_chain_sets`).
"""

from __future__ import annotations

import numpy as np

from ddpbayes.engines.structured.graph import FactorGraph, calibrate
from ddpbayes.engines.structured.junction import Calibration
from ddpbayes.engines.structured.pathsum import Path, path_of
from ddpbayes.engines.structured.potential import Potential
from ddpbayes.errors import InputError
from ddpbayes.numerics import INDEPENDENT, laws_change, logsumexp
from ddpbayes.problem import DependenceSets

STOP = INDEPENDENT / 4  # TV from the first possible t's law: pairs of t differ by at most twice that


def dependence_sets(graph: FactorGraph, n: int, limit: int) -> DependenceSets:
    """N(i) for the tuples 0..n-1: d-connected (`separation`) and changing beyond the tolerance, each computed
    when first read (one calibration, at the first; then one walk per tuple read: ddp of one child of 2,035
    walks once, not 2,035 times). A chain's sets all come from one batched walk at the first read (`_chain_sets`)."""
    path = path_of(graph)
    if path is not None and len(path.order) == graph.slots:
        every: dict[str, list[frozenset[int]]] = {}

        def on_chain(i: int) -> frozenset[int]:
            if "sets" not in every:
                every["sets"] = _chain_sets(path, n)
            return every["sets"][i]

        return DependenceSets(n, on_chain)
    state: dict[str, _Cliques] = {}

    def one(i: int) -> frozenset[int]:
        near = sorted(j for j in graph.directed.reachable(i) if j < n)
        if not near:
            return frozenset()
        if "cliques" not in state:
            calibration = calibrate(graph, [np.zeros(s, dtype=np.int64) for s in graph.sizes], {}, limit)
            state["cliques"] = _Cliques(calibration, graph.sizes)
        log_pi, laws = state["cliques"].laws_given(i, n)
        return frozenset(_changing(log_pi, [j for j in near if j in laws], laws))

    return DependenceSets(n, one)


def _chain_sets(path: Path, n: int) -> list[frozenset[int]]:
    """N(i) of every tuple of a path (`pathsum.Path`, every slot on it) in one batched walk each way: the laws
    P(X_j | X_i = t) = P(X_{j-1} | X_i = t) P(X_j | X_{j-1}) (the Markov property of a path) for every i at
    once, one matrix product a day, each i stopped as the walk above stops it (TV at most STOP). On a path
    every pair is d-connected unless a link is independent, which leaves its rows equal up to rounding, far
    below the tolerance, so the numeric test alone decides."""
    log_alpha, log_beta = _messages(path)
    log_pi = [a + b for a, b in zip(log_alpha, log_beta)]
    if not np.isfinite(log_pi[0]).any():
        raise InputError("every configuration of the model has probability zero (its observed data or "
                         "potentials cannot all hold): no dependence sets")
    width = max(len(u) for u in path.unary)
    pi = np.zeros((len(path.order), width))
    for k, lp in enumerate(log_pi):
        with np.errstate(invalid="ignore"):
            pi[k, :len(lp)] = np.exp(lp - lp.max())
    ahead, back = (np.zeros((max(len(path.pair), 1), width, width)) for _ in range(2))
    for k, pair in enumerate(path.pair):
        a, b = pair.shape  # P(X_{k+1} | X_k) and P(X_k | X_{k+1}), rows the given value
        ahead[k, :a, :b] = _conditional(pair + (path.unary[k + 1] + log_beta[k + 1])[None, :], (1,))
        back[k, :b, :a] = _conditional((log_alpha[k][:, None] + pair).T, (1,))
    right = _one_way(ahead, pi)
    left = _one_way(back[::-1], pi[::-1])
    last = len(path.order) - 1
    sets: list[frozenset[int]] = [frozenset()] * n
    for k, v in enumerate(path.order):
        if v < n:
            near = [path.order[j] for j in right[k]] + [path.order[last - j] for j in left[last - k]]
            sets[v] = frozenset(j for j in near if j < n)
    return sets


def _messages(path: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """log α_k(x) (the factors up to k, X_k = x) and log β_k(x) (the factors after k given X_k = x) along the path,
    each normalised to its maximum (log space: no tail underflows)."""
    alpha = [path.unary[0] - _top(path.unary[0])]
    for k, pair in enumerate(path.pair):
        nxt = logsumexp(alpha[-1][:, None] + pair, axis=0) + path.unary[k + 1]
        alpha.append(nxt - _top(nxt))
    beta = [np.zeros(len(path.unary[-1]))]
    for k in range(len(path.pair) - 1, -1, -1):
        nxt = logsumexp(path.pair[k] + (path.unary[k + 1] + beta[-1])[None, :], axis=1)
        beta.append(nxt - _top(nxt))
    return alpha, beta[::-1]


def _top(log_table: np.ndarray) -> float:
    top = log_table.max()
    return float(top) if np.isfinite(top) else 0.0


def _one_way(steps: np.ndarray, pi: np.ndarray) -> list[list[int]]:
    """For every position i, the positions i + d (d >= 1) whose law given X_i changes (`numerics.laws_change`
    on P(X_i = t) P(X_{i+d} = v | X_i = t)), walking while the law moves with t by more than STOP in total
    variation. steps[k]: P(X_{k+1} | X_k) (rows the given value, zero-padded); pi (positions, values): P(X_k)
    up to a constant per position."""
    m = len(pi)
    possible = pi > 0
    first = np.argmax(possible, axis=1)
    laws = possible[:, :, None] * np.eye(pi.shape[1])[None]  # P(X_i | X_i = t) for the possible t
    out: list[list[int]] = [[] for _ in range(m)]
    active, d = np.arange(m - 1), 0
    while active.size:
        d += 1
        moved = laws[active] @ steps[active + d - 1]
        laws[active] = moved
        for i in active[laws_change(pi[active][:, :, None] * moved)].tolist():
            out[i].append(i + d)
        gap = 0.5 * np.abs(moved - moved[np.arange(len(active)), first[active]][:, None, :]).sum(axis=2)
        tv = np.where(possible[active], gap, 0.0).max(axis=1)
        active = active[(tv > STOP) & (active + d + 1 < m)]
    return out


def _changing(log_pi: np.ndarray, reached: list[int], laws: dict[int, np.ndarray]) -> list[int]:
    """The j whose law changes by the exact engine's test (`numerics.laws_change`) on log P(X_i = t, X_j = v)
    = log P(X_i = t) + log P(X_j = v | X_i = t), the tables of equal shape stacked."""
    out = []
    for size in {laws[j].shape[1] for j in reached}:
        group = [j for j in reached if laws[j].shape[1] == size]
        with np.errstate(divide="ignore"):
            tables = log_pi[None, :, None] + np.log(np.stack([laws[j] for j in group]))
        top = tables.reshape(len(group), -1).max(axis=1)
        out += [j for j, moves in zip(group, laws_change(np.exp(tables - top[:, None, None]))) if moves]
    return out


class _Cliques:
    """Each slot v's clique (v, *separator) as a log-table, and the walk across the tree's separators."""

    def __init__(self, calibration: Calibration, sizes: list[int]):
        tree = calibration.tree
        self.tree, self.sizes = tree, sizes
        self.scope = {v: (v, *tree.separator[v]) for v in tree.order}
        self.belief = {v: _aligned(calibration.clique_belief(v), self.scope[v], sizes) for v in tree.order}
        self.down = {v: _conditional(self.belief[v], (0,)) for v in tree.order}  # P(X_v | v's separator)
        self.up: dict[int, np.ndarray] = {}  # v -> P(parent's clique | v's separator), when first needed

    def laws_given(self, i: int, n: int) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """log P(X_i = t) (up to a constant) and P(X_j = . | X_i = t) (rows: t, zero where P(X_i = t) = 0) for
        every tuple j the walk from X_i's clique reaches."""
        belief = self.belief[i]
        log_pi = logsumexp(belief.reshape(belief.shape[0], -1), axis=1)
        possible = np.flatnonzero(np.isfinite(log_pi))
        if not possible.size:
            raise InputError("every configuration of the model has probability zero (its observed data or "
                             "potentials cannot all hold): no dependence sets")
        start = np.zeros((possible.size, *belief.shape))
        start[np.arange(possible.size), possible] = _conditional(belief, tuple(range(1, belief.ndim)))[possible]
        laws: dict[int, np.ndarray] = {}
        stack = [(i, start, None)]
        while stack:
            v, dist, came = stack.pop()
            for j in self.scope[v]:
                if j < n and j != i and j not in laws:
                    law = np.zeros((belief.shape[0], self.sizes[j]))
                    law[possible] = _sum_to(dist, self.scope[v], (j,))
                    laws[j] = law
            parent = self.tree.parent[v]
            for w in [*self.tree.children[v], *([] if parent is None else [parent])]:
                if w != came and (moved := self._move(v, w, dist)) is not None:
                    stack.append((w, moved, v))
        return log_pi, laws

    def _move(self, v: int, w: int, dist: np.ndarray) -> np.ndarray | None:
        """P(w's clique | X_i = t) from P(v's clique | X_i = t), or None when the separator's law moves with t
        by at most STOP in total variation (nothing beyond it is in N(i))."""
        child = w if self.tree.parent[w] == v else v
        separator = self.tree.separator[child]
        if not separator:  # independent parts of the model
            return None
        on_separator = _sum_to(dist, self.scope[v], separator)
        flat = on_separator.reshape(on_separator.shape[0], -1)
        if 0.5 * np.abs(flat - flat[0]).sum(axis=1).max() <= STOP:
            return None
        if w == child:  # into the child: P(X_w | separator) · P(separator | t)
            return self.down[w][None] * on_separator[:, None]
        if child not in self.up:
            self.up[child] = _conditional(self.belief[w], tuple(a for a, u in enumerate(self.scope[w])
                                                                if u not in separator))
        return self.up[child][None] * _spread(on_separator, separator, self.scope[w])


def _aligned(pot: Potential, scope: tuple[int, ...], sizes: list[int]) -> np.ndarray:
    """The log-table of a potential without partial sum, axes in the order of `scope` (constant along
    the slots of `scope` it does not depend on)."""
    table = logsumexp(pot.table, axis=pot.table.ndim - 1)
    present = [u for u in scope if u in pot.scope]
    table = np.transpose(table, [pot.scope.index(u) for u in present])
    shape = [sizes[u] if u in pot.scope else 1 for u in scope]
    return np.ascontiguousarray(np.broadcast_to(table.reshape(shape), [sizes[u] for u in scope]))


def _conditional(log_table: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """exp(log_table) normalised over `axes` (the law of those axes given the others; 0 where the others
    have probability zero)."""
    norm = np.expand_dims(logsumexp(log_table, axis=axes), axes)
    with np.errstate(invalid="ignore"):
        out = np.exp(log_table - norm)
    return np.where(np.isfinite(norm), out, 0.0)


def _sum_to(dist: np.ndarray, scope: tuple[int, ...], target: tuple[int, ...]) -> np.ndarray:
    """dist (rows, *scope) summed down to (rows, *target), target a subset of scope."""
    kept = sorted(target, key=scope.index)
    summed = dist.sum(axis=tuple(1 + a for a, u in enumerate(scope) if u not in target))
    return np.transpose(summed, [0, *(1 + kept.index(u) for u in target)])


def _spread(on: np.ndarray, separator: tuple[int, ...], scope: tuple[int, ...]) -> np.ndarray:
    """on (rows, *separator) with size-1 axes for scope's other slots, axes in scope's order."""
    inside = [u for u in scope if u in separator]
    table = np.transpose(on, [0, *(1 + separator.index(u) for u in inside)])
    return table.reshape(on.shape[0], *[on.shape[1 + separator.index(u)] if u in separator else 1 for u in scope])
