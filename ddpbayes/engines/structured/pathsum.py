"""A chain's laws with the partial sum by forward–backward in scaled linear space (DESIGN §2.1b).

When the factors (no quadrature rule, none carrying a partial sum) are unary or pairwise and the
pairs join the slots into one path x_0 - x_1 - ... - x_{n-1}, the law of X_i with the partial sum
of the others is the product of two messages that the junction tree also computes, but each day is
one k x k matrix product on a (k, S) array, as in hand-written numpy:

    F_{k+1}(x', s) = Σ_x u_k(x) ψ_k(x, x') F_k(x, s - c_k(x)),       F_0 = δ(s = 0),
    B_k(x, s)      = Σ_x' ψ_k(x, x') u_{k+1}(x') B_{k+1}(x', s - c_{k+1}(x')),   B_{n-1} = δ(s = 0),
    P(X_i = t, Σ_{k≠i} c_k(X_k) = s) ∝ u_i(t) Σ_j F_i(t, j) B_i(t, s - j).

Each message is held in linear space scaled to its maximum, its log scale apart (divided by it every few
days only, while bounds on how far the maximum moved stay within DRIFT: `_run`). A day is taken
only under the 600-nat rule of `potential` (the spans of u_k ψ_k and of the message add up to at
most _RANGE, so every product stays above e^-600 of its scale and sums of positive terms never
cancel: as exact as log space); a message whose span passes it is held scaled column by column (one
log scale per partial sum), where only the spread within a column counts. The convolution of the two
messages follows the same rule, else it is in log space (`log_convolve`). The forward messages of many
targets are kept in blocks recomputed from checkpoints. A day whose own span or column spread passes
the rule, a graph that is not a path, or a block over `CELLS` give None: the junction tree answers.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ddpbayes.engines.structured.graph import FactorGraph
from ddpbayes.engines.structured.memo import BoundedMemo, array_key, vectors_key
from ddpbayes.engines.structured.potential import _RANGE, Potential, log_convolve
from ddpbayes.model.domains import distinct

CELLS = 1 << 23  # cells of forward messages kept at once (64 MiB): past half, in blocks (`_blocks`); past it, None
STEP_CELLS = CELLS // 8  # cells of the laws and messages a path's `_Steps` keeps (8 MiB)


@dataclass(frozen=True)
class Path:
    """The slots along the path, the log unary table of each position (0 where none) and the log pairwise
    table between positions k and k + 1, oriented (x_k, x_{k+1}); `constant`: the empty scopes' log sum.
    `forward[k]`, `backward[k]`: the day k -> k + 1 and k + 1 -> k as `_Day`s (built once per graph, equal days
    one object); `steps`: `path_table`'s laws and messages, shared by every stretch cut from the path."""

    order: list[int]
    unary: list[np.ndarray]
    pair: list[np.ndarray]
    constant: float
    forward: list[_Day]
    backward: list[_Day]
    steps: _Steps = field(default_factory=lambda: _Steps(), compare=False, repr=False)


class _Day(NamedTuple):
    """A day's table g (out value, in value) = exp(log g - top) in linear space, the span of log g (nats
    from its maximum to its smallest finite entry), and `floor` = -log min_x max_x' g(x', x) (inf when a column
    is all zero): how far a message's maximum can fall in a day (`_run`). A named tuple: thousands are made per
    chain and per sweep, where a frozen dataclass's setattrs cost a microsecond each."""

    linear: np.ndarray
    top: float
    span: float
    floor: float


class _Message(NamedTuple):
    """exp(scale) * table[b, x, s - offset], table's maximum 1; `span` at least the nats from 1 down to its
    smallest positive entry (an upper bound, made exact when the rule needs it). With `columns` (a message whose
    sums spread past the rule), exp(scale + columns[s - offset]) * table[b, x, s - offset], each column's
    maximum 1 (or all 0, its column scale -inf): `span` then bounds the spread within a column only."""

    table: np.ndarray
    scale: float
    offset: int
    span: float
    columns: np.ndarray | None = None


def path_of(graph: FactorGraph) -> Path | None:
    """The graph as a path of unary and pairwise factors without partial sums, or None; cached with its trees."""
    if "path" not in graph.trees:
        stacked = graph.trees.get("stacked path")  # a chain read off the model's constants (`graph._scalar_chain`)
        graph.trees["path"] = _path(graph) if stacked is None else _one_size(list(range(graph.slots)), *stacked, 0.0)
    return graph.trees["path"]


def _path(graph: FactorGraph) -> Path | None:
    if graph.rules or any(p.length != 1 or p.offset != 0 or len(set(p.scope)) != len(p.scope) or len(p.scope) > 2
                           for p in graph.factors):
        return None
    order = _walk(graph)
    if order is None:
        return None
    at = np.zeros(graph.slots, dtype=np.int64)
    at[order] = np.arange(len(order))
    constant = float(sum(p.table[..., 0] for p in graph.factors if not p.scope))
    sizes = {graph.sizes[v] for v in order}
    unary, pair = (_stacked if len(sizes) == 1 else _listed)(graph, order, at)
    if len(sizes) == 1:
        return _one_size(order, unary, pair, constant)
    forward = [_days((u[:, None] + p).T[None])[0] for u, p in zip(unary, pair)]
    backward = [_days((p + u[None, :])[None])[0] for u, p in zip(unary[1:], pair)]
    return Path(order, unary, pair, constant, forward, backward)


def _one_size(order: list[int], unary: np.ndarray, pair: np.ndarray, constant: float) -> Path:
    """The path of slots that all take k values from its stacked tables (`_stacked`): every day's table in one
    NumPy call."""
    forward = _days((unary[:-1, :, None] + pair).transpose(0, 2, 1))
    backward = _days(pair + unary[1:, None, :])
    return Path(order, list(unary), list(pair), constant, forward, backward)


def _walk(graph: FactorGraph) -> list[int] | None:
    """The slots in path order from one end, or None when the pairwise factors do not join them into one path."""
    slots = sorted({v for p in graph.factors for v in p.scope})
    nbrs: dict[int, set[int]] = {v: set() for v in slots}
    for p in graph.factors:
        if len(p.scope) == 2:
            a, b = p.scope
            nbrs[a].add(b)
            nbrs[b].add(a)
    ends = [v for v in slots if len(nbrs[v]) <= 1]
    if not slots or any(len(s) > 2 for s in nbrs.values()) or not ends:
        return None
    order = [ends[0]]
    while len(order) < len(slots) and (step := nbrs[order[-1]] - set(order[-2:])):
        order.append(step.pop())
    return order if len(order) == len(slots) else None  # else several parts, or a cycle


def _stacked(graph: FactorGraph, order: list[int], at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The log unary tables (positions, k) and pairwise tables (positions - 1, k, k) oriented (x_k, x_{k+1}) of
    a path whose slots all take k values, each factor added where it lies."""
    k = graph.sizes[order[0]]
    unary, pair = np.zeros((len(order), k)), np.zeros((len(order) - 1, k, k))
    ones = [p for p in graph.factors if len(p.scope) == 1]
    twos = [p for p in graph.factors if len(p.scope) == 2]
    if ones:
        np.add.at(unary, at[[p.scope[0] for p in ones]], np.stack([p.table[:, 0] for p in ones]))
    if twos:
        ends = at[np.array([p.scope for p in twos])]
        tables = np.stack([p.table[..., 0] for p in twos])
        flip = ends[:, 0] > ends[:, 1]
        tables[flip] = tables[flip].transpose(0, 2, 1)
        np.add.at(pair, ends.min(axis=1), tables)
    return unary, pair


def _listed(graph: FactorGraph, order: list[int], at: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """`_stacked` for slots of different sizes: one table per position."""
    unary = [np.zeros(graph.sizes[v]) for v in order]
    pair = [np.zeros((graph.sizes[a], graph.sizes[b])) for a, b in zip(order, order[1:])]
    for p in graph.factors:
        table = p.table[..., 0]
        if len(p.scope) == 1:
            unary[at[p.scope[0]]] = unary[at[p.scope[0]]] + table
        elif len(p.scope) == 2:
            a, b = (int(at[v]) for v in p.scope)
            pair[min(a, b)] = pair[min(a, b)] + (table if a < b else table.T)
    return unary, pair


def _days(stacked: np.ndarray) -> list[_Day]:
    """Each log table of `stacked` (days, out, in) as a `_Day`, in one NumPy call per step."""
    if not len(stacked):
        return []
    top = stacked.max(axis=(1, 2))
    low = np.where(stacked > -np.inf, stacked, np.inf).min(axis=(1, 2))
    with np.errstate(invalid="ignore", under="ignore"):
        linear = np.exp(stacked - top[:, None, None])
    with np.errstate(divide="ignore"):
        floor = -np.log(linear.max(axis=1).min(axis=1))
    first, which = _distinct(stacked)  # equal log tables give equal days, bit for bit: one object each (`_Steps`)
    made = [_Day(linear[j], t, t - lo if t > -np.inf else np.inf, f)
            for j, t, lo, f in zip(first.tolist(), top[first].tolist(), low[first].tolist(), floor[first].tolist())]
    return [made[j] for j in which.tolist()]


def _distinct(stacked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first index of each distinct table of `stacked` (equal bytes: -0.0 is not 0.0) and each table's
    distinct one, in one sort of the tables' bytes (a chain's thousand days, no Python per day); a single table
    (`_path`'s days of slots of different sizes, one call each) without the sort."""
    if len(stacked) == 1:
        return np.zeros(1, dtype=np.intp), np.zeros(1, dtype=np.intp)
    rows = np.ascontiguousarray(stacked).reshape(len(stacked), -1)
    raw = rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize)))[:, 0]
    _, first, which = np.unique(raw, return_index=True, return_inverse=True)
    return first, which.reshape(-1)


def path_laws(path: Path, contribution: list[np.ndarray], targets: list[int]) -> list[tuple[int, Potential]] | None:
    """log P(X_v = t, Σ_{k≠v} c_k(X_k) = s) over (v, s) for every v of `targets` (slots of the path), up to one
    constant; None when a day or the kept messages fall outside the rule above."""
    at = {v: k for k, v in enumerate(path.order)}
    if any(v not in at for v in targets):
        return None
    positions = sorted({at[v] for v in targets})
    blocks = _blocks(path, contribution, positions)
    checkpoints = _forward(path, contribution, [block[0] for block in blocks], _start(path, 0, False))
    if checkpoints is None:
        return None
    starts = [block[0] for block in blocks]
    laws, forward = {}, {}
    for k, back in _backward(path, contribution, positions, _start(path, -1, False)):
        if k not in forward:  # the backward sweep entered a block: its forward messages from its checkpoint
            b = bisect.bisect_right(starts, k) - 1
            forward = _forward(path, contribution, blocks[b], checkpoints.pop(starts[b]), starts[b])
            if forward is None:
                return None
        table, offset = _law(path.unary[k], forward.pop(k), back)
        laws[path.order[k]] = Potential((path.order[k],), table[:, 0, 0] + path.constant, offset)
    if len(laws) < len(positions):
        return None
    return [(v, laws[v]) for v in targets]


def _blocks(path: Path, contribution: list[np.ndarray], positions: list[int]) -> list[list[int]]:
    """The target positions in consecutive blocks whose forward messages are kept at once: one block when all of
    them fit CELLS / 2 (their sums' widths bounded by the contributions' ranges), else about √(positions) blocks,
    each started again from the forward message kept at its first position (a checkpoint): one more forward
    pass, and √ of the cells (5,000 days' every target: 2 x 10^5 cells a block, not 2.5 x 10^7)."""
    k = max(len(u) for u in path.unary)
    arrays, which = distinct([contribution[v] for v in path.order])  # a chain's days share a few
    width = np.concatenate([[1], 1 + np.cumsum(np.array([int(c.max() - c.min()) for c in arrays])[which])])
    if k * int(width[positions].sum()) <= CELLS // 2:
        return [positions]
    size = math.isqrt(len(positions) - 1) + 1
    return [positions[j:j + size] for j in range(0, len(positions), size)]


def path_table(path: Path, contribution: list[np.ndarray], target: int,
               kept: list[int]) -> tuple[np.ndarray, int] | None:
    """`eliminate.target_table` on a path whose `kept` slots are its ends: log P(X_target, X_kept..., Σ c_k(X_k) =
    offset + s) over the other slots, up to a constant, as a table with axes (target, *kept, s), and the offset
    (the kept slots' contributions not added); None when a kept slot is not an end, or past the rule. Each end's
    values ride along as a batch axis of the messages (a ddp adversary's two boundary days)."""
    at = {v: k for k, v in enumerate(path.order)}
    last = len(path.order) - 1
    if target not in at or any(v not in at or v == target or at[v] not in (0, last) for v in kept):
        return None
    ends = {at[v] for v in kept}
    moving = list(contribution)
    for v in kept:
        moving[v] = np.zeros_like(moving[v])
    found = path.steps.table(path, moving, at[target], 0 in ends, last in ends)
    if found is None:
        return None
    table, offset = found  # (target, left end, right end, s)
    table = table + path.constant
    sides = [v for v in (path.order[0], path.order[-1]) if at[v] in ends and v in kept]
    if len(sides) == 1 and at[sides[0]] == last:
        table = table[:, 0]
    elif len(sides) == 1:
        table = table[:, :, 0]
    elif not sides:
        table = table[:, 0, 0]
    axes = [0, *(1 + sides.index(v) for v in kept), len(sides) + 1]
    return np.transpose(table, axes), offset


def _start(path: Path, end: int, batched: bool) -> _Message:
    """The message at an end: δ(s = 0) for every value, with that end's values as the batch axis (one-hot) when
    `batched`, else one batch."""
    return _started(len(path.unary[end]), batched)


def _started(k: int, batched: bool) -> _Message:
    """`_start`'s message for an end of k values."""
    table = np.eye(k)[:, :, None] if batched else np.ones((1, k, 1))
    return _Message(table, 0.0, 0, 0.0)


class _Steps:
    """`path_table`'s laws and the messages stepped to them, remembered by the identities of the days (equal days
    are one object, `_days`) and the values of the contributions: a chain's ddp adversaries walk stretches of one
    path (`path_within`, which shares this with every stretch) from the same start messages over the same days
    (on a chain whose days are equal, every known set away from the ends the same stretch), so each step and
    each law is computed once, the same arrays bit for bit. An entry holds the objects whose ids key it; the
    memo holds at most STEP_CELLS cells (`memo.BoundedMemo`)."""

    def __init__(self) -> None:
        self.memo = BoundedMemo(STEP_CELLS, _cells)

    def table(self, path: Path, contribution: list[np.ndarray], p: int, left: bool,
              right: bool) -> tuple[np.ndarray, int] | None:
        """log u_p(t) + log Σ_j F_p(a, t, j) B_p(b, t, s - j) over (t, a, b, s) and its offset (`_law`), the ends'
        values as batches a, b where `left`, `right` (else one batch); None past the rule."""
        days = (*path.forward, *path.backward)
        sums = [contribution[v] for v in path.order]
        key = ("table", p, left, right, tuple(map(id, days)), vectors_key(sums), array_key(path.unary[p]))
        return self.memo.remember(key, lambda: self._law(path, contribution, p, left, right), days)

    def _law(self, path: Path, contribution: list[np.ndarray], p: int, left: bool,
             right: bool) -> tuple[np.ndarray, int] | None:
        forward = _forward(path, contribution, [p], self._start(len(path.unary[0]), left), step=self._step)
        back = next((m for _, m in _backward(path, contribution, [p], self._start(len(path.unary[-1]), right),
                                             step=self._step)), None)
        return None if forward is None or back is None else _law(path.unary[p], forward[p], back)

    def _start(self, k: int, batched: bool) -> _Message:
        """`_start`'s message of an end of k values, one object per (k, batched)."""
        return self.memo.remember(("start", k, batched), lambda: _started(k, batched))

    def _step(self, day: _Day, message: _Message, contribution: np.ndarray) -> _Message | None:
        """`_step`, taken once per day, message and contributions."""
        key = (id(day), id(message), array_key(contribution))
        return self.memo.remember(key, lambda: _step(day, message, contribution), (day, message))


def _cells(key: tuple, value: _Message | tuple[np.ndarray, int] | None) -> int:
    """The cells a `_Steps` entry holds: a message's table, a law's (None: 0)."""
    return value.table.size if isinstance(value, _Message) else value[0].size if value is not None else 0


def _forward(path: Path, contribution: list[np.ndarray], positions: list[int], message: _Message,
             first: int = 0, step=None) -> dict[int, _Message] | None:
    """F at each of `positions` (sorted, from `first`) from `message` at position `first`, or None (a day past
    the rule, or the kept messages over CELLS). `step`: a `_Steps`'s (one day at a time), else `_run`."""
    kept, cells, k = {}, 0, first
    for p in positions:
        message = _along(path.forward[k:p], [contribution[v] for v in path.order[k:p]], message, step)
        if message is None:
            return None
        kept[p], k = message, p
        cells += message.table.size
        if cells > CELLS:
            return None
    return kept


def _backward(path: Path, contribution: list[np.ndarray], positions: list[int],
              message: _Message, step=None) -> Iterator[tuple[int, _Message]]:
    """(k, B_k) for each of `positions`, from the last down, from `message` at the last position; stops early
    (the caller sees fewer) past the rule. `step`: a `_Steps`'s (one day at a time), else `_run`."""
    k = len(path.order) - 1
    for p in sorted(positions, reverse=True):
        message = _along(path.backward[p:k][::-1], [contribution[v] for v in path.order[k:p:-1]], message, step)
        if message is None:
            return
        yield p, message
        k = p


def _along(days: list[_Day], sums: list[np.ndarray], message: _Message, step) -> _Message | None:
    """The message after `days` (each with its contributions): `step` day by day, or `_run`."""
    if step is None:
        return _run(days, sums, message)
    for day, contribution in zip(days, sums):
        message = step(day, message, contribution)
        if message is None:
            return None
    return message


DRIFT = 64.0  # nats a held message's maximum may move from 1 between rescalings (`_run`)


def _run(days: list[_Day], sums: list[np.ndarray], message: _Message) -> _Message | None:
    """`_step` over each day in turn, the message rescaled only when needed. A single batch held without column
    scales and within the rule takes a day as the shifted product alone, unscaled: its maximum M then moves by at
    most log k up (g's entries are at most 1, k terms) and the day's `floor` down (M sits at some (x, s), and the
    product at (x', s + c(x)) is at least g(x', x) M), and the table is divided by its maximum before either bound
    passes DRIFT and at the end. Every positive entry stays above e^-(_RANGE + DRIFT) = 1e-289 of the scale (a
    normal float: as exact as `_step`, one division by the maximum every few days instead of every day; the
    products are `_step`'s, in the same order). Any other day: `_step`. None past the rule or when nothing is
    left possible."""
    held, up, down = None, 0.0, 0.0  # the unscaled 2-D table and the bounds on its maximum's moves (nats)
    scale, offset, span = message.scale, message.offset, message.span
    for day, contribution in zip(days, sums):
        if held is None and (message.columns is not None or len(message.table) != 1):
            plain = False
        else:
            table = message.table[0] if held is None else held
            plain = span + day.span <= _RANGE
        if not plain:
            if held is not None:
                message, held = _settled(held, scale, offset, span), None
                if message is None:
                    return None
            message = _step(day, message, contribution)
            if message is None:
                return None
            scale, offset, span = message.scale, message.offset, message.span
            continue
        grow = math.log(len(table))
        if held is not None and (up + grow > DRIFT or down + day.floor > DRIFT):
            log_peak = _to_peak(held)
            if log_peak is None:
                return None
            scale, up, down = scale + log_peak, 0.0, 0.0  # `table` is `held`, divided in place
        shifted, low = _shifted(table, contribution)
        held = day.linear @ shifted
        scale, offset, span = scale + day.top, offset + low, span + day.span + grow
        up, down = up + grow, down + day.floor
    return message if held is None else _settled(held, scale, offset, span)


def _settled(held: np.ndarray, scale: float, offset: int, span: float) -> _Message | None:
    """A held table (`_run`) divided by its maximum as a message; None when it is all zero."""
    log_peak = _to_peak(held)
    return None if log_peak is None else _Message(held[None], scale + log_peak, offset, span)


def _to_peak(table: np.ndarray) -> float | None:
    """The table divided by its maximum, in place, and the maximum's log; None when the table is all zero (nothing
    left possible)."""
    peak = table.max()
    if not peak > 0:
        return None
    table /= peak
    return math.log(peak)


def _step(day: _Day, message: _Message, contribution: np.ndarray) -> _Message | None:
    """Σ_x g(x', x) m(b, x, s - c(x)) over (b, x', s); None when the spans of g and m add up to more than _RANGE
    (or nothing is left possible). The message's span bound grows by at most g's span and log(values) a day
    (every positive entry is at least a product of positive entries, the maximum at most `values` products of
    maxima); it is measured again only when the bound passes the rule. A message whose span passes it even then
    is held scaled column by column (`_by_columns`), where only the spread within a column counts."""
    if day.span > _RANGE:
        return None
    m, span = message.table, message.span
    if message.columns is None and span + day.span > _RANGE:
        span = _exact_span(m)
        if span + day.span > _RANGE:
            message = _by_columns(message)
    if message.columns is not None:
        return _column_step(day, message, contribution)
    k = m.shape[1]
    if len(m) == 1:  # the same products on 2-D arrays: NumPy's calls cost a third less
        shifted, low = _shifted(m[0], contribution)
        out = (day.linear @ shifted)[None]
    else:
        shifted, low = _shifted(m, contribution)
        out = day.linear @ shifted
    log_peak = _to_peak(out)
    if log_peak is None:
        return None
    return _Message(out, message.scale + day.top + log_peak, message.offset + low, span + day.span + math.log(k))


def _shifted(m: np.ndarray, contribution: np.ndarray) -> tuple[np.ndarray, int]:
    """m (..., x, s) with value x's row moved to the sums s + c(x) - low, zeros elsewhere, and low = min c (a few
    values: Python's min and max are cheaper than NumPy's)."""
    values = contribution.tolist()
    low, length = min(values), m.shape[-1]
    shifted = np.zeros((*m.shape[:-1], length + max(values) - low))
    for x, c in enumerate(values):
        shifted[..., x, c - low:c - low + length] = m[..., x, :]
    return shifted, low


def _by_columns(message: _Message) -> _Message:
    """The message with each sum's column scaled to its maximum (its log apart, in `columns`)."""
    top = message.table.max(axis=(0, 1))
    with np.errstate(divide="ignore"):
        columns = np.log(top)
    table = message.table / np.where(top > 0, top, 1.0)
    return _Message(table, message.scale, message.offset, _exact_span(table), columns)


def _column_step(day: _Day, message: _Message, contribution: np.ndarray) -> _Message | None:
    """`_step` on a message scaled column by column: value x's slice moves to the sums s + c(x), rescaled from
    its column's scale to the largest scale landing on that column (their ratio is e^(at most the law's slope
    times the shift), so no column's entries leave the rule), one matrix product, each column scaled to its
    maximum again. None when a column's spread and g's pass the rule."""
    m, columns = message.table, message.columns
    span = _exact_span(m)
    if span + day.span > _RANGE:
        return None
    values = contribution.tolist()
    low = min(values)
    batch, k, length = m.shape
    width = length + max(values) - low
    landing = np.full((k, width), -np.inf)
    for x, c in enumerate(values):
        landing[x, c - low:c - low + length] = columns
    target = landing.max(axis=0)
    with np.errstate(invalid="ignore"):
        factor = np.exp(landing - np.where(np.isfinite(target), target, 0.0))  # <= 1; 0 where nothing lands
    shifted = np.zeros((batch, k, width))
    for x, c in enumerate(values):
        shifted[:, x, c - low:c - low + length] = m[:, x] * factor[x, c - low:c - low + length]
    out = day.linear @ shifted
    top = out.max(axis=(0, 1))
    if not top.max() > 0:
        return None
    with np.errstate(divide="ignore"):
        scales = target + np.log(top)
    out /= np.where(top > 0, top, 1.0)
    return _Message(out, message.scale + day.top, message.offset + low, span + day.span + math.log(k), scales)


def _exact_span(table: np.ndarray) -> float:
    """Nats from 1 (the table's maximum) down to its smallest positive entry."""
    return -math.log(table.min(where=table > 0, initial=1.0))


def _law(unary: np.ndarray, forward: _Message, backward: _Message) -> tuple[np.ndarray, int]:
    """log u(t) + log Σ_j F(a, t, j) B(b, t, s - j) over (t, a, b, s) (a, b: the batches): linear when the
    messages' spans add up to at most _RANGE, else in log space (a message scaled by columns: its column scales
    added to the logs)."""
    f, b = forward.table, backward.table
    scale = forward.scale + backward.scale
    pairs = [(t, i, j) for t in range(f.shape[1]) for i in range(len(f)) for j in range(len(b))]
    plain = forward.columns is None and backward.columns is None
    with np.errstate(divide="ignore"):
        if plain and (forward.span + backward.span <= _RANGE or _exact_span(f) + _exact_span(b) <= _RANGE):
            rows = [np.log(np.convolve(f[i, t], b[j, t])) for t, i, j in pairs]
        else:
            cf = 0.0 if forward.columns is None else forward.columns
            cb = 0.0 if backward.columns is None else backward.columns
            rows = [log_convolve(np.log(f[i, t]) + cf, np.log(b[j, t]) + cb) for t, i, j in pairs]
    table = np.stack(rows).reshape(f.shape[1], len(f), len(b), -1)
    return table + (unary[:, None, None, None] + scale), forward.offset + backward.offset


def path_within(whole: FactorGraph, part: FactorGraph) -> Path | None:
    """`path_of(part)` cut from `whole`'s path when `part`'s factors are exactly `whole`'s factors whose slots lie
    on one stretch of it, in `whole`'s order (a ddp adversary's days between its two boundary days, `engine._local`):
    its tables and days are then those of the stretch, bit for bit (sums over the same factors in the same order,
    each day computed on its own), so every known set of a chain reuses the days built once; else `path_of(part)`."""
    if "path" not in part.trees:
        part.trees["path"] = _stretch(whole, part)
    return path_of(part)


def _stretch(whole: FactorGraph, part: FactorGraph) -> Path | None:
    path, spans = path_of(whole), _spans(whole)
    if path is None or spans is None or part.rules or not all(p.scope for p in part.factors):
        return _path(part)
    position, low, high = spans
    try:
        at = [position[id(p)] for p in part.factors]
    except KeyError:  # a factor of its own (a free part's law)
        return _path(part)
    if not at or at != sorted(at):
        return _path(part)
    a, b = int(low[at].min()), int(high[at].max())
    if np.count_nonzero((low >= a) & (high <= b)) != len(at) or path.order[a] > path.order[b]:
        return _path(part)  # a factor of the stretch left out, or `_path` would walk it the other way
    return Path(path.order[a:b + 1], path.unary[a:b + 1], path.pair[a:b], 0.0, path.forward[a:b], path.backward[a:b],
                path.steps)


def _spans(graph: FactorGraph) -> tuple[dict[int, int], np.ndarray, np.ndarray] | None:
    """Each factor's index (by identity) and the lowest and highest positions of its slots on the graph's path
    (an empty scope: below and above every position, never inside a stretch); cached with its trees."""
    if "path spans" not in graph.trees:
        path = path_of(graph)
        spans = None
        if path is not None:
            at = {v: k for k, v in enumerate(path.order)}
            low = np.array([min((at[v] for v in p.scope), default=-1) for p in graph.factors])
            high = np.array([max((at[v] for v in p.scope), default=len(at)) for p in graph.factors])
            spans = ({id(p): k for k, p in enumerate(graph.factors)}, low, high)
        graph.trees["path spans"] = spans
    return graph.trees["path spans"]
