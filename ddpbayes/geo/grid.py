"""A wide Gaussian kernel sum over fixed points as a bilinear interpolant of its logarithm on a
rectangle, with a certified error (DESIGN §7.1, issue #42.1): the near-friend ego network's
normalisers at the 229 km scale keep half of the 2,389 known users however they are truncated, and
each is a fixed smooth function of a particle's 2-D position, so it is tabulated once per model.

For S(x) = Σ_k c_k exp(-|x - o_k|² / 2v) and f = log S, the weights w_k(x) ∝ c_k exp(-|x - o_k|²/2v)
give ∂²f/∂x² = Var_w(o_x) / v² - 1/v (and alike in y). Over a block of half-sides (a_x, a_y) around
its centre c, w(x) is w(c) tilted by e^{(x - c)·(o_k - c)/v} (the common factor e^{-|x - c|²/2v}
cancels), and |(x - c)·(o_k - c)| <= t_k = a_x |o_kx - c_x| + a_y |o_ky - c_y|, so for every x in
the block and any a (here w(c)'s mean)

    Var_w(x)(o_x) <= E_w(x)[(o_x - a)²] <= Σ_k w_k(c) e^{t_k/v} (o_kx - a)² / Σ_k w_k(c) e^{-t_k/v} =: V,

and |∂²f/∂x²| <= M_x = max(1/v, V/v² - 1/v). The grid's lines are uniform inside each column and
row of blocks, at spacings δ_x, δ_y chosen so that δ_x² M_x / 8 and δ_y² M_y / 8 stay under half
the tolerance (the largest M of the column's, the row's blocks); a cell lies in one block, and the
bilinear interpolant I f of the exact nodal values errs there by at most δ_x²/8 max|f_xx| +
δ_y²/8 max|f_yy| (I = I_x I_y: f - I f = (f - I_x f) + I_x (f - I_y f), linear interpolation errs
by δ²/8 max|f''| and I_x is a convex combination). `error` is the largest such bound over the
blocks plus `ROUNDING` (the nodal sums of positive terms and the interpolation in double precision).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from scipy.special import logsumexp

from ddpbayes.errors import InputError
from ddpbayes.limits import check_memory

TOLERANCE = 1e-4  # the interpolation error in log S aimed at (nats); `error` is what is certified
BLOCKS_PER_SCALE = 4  # blocks per kernel standard deviation √v along each side
CHUNK = 256  # rows of nodes per matrix product (`_nodal_log_sums`)
UNDERFLOW = 600.0  # the largest |x - o|²/2v a nodal term may reach (e^-600 is a normal double)
ROUNDING = 1e-10  # nats: the nodal sums' and the interpolation's rounding, generously


class TooFine(ValueError):
    """The rectangle's table would not fit in the available memory (`limits.check_memory`), or its
    terms would underflow: keep the sum."""


class LogSumGrid:
    """log S of the module docstring over the rectangle [lo, hi], bilinear between nodal values
    on a tensor grid, uniform inside each column and row of blocks; `error` bounds |log Ŝ - log S|."""

    def __init__(self, points: np.ndarray, weights: np.ndarray, variance: float, lo: np.ndarray, hi: np.ndarray,
                 tolerance: float = TOLERANCE):
        self.lo, self.hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
        span = self.hi - self.lo
        reach = np.maximum(np.abs(points - self.lo).max(axis=0), np.abs(points - self.hi).max(axis=0))
        if float(reach @ reach) / (2 * variance) > UNDERFLOW:
            raise TooFine("the rectangle is too wide for the kernel: its terms would underflow")
        blocks = np.maximum(1, np.ceil(span * BLOCKS_PER_SCALE / math.sqrt(variance))).astype(int)
        self.block = span / blocks
        m_x, m_y = curvature_bounds(points, weights, variance, self.lo, self.block, blocks)
        cells = [np.maximum(1, np.ceil(self.block[a] * np.sqrt(m.max(axis=1 - a) / (4 * tolerance)))).astype(int)
                 for a, m in enumerate((m_x, m_y))]  # per column (a = 0) and per row (a = 1): δ² M / 8 <= tol / 2
        nodes = [int(c.sum()) + 1 for c in cells]
        try:
            check_memory(_table_bytes(*nodes, len(points)), "a kernel sum's table", f"{nodes[0]:,} x {nodes[1]:,} nodes")
        except InputError as e:
            raise TooFine(str(e)) from None
        self.cells, self.step = cells, [self.block[a] / cells[a] for a in range(2)]
        self.lines = [self._lines(a) for a in range(2)]
        spacing = np.add.outer(self.step[0] ** 2, np.zeros(len(cells[1]))), np.add.outer(
            np.zeros(len(cells[0])), self.step[1] ** 2)
        self.error = float(np.max(spacing[0] * m_x + spacing[1] * m_y)) / 8 + ROUNDING
        self.values = _nodal_log_sums(points, weights, variance, *self.lines)

    def _lines(self, axis: int) -> np.ndarray:
        """The grid's coordinates along `axis`: each block's uniform lines, shared block edges once."""
        parts = [self.lo[axis] + self.block[axis] * (b + np.arange(n) / n) for b, n in enumerate(self.cells[axis])]
        return np.concatenate(parts + [[self.hi[axis]]])

    @property
    def nodes(self) -> int:
        return self.values.size

    def inside(self, x: np.ndarray) -> np.ndarray:
        """Whether each row of x (P, 2) lies in the rectangle."""
        return np.all((x >= self.lo) & (x <= self.hi), axis=1)

    def log_sum(self, x: np.ndarray, gradient: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
        """The interpolant (P,) at the rows of x (P, 2), all inside the rectangle, and its gradient: each row's
        cell found by bisection on the lines, in one compiled loop (`_bilinear`; numpy's dozen small passes cost
        1.1 us a row)."""
        value, grad = _bilinear(np.ascontiguousarray(x, dtype=float), self.lines[0], self.lines[1], self.values,
                                gradient)
        return value, (grad if gradient else None)


@numba.njit(cache=True, nogil=True)
def _bilinear(x, xs, ys, values, gradient):  # pragma: no cover (compiled)
    """Bilinear interpolation of `values` on the lines xs, ys at the rows of x, and its gradient with
    `gradient` (a point on a line takes the cell above it, the last line the cell below)."""
    n = len(x)
    out, grad = np.empty(n), np.zeros((n, 2))
    for r in range(n):
        i = min(max(np.searchsorted(xs, x[r, 0], side="right") - 1, 0), len(xs) - 2)
        j = min(max(np.searchsorted(ys, x[r, 1], side="right") - 1, 0), len(ys) - 2)
        hx, hy = xs[i + 1] - xs[i], ys[j + 1] - ys[j]
        s, t = (x[r, 0] - xs[i]) / hx, (x[r, 1] - ys[j]) / hy
        v00, v10, v01, v11 = values[i, j], values[i + 1, j], values[i, j + 1], values[i + 1, j + 1]
        low, high = v00 + s * (v10 - v00), v01 + s * (v11 - v01)
        out[r] = low + t * (high - low)
        if gradient:
            grad[r, 0] = ((1 - t) * (v10 - v00) + t * (v11 - v01)) / hx
            grad[r, 1] = (high - low) / hy
    return out, grad


def curvature_bounds(points: np.ndarray, weights: np.ndarray, variance: float, lo: np.ndarray, block: np.ndarray,
                     blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """M_x and M_y (columns, rows) of the module docstring: bounds on |∂²log S/∂x²| and |∂²log S/∂y²|
    over each block of the grid of `blocks` blocks of sides `block` from `lo`."""
    half = block / 2
    centres = [lo[a] + block[a] * (np.arange(blocks[a]) + 0.5) for a in range(2)]
    out = np.empty((2, *blocks))
    log_c = np.log(weights)
    for col, cx in enumerate(centres[0]):
        d = [points[:, 0][None] - cx, points[:, 1][None] - centres[1][:, None]]  # (rows, N) each: o - c
        log_w = log_c - (d[0] ** 2 + d[1] ** 2) / (2 * variance)
        tilt = (half[0] * np.abs(d[0]) + half[1] * np.abs(d[1])) / variance
        log_den = logsumexp(log_w - tilt, axis=1)
        share = np.exp(log_w - logsumexp(log_w, axis=1, keepdims=True))
        for a in range(2):
            centred = d[a] - np.sum(share * d[a], axis=1, keepdims=True)  # o - a, a = w(c)'s mean
            with np.errstate(divide="ignore"):
                log_num = logsumexp(log_w + tilt + 2 * np.log(np.abs(centred)), axis=1)
            bound = np.exp(log_num - log_den)
            out[a, col] = np.maximum(1 / variance, bound / variance**2 - 1 / variance)
    return out[0], out[1]


def _table_bytes(columns: int, rows: int, points: int) -> int:
    """Bytes `_nodal_log_sums` holds at once: the nodal values, both factors and a chunk's product."""
    return 8 * (columns * rows + (columns + rows) * points + CHUNK * rows)


def _nodal_log_sums(points: np.ndarray, weights: np.ndarray, variance: float, xs: np.ndarray, ys: np.ndarray
                    ) -> np.ndarray:
    """log S at every node (len(xs), len(ys)): the Gaussian kernel factorises, S = E_x diag(c) E_yᵀ
    (a matrix product, in row chunks), weights scaled by their largest (no term below e^-UNDERFLOW)."""
    top = weights.max()
    ex = np.exp(-((xs[:, None] - points[None, :, 0]) ** 2) / (2 * variance)) * (weights / top)
    ey = np.exp(-((ys[:, None] - points[None, :, 1]) ** 2) / (2 * variance))
    out = np.empty((len(xs), len(ys)))
    for a in range(0, len(xs), CHUNK):
        out[a:a + CHUNK] = np.log(ex[a:a + CHUNK] @ ey.T)
    return out + math.log(top)
