"""A sound upper bound on an `expr:` query's sensitivity over continuous domains (DESIGN §1.1).

Interval arithmetic (inclusion functions: the interval an operation returns contains every value
it takes on its argument intervals) on a grid of cells covering the product of the domains: a
finite domain's values are one-point cells, a bounded interval is cut into m equal cells, an
unbounded one is one cell. For tuple k and every cell of x_{-k}, q(t, x_{-k}) lies, for every t,
in the hull over tuple k's cells of the cells' intervals, so

    sensitivity_k <= max over cells of x_{-k} of sum over outputs c of the hull's width.

The inclusion functions are `inclusion`'s; where they give the unknown box (nan, nan), the bound
is infinite, never an optimistic one.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence

import numpy as np

from ddpbayes.model.domains import Domain, Finite
from ddpbayes.queries.expression import names_in
from ddpbayes.queries.inclusion import Box, evaluate_box

CELLS = 1 << 16  # grid cells at most: m = the largest cut of the bounded intervals within it


def interval_sensitivities(trees: Sequence[ast.expr], columns: dict[str, list[int]],
                           domains: Sequence[Domain]) -> tuple[np.ndarray, int]:
    """Upper bounds on every tuple's sensitivity of the expressions `trees` (one or more outputs),
    `columns` naming each variable's tuples; and m, the cells per bounded interval."""
    cuts, m = _cells(domains)
    lo = np.stack(np.meshgrid(*[c[0] for c in cuts], indexing="ij"), axis=-1).reshape(-1, len(domains))
    hi = np.stack(np.meshgrid(*[c[1] for c in cuts], indexing="ij"), axis=-1).reshape(-1, len(domains))
    env = {name: (lo[:, cols], hi[:, cols]) for name, cols in columns.items()}
    owner = {k: name for name, cols in columns.items() for k in cols}
    sizes = [len(c[0]) for c in cuts]
    bounds = np.zeros(len(domains))
    for tree in trees:  # per expression, so one that does not name tuple k adds exactly 0
        qlo, qhi = _shape(evaluate_box(tree, env), len(lo))
        bad = np.isnan(qlo) | np.isnan(qhi)
        qlo, qhi = np.where(bad, -np.inf, qlo).reshape(*sizes, -1), np.where(bad, np.inf, qhi).reshape(*sizes, -1)
        named = set(names_in(tree))
        bounds += [float((qhi.max(axis=k) - qlo.min(axis=k)).sum(axis=-1).max()) if owner[k] in named else 0.0
                   for k in range(len(sizes))]
    return bounds, m


def _cells(domains: Sequence[Domain]) -> tuple[list[Box], int]:
    """Each domain's cells (lo, hi) and the cut m of its bounded intervals (finite domains whose
    product exceeds CELLS become their hulls)."""
    finite = math.prod(len(d.values) for d in domains if isinstance(d, Finite))
    exact_points = finite <= CELLS
    budget = CELLS // finite if exact_points else CELLS
    cut = [d for d in domains if not (isinstance(d, Finite) and exact_points) and math.isfinite(d.hi - d.lo)]
    m = max(1, int(budget ** (1 / len(cut)))) if cut else 1
    while cut and m > 1 and m ** len(cut) > budget:
        m -= 1
    out = []
    for d in domains:
        if isinstance(d, Finite) and exact_points:
            v = np.asarray(d.values)
            out.append((v, v))
        elif math.isfinite(d.hi - d.lo):
            edges = np.linspace(d.lo, d.hi, m + 1)
            out.append((edges[:-1], edges[1:]))
        else:
            out.append((np.array([d.lo]), np.array([d.hi])))
    return out, m


def _shape(box: Box, g: int) -> Box:
    lo, hi = (np.asarray(v, dtype=float) for v in box)
    width = lo.shape[-1] if lo.ndim == 2 else (hi.shape[-1] if hi.ndim == 2 else 1)
    return tuple(np.broadcast_to(v.reshape(-1, v.shape[-1]) if v.ndim == 2 else v, (g, width)) for v in (lo, hi))

