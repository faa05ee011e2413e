"""Gaussian kernel sums over fixed points, truncated to the points near where they are evaluated,
with a stated error (DESIGN §7.1, issue #42.1): the near-friend ego network's log-density is a kernel
density over the 2,389 known users per member, and most of them are too far to count.

For points o_k (N, 2) with weights c_k > 0 (C = Σ c_k) and a variance v, at x

    S(x) = Σ_k c_k exp(-|x - o_k|² / (2v)).

`KernelSum` sums only the points within r(x) of x, found with a KD-tree, where

    r(x)² = d_1² + 2v log(C / (c_1 ρ)),

d_1 the distance from x to its nearest point and c_1 that point's weight. Every dropped point is
farther than r, so the dropped total is at most C e^{-r²/2v} = ρ c_1 e^{-d_1²/2v}, and the nearest
point's own term (kept) is c_1 e^{-d_1²/2v} <= S̃: hence S̃(x) <= S(x) <= (1 + ρ) S̃(x) at every x,
i.e. 0 <= log S - log S̃ <= log1p(ρ).

Given the rectangle where it will be evaluated (`domain`), a sum finds the points it keeps from a
table instead (issue #42.1): the rectangle, widened by CELL_MARGIN of its sides, is cut into about
CELLS cells, and each cell keeps the points within R of it, R² = d_1² + 2v log(C / (c_1 ρ)) with c_1
the weight of the point nearest the cell's centre and d_1 its largest distance to the cell; for x in
the cell every dropped point is farther than R, so the same bound holds (the dropped total is at most
ρ c_1 e^{-d_1²/2v} <= ρ S̃(x)), and no tree is searched per point. A dense sum over a rectangle is
tabulated instead, when the grid is affordable (`geo.grid.LogSumGrid`, over the rectangle widened by
GRID_MARGIN: |log Ŝ - log S| <= its `error`). `error` is the range of log Ŝ - log S at any point of
the widened rectangle; a point beyond it takes the full sum (S̃ = S, a compiled loop over every
point: no tree search per call). A sum over at most FULL_POINTS points is always the full sum (S̃ = S, no
table). `LogKernelSum` is the PyTensor Op of log S̃ with its gradient
(the truncated sum's own: Σ w_k (o_k - x) / v, w the kept terms' shares), over any leading axes of
x (..., 2), and registered for `vectorize_graph` so that a batch of SMC particles is one call.
"""

from __future__ import annotations

import math
import threading

import numba
import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.replace import _vectorize_node
from scipy.spatial import cKDTree

from ddpbayes.fastexp import CUT, FAST, exp_parts, scratch, smallest
from ddpbayes.geo.grid import LogSumGrid, TooFine

RHO = 1e-6  # each truncated sum is within a factor 1 + RHO of the full one (module docstring)
GRAPH_POINTS = 8  # over at most this many points a sum is a PyTensor graph (`log_kernel_sum`)
FULL_POINTS = 256  # over at most this many points a sum is taken in full (no truncation, no table)
DENSE = 0.25  # a cut radius over this share of the points' extent keeps every point (the full sum: no KD-tree)
CELLS = 8192  # about this many cells in a domain's table of kept points (each at least the kernel's √v wide)
CELL_MARGIN = 0.2  # a cell table covers its domain and this share of its sides beyond it (cheap: 0.14 s for 8,192)
CACHE = 2 ** 14  # slots of a cell table's cache of rows met (`_Cache`)
TINY = math.exp(CUT + 200.0)  # a vectorised sum this small is computed again, scaled by its nearest term
GRID_MARGIN = 0.1  # a grid this share (Gowalla's 229-km sums: 2.0M nodes over the box, 4.3M so, 10.1M at 0.2)


class KernelSum:
    """log S̃(x) of the module docstring for fixed points, weights and variance: truncated at r(x)
    when the cut radius is small beside the points' extent, else the full (dense) sum, S̃ = S."""

    def __init__(self, points: np.ndarray, variance: float, weights: np.ndarray | None = None, rho: float = RHO,
                 domain: tuple[np.ndarray, np.ndarray] | None = None):
        self.points = np.ascontiguousarray(points, dtype=float).reshape(-1, 2)
        if not len(self.points):
            raise ValueError("a kernel sum needs at least one point")
        self.weights = np.ones(len(self.points)) if weights is None else np.asarray(weights, dtype=float)
        if not (np.all(self.weights > 0) and np.all(np.isfinite(self.weights))):
            raise ValueError("kernel weights must be positive and finite")
        self.variance, self.rho = float(variance), float(rho)
        self.tree = cKDTree(self.points)
        self._log_cut = np.log(self.weights.sum() / (self.weights * rho))  # log(C / (c_k ρ)) per point k
        extent = float(np.linalg.norm(np.ptp(self.points, axis=0)))
        self._all = np.array([0, len(self.points)], dtype=np.int64)  # every point in one cell (`_dense`)
        self._xs, self._ys = self.points.T.copy()  # its coordinates, contiguous, as `_cell_sums` reads them
        self.dense = len(self.points) <= FULL_POINTS or math.sqrt(
            2.0 * self.variance * self._log_cut.max()) > DENSE * extent
        self.grid, self.cells = None, None
        if domain is None or len(self.points) <= FULL_POINTS:
            return
        lo, hi = (np.asarray(a, dtype=float) for a in domain)  # SMC's early particles stray outside the domain:
        if self.dense:  # the tables reach beyond it, a grid less far (its lines multiply there)
            try:
                self.grid = LogSumGrid(self.points, self.weights, self.variance, lo - GRID_MARGIN * (hi - lo),
                                       hi + GRID_MARGIN * (hi - lo))
            except TooFine:
                pass
        else:
            self.cells = _CellTable(self, lo - CELL_MARGIN * (hi - lo), hi + CELL_MARGIN * (hi - lo))

    @property
    def error(self) -> tuple[float, float]:
        """(below, above): log Ŝ - log S lies in [-below, above] at every point of the domain."""
        if self.grid is not None:
            return self.grid.error, self.grid.error
        return (0.0, 0.0) if self.dense else (log_sum_error(self.rho), 0.0)  # a dense sum without a grid is S

    def radius(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The nearest point's squared distance d_1² and the cut radius r(x) at the rows of x (P, 2)."""
        d1, nearest = self.tree.query(x, k=1)
        d1_sq = d1 * d1
        return d1_sq, np.sqrt(d1_sq + 2.0 * self.variance * self._log_cut[nearest])

    def log_sum(self, x: np.ndarray, gradient: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
        """log S̃ (P,) at the rows of x (P, 2), and its gradient (P, 2) if asked."""
        x = np.ascontiguousarray(x, dtype=float).reshape(-1, 2)
        table = self.grid or self.cells
        if table is None and self.dense and not gradient:  # every row in one compiled loop that vectorises
            return _full_values(x, self._xs, self._ys, self.weights, 0.5 / self.variance,
                                *scratch(len(self.points))), None
        if table is None:
            return self._dense(x, gradient) if self.dense else self._truncated(x, gradient)
        if table is self.cells and not gradient:  # every row in one compiled loop (the masks cost 6% of an event)
            return self.cells.values(x), None
        inside = table.inside(x)
        if inside.all():
            return table.log_sum(x, gradient)
        value, grad = np.empty(len(x)), (np.empty_like(x) if gradient else None)  # outside the domain: the full sum
        for rows, f in ((inside, table.log_sum), (~inside, self._dense)):
            if not rows.any():
                continue
            v, g = f(x[rows], gradient)
            value[rows] = v
            if gradient:
                grad[rows] = g
        return value, grad

    def _dense(self, x: np.ndarray, gradient: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """The full sum, S̃ = S, every row's terms scaled by its nearest point's (no underflow): the cell
        table's compiled loop with every point in one cell (`_cell_sums`)."""
        value, mean = _cell_sums(x, self._all, np.zeros(len(x), dtype=np.int64), self._xs, self._ys, self.weights,
                                 0.5 / self.variance, gradient)
        return value, ((mean - x) / self.variance if gradient else None)

    def _truncated(self, x: np.ndarray, gradient: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """The sum over the points within r(x) (module docstring), scaled by the nearest point's term."""
        d1_sq, r = self.radius(x)
        near = self.tree.query_ball_point(x, r, return_sorted=False)
        counts = np.fromiter((len(k) for k in near), dtype=np.int64, count=len(x))
        rows, index = np.repeat(np.arange(len(x)), counts), np.concatenate(near).astype(np.int64)
        diff = self.points[index] - x[rows]
        term = self.weights[index] * np.exp(((diff * diff).sum(axis=1) - d1_sq[rows]) * (-0.5 / self.variance))
        total = np.bincount(rows, term, minlength=len(x))
        return _scaled_sums(rows, diff, term, total, d1_sq, self.variance, gradient)


def _scaled_sums(rows, diff, term, total, shift, variance: float, gradient: bool):
    """log S̃ from the kept terms scaled by e^{shift/2v} (`total` per row of x), and its gradient."""
    value = np.log(total) - shift / (2.0 * variance)
    if not gradient:
        return value, None
    grad = np.stack([np.bincount(rows, term * diff[:, a], minlength=len(total)) for a in range(2)], axis=1)
    return value, grad / (total[:, None] * variance)


class _CellTable:
    """The points a sum keeps in each cell of its domain (module docstring), as CSR lists."""

    def __init__(self, kernel: KernelSum, lo: np.ndarray, hi: np.ndarray):
        self.kernel, self.lo, self.hi = kernel, np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
        self._local = threading.local()  # each thread's `_Cache`
        span = self.hi - self.lo
        side = max(math.sqrt(kernel.variance), math.sqrt(float(np.prod(span)) / CELLS))
        self.shape = np.maximum(1, np.ceil(span / side)).astype(int)
        self.side = span / self.shape
        half = 0.5 * float(np.linalg.norm(self.side))
        grid = np.meshgrid(*(self.lo[a] + self.side[a] * (np.arange(self.shape[a]) + 0.5) for a in range(2)),
                           indexing="ij")
        centres = np.stack(grid, axis=-1).reshape(-1, 2)
        d, nearest = kernel.tree.query(centres, k=1)
        reach = np.sqrt((d + half) ** 2 + 2.0 * kernel.variance * kernel._log_cut[nearest]) + half
        self.floor = np.maximum(d - half, 0.0) ** 2  # no point is nearer than this to any x in the cell (`values`)
        kept = kernel.tree.query_ball_point(centres, reach, return_sorted=True)
        self.indptr = np.concatenate([[0], np.cumsum([len(k) for k in kept])]).astype(np.int64)
        index = np.concatenate(kept).astype(np.int64)
        self.centres = centres
        owner = np.repeat(np.arange(len(centres)), np.diff(self.indptr))
        self.x, self.y = (kernel.points[index] - centres[owner]).T.copy()  # each cell's points about its centre
        self.w = kernel.weights[index]

    def inside(self, x: np.ndarray) -> np.ndarray:
        return np.all((x >= self.lo) & (x <= self.hi), axis=1)

    def log_sum(self, x: np.ndarray, gradient: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """log S̃ at the rows of x (P, 2), all in the domain: each row's kept terms (its cell's points, about the
        cell's centre) summed in one compiled loop (`_cell_sums`; numpy's gathers and segment reductions cost
        25 ns a term, user 332's 153 terms a row at the 39-km scale)."""
        k = self.kernel
        if not len(x):
            return np.empty(0), (np.empty((0, 2)) if gradient else None)
        ij = np.minimum(np.floor((x - self.lo) / self.side).astype(np.int64), self.shape - 1)  # `_table_values`'s
        cell = ij[:, 0] * self.shape[1] + ij[:, 1]
        z = x - self.centres[cell]  # about the cell's centre, as the table keeps its points
        value, mean = _cell_sums(z, self.indptr, cell, self.x, self.y, self.w, 0.5 / k.variance, gradient)
        return value, ((mean - z) / k.variance if gradient else None)

    def values(self, x: np.ndarray) -> np.ndarray:
        """log S̃ at every row of x (P, 2): `log_sum` at the rows inside the rectangle, the full sum beyond it
        (`KernelSum._dense`), in one compiled loop (`_table_values`), a row met before read from this thread's
        cache (`_Cache`)."""
        k, cache = self.kernel, self._cache()
        return _table_values(x, self.lo, self.hi, self.side, self.shape, self.centres, self.indptr, self.floor,
                             self.x, self.y, self.w, k._xs, k._ys, k.weights, 0.5 / k.variance, cache.keys,
                             cache.values, cache.filled, *scratch(len(k.points)))

    def _cache(self) -> _Cache:
        cache = getattr(self._local, "cache", None)
        if cache is None:
            cache = self._local.cache = _Cache()
        return cache


class _Cache:
    """The last rows met, by their coordinates' bits, and their log S̃: a direct-mapped table of CACHE slots (a
    row's slot from a hash of its bits; a new row takes its slot's place). A value read is the one computed
    for the same bits, so the cache changes no number. SMC's block kernel moves one member of an ego
    network and leaves the others' rows as they were: 17-19% of a Gowalla event's rows were met before.
    One per thread (a slot's key and value are written apart)."""

    def __init__(self):
        self.keys = np.zeros((CACHE, 2), dtype=np.uint64)
        self.values = np.zeros(CACHE)
        self.filled = np.zeros(CACHE, dtype=np.bool_)


@numba.njit(cache=True, nogil=True)
def _row_sum(zx, zy, a, b, px, py, w, half_precision, gradient):  # pragma: no cover (compiled)
    """log Σ_{i in [a, b)} w_i e^{-|z - p_i|² h} (h = 1/2v), the terms scaled by the nearest point's (the largest
    term is 1: no underflow), and with `gradient` the terms' weighted mean of p_i (else 0, 0)."""
    nearest = np.inf
    for i in range(a, b):
        nearest = min(nearest, (zx - px[i]) ** 2 + (zy - py[i]) ** 2)
    total, mx, my = 0.0, 0.0, 0.0
    for i in range(a, b):
        e = w[i] * math.exp((nearest - (zx - px[i]) ** 2 - (zy - py[i]) ** 2) * half_precision)
        total += e
        if gradient:
            mx += e * px[i]
            my += e * py[i]
    return math.log(total) - nearest * half_precision, mx / total, my / total


@numba.njit(cache=True, nogil=True)
def _table_values(x, lo, hi, side, shape, centres, indptr, floor, px, py, w, all_x, all_y, all_w, half_precision,
                  keys, cached, filled, d, q, bits, scale):  # pragma: no cover (compiled)
    """log S̃ per row of x: inside [lo, hi] its cell's kept points about the cell's centre (`_CellTable.log_sum`'s
    cell and terms, `_shifted_sum`), beyond it every point (`_full_sum`); a row whose bits are in its slot of the
    cache (`_Cache`) is read from it, any other is computed and takes the slot."""
    n, slots = len(x), len(filled)
    value = np.empty(n)
    x_bits = x.view(np.uint64)
    shift = np.uint64(64 - int(round(math.log2(slots))))
    for r in range(n):
        bx, by = x_bits[r, 0], x_bits[r, 1]
        slot = int(((bx * np.uint64(0x9E3779B97F4A7C15)) ^ (by * np.uint64(0xC2B2AE3D27D4EB4F))) >> shift)
        if filled[slot] and keys[slot, 0] == bx and keys[slot, 1] == by:
            value[r] = cached[slot]
            continue
        if lo[0] <= x[r, 0] <= hi[0] and lo[1] <= x[r, 1] <= hi[1]:
            c = min(math.floor((x[r, 0] - lo[0]) / side[0]), shape[0] - 1) * shape[1] + min(
                math.floor((x[r, 1] - lo[1]) / side[1]), shape[1] - 1)  # `//` on floats: fmod's 40 ns
            zx, zy = x[r, 0] - centres[c, 0], x[r, 1] - centres[c, 1]
            total = _shifted_sum(zx, zy, indptr[c], indptr[c + 1], px, py, w, floor[c], half_precision, q, bits,
                                 scale)
            if total > TINY:
                value[r] = math.log(total) - floor[c] * half_precision
            else:  # far from every point: the terms scaled by the nearest one's
                value[r] = _row_sum(zx, zy, indptr[c], indptr[c + 1], px, py, w, half_precision, False)[0]
        else:
            value[r] = _full_sum(x[r, 0], x[r, 1], all_x, all_y, all_w, half_precision, d, q, bits, scale)
        keys[slot, 0], keys[slot, 1], cached[slot], filled[slot] = bx, by, value[r], True
    return value


@numba.njit(cache=True, nogil=True, fastmath=FAST)
def _shifted_sum(zx, zy, a, b, px, py, w, floor, half_precision, q, bits, scale):  # pragma: no cover (compiled)
    """Σ_{i in [a, b)} w_i e^{(floor - |z - p_i|²) h}: every exponent <= 0 when no p_i is nearer z than √floor
    (`_CellTable.floor`), in two loops that vectorise (`fastexp.exp_parts`)."""
    n = b - a
    for i in range(n):
        dx, dy = zx - px[a + i], zy - py[a + i]
        q[i], bits[i] = exp_parts((floor - dx * dx - dy * dy) * half_precision)
    total = 0.0
    for i in range(n):
        total += w[a + i] * q[i] * scale[i]
    return total


@numba.njit(cache=True, nogil=True, fastmath=FAST)
def _full_sum(zx, zy, px, py, w, half_precision, d, q, bits, scale):  # pragma: no cover (compiled)
    """log Σ_i w_i e^{-|z - p_i|² h} over every point: `_shifted_sum` with the nearest point's squared distance
    as the floor (its term is w_1: no underflow; a term below e^-600 of it is left out, within rounding of the
    sum)."""
    n = len(px)
    for i in range(n):
        dx, dy = zx - px[i], zy - py[i]
        d[i] = dx * dx + dy * dy
    nearest = smallest(d, n)
    return math.log(_shifted_sum(zx, zy, 0, n, px, py, w, nearest, half_precision, q, bits, scale)) - (
        nearest * half_precision)


@numba.njit(cache=True, nogil=True)
def _full_values(x, px, py, w, half_precision, d, q, bits, scale):  # pragma: no cover (compiled)
    """`_full_sum` at every row of x."""
    value = np.empty(len(x))
    for r in range(len(x)):
        value[r] = _full_sum(x[r, 0], x[r, 1], px, py, w, half_precision, d, q, bits, scale)
    return value


@numba.njit(cache=True, nogil=True)
def _cell_sums(z, indptr, cell, px, py, w, half_precision, gradient):  # pragma: no cover (compiled)
    """Per row r: log Σ_i w_i e^{-|z_r - p_i|² h} over its cell's points i (`_row_sum`), and with `gradient` the
    terms' weighted mean of p_i (the gradient is (mean - z) / v)."""
    n = len(cell)
    value, mean = np.empty(n), np.zeros((n, 2))
    for r in range(n):
        value[r], mean[r, 0], mean[r, 1] = _row_sum(z[r, 0], z[r, 1], indptr[cell[r]], indptr[cell[r] + 1], px, py,
                                                    w, half_precision, gradient)
    return value, mean


class LogKernelSum(Op):
    """log S̃ of a `KernelSum` at x (..., 2), as a PyTensor Op with output (...); its gradient is
    `KernelSumGradient`'s. Instances compare by identity (each holds its own points)."""

    def __init__(self, kernel: KernelSum):
        self.kernel = kernel

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [pt.tensor(dtype="float64", shape=x.type.shape[:-1])])

    def perform(self, node, inputs, outputs):
        x = np.asarray(inputs[0], dtype=float)
        outputs[0][0] = self.kernel.log_sum(x.reshape(-1, 2))[0].reshape(x.shape[:-1])

    def grad(self, inputs, output_grads):
        return [output_grads[0][..., None] * KernelSumGradient(self.kernel)(inputs[0])]


class KernelSumGradient(Op):
    """The gradient (..., 2) of log S̃ at x (..., 2) (module docstring)."""

    def __init__(self, kernel: KernelSum):
        self.kernel = kernel

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [pt.tensor(dtype="float64", shape=x.type.shape)])

    def perform(self, node, inputs, outputs):
        x = np.asarray(inputs[0], dtype=float)
        outputs[0][0] = self.kernel.log_sum(x.reshape(-1, 2), gradient=True)[1].reshape(x.shape)

    def grad(self, inputs, output_grads):
        raise NotImplementedError("KernelSumGradient has no gradient")


@_vectorize_node.register(LogKernelSum)
@_vectorize_node.register(KernelSumGradient)
def _vectorize_kernel_op(op: Op, node: Apply, x) -> Apply:
    """A batch of points is more leading axes: the same Op (no Python loop over the batch)."""
    return op.make_node(x)


def log_kernel_sum(kernel: KernelSum, x):
    """log S̃ at x (..., 2) as a PyTensor expression: the Op, or, over at most GRAPH_POINTS points,
    the full sum written as a graph (exact, and compiled: no Python call per evaluation, which over a
    few points costs more than the sum; over 20 to 54, a Gowalla friend's known friends, the graph's
    exponentials cost 9 ns a term against the Op's vectorised 1.5, and it was a third of an SMC event's
    log-density)."""
    if len(kernel.points) > GRAPH_POINTS:
        return LogKernelSum(kernel)(x)
    o = kernel.points
    d2 = (x[..., 0, None] - o[:, 0]) ** 2 + (x[..., 1, None] - o[:, 1]) ** 2
    terms = np.log(kernel.weights) - d2 / (2.0 * kernel.variance)
    peak = pt.max(terms, axis=-1, keepdims=True)  # stable in any mode (FAST_COMPILE leaves logsumexp unrewritten)
    return pt.log(pt.sum(pt.exp(terms - peak), axis=-1)) + peak[..., 0]


def log_sum_error(rho: float = RHO) -> float:
    """The most log S - log S̃ can be (module docstring): log1p(ρ)."""
    return math.log1p(rho)
