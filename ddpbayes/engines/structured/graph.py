"""The model as a factor graph and variable elimination with a partial-sum axis (issue 13).

The factors are the exact engine's per-term log-tables (DESIGN §2.1: one term per variable,
tabulated over its (value, parents) slots in float64, tuples first then latents). Clamped slots
are selected, the kept slots stay in scope, every other slot is summed out in a greedy min-fill
order on the interaction graph, each tuple slot k adding w_k · value to the partial sum.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from pytensor.graph.traversal import ancestors

from ddpbayes.engines.exact.joint import _factors, enumerable_slots
from ddpbayes.engines.structured.potential import Potential, align, clamp, multiply, sum_out
from ddpbayes.limits import check_states
from ddpbayes.model import DependenceModel


@dataclass(frozen=True)
class FactorGraph:
    """The model's factors over its slots (tuples 0..n-1, then latent elements)."""

    sizes: list[int]
    values: list[np.ndarray]
    factors: list[Potential]
    orders: dict = field(default_factory=dict)  # elimination orders per (clamped slots, kept slots)

    @property
    def slots(self) -> int:
        return len(self.sizes)


def factor_graph(model: DependenceModel, limit: int) -> FactorGraph:
    """The factors of `model`, each table checked against `limit` before it is built (cached)."""
    return model.memo("structured", ("factor_graph", limit), lambda: _build(model, limit))


def _build(model: DependenceModel, limit: int) -> FactorGraph:
    slots = enumerable_slots(model, "structured")
    sizes = [len(s.values) for s in slots]
    for scope in _scopes(model, slots):
        check_states(math.prod(sizes[k] for k in scope), "a term's table (a variable and its parents)", "cells",
                     limit, ", or use another engine")
    factors = [Potential(tuple(ids), table.reshape(*[sizes[k] for k in ids], 1), 0)
               for ids, table in _factors(model, slots)]
    return FactorGraph(sizes, [s.values for s in slots], factors)


def _scopes(model: DependenceModel, slots) -> list[list[int]]:
    """The slots each log-probability term reads (a variable's own and its parents', a potential's
    inputs), read from the random-variable graph: cheaper than building the terms twice."""
    pm_model = model.model
    slots_of: dict = {}
    for k, s in enumerate(slots):
        slots_of.setdefault(s.rv, []).append(k)
    free = list(slots_of)
    scopes = []
    for var in [*pm_model.free_RVs, *pm_model.observed_RVs, *pm_model.potentials]:
        inputs = var.owner.inputs if var in slots_of or var in pm_model.observed_RVs else [var]
        reached = [v for v in ancestors(inputs, blockers=free) if v in slots_of]
        scopes.append(slots_of.get(var, []) + [k for v in reached for k in slots_of[v]])
    return scopes


def eliminate(graph: FactorGraph, contribution: list[np.ndarray], clamped: Mapping[int, int],
              keep: tuple[int, ...], limit: int) -> Potential:
    """Σ over every slot neither clamped nor kept of Π factors, with the partial sum of the summed
    tuples' contributions as the last axis: a potential over `keep` (in that order)."""
    pots = []
    for p in graph.factors:
        for v in p.scope:
            if v in clamped:
                p = clamp(p, v, clamped[v])
        pots.append(p)
    key = (frozenset(clamped), keep)
    if key not in graph.orders:
        drop = [v for v in range(graph.slots) if v not in clamped and v not in keep]
        graph.orders[key] = elimination_order([p.scope for p in pots], drop)
    for v in graph.orders[key]:
        touching = [p for p in pots if v in p.scope]
        pots = [p for p in pots if v not in p.scope]
        pots.append(sum_out(_product(touching, graph.sizes, limit), v, contribution[v], limit))
    result = _product(pots, graph.sizes, limit)
    return Potential(keep, align(result, keep), result.offset)


def _product(pots: list[Potential], sizes: list[int], limit: int) -> Potential:
    """Π pots, smallest tables first (an empty product is the constant 1)."""
    out = Potential((), np.zeros(1), 0)
    for p in sorted(pots, key=lambda p: p.table.size):
        out = multiply(out, p, sizes, limit)
    return out


def elimination_order(scopes: list[tuple[int, ...]], drop: list[int]) -> list[int]:
    """A greedy min-fill order (ties: fewest neighbours, then lowest slot) of the slots `drop`."""
    nbrs: dict[int, set[int]] = {}
    for scope in scopes:
        for v in scope:
            nbrs.setdefault(v, set()).update(u for u in scope if u != v)
    left = set(drop)
    order = []
    while left:
        v = min(left, key=lambda u: (_fill(u, nbrs), len(nbrs.get(u, ())), u))
        near = nbrs.pop(v, set())
        for u in near:
            nbrs[u] |= near - {u}
            nbrs[u].discard(v)
        left.remove(v)
        order.append(v)
    return order


def _fill(v: int, nbrs: dict[int, set[int]]) -> int:
    """Edges that eliminating v would add between its neighbours."""
    near = list(nbrs.get(v, ()))
    return sum(1 for a in range(len(near)) for b in near[a + 1:] if b not in nbrs[near[a]])
