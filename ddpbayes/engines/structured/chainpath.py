"""One side of a chain's continual release: Cao's L^B (or L^F) interval recursion (DESIGN §2.1c).

A message holds three rows over the two values of a tuple, in log space: the ratio-minimising end
(LO), the ratio-maximising end (HI) and the noiseless message (PRIOR). One day maps a message
through the pairwise potential ψ; the map of ratios is a monotone Möbius map, so the new ends come
from old ends, and which ones (the choice) is kept for the witness. Messages are six Python floats
and each day is scalar arithmetic with numpy's own logaddexp formula, so the values are those of
the array form bit for bit, at a fraction of its per-call cost. A one-valued tuple is padded with
an impossible (-inf) second value.

A witness's y is the outputs that put the message at a position on a given end: the choices traced
back from there. Each choice maps the two ends at k to ends at k - 1 by the identity, a swap, or a
constant; so the end at every earlier position is one of two parity patterns, or, below a constant
choice, fixed. `Path.trace` returns those outputs as slices of lists built once per path.
"""

from __future__ import annotations

import math

import numpy as np

LO, HI, PRIOR = 0, 1, 2  # rows of a message
_LOG2 = math.log(2.0)


class Side:
    """The chain read in one direction: position k holds slot order[k]."""

    def __init__(self, order: list[int], own: np.ndarray, edges: np.ndarray, outputs: list[tuple[float, float]]):
        self.order = order
        self.own = own  # (n, 3, 2): log u_k plus log K at the LO and HI outputs; log u_k alone (PRIOR)
        self.edges = edges  # (n - 1, 2, 2): log ψ between positions k and k + 1
        self.outputs = outputs  # the LO and HI outputs of every position
        self.own_rows = own.reshape(len(order), 6).tolist()
        self.edge_rows = edges.reshape(len(edges), 4).tolist()
        self.same = _same_days(own, edges)

    def reversed(self) -> Side:
        return Side(self.order[::-1], self.own[::-1], self.edges[::-1].transpose(0, 2, 1), self.outputs[::-1])


class Path:
    """One side's messages at positions base..stop (list index k - base): from the side's first
    position (base 0, its own factors in `start`), or a bridge from a known tuple at `base`
    pinned to a value (`start` one-hot, `pinned`: its output does not matter)."""

    def __init__(self, side: Side, base: int, stop: int, start: list[float], pinned: bool):
        self.side, self.base = side, base
        self.first = base + 1 if pinned else base  # the first position whose output a trace writes
        self.messages, self.choices = _sweep(side, start, base, stop)
        self._tables: tuple | None = None

    def trace(self, p: int, end: int, backwards: bool = False) -> tuple[float, ...]:
        """The outputs of positions first..p-1 (this side's order; `backwards`: reversed) that put
        the message at p on its `end` row (LO or HI): with E_p = end and E_{k-1} = choice_k(E_k),
        position k's output is outputs[k][E_k]."""
        parity, last, tables = self._trace_tables()
        o, lo = p - self.base, self.first - self.base
        fixed = last[o]  # below the last constant choice at or under p, the ends are fixed
        start = max(fixed, lo)
        free, settled = tables[backwards][0 if end == parity[o] else 1], tables[backwards][2]
        if not backwards:
            return settled[lo:fixed] + free[start:o]
        top, bottom = len(free), len(settled)
        return free[top - o:top - start] + settled[bottom - fixed:bottom - lo]

    def _trace_tables(self) -> tuple:
        """parity[o]: the number of swaps among the choices at base+1..base+o, mod 2 (so between two
        positions with no constant choice between them, E_k = E_p ^ parity[p] ^ parity[k]); last[o]:
        the last constant choice at or under base+o (0: none); then every position's output on the
        end parity[o], on the opposite end, and below a constant choice (fixed by it), as tuples in
        this side's order and reversed."""
        if self._tables is None:
            choices = np.array(self.choices, dtype=int).reshape(-1, 2)
            const = np.concatenate([[False], choices[:, 0] == choices[:, 1]])
            swap = np.concatenate([[0], (choices[:, 0] == 1) & (choices[:, 1] == 0)])
            parity = np.cumsum(swap) & 1
            at = np.arange(len(parity))
            last = np.maximum.accumulate(np.where(const, at, 0))
            outputs = np.empty((len(parity), 2), dtype=object)
            outputs[:] = self.side.outputs[self.base:self.base + len(parity)]
            marks = np.flatnonzero(const)
            below = at[:marks[-1]] if len(marks) else at[:0]
            mark = marks[np.searchsorted(marks, below, side="right")]  # the nearest constant choice above
            fixed_end = choices[mark - 1, 0] ^ parity[mark - 1] ^ parity[below]
            lists = [outputs[at, parity].tolist(), outputs[at, 1 - parity].tolist(),
                     outputs[below, fixed_end].tolist()]
            self._tables = (parity.tolist(), last.tolist(),
                            ([tuple(x) for x in lists], [tuple(x[::-1]) for x in lists]))
        return self._tables


def _same_days(own: np.ndarray, edges: np.ndarray) -> list[bool]:
    """same[k]: position k's own factors and the edge from it to k + 1 are bit for bit those of position k - 1
    (False at 0), for the positions an edge leaves (0..n-2)."""
    n = len(own)
    own_bits = np.ascontiguousarray(own).view(np.int64).reshape(n, 6)
    edge_bits = np.ascontiguousarray(edges).view(np.int64).reshape(len(edges), 4)
    equal_own = (own_bits[1:] == own_bits[:-1]).all(axis=1)[:max(n - 2, 0)]
    return [False, *(equal_own & (edge_bits[1:] == edge_bits[:-1]).all(axis=1)).tolist()][:max(n - 1, 0)]


def _sweep(side: Side, inclusive: list[float], base: int, stop: int) -> tuple[list, list[tuple[int, int]]]:
    """The messages at positions base..stop (zeros at base) from everything on this side from `base`
    on (`inclusive`: the message at `base` with its own factors), and the choices at base+1..stop.

    A chain whose days repeat settles: once a message equals the one `period` days before (1: a fixed point,
    2: a last bit alternating), a day whose own factors and edge are those of the `period` days before
    (`Side.same`) maps the same inclusive message through the same edge, so its message and choice are those of
    `period` days before, bit for bit, and are not computed again. Equal messages are equal bit for bit: their
    entries are differences of `_lae` values, never -0.0, and NaN equals nothing."""
    messages: list = [(0.0,) * 6]
    choices: list = []
    own, edges, same = side.own_rows, side.edge_rows, side.same
    period = 0  # the last message equals the one `period` positions before it, both from this side's days
    for k in range(base, stop):
        if k > base:
            if period and same[k] and (period == 1 or same[k - 1]):
                messages.append(messages[-period])
                choices.append(choices[-period])
                continue
            m, o = messages[-1], own[k]
            inclusive = [m[0] + o[0], m[1] + o[1], m[2] + o[2], m[3] + o[3], m[4] + o[4], m[5] + o[5]]
        message = _step(inclusive, edges[k])
        head = message[:6]
        period = 1 if k > base and head == messages[-1] else 2 if k > base + 1 and head == messages[-2] else 0
        messages.append(head)
        choices.append(message[6])
    return messages, choices


def _step(inclusive: list[float], edge: list[float]) -> tuple:
    """One day of Cao's L^B (or L^F): the message through ψ, g'(x') = Σ_x g(x) ψ(x, x'), each row
    normalised to its maximum (numpy's max: the first on ties, NaN propagates), then which old
    ends (LO or HI) gave the new LO and HI ends: the first on ties, as numpy's argmin and argmax
    (NaN first) choose."""
    a0, a1, b0, b1, c0, c1 = inclusive
    e00, e01, e10, e11 = edge
    lo0, lo1 = _lae(a0 + e00, a1 + e10), _lae(a0 + e01, a1 + e11)
    hi0, hi1 = _lae(b0 + e00, b1 + e10), _lae(b0 + e01, b1 + e11)
    p0, p1 = _lae(c0 + e00, c1 + e10), _lae(c0 + e01, c1 + e11)
    r_lo, r_hi = lo1 - lo0, hi1 - hi0
    if r_lo != r_lo:
        down = up = 0
    elif r_hi != r_hi:
        down = up = 1
    else:
        down, up = (0 if r_lo <= r_hi else 1), (0 if r_lo >= r_hi else 1)
    top = p0 if (p0 >= p1 or p0 != p0) else p1
    low0, low1 = (lo0, lo1) if down == 0 else (hi0, hi1)
    high0, high1 = (lo0, lo1) if up == 0 else (hi0, hi1)
    low = low0 if (low0 >= low1 or low0 != low0) else low1
    high = high0 if (high0 >= high1 or high0 != high0) else high1
    return low0 - low, low1 - low, high0 - high, high1 - high, p0 - top, p1 - top, (down, up)


def _lae(x: float, y: float) -> float:
    """log(e^x + e^y) by numpy's npy_logaddexp formula, so the result is np.logaddexp's bit for bit."""
    if x == y:
        return x + _LOG2
    tmp = x - y
    if tmp > 0:
        return x + math.log1p(math.exp(-tmp))
    if tmp <= 0:
        return y + math.log1p(math.exp(tmp))
    return tmp
