"""Log-space potentials that carry the partial sum of a linear query (DESIGN §2.1, issue 13).

A potential is a log-table over the values of its scope (slot ids) with one extra last axis:
the partial sum s = Σ w_k x_k of the tuples already summed out of it, from `offset` to
`offset + S - 1`. Multiplying two potentials adds their log-tables over the union scope and
convolves their sum axes; summing out a tuple shifts each of its values' slices by that value's
contribution w_k x_k before the logsumexp. Everything stays in log space, so a tail far below
1e-300 keeps its exact value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ddpbayes.numerics import logsumexp
from ddpbayes.limits import check_states


@dataclass(frozen=True)
class Potential:
    """exp(table)[v_0, ..., v_{m-1}, s - offset] over the scope's value indices and the partial sum s."""

    scope: tuple[int, ...]
    table: np.ndarray  # shape (*sizes of scope, S)
    offset: int

    @property
    def length(self) -> int:
        return self.table.shape[-1]


def align(p: Potential, scope: tuple[int, ...]) -> np.ndarray:
    """p's table with its axes in the order of `scope` (a superset), size-1 axes for the others."""
    if p.scope == scope[:len(p.scope)]:  # already in order: pad with size-1 axes
        return p.table.reshape(*p.table.shape[:-1], *([1] * (len(scope) - len(p.scope))), p.length)
    present = [v for v in scope if v in p.scope]
    table = np.transpose(p.table, [p.scope.index(v) for v in present] + [len(p.scope)])
    shape = [table.shape[present.index(v)] if v in p.scope else 1 for v in scope]
    return table.reshape(*shape, p.length)


def multiply(a: Potential, b: Potential, sizes: list[int], limit: int) -> Potential:
    """a·b: log-tables added over the union scope, sum axes convolved (lengths A + B - 1)."""
    scope = a.scope + tuple(v for v in b.scope if v not in a.scope)
    length = a.length + b.length - 1
    check_states(math.prod(sizes[v] for v in scope) * length, "a factor of the structured elimination",
                 "cells", limit, ", or use another engine: the model's treewidth or the query's range is too large")
    ta, tb = align(a, scope), align(b, scope)
    if a.length == 1 or b.length == 1:
        return Potential(scope, ta + tb, a.offset + b.offset)
    if a.length < b.length:
        ta, tb = tb, ta
    shape = np.broadcast_shapes(ta.shape[:-1], tb.shape[:-1])
    la, lb = _scaled(ta), _scaled(tb)
    if la is not None and lb is not None:  # one band each: linear space, scaled by the tables' maxima
        out = _linear_convolve(la[0], lb[0], shape, length)
        with np.errstate(divide="ignore"):
            return trim(Potential(scope, np.log(out) + (la[1] + lb[1]), a.offset + b.offset))
    if tb.shape[-1] <= _SHORT:
        out = np.full((*shape, length), -np.inf)
        wide = ta.shape[-1]
        for j in range(tb.shape[-1]):  # the shorter axis: O(A·B) logaddexps, vectorised over the scope
            out[..., j:j + wide] = np.logaddexp(out[..., j:j + wide], ta + tb[..., j:j + 1])
    else:
        rows_a = np.broadcast_to(ta, (*shape, ta.shape[-1])).reshape(-1, ta.shape[-1])
        rows_b = np.broadcast_to(tb, (*shape, tb.shape[-1])).reshape(-1, tb.shape[-1])
        out = np.stack([log_convolve(x, y) for x, y in zip(rows_a, rows_b)]).reshape(*shape, length)
    return trim(Potential(scope, out, a.offset + b.offset))


def _scaled(table: np.ndarray) -> tuple[np.ndarray, float] | None:
    """(exp(table - top), top) when every finite entry is within _BAND nats of the maximum `top`, else None:
    products of two such entries stay above e^-2·BAND > 1e-261 of their scale and sums of them never cancel,
    so linear arithmetic on them is as exact as log space (the -inf entries are exact zeros)."""
    top = table.max()
    if not np.isfinite(top):
        return None
    scaled = np.exp(table - top)
    if np.count_nonzero(scaled < _FLOOR) != np.count_nonzero(table == -np.inf):  # an entry below the band
        return None
    return scaled, float(top)


def _linear_convolve(a: np.ndarray, b: np.ndarray, shape: tuple[int, ...], length: int) -> np.ndarray:
    """The sum axes of linear tables a (the longer) and b convolved, broadcast over `shape`."""
    if b.shape[-1] <= _SHORT:
        out = np.zeros((*shape, length))
        wide = a.shape[-1]
        for j in range(b.shape[-1]):
            out[..., j:j + wide] += a * b[..., j:j + 1]
        return out
    rows_a = np.broadcast_to(a, (*shape, a.shape[-1])).reshape(-1, a.shape[-1])
    rows_b = np.broadcast_to(b, (*shape, b.shape[-1])).reshape(-1, b.shape[-1])
    return np.stack([np.convolve(x, y) for x, y in zip(rows_a, rows_b)]).reshape(*shape, length)


_SHORT = 8  # up to this many partial sums on the shorter side, convolve by shifted logaddexps
_BAND = 300.0  # nats: values within a band of their vector's scale keep e^-2·BAND > 1e-308 in products
_FLOOR = math.exp(-_BAND)


def log_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log Σ_j exp(a[j] + b[k - j]) for every k, exactly in log space at any dynamic range: each
    vector is cut into bands of width _BAND nats below its maximum, each band is convolved in
    linear space (np.convolve, scaled by the band's top) with each of the other's, and the
    results are added with logaddexp. Every product is a positive number above 1e-261 times
    its scale, so no tail underflows and there is no cancellation (relative error ~1e-15).
    Vectors within one band each (the usual case) take a single np.convolve."""
    top_a, top_b = a.max(), b.max()
    if top_a == -np.inf or top_b == -np.inf:
        return np.full(len(a) + len(b) - 1, -np.inf)
    if _within_band(a, top_a) and _within_band(b, top_b):
        with np.errstate(divide="ignore"):
            return np.log(np.convolve(np.exp(a - top_a), np.exp(b - top_b))) + (top_a + top_b)
    out = np.full(len(a) + len(b) - 1, -np.inf)
    bands_b = _bands(b)
    for start_a, top_a, va in _bands(a):
        for start_b, top_b, vb in bands_b:
            c = np.convolve(va, vb)
            with np.errstate(divide="ignore"):
                lc = np.log(c) + (top_a + top_b)
            at = slice(start_a + start_b, start_a + start_b + len(c))
            out[at] = np.logaddexp(out[at], lc)
    return out


def _within_band(v: np.ndarray, top: float) -> bool:
    """Are v's finite entries all within _BAND nats of its maximum `top` (-inf entries are zeros)?"""
    return bool(np.all((v >= top - _BAND) | (v == -np.inf)))


def _bands(v: np.ndarray) -> list[tuple[int, float, np.ndarray]]:
    """(first index, log scale, linear values in [e^-BAND, 1] or 0) for each band of v's finite entries."""
    finite = np.isfinite(v)
    if not finite.any():
        return []
    peak = float(v[finite].max())
    band = np.full(len(v), -1)
    band[finite] = ((peak - v[finite]) // _BAND).astype(int)
    out = []
    for j in np.unique(band[finite]):
        where = np.flatnonzero(band == j)
        first, last = int(where[0]), int(where[-1]) + 1
        top = peak - j * _BAND
        piece = np.exp(np.where(band[first:last] == j, v[first:last] - top, -np.inf))
        out.append((first, top, piece))
    return out


def sum_out(p: Potential, v: int, contribution: np.ndarray, limit: int) -> Potential:
    """Σ over the values of slot v, each value a adding contribution[a] (an integer) to s."""
    axis = p.scope.index(v)
    scope = p.scope[:axis] + p.scope[axis + 1:]
    if not np.any(contribution):
        return Potential(scope, logsumexp(p.table, axis), p.offset)
    low, high = int(contribution.min()), int(contribution.max())
    length = p.length + high - low
    rest = p.table.shape[:axis] + p.table.shape[axis + 1:-1]
    check_states(math.prod(rest) * length, "a factor of the structured elimination", "cells", limit,
                 ", or use another engine: the model's treewidth or the query's range is too large")
    scaled = _scaled(p.table)
    if scaled is not None:  # linear space: a sum of positive terms, each above e^-BAND of the scale
        out = np.zeros((*rest, length))
        for a, c in enumerate(contribution):
            start = int(c) - low
            out[..., start:start + p.length] += np.take(scaled[0], a, axis=axis)
        with np.errstate(divide="ignore"):
            return trim(Potential(scope, np.log(out) + scaled[1], p.offset + low))
    out = np.full((*rest, length), -np.inf)
    for a, c in enumerate(contribution):
        start = int(c) - low
        out[..., start:start + p.length] = np.logaddexp(out[..., start:start + p.length], np.take(p.table, a, axis=axis))
    return trim(Potential(scope, out, p.offset + low))


def clamp(p: Potential, v: int, index: int) -> Potential:
    """p restricted to slot v = its value number `index` (v leaves the scope)."""
    axis = p.scope.index(v)
    return Potential(p.scope[:axis] + p.scope[axis + 1:], np.take(p.table, index, axis=axis), p.offset)


def trim(p: Potential) -> Potential:
    """Drop the partial sums of probability zero at both ends of the sum axis."""
    if (p.table[..., 0] > -np.inf).any() and (p.table[..., -1] > -np.inf).any():  # the usual case: nothing to drop
        return p
    alive = np.flatnonzero(np.any(p.table > -np.inf, axis=tuple(range(p.table.ndim - 1))))
    if alive.size == 0 or (alive[0] == 0 and alive[-1] == p.length - 1):
        return p
    return Potential(p.scope, p.table[..., alive[0]:alive[-1] + 1], p.offset + int(alive[0]))
