"""Every slot's law jointly with the query's partial sum, in two passes over an elimination tree.

Eliminating the unclamped slots in a min-fill order (`graph.elimination_order`) defines a
junction tree (Koller & Friedman, Probabilistic Graphical Models, §10.4): slot v's clique is v
with its neighbours when it is eliminated (its separator), and its parent is the first of those
neighbours to be eliminated (the next root, across an empty separator, when it has none: the
forest becomes one tree, so the partial sums of independent parts are convolved too). Each
factor sits in the clique of the first of its slots to be eliminated. The upward messages are
variable elimination's; a downward message into v sums its parent's clique down to v's
separator; the belief of v's clique summed down to v is log P(X_v = t, q_rest = s, x_K), where
q_rest is the partial sum of every other tuple. Each tuple's contribution is added exactly once,
where it is summed out, because the cliques holding a slot form a subtree (running
intersection). The potentials are polynomials in the partial sum (`potential`), so this is
the sum-product algorithm in that semiring: one upward pass and one downward path per target
give every target's law, instead of one elimination each.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from ddpbayes.engines.structured.potential import ONE, Potential, clamp, eliminate, extend, product


@dataclass(frozen=True)
class Tree:
    """The elimination tree of the slots left free by a clamped set."""

    order: list[int]
    separator: dict[int, tuple[int, ...]]  # v -> its neighbours when eliminated (the upward message's scope)
    parent: dict[int, int | None]
    children: dict[int, list[int]]


def elimination_tree(order: list[int], separators: dict[int, tuple[int, ...]]) -> Tree:
    position = {v: k for k, v in enumerate(order)}
    roots = [v for v in order if not separators[v]]
    next_root = dict(itertools.pairwise(roots))
    parent: dict[int, int | None] = {}
    children: dict[int, list[int]] = {v: [] for v in order}
    for v in order:
        sep = separators[v]
        parent[v] = min(sep, key=position.__getitem__) if sep else next_root.get(v)
        if parent[v] is not None:
            children[parent[v]].append(v)
    return Tree(order, separators, parent, children)


class Calibration:
    """The factors with slots `clamped` fixed, on `tree`: laws of single slots with the partial sum."""

    def __init__(self, tree: Tree, factors: list[Potential], sizes: list[int], contribution: list[np.ndarray],
                 clamped: Mapping[int, int], limit: int):
        self.tree, self.sizes, self.contribution, self.limit = tree, sizes, contribution, limit
        position = {v: k for k, v in enumerate(tree.order)}
        self.assigned: dict[int, list[Potential]] = {v: [] for v in tree.order}
        last = tree.order[-1]
        for p in factors:
            for v in p.scope:
                if v in clamped:
                    p = clamp(p, v, clamped[v])
            home = min(p.scope, key=position.__getitem__) if p.scope else last
            self.assigned[home].append(p)
        self.up: dict[int, Potential] = {}
        for v in tree.order:  # children are eliminated before their parent
            self.up[v] = self._eliminate(self.assigned[v] + [self.up[c] for c in tree.children[v]], v)
        self.down: dict[int, Potential] = {}
        self._siblings: dict[int, tuple[list[Potential], list[Potential]]] = {}

    def marginal(self, v: int) -> Potential:
        """log P(X_v = value, Σ_{k != v} w_k X_k = s, x_K) over (v, s). When a child's separator is v alone, its
        downward message is everything else summed down to v, so the marginal is that message times the
        child's upward one (and the message is then ready for the child's own marginal)."""
        kids = self.tree.children[v]
        if kids and self.tree.separator[kids[0]] == (v,):
            out = self._product([self._down(kids[0]), self.up[kids[0]]])
        else:
            pots = self._clique(v)
            out = self._contract(pots, tuple(dict.fromkeys(u for p in pots for u in p.scope if u != v)))
        if v not in out.scope:
            out = extend(out, v, self.sizes[v])
        return out

    def clique_belief(self, v: int) -> Potential:
        """log of v's clique's belief: its factors, the message from its parent and its children's (what
        `marginal` sums down to v)."""
        return self._product(self._clique(v))

    def _clique(self, v: int) -> list[Potential]:
        """The potentials of v's clique: its own factors, the message from its parent and its children's."""
        return self._base(v) + [self.up[c] for c in self.tree.children[v]]

    def marginals(self, slots: Iterable[int]) -> Iterator[tuple[int, Potential]]:
        """(v, marginal(v)) for every v of `slots`, depth-first from the root, releasing what nothing left
        needs: a slot's children's upward messages once its own law and its children's downward messages are
        built, a slot's downward message once its subtree is done. Memory: the upward messages not yet
        released and the downward ones along one path, not every message. The calibration is spent after."""
        wanted = set(slots)
        needed: set[int] = set()
        for v in self.tree.order:  # children before parents
            if v in wanted or any(c in needed for c in self.tree.children[v]):
                needed.add(v)
        stack = [self.tree.order[-1]]
        while stack:
            v = stack.pop()
            if v not in needed:
                continue
            if v in wanted:
                yield v, self.marginal(v)
            kids = [c for c in self.tree.children[v] if c in needed]
            for c in kids:
                self._down(c)
            for c in self.tree.children[v]:
                self.up.pop(c, None)
            self.down.pop(v, None)
            self._siblings.pop(v, None)
            stack.extend(reversed(kids))

    def completion(self) -> dict[int, int] | None:
        """Values (indices) of every free slot of positive joint probability with the clamped ones,
        or None when there is none: each slot, from the root down, takes the most probable value
        given the values already chosen for its separator (the upward messages guarantee that the
        rest of its subtree can follow: a traceback through the sum-product tables)."""
        chosen: dict[int, int] = {}
        for v in reversed(self.tree.order):
            inner = self._product(self.assigned[v] + [self.up[c] for c in self.tree.children[v]])
            for u in self.tree.separator[v]:
                if u in inner.scope:
                    inner = clamp(inner, u, chosen[u])
            if v not in inner.scope:
                inner = extend(inner, v, self.sizes[v])
            score = np.logaddexp.reduce(inner.table.reshape(self.sizes[v], -1), axis=1)
            if not np.isfinite(score.max()):
                return None
            chosen[v] = int(np.argmax(score))
        return chosen

    def log_total(self) -> float:
        """log Σ over every free slot of the product (the probability of the clamped values)."""
        root = self.tree.order[-1]
        total = self._eliminate([self.marginal(root)], root)
        return float(np.logaddexp.reduce(total.table.reshape(-1))) if total.table.size else -np.inf

    def _base(self, v: int) -> list[Potential]:
        """v's own factors and the message from its parent."""
        return self.assigned[v] + ([self._down(v)] if self.tree.parent[v] is not None else [])

    def _down(self, v: int) -> Potential:
        """The message from v's parent into v, over v's separator."""
        if v in self.down:
            return self.down[v]
        path = [v]
        while self.tree.parent[path[-1]] is not None and self.tree.parent[path[-1]] not in self.down:
            path.append(self.tree.parent[path[-1]])
        for u in reversed(path):
            if u in self.down or self.tree.parent[u] is None:
                continue
            p = self.tree.parent[u]
            drop = tuple(w for w in (p, *self.tree.separator[p]) if w not in self.tree.separator[u])
            self.down[u] = self._contract(self._base(p) + [self._all_but(p, u)], drop)
        return self.down[v]

    def _all_but(self, p: int, child: int) -> Potential:
        """The product of p's children's upward messages but `child`'s (prefix and suffix products)."""
        kids = self.tree.children[p]
        if p not in self._siblings:
            prefix, suffix = [ONE], [ONE]
            for c in kids:
                prefix.append(self._product([prefix[-1], self.up[c]]))
            for c in reversed(kids):
                suffix.append(self._product([suffix[-1], self.up[c]]))
            self._siblings[p] = (prefix, suffix[::-1])
        prefix, suffix = self._siblings[p]
        k = kids.index(child)
        return self._product([prefix[k], suffix[k + 1]])

    def _product(self, pots: list[Potential]) -> Potential:
        return product(pots, self.sizes, self.limit)

    def _contract(self, pots: list[Potential], drop: tuple[int, ...]) -> Potential:
        """Σ over the slots `drop` of Π pots, each slot summed out of the product of only the potentials
        that hold it (sums pushed inside the product: shifting the sum axis commutes with convolving
        it), cheapest first, so long partial-sum axes are convolved after the short ones are reduced."""
        pots = [p for p in pots if p is not ONE]
        left = list(drop)
        while left:
            u = min(left, key=lambda w: sum(p.table.size for p in pots if w in p.scope))
            left.remove(u)
            pots = [p for p in pots if u not in p.scope] + [self._eliminate([p for p in pots if u in p.scope], u)]
        return self._product(pots)

    def _eliminate(self, pots: list[Potential], v: int) -> Potential:
        return eliminate(pots, v, self.contribution[v], self.sizes, self.limit)
