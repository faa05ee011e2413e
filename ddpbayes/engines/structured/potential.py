"""Log-space potentials that carry the partial sum of a linear query (DESIGN §2.1, issue 13).

A potential is a log-table over the values of its scope (slot ids) with one extra last axis:
the partial sum s = Σ w_k x_k of the tuples already summed out of it, from `offset` to
`offset + S - 1`. Multiplying two potentials adds their log-tables over the union scope and
convolves their sum axes; summing out a tuple shifts each of its values' slices by that value's
contribution w_k x_k before the sum. Tables are stored in log space, so a tail far below 1e-300
keeps its exact value; the arithmetic runs in linear space scaled by a table's maximum where its
span allows it exactly (`_span`, issue #29), run by run or by logaddexps where it does not.
"""

from __future__ import annotations

import itertools
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
    _check_cells(math.prod(sizes[v] for v in scope) * length, limit)
    ta, tb = align(a, scope), align(b, scope)
    if a.length == 1 or b.length == 1:
        return Potential(scope, ta + tb, a.offset + b.offset)
    if a.length < b.length:
        ta, tb = tb, ta
    shape = np.broadcast_shapes(ta.shape[:-1], tb.shape[:-1])
    top_a, top_b = ta.max(), tb.max()
    if _span(ta, top_a) + _span(tb, top_b) <= _RANGE:  # linear space, scaled by the tables' maxima
        out = _linear_convolve(np.exp(ta - top_a), np.exp(tb - top_b), shape, length)
        with np.errstate(divide="ignore"):
            return trim(Potential(scope, np.log(out) + (top_a + top_b), a.offset + b.offset))
    if tb.shape[-1] <= max(_SHORT, math.prod(shape)):  # fewer shifts than rows (a quadrature slot's 256 nodes)
        out = np.full((*shape, length), -np.inf)
        wide = ta.shape[-1]
        for j in range(tb.shape[-1]):  # the shorter axis: O(A·B) logaddexps, vectorised over the scope
            out[..., j:j + wide] = np.logaddexp(out[..., j:j + wide], ta + tb[..., j:j + 1])
    else:
        rows_a = np.broadcast_to(ta, (*shape, ta.shape[-1])).reshape(-1, ta.shape[-1])
        rows_b = np.broadcast_to(tb, (*shape, tb.shape[-1])).reshape(-1, tb.shape[-1])
        out = np.stack([log_convolve(x, y) for x, y in zip(rows_a, rows_b)]).reshape(*shape, length)
    return trim(Potential(scope, out, a.offset + b.offset))


def _check_cells(cells: int, limit: int) -> None:
    """Refuse a table of `cells` cells above `limit`, before it is built."""
    check_states(cells, "a factor of the structured elimination", "cells", limit,
                 ", or use another engine: the model's treewidth or the query's range is too large")


def _span(table: np.ndarray, top: float) -> float:
    """Nats from the maximum `top` down to the smallest finite entry (inf when every entry is -inf): linear
    arithmetic scaled by `top` is as exact as log space when the spans of a product's factors add up to at most
    _RANGE, since every product then stays above e^-RANGE > 1e-261 of its scale and sums of positive terms never
    cancel (the -inf entries are exact zeros)."""
    if top == -np.inf:
        return math.inf
    low = table.min()
    if low == -np.inf:  # zeros: the smallest finite entry
        low = np.min(np.where(table > -np.inf, table, top))
    return float(top - low)


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
_RANGE = 600.0  # nats: the spans a linear product may add up to (e^-600 > 1e-261)


def log_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log Σ_j exp(a[j] + b[k - j]) for every k, exactly in log space at any dynamic range: each vector is cut
    into contiguous segments spanning at most _RANGE / 2 nats (`_segments`), each segment is convolved in linear
    space (np.convolve, scaled by its top) with each of the other's, and the results are added with logaddexp.
    Every product is a positive number above e^-RANGE of its scale, so no tail underflows and there is no
    cancellation (relative error ~1e-15); as the segments partition the vectors, the multiplications are those
    of one convolution. Vectors whose spans add up to at most _RANGE take a single np.convolve. Pairs go from the
    largest tops down, and a pair is skipped when the sums it touches already exceed its bound (its entries are
    at most 1 times its tops, so each of its sums is at most e^(top_a + top_b) times the shorter run's length) by
    NEGLIGIBLE nats: each skipped pair moves a sum by less than e^-50 of it, so m skipped pairs by less than
    m e^-50 (2e-22 m; 1e-13 for 5 x 10^8 pairs). Spans adding up to at most 2 _EXP - log(shorter length) need no
    runs: one np.convolve with the two vectors scaled apart (`_wide_scales`)."""
    top_a, top_b = a.max(), b.max()
    if top_a == -np.inf or top_b == -np.inf:
        return np.full(len(a) + len(b) - 1, -np.inf)
    span_a, span_b = _span(a, top_a), _span(b, top_b)
    if span_a + span_b <= _RANGE:
        with np.errstate(divide="ignore"):
            return np.log(np.convolve(np.exp(a - top_a), np.exp(b - top_b))) + (top_a + top_b)
    wide = _wide_scales(span_a, span_b, min(len(a), len(b)))
    if wide is not None:
        low_a, low_b = top_a - wide[0], top_b - wide[1]
        with np.errstate(divide="ignore"):
            return np.log(np.convolve(np.exp(a - low_a), np.exp(b - low_b))) + (low_a + low_b)
    out = np.full(len(a) + len(b) - 1, -np.inf)
    pieces_b = _segments(b)
    pairs = sorted(((pa, pb) for pa in _segments(a) for pb in pieces_b), key=lambda p: -(p[0][1] + p[1][1]))
    for (start_a, top_a, va), (start_b, top_b, vb) in pairs:
        at = slice(start_a + start_b, start_a + start_b + len(va) + len(vb) - 1)
        if out[at].min() > top_a + top_b + math.log(min(len(va), len(vb))) + NEGLIGIBLE:
            continue  # below e^-NEGLIGIBLE of every sum it would add to
        c = np.convolve(va, vb)
        with np.errstate(divide="ignore"):
            lc = np.log(c) + (top_a + top_b)
        out[at] = np.logaddexp(out[at], lc)
    return out


NEGLIGIBLE = 50.0  # nats: a run pair whose largest possible term lies this far below every sum it touches is skipped
_EXP = 700.0  # nats: the largest exponent, either way, of an entry, product or sum of a widely scaled convolution


def _wide_scales(span_a: float, span_b: float, terms: int) -> tuple[float, float] | None:
    """Exponents e_a, e_b for the maxima of two vectors spanning span_a and span_b nats, convolved in linear space
    with at most `terms` products a sum, such that every positive entry, product and sum is a normal double within
    e^±_EXP (1e±304): e_a + e_b = _EXP - log(terms) (so a sum is at most e^_EXP), e_a - span_a and e_b - span_b at
    least -_EXP (an entry) and so is their sum (the smallest product); None when the spans add up to more than
    2 _EXP - log(terms). Sums of positive terms then never cancel nor underflow: as exact as log space."""
    room = _EXP - math.log(terms)
    if span_a + span_b > room + _EXP:
        return None
    low, high = max(span_a - _EXP, room - _EXP), min(_EXP, room + _EXP - span_b)
    e_a = min(max((room + span_a - span_b) / 2, low), high)  # both smallest entries equally far from e^-_EXP
    return e_a, room - e_a


def _segments(v: np.ndarray) -> list[tuple[int, float, np.ndarray]]:
    """(first index, log scale, linear values in [e^-RANGE/2, 1] or 0) for pieces of v whose finite entries lie in
    one band of _RANGE / 2 nats below v's maximum: the contiguous runs of a band (-inf entries join the run they
    fall in), or, when the bands alternate more than `_RUNS` times, each band's whole extent with the other
    bands' entries zeroed."""
    finite = v > -np.inf
    peak = float(v[finite].max())
    band = np.full(len(v), -1)
    band[finite] = ((peak - v[finite]) // (_RANGE / 2)).astype(int)
    filled = band[np.maximum.accumulate(np.where(finite, np.arange(len(v)), 0))]  # -inf: the band before it
    cuts = np.flatnonzero(np.diff(filled)) + 1
    if len(cuts) < _RUNS:
        bounds = itertools.pairwise([0, *cuts.tolist(), len(v)])
        pieces = [(first, last, None) for first, last in bounds]
    else:
        pieces = []
        for j in np.unique(band[finite]):
            where = np.flatnonzero(band == j)
            pieces.append((int(where[0]), int(where[-1]) + 1, j))
    out = []
    for first, last, j in pieces:
        piece = v[first:last] if j is None else np.where(band[first:last] == j, v[first:last], -np.inf)
        top = float(piece.max())
        if top > -np.inf:
            out.append((first, top, np.exp(piece - top)))
    return out


_RUNS = 64  # runs of one band beyond which a band is convolved whole


def sum_out(p: Potential, v: int, contribution: np.ndarray, limit: int) -> Potential:
    """Σ over the values of slot v, each value a adding contribution[a] (an integer) to s."""
    axis = p.scope.index(v)
    scope = p.scope[:axis] + p.scope[axis + 1:]
    if not np.any(contribution):
        return Potential(scope, logsumexp(p.table, axis), p.offset)
    low, high = int(contribution.min()), int(contribution.max())
    length = p.length + high - low
    rest = p.table.shape[:axis] + p.table.shape[axis + 1:-1]
    _check_cells(math.prod(rest) * length, limit)
    top = p.table.max()
    if _span(p.table, top) <= _RANGE:  # linear space: sums of positive terms above e^-RANGE of the scale
        out = np.zeros((*rest, length))
        scaled = np.exp(p.table - top)
        for a, c in enumerate(contribution):
            start = int(c) - low
            out[..., start:start + p.length] += np.take(scaled, a, axis=axis)
        with np.errstate(divide="ignore"):
            return trim(Potential(scope, np.log(out) + top, p.offset + low))
    out = np.full((*rest, length), -np.inf)
    for a, c in enumerate(contribution):
        start = int(c) - low
        out[..., start:start + p.length] = np.logaddexp(out[..., start:start + p.length], np.take(p.table, a, axis=axis))
    return trim(Potential(scope, out, p.offset + low))


def weighted_sum_out(factor: Potential, p: Potential, v: int, contribution: np.ndarray, sizes: list[int],
                     limit: int) -> Potential:
    """`sum_out(multiply(factor, p), v, ...)` (v in their scopes) for a factor with one partial sum (length 1: none,
    or a sum fixed at its offset, as a message across deterministic zeros can be), in linear space when their spans
    add up to at most _RANGE: each table exponentiated once, not their product (a chain's day: a k x k transition
    table times a k x S message, k·S exponentials instead of k·k·S)."""
    scope = p.scope + tuple(u for u in factor.scope if u not in p.scope)
    tf, tp = align(factor, scope), align(p, scope)
    top_f, top_p = tf.max(), tp.max()
    if _span(tf, top_f) + _span(tp, top_p) > _RANGE:
        return sum_out(multiply(factor, p, sizes, limit), v, contribution, limit)
    axis = scope.index(v)
    kept = scope[:axis] + scope[axis + 1:]
    low, high = int(contribution.min()), int(contribution.max())
    length = p.length + high - low
    _check_cells(math.prod(sizes[u] for u in kept) * length, limit)
    ef, ep = np.exp(tf - top_f), np.exp(tp - top_p)
    out = np.zeros((*(sizes[u] for u in kept), length))
    for a, c in enumerate(contribution):
        start = int(c) - low
        out[..., start:start + p.length] += _at(ef, a, axis) * _at(ep, a, axis)
    with np.errstate(divide="ignore"):
        return trim(Potential(kept, np.log(out) + (top_f + top_p), factor.offset + p.offset + low))


def _at(table: np.ndarray, a: int, axis: int) -> np.ndarray:
    """The slice at index a of `axis`, an aligned table's size-1 axis (a slot it does not depend on) at 0."""
    return np.take(table, a if table.shape[axis] > 1 else 0, axis=axis)


ONE = Potential((), np.zeros(1), 0)  # the constant 1: an empty product


def product(pots: list[Potential], sizes: list[int], limit: int) -> Potential:
    """Π pots, smallest tables first; the constant 1 (`ONE`) is skipped."""
    pots = sorted((p for p in pots if p is not ONE), key=lambda p: p.table.size)
    if not pots:
        return ONE
    out = pots[0]
    for p in pots[1:]:
        out = multiply(out, p, sizes, limit)
    return out


def eliminate(pots: list[Potential], v: int, contribution: np.ndarray, sizes: list[int], limit: int) -> Potential:
    """Σ over slot v of Π pots (v's value a adding contribution[a] to s); the factors without partial sums
    folded into the sum when one potential alone carries them (`weighted_sum_out`)."""
    short = [p for p in pots if p.length == 1 and p is not ONE]
    long = [p for p in pots if p.length > 1]
    if short and len(long) == 1 and any(v in p.scope for p in pots):
        return weighted_sum_out(product(short, sizes, limit), long[0], v, contribution, sizes, limit)
    pot = product(pots, sizes, limit)
    return sum_out(pot if v in pot.scope else extend(pot, v, sizes[v]), v, contribution, limit)


def extend(p: Potential, v: int, size: int) -> Potential:
    """p as a function of one more slot v that it does not depend on."""
    table = np.broadcast_to(p.table[..., None, :], (*p.table.shape[:-1], size, p.length))
    return Potential((*p.scope, v), np.ascontiguousarray(table), p.offset)


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
