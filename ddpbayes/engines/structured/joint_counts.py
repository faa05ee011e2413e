"""Joint laws over a chain's days against an adversary who knows every day outside one window around the target
(issue #43 item 4, DESIGN §2.1b): ddp's adversaries on a year of days, and pdp's known sets of that shape.

K = [0, s) ∪ (e, n) with the target in [s, e] and every other day of [s, e] unknown. The sub-chain runs from the
left border a = s − 1 to the right border b = e + 1 (each when it exists); the interior known days are L' = [0, a)
and R' = (b, n). Given x_a and x_b the window is independent of the rest (Markov), and the interior days' own
probabilities are common to t and t' and cancel in P(y | t, x_K) / P(y | t', x_K): they enter only through their
emission factors in the integral over v, which commute, so through the counts of each value among them by role.
With every unary and pairwise entry of the known runs positive every count vector is possible, and the sup over
x_K is a max over the border values and the count vectors (C(ℓ + k − 1, k − 1) of ℓ days):

    SVT, j in [a, b]: L' emits e_B (R' after j: 1);  none: L' and R' emit e_B;
         j in R': L' and R' before j emit e_B, x_j e_A, the window all e_B;  j in L': the window all e_C = 1, ratio 1;
    RNM, j in [a, b]: L' and R' emit e_B = F;  j in L' or R': x_j emits f, the others F, the window all F.

For each node v the window's law P(j, X_i = t, x_b | x_a, v) comes from plain messages (forward with e_B, backward
with e_B and e_C, the borders' values a batch) and two passes from the target clamped at t (backward with e_C to
each j < i, forward with e_B to each j > i): O(w k² N) per window. The integrals over v of (known factors) ×
(window) are one matrix product per class; windows with equal tables and target offset share them (a homogeneous
chain's inner targets), and each (class, count total) is solved once per window.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ddpbayes.problem import Adversary

_TINY = 1e-280  # an integral below this from the scaled product is recomputed term by term in logs


@dataclass(frozen=True)
class Window:
    """An adversary's window: the sub-chain [lo, hi] (borders included when they exist), the target's offset in it,
    whether lo and hi are known borders, and the counts of interior known days on either side."""

    lo: int
    hi: int
    target: int
    left: bool
    right: bool
    outer_left: int  # |L'|
    outer_right: int  # |R'|


def window_of(adv: Adversary, n: int) -> Window | None:
    """The adversary's window when its unknown days and target form one run [s, e] and it knows every other day."""
    unknown = sorted(set(range(n)) - set(adv.known))
    s, e = unknown[0], unknown[-1]
    if e - s + 1 != len(unknown) or adv.target not in unknown:
        return None
    left, right = s > 0, e < n - 1
    lo, hi = s - left, e + right
    return Window(lo, hi, adv.target - lo, left, right, max(s - 1, 0), max(n - e - 2, 0))


def counts_reason(chain, window: Window, values_equal: bool) -> str | None:
    """Why the count reduction does not hold for this window, or None: every day shares one value list and every
    unary and pairwise entry of the known runs is positive (then every count vector is possible)."""
    if not values_equal:
        return "the days do not share one value list"
    n = chain.unary.shape[0]
    runs = [(0, window.lo)] if window.left else []
    runs += [(window.hi, n - 1)] if window.right else []
    for first, last in runs:
        if (chain.unary[first:last + 1] <= 0).any() or (chain.pair[first:last] <= 0).any():
            return f"a known run (days {first}..{last}) has a zero probability entry"
    return None


def configurations(total: int, k: int) -> np.ndarray:
    """Every count vector of `total` days over k values (C, k), the first value's count descending."""
    if k <= 2:
        first = np.arange(total, -1, -1) if k == 2 else np.array([total])
        return np.column_stack([first, total - first][:k])
    parts = [np.column_stack([np.full(len(rest), total - c), rest])
             for c in range(total + 1) for rest in [configurations(c, k - 1)]]
    return np.concatenate(parts)


def configuration_count(total: int, k: int) -> int:
    return math.comb(total + k - 1, k - 1)


# --------------------------------------------------------------------------- the window's law per node


@dataclass
class _Msg:
    """Messages (..., N, k) scaled per row, and their log scales (..., N)."""

    val: np.ndarray
    log: np.ndarray

    def step(self, own: np.ndarray, pair: np.ndarray) -> _Msg:
        """Carry through a day's own factor and a pairwise table (x_m → x_{m+1} rows)."""
        val = (self.val * own) @ pair
        return _Msg(*_scaled(val, self.log))

    def at(self, own: np.ndarray) -> np.ndarray:
        """log of the message times the day's own factor (..., N, k)."""
        with np.errstate(divide="ignore"):
            return np.log(self.val * own) + self.log[..., None]


def _scaled(val: np.ndarray, log: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    top = val.max(axis=-1)
    alive = top > 0
    val = val / np.where(alive, top, 1.0)[..., None]
    with np.errstate(divide="ignore"):
        return val, log + np.where(alive, np.log(np.where(alive, top, 1.0)), -np.inf)


@dataclass(frozen=True)
class WindowLaw:
    """log P(y, X_i = t, x_b | x_a, v) of one window per node: `inside` (ka, kb, kt, w, N) for outputs j in the
    sub-chain, `all_b` (ka, kb, kt, N) with every window day emitting e_B, and log P(X_i = t, x_b | x_a)
    (ka, kb, kt); ka, kb = k with a border, else 1."""

    inside: np.ndarray
    all_b: np.ndarray
    marginal: np.ndarray


def window_law(unary: np.ndarray, pair: np.ndarray, emit: tuple[np.ndarray, np.ndarray, np.ndarray],
               window: Window) -> WindowLaw:
    """The window's tables (module docstring) from its unary (w, k), pairwise (w − 1, k, k) and emissions
    (e_B, e_A, e_C), each (N, w, k)."""
    w, k = unary.shape
    big = emit[0].shape[0]
    clamp_a = np.eye(k)[:, None, None, None, :] if window.left else np.ones((1, 1, 1, 1, k))
    clamp_b = np.eye(k)[None, :, None, None, :] if window.right else np.ones((1, 1, 1, 1, k))

    def own(m: int, e: np.ndarray) -> np.ndarray:  # (ka|1, kb|1, 1, N, k)
        out = (unary[m] * e[:, m])[None, None, None]
        if m == 0:
            out = out * clamp_a
        if m == w - 1:
            out = out * clamp_b
        return out

    e_b, e_a, e_c = emit
    ones = np.ones((1, 1, 1, big, k))
    forward = _run([own(m, e_b) for m in range(w)], pair, True, ones)  # fB into day m
    back_b = _run([own(m, e_b) for m in range(w)], pair, False, ones)
    back_c = _run([own(m, e_c) for m in range(w)], pair, False, ones)
    p = window.target
    inside = np.full((*np.broadcast_shapes(clamp_a.shape[:2], clamp_b.shape[:2]), k, w, big), -np.inf)
    target_a = _pick(forward[p].at(own(p, e_a)) + _log(back_c[p]), k)
    inside[..., p, :] = target_a
    all_b = _pick(forward[p].at(own(p, e_b)) + _log(back_b[p]), k)
    tail_c = _pick(_log(_Msg(own(p, e_c) * back_c[p].val, back_c[p].log)), k)  # own_C(t) bC(t) at p
    beta = _Msg(np.broadcast_to(pair[p - 1].T[None, None, :, None, :], (1, 1, k, big, k)).copy(),
                np.zeros((1, 1, k, big))) if p > 0 else None
    for j in range(p - 1, -1, -1):  # j < p: day j emits e_A, days j+1..p−1 e_C
        inside[..., j, :] = _sum(forward[j].at(own(j, e_a)) + _log(beta)) + tail_c
        if j:
            beta = _Msg(*_scaled((beta.val * own(j, e_c)) @ pair[j - 1].T, beta.log))
    head_b = _pick(forward[p].at(own(p, e_b)), k)  # fB(t) own_B(t) at p
    alpha = _Msg(np.broadcast_to(pair[p][None, None, :, None, :], (1, 1, k, big, k)).copy(),
                 np.zeros((1, 1, k, big))) if p < w - 1 else None
    for j in range(p + 1, w):  # j > p: days p+1..j−1 emit e_B, day j e_A, after it e_C
        inside[..., j, :] = _sum(alpha.at(own(j, e_a)) + _log(back_c[j])) + head_b
        if j < w - 1:
            alpha = alpha.step(own(j, e_b), pair[j])
    plain = [own(m, np.ones_like(e_b[:1]))[..., :1, :] for m in range(w)]
    f0 = _run(plain, pair, True, np.ones((1, 1, 1, 1, k)))
    b0 = _run(plain, pair, False, np.ones((1, 1, 1, 1, k)))
    marginal = _pick(f0[p].at(plain[p]) + _log(b0[p]), k)[..., 0]
    return WindowLaw(inside, np.broadcast_to(all_b, inside.shape[:3] + (big,)), marginal)


def _run(own: list[np.ndarray], pair: np.ndarray, forward: bool, start: np.ndarray) -> list[_Msg]:
    """Messages into every day: forward from day 0 or backward from the last, each scaled."""
    w = len(own)
    out: list[_Msg | None] = [None] * w
    first = 0 if forward else w - 1
    out[first] = _Msg(start, np.zeros(start.shape[:-1]))
    days = range(w - 1) if forward else range(w - 1, 0, -1)
    for m in days:
        nxt = m + 1 if forward else m - 1
        table = pair[m] if forward else pair[m - 1].T
        out[nxt] = out[m].step(own[m], table)
    return out


def _log(msg: _Msg) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(msg.val) + msg.log[..., None]


def _sum(logs: np.ndarray) -> np.ndarray:
    """log Σ over the last axis."""
    top = logs.max(axis=-1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(logs - safe[..., None]).sum(axis=-1)) + safe


def _pick(logs: np.ndarray, k: int) -> np.ndarray:
    """The diagonal t = x of (..., kt, N, k) when kt = k, as (..., kt, N); (..., 1, N, k) broadcast: x taken as t."""
    logs = np.broadcast_to(logs, logs.shape[:-3] + (k,) + logs.shape[-2:])
    return np.stack([logs[..., t, :, t] for t in range(k)], axis=-2)


# --------------------------------------------------------------------------- the known days by their counts


KERNEL_BYTES = 1 << 30  # scaled kernels kept per law and kind (a year of binary days, SVT: 0.23 and 0.46 GB)


def _scale_rows(logs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows (C, N) in logs scaled by their maxima: exp(row − top), top (0 for a row of −∞), and whether it is finite."""
    top = logs.max(axis=1)
    alive = np.isfinite(top)
    top = np.where(alive, top, 0.0)
    with np.errstate(under="ignore"):
        return np.exp(logs - top[:, None]), top, alive


@dataclass(frozen=True)
class KernelBlock:
    """One count total's kernels (`Kernels.log_rows`), each row scaled by its maximum: `scaled` (C, N) =
    exp(row − top), `top` (C,) the row's maximum (0 for a row of zeros), `alive` (C,) whether it is finite, the
    rows' counts (C, k) and x_j's value (C,; -1 without)."""

    scaled: np.ndarray
    top: np.ndarray
    alive: np.ndarray
    counts: np.ndarray
    chosen: np.ndarray


class Kernels:
    """The known days' factors per count vector, log_b (N, k) for e_B, x_j's log_a (N, k) when given, times the
    weight `base` (N): they depend on the law, the rule and the values only, not on the window, so each count
    total's rows are built and scaled once and kept (up to KERNEL_BYTES; past it built when asked) for every
    window's tables (DESIGN §2.1b)."""

    def __init__(self, log_b: np.ndarray, log_a: np.ndarray | None, base: np.ndarray):
        self.log_b, self.log_a, self.base = log_b, log_a, base
        self.blocks: dict[int, KernelBlock] = {}
        self.held = 0

    def log_rows(self, counts: np.ndarray, chosen: np.ndarray) -> np.ndarray:
        """log of the known factors (C, N) of count vectors `counts` (C, k) times x_j's e_A at value `chosen` (C,;
        -1: none) times the weight."""
        finite = np.isfinite(self.log_b)
        body = self.base[None, :] + counts @ np.where(finite, self.log_b, 0.0).T
        body[(counts > 0) @ ~finite.T] = -np.inf  # a factor that underflowed: the product is 0
        if self.log_a is not None:
            body += self.log_a[:, chosen].T
        return body

    def block(self, total: int) -> KernelBlock:
        """Every count vector of `total` days (times each value of x_j when log_a is given), scaled per row."""
        if total in self.blocks:
            return self.blocks[total]
        k = self.log_b.shape[1]
        counts = configurations(total, k)
        chosen = np.full(len(counts), -1)
        if self.log_a is not None:
            counts, chosen = np.tile(counts, (k, 1)), np.repeat(np.arange(k), len(counts))
        out = KernelBlock(*_scale_rows(self.log_rows(counts, chosen)), counts, chosen)
        if self.held + out.scaled.nbytes <= KERNEL_BYTES:
            self.blocks[total] = out
            self.held += out.scaled.nbytes
        return out


@dataclass(frozen=True)
class _Scaled:
    """Tables (M, N) in logs, and each row scaled by its maximum: `scaled` = exp(row − top), `top` (0 for a row of
    −∞), `alive`."""

    logs: np.ndarray
    scaled: np.ndarray
    top: np.ndarray
    alive: np.ndarray

    @classmethod
    def of(cls, logs: np.ndarray) -> _Scaled:
        return cls(logs, *_scale_rows(logs))

    def rows(self, index: np.ndarray) -> _Scaled:
        return _Scaled(self.logs[index], self.scaled[index], self.top[index], self.alive[index])


def log_integrals(kernels: Kernels, block: KernelBlock, tables: _Scaled) -> np.ndarray:
    """log Σ_ν exp(kernel[c, ν] + tables[m, ν]) (C, M): one product of the scaled rows, entries that fall below
    _TINY recomputed term by term in logs (the kernel rows rebuilt from their counts)."""
    product = block.scaled @ tables.scaled.T
    with np.errstate(divide="ignore"):
        out = np.log(product) + block.top[:, None] + tables.top[None, :]
    low = np.argwhere((product < _TINY) & block.alive[:, None] & tables.alive[None, :])
    for chunk in range(0, len(low), 4096):
        c, m = low[chunk:chunk + 4096].T
        terms = kernels.log_rows(block.counts[c], block.chosen[c]) + tables.logs[m]
        top = terms.max(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[c, m] = np.where(np.isfinite(top), np.log(np.exp(terms - top[:, None]).sum(axis=1)) + top, -np.inf)
    return out


@dataclass(frozen=True)
class Best:
    """The largest log-ratio found and what attains it: count vector, x_j's value (or -1), output column,
    border values (ka, kb indices), t, t'."""

    value: float
    counts: tuple[int, ...]
    chosen: int
    column: int
    borders: tuple[int, int]
    t: int
    t_prime: int


def best_by_total(kernels: Kernels, requests: list[tuple[list[int], np.ndarray, np.ndarray]]
                  ) -> list[dict[int, Best | None]]:
    """For each request (count totals, tables (ka, kb, kt, J, N), marginal (ka, kb, kt)) and each of its totals: the
    largest log P(j | t, x_K) − log P(j | t', x_K) over the count vectors of that many days (times x_j's e_A, each
    value, when the kernels carry it), the tables' columns, the border values and the possible t ≠ t' (None when no
    border values are possible). Each total's kernels go into one product with the tables of every request asking
    for it (windows batched: one pass over the kernels for all); each request's ratios in batches of about 2^18
    cells."""
    flats = [tables.transpose(0, 1, 3, 2, 4).reshape(-1, tables.shape[-1]) for _, tables, _ in requests]
    edges = np.cumsum([0] + [len(f) for f in flats])
    scaled = _Scaled.of(np.concatenate(flats))
    asking: dict[int, list[int]] = {}
    for r, (totals, _, _) in enumerate(requests):
        for total in totals:
            asking.setdefault(total, []).append(r)
    out: list[dict[int, Best | None]] = [{} for _ in requests]
    pending: list[list[tuple[int, KernelBlock, np.ndarray]]] = [[] for _ in requests]
    sizes = [0] * len(requests)
    for total in sorted(asking):
        block, rs = kernels.block(total), asking[total]
        rows = np.concatenate([np.arange(edges[r], edges[r + 1]) for r in rs])
        logs = log_integrals(kernels, block, scaled if len(rows) == edges[-1] else scaled.rows(rows))
        starts = np.cumsum([0] + [edges[r + 1] - edges[r] for r in rs])
        for r, lo, hi in zip(rs, starts[:-1], starts[1:]):
            pending[r].append((total, block, logs[:, lo:hi]))
            sizes[r] += logs.shape[0] * (hi - lo)
            if sizes[r] >= 1 << 18:
                out[r].update(_best_batch(pending[r], requests[r][1].shape, requests[r][2]))
                pending[r], sizes[r] = [], 0
    for r, part in enumerate(pending):
        if part:
            out[r].update(_best_batch(part, requests[r][1].shape, requests[r][2]))
    return out


def _best_batch(batch: list, shape: tuple[int, ...], marginal: np.ndarray) -> dict[int, Best | None]:
    """Each total's best of the batch's (total, kernel block, logs): the largest ratio, ties to the first border values,
    then the first count vector, then the first column; each step vectorised over the totals."""
    ka, kb, kt, cols, _ = shape
    counts, chosen = np.concatenate([b[1].counts for b in batch]), np.concatenate([b[1].chosen for b in batch])
    lens = [len(b[1].counts) for b in batch]
    starts, seg = np.cumsum([0] + lens)[:-1], np.repeat(np.arange(len(batch)), lens)
    logs = np.concatenate([b[2] for b in batch])
    logs = logs.reshape(len(logs), ka, kb, cols, kt) - marginal[None, :, :, None, :]
    possible = np.isfinite(marginal)  # (ka, kb, kt)
    value, unset = np.full(len(batch), -np.inf), np.ones(len(batch), dtype=bool)
    at = np.zeros((len(batch), 4), dtype=int)  # border a, border b, row, column
    for a, b in itertools.product(range(ka), range(kb)):
        ts = np.flatnonzero(possible[a, b])
        if ts.size == 0:
            continue
        part = logs[:, a, b][..., ts]  # (C, J, t)
        with np.errstate(invalid="ignore"):
            ratio = part.max(axis=-1) - part.min(axis=-1) if ts.size > 1 else np.zeros(part.shape[:2])
        ratio[np.isnan(ratio)] = -np.inf
        column = ratio.argmax(axis=1)
        top = ratio[np.arange(len(logs)), column]
        most = np.maximum.reduceat(top, starts)
        hits = np.flatnonzero(top == most[seg])
        row = hits[np.searchsorted(seg[hits], np.arange(len(batch)))]  # each total's first row at its maximum
        better = unset | (most > value)
        value[better], unset[better] = most[better], False
        at[better] = np.column_stack([np.full(len(row), a), np.full(len(row), b), row, column[row]])[better]
    out: dict[int, Best | None] = {}
    for (total, *_), found, (a, b, c, j), missing in zip(batch, value, at, unset):
        if missing:
            out[total] = None
            continue
        ts = np.flatnonzero(possible[a, b])
        line = logs[c, a, b, j, ts]
        out[total] = Best(float(found), tuple(map(int, counts[c])), int(chosen[c]), int(j), (int(a), int(b)),
                          int(ts[line.argmax()]), int(ts[line.argmin()]))
    return out


def witness_values(window: Window, n: int, borders: tuple[int, int], counts: tuple[int, ...], counted: list[int],
                   chosen: tuple[int, int] | None, values: np.ndarray) -> dict[int, float]:
    """Known values attaining a ratio: the borders, the counted days given values in order of the counts, x_j,
    every other known day the first value (its factor is 1 or cancels)."""
    out = {m: float(values[0]) for m in range(n) if m < window.lo or m > window.hi}
    if window.left:
        out[window.lo] = float(values[borders[0]])
    if window.right:
        out[window.hi] = float(values[borders[1]])
    codes = np.repeat(np.arange(len(counts)), counts)
    for m, code in zip(counted, codes):
        out[m] = float(values[code])
    if chosen is not None:
        out[chosen[0]] = float(values[chosen[1]])
    return out
