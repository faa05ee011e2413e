"""The sup over y of the estimated log-ratio when the release has several output coordinates
(identity, histograms, several linear rows, expr:/fn: with several outputs, compositions;
DESIGN §2.3).

With Laplace(b_c) noise on coordinate c, L(y | t, x_K) ≈ Σ_s w_s Π_c exp(-|y_c - q_sc| / b_c) over the
estimated law's points q_s and weights w_s (`estimate.Draws.mixture`).
- A coordinate constant over the draws of both events (e.g. the target's own coordinate under
  identity: y_i = t + noise) is a separate factor of both mixtures: its log-ratio sup is
  exactly |v - v'| / b_c, attained as y_c -> ±inf.
- One varying coordinate: the exact 1-D sup (`mixture`).
- m >= 2 varying coordinates: for fixed other coordinates the ratio in y_c is a ratio of two
  positive 1-D Laplace mixtures, which peaks at a draw's value or at ±inf (004 Lemma 1), so the
  sup lies on the product of the coordinates' breakpoints and ±inf (DESIGN §2.1's vector
  proof) — draws^m points. Searched: every corner (±inf)^m plus, per coordinate, its pooled
  draw values (all of them when few, as for histogram counts; else k quantiles) with the
  product at most GRID_MAX points; then coordinate ascent, each step a 1-D sup over that
  coordinate's draws (thinned to 400 quantiles, as for one output) with the others fixed.
  When the grid held every breakpoint the result is the sup of the estimated mixture;
  otherwise it is a value the estimate reaches (`complete` False: the engine then earns no
  pass).

Cost (issue #42.1). Both searches move one coordinate along its values with the others fixed,
so the others' kernel terms and the log-weights are summed once per line (S values: per point
of the grid's leading axes from per-coordinate tables, per ascent step from y), and a line of n
finite outputs costs O(S log n + n √n) (`log_mixture_lines`: each draw's term carried to its
neighbouring outputs, then running sums over the n masses; same-signed distances only, as exact
as the direct sum) instead of the direct O(S n C). Two laws of 1600 and 3200 draws, 2-10
coordinates: 0.05-0.29 CPU s a pair instead of 0.56-4.4, the values equal to 2e-15 (DESIGN §2.3).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ddpbayes.engines.sampling.mixture import candidate_outputs
from ddpbayes.errors import InputError
from ddpbayes.numerics import logsumexp

GRID_MAX = 2048  # output points searched jointly over the varying coordinates
ASCENT_ROUNDS = 5
_CHUNK = 1 << 22  # kernel cells evaluated at once


def log_kernels(q: np.ndarray, y: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Σ_c log k(y_gc, q_sc) of shape (G, S) for draws q (S, C) and outputs y (G, C): k =
    exp(-|y - q|/b) for finite y, exp(q/b) at +inf and exp(-q/b) at -inf (the factor that
    depends on y alone cancels in every ratio of two mixtures at the same y)."""
    out = np.zeros((len(y), len(q)))
    step = np.empty_like(out)  # each coordinate's term, in place (no temporaries of the (G, S) size)
    for c in range(q.shape[1]):
        yc, qc = y[:, c], q[:, c] / b[c]
        up, down = np.isposinf(yc), np.isneginf(yc)
        np.subtract(yc[:, None] / b[c], qc[None, :], out=step)
        np.abs(step, out=step)
        step[up], step[down] = -qc, qc  # at ±inf: ±q/b (the rows' finite terms above are overwritten)
        out -= step
    return out


def log_mixture_grid(q: np.ndarray, wq: np.ndarray, axes: list[np.ndarray], b: np.ndarray) -> np.ndarray:
    """log Σ_s w_s Π_c k(y_c, q_sc) (wq: the points' log-weights) at every point of the product of
    the axes (one per coordinate of q, at least two), in np.meshgrid(..., indexing="ij")'s order
    flattened: per point of the leading
    axes the log-weights plus those coordinates' kernel terms (`_lead_rows`, from each
    coordinate's table on its axis), then `log_mixture_lines` along the last axis."""
    *lead, last = axes
    tables = [log_kernels(q[:, c:c + 1], axis[:, None], b[c:c + 1]) for c, axis in enumerate(lead)]
    rows = max(1, _CHUNK // (4 * (len(q) + len(last) ** 2)))  # ~4 arrays of a block's size live at once
    return np.concatenate([log_mixture_lines(q[:, -1], w, last, float(b[-1])).ravel()
                           for w in _lead_rows(tables, wq, rows)])


def _lead_rows(tables: list[np.ndarray], wq: np.ndarray, rows: int) -> Iterator[np.ndarray]:
    """wq + Σ_c tables[c][i_c] (tables (len(axis_c), S)) for every index tuple of the product, in
    C order, in blocks of about `rows`: the trailing tables' sum by broadcasting, once (at most
    `rows` rows), plus each leading index tuple's row."""
    sizes = [len(t) for t in tables]
    split = len(sizes)
    while split > 0 and math.prod(sizes[split - 1:]) <= rows:
        split -= 1
    tail = wq[None, :]
    for table in tables[split:]:
        tail = (tail[:, None, :] + table[None, :, :]).reshape(-1, len(wq))
    heads = math.prod(sizes[:split])
    batch = max(1, rows // len(tail))
    for h in range(0, heads, batch):
        index = np.arange(h, min(heads, h + batch))
        lead = np.zeros((len(index), len(wq)))
        for table, i in zip(tables, np.unravel_index(index, sizes[:split]) if split else ()):
            lead += table[i]
        yield (lead[:, None, :] + tail[None, :, :]).reshape(-1, len(wq))


def pair_sup(qa: np.ndarray, wa: np.ndarray, qc: np.ndarray, wc: np.ndarray,
             b: np.ndarray) -> tuple[list[tuple[float, np.ndarray]], bool]:
    """For the estimated law of the query given t (points qa (M_a, C), log-weights wa) and given
    t' (qc, wc): [(sup_y log L_a/L_c, its y), (sup_y log L_c/L_a, its y)] and whether the search
    was exhaustive over the breakpoints."""
    const = np.ptp(qa, axis=0) == 0
    const &= np.ptp(qc, axis=0) == 0
    delta = np.where(const, qa[0] - qc[0], 0.0)
    fixed = float(np.sum(np.abs(delta) / b))
    varying = np.flatnonzero(~const)
    both, complete = _varying_sup(qa[:, varying], wa, qc[:, varying], wc, b[varying]) if varying.size else (None, True)
    out = []
    for d, sign in enumerate((1.0, -1.0)):
        y = np.where(delta * sign > 0, math.inf, np.where(delta * sign < 0, -math.inf, qa[0]))
        value = fixed
        if both is not None:
            value += both[d][0]
            y[varying] = both[d][1]
        out.append((value, y))
    return out, complete


def _varying_sup(qa: np.ndarray, wa: np.ndarray, qc: np.ndarray, wc: np.ndarray,
                 b: np.ndarray) -> tuple[list[tuple[float, np.ndarray]], bool]:
    """sup over y of ±(log L_a(y) - log L_c(y)) on the varying coordinates, each with its y."""
    if qa.shape[1] == 1:
        ys = candidate_outputs(qa, qc)
        line_a, line_c = (log_mixture_lines(q[:, 0], w[None, :], ys, float(b[0]))[0] for q, w in ((qa, wa), (qc, wc)))
        r = line_a - line_c
        return [(float(sign * r[k]), ys[k:k + 1]) for sign, k in ((1, np.argmax(r)), (-1, np.argmin(r)))], True
    axes, complete = _grid(qa, qc)
    r = log_mixture_grid(qa, wa, axes, b) - log_mixture_grid(qc, wc, axes, b)
    starts = [(float(sign * r[k]), _grid_point(axes, k)) for sign, k in ((1, np.argmax(r)), (-1, np.argmin(r)))]
    if complete:
        return starts, True
    return [_ascent(qa, wa, qc, wc, b, sign, *start) for sign, start in zip((1.0, -1.0), starts)], False


def _ascent(qa: np.ndarray, wa: np.ndarray, qc: np.ndarray, wc: np.ndarray, b: np.ndarray, sign: float, best: float,
            y: np.ndarray) -> tuple[float, np.ndarray]:
    """Coordinate ascent from y: each step the best of one coordinate's candidate outputs."""
    cands = [candidate_outputs(qa[:, c], qc[:, c]) for c in range(qa.shape[1])]
    for _ in range(ASCENT_ROUNDS):
        moved = False
        for c, ys in enumerate(cands):
            rc = sign * (_along(qa, wa, y, c, ys, b) - _along(qc, wc, y, c, ys, b))
            j = int(np.argmax(rc))
            if rc[j] > best + 1e-12:
                best, y, moved = float(rc[j]), y.copy(), True
                y[c] = ys[j]
        if not moved:
            break
    return best, y


def _along(q: np.ndarray, wq: np.ndarray, y: np.ndarray, c: int, ys: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log Σ_s w_s Π_c k(y_c, q_sc) at y with its coordinate c set to each of ys: the log-weights plus the
    other coordinates' kernel terms summed once (S values), then `log_mixture_lines`."""
    rest = np.arange(q.shape[1]) != c
    base = wq + log_kernels(q[:, rest], y[None, rest], b[rest])[0]
    return log_mixture_lines(q[:, c], base[None, :], ys, float(b[c]))[0]


def log_mixture_lines(q: np.ndarray, w: np.ndarray, ys: np.ndarray, b: float) -> np.ndarray:
    """log Σ_s exp(w_hs - |y - q_s| / b) (H, len(ys)) for 1-D points q (S), log-weights w (H, S)
    and each y of ys (at ±inf w_hs ± q_s/b, as `log_kernels` writes them). For n finite ys,
    O(H (S + n √n)) exponentials instead of O(H S n): each point's term is carried to its
    neighbouring outputs (`_carried`), then the n carried masses combined (`_from_carried`);
    every exponent is a sum of same-signed distances, as exact as the direct sum."""
    out = np.empty((len(w), len(ys)))
    for sign in (1.0, -1.0):
        out[:, ys == sign * math.inf] = logsumexp(w + sign * q / b, axis=1)[:, None]
    finite = np.flatnonzero(np.isfinite(ys))
    if len(finite):
        finite = finite[np.argsort(ys[finite], kind="stable")]
        order = np.argsort(q, kind="stable")
        out[:, finite] = _from_carried(ys[finite], *_carried(q[order], w[:, order], ys[finite], b), b)
    return out


def _carried(q: np.ndarray, w: np.ndarray, y: np.ndarray, b: float) -> tuple[np.ndarray, np.ndarray]:
    """For sorted points q (S), their log-weights w (H, S) and sorted outputs y (n): below_hi =
    log Σ exp(w_hs - (y_i - q_s)/b) over the points in (y_{i-1}, y_i] (every q_s <= y_0 for
    i = 0) and above_hi = log Σ exp(w_hs - (q_s - y_i)/b) over the points in (y_i, y_{i+1}]
    (every q_s > y_{n-1} for the last), each (H, n)."""
    u = np.searchsorted(y, q, side="left")  # y[u - 1] < q <= y[u], non-decreasing
    low, high = np.searchsorted(u, len(y)), np.searchsorted(u, 0, side="right")  # u < n: [:low]; u > 0: [high:]
    below = _group_log_sum(u[:low], w[:, :low] - (y[u[:low]] - q[:low]) / b, len(y))
    above = _group_log_sum(u[high:] - 1, w[:, high:] - (q[high:] - y[u[high:] - 1]) / b, len(y))
    return below, above


def _from_carried(y: np.ndarray, below: np.ndarray, above: np.ndarray, b: float) -> np.ndarray:
    """log Σ_s exp(w_hs - |y_j - q_s| / b) (H, n) at the sorted outputs y from `_carried`'s
    masses: below_i reaches y_j >= y_i with exp(-(y_j - y_i)/b), above_i reaches y_j <= y_i with
    exp(-(y_i - y_j)/b); each point counted once (its below mass at and after its output, its
    above mass before). The above sums are `_running` sums on the reversed, negated outputs."""
    return np.logaddexp(_running(y, below, b), _running(-y[::-1], above[:, ::-1], b)[:, ::-1])


def _running(y: np.ndarray, mass: np.ndarray, b: float) -> np.ndarray:
    """log Σ_{i <= j} exp(mass_hi - (y_j - y_i)/b) (H, n) for sorted y, in blocks of about √n
    outputs: summed directly within a block, and carried from each block's last output to the
    next block (decay factors at most 1, no cancellation), O(H n √n) terms."""
    n, rows = len(y), len(mass)
    width = math.isqrt(n)
    blocks = -(-n // width)
    pad = blocks * width - n
    yb = np.concatenate([y, np.full(pad, y[-1])]).reshape(blocks, width)
    mb = np.concatenate([mass, np.full((rows, pad), -math.inf)], axis=1).reshape(rows, blocks, width)
    upper = np.arange(width)[None, :] > np.arange(width)[:, None]  # (j, i): i after j
    z = mb[:, :, None, :] - (yb[:, :, None] - yb[:, None, :])[None] / b
    z[:, :, upper] = -math.inf
    within = logsumexp(z, axis=3)  # (H, blocks, width)
    ends = yb[:, -1]
    before = np.full((rows, blocks), -math.inf)  # everything in earlier blocks, at the previous block's end
    for k in range(1, blocks):
        decayed = before[:, k - 1] - (ends[k - 1] - ends[k - 2]) / b if k > 1 else before[:, 0]
        before[:, k] = np.logaddexp(decayed, within[:, k - 1, -1])
    start = np.concatenate([[y[0]], ends[:-1]])
    out = np.logaddexp(before[:, :, None] - ((yb - start[:, None]) / b)[None], within)
    return out.reshape(rows, -1)[:, :n]


def _group_log_sum(group: np.ndarray, z: np.ndarray, n: int) -> np.ndarray:
    """log Σ exp(z_hk) over the columns k of each group 0..n-1 (group sorted; -inf for an empty
    group), (H, n)."""
    out = np.full((len(z), n), -math.inf)
    if group.size:
        starts = np.flatnonzero(np.r_[True, np.diff(group) != 0])
        top = np.maximum.reduceat(z, starts, axis=1)
        z = np.exp(z - np.repeat(top, np.diff(np.r_[starts, group.size]), axis=1))
        out[:, group[starts]] = np.log(np.add.reduceat(z, starts, axis=1)) + top
    return out


def _grid(qa: np.ndarray, qc: np.ndarray) -> tuple[list[np.ndarray], bool]:
    """The grid's axes: every corner (±inf)^m and up to k pooled draw values per coordinate (k as
    large as GRID_MAX allows); True when no coordinate's values were subsampled."""
    m = qa.shape[1]
    if 2 ** m > GRID_MAX:
        raise InputError(f"the release has {m} output coordinates that vary given the target: the sampling engine "
                         f"searches the output space jointly up to {int(math.log2(GRID_MAX))} of them "
                         f"({2 ** m:,} corners alone, over {GRID_MAX:,}); release fewer outputs")
    levels = [np.unique(np.concatenate([qa[:, c], qc[:, c]])) for c in range(m)]
    k = 0
    while k < max(len(v) for v in levels) and math.prod(min(len(v), k + 1) + 2 for v in levels) <= GRID_MAX:
        k += 1
    return [np.concatenate([_thin(v, k), [math.inf, -math.inf]]) for v in levels], all(len(v) <= k for v in levels)


def _grid_point(axes: list[np.ndarray], k: int) -> np.ndarray:
    """The k-th point of the product of the axes in `log_mixture_grid`'s order."""
    return np.array([axis[i] for axis, i in zip(axes, np.unravel_index(k, [len(a) for a in axes]))])


def _thin(values: np.ndarray, k: int) -> np.ndarray:
    if len(values) <= k:
        return values
    if k == 0:
        return values[:0]
    return np.unique(np.quantile(values, np.linspace(0, 1, k), method="nearest"))
