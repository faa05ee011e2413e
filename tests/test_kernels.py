"""Truncated kernel sums (geo/kernels.py, DESIGN §7.1): against the full sum written here, within the
bound the test derives from the cut radius (the dropped points' count times the kernel at that radius),
the gradient against the full sum's, and the Op over a batch against the Op point by point."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.graph.replace import vectorize_graph

from ddpbayes.geo.grid import ROUNDING, LogSumGrid, TooFine
from ddpbayes.geo.kernels import KernelSum, LogKernelSum, log_sum_error

FAST = "FAST_COMPILE"  # no C compilation: these graphs are a few nodes

def _cities(rng: np.random.Generator, n: int) -> np.ndarray:
    """Points in clusters over a 4,000 x 2,500 km box, as users are."""
    centres = rng.uniform([0, 0], [4000, 2500], size=(12, 2))
    return centres[rng.integers(0, 12, n)] + rng.normal(0, 60, (n, 2))


def _full(x: np.ndarray, points: np.ndarray, weights: np.ndarray, v: float) -> tuple[np.ndarray, np.ndarray]:
    """Every term, each row scaled by e^{d_min²/2v} (no underflow far from the points): S e^{d_min²/2v}
    (P,), and the squared distances (P, N) less the row's smallest."""
    d2 = ((x[:, None, :] - points[None]) ** 2).sum(-1)
    d2 = d2 - d2.min(axis=1, keepdims=True)
    return (weights * np.exp(-d2 / (2 * v))).sum(axis=1), d2


@pytest.mark.parametrize("weighted", [False, True])
def test_truncated_sum_within_its_stated_bound(weighted):
    rng = np.random.default_rng(42)
    points = _cities(rng, 2000)
    weights = rng.uniform(0.2, 5.0, len(points)) if weighted else np.ones(len(points))
    v, rho = 40.0 ** 2, 1e-3  # a loose ρ, so that the dropped mass is visible
    kernel = KernelSum(points, v, weights if weighted else None, rho)
    assert not kernel.dense
    x = np.vstack([points[rng.integers(0, len(points), 150)] + rng.normal(0, 30, (150, 2)),
                   rng.uniform([-500, -500], [4500, 3000], size=(150, 2))])  # near users, and anywhere
    full, d2 = _full(x, points, weights, v)  # scaled and shifted by the nearest point's squared distance
    d_min2 = ((x[:, None, :] - points[None]) ** 2).sum(-1).min(axis=1)
    got = np.exp(kernel.log_sum(x)[0] + d_min2 / (2 * v))  # scaled alike
    nearest = np.argmin(d2, axis=1)
    r2 = 2 * v * np.log(weights.sum() / (weights[nearest] * rho))  # the cut radius² less d_min², shifted alike
    kept = d2 <= r2[:, None]
    within = (weights * np.exp(-d2 / (2 * v)) * kept).sum(axis=1)
    dropped_bound = ((~kept) * weights).sum(axis=1) * np.exp(-r2 / (2 * v))  # count (weight) x kernel at r
    assert got == pytest.approx(within, rel=1e-12)
    assert np.all(full - got >= -1e-12 * full)
    assert np.all(full - got <= dropped_bound * (1 + 1e-9) + 1e-300)
    assert np.all(dropped_bound <= rho * got * (1 + 1e-9))  # the bound is within ρ of the kept sum
    assert np.all(np.log(full) - np.log(got) <= log_sum_error(rho) + 1e-12)
    assert np.any(full - got > 1e-9 * full)  # something was dropped: the check is not vacuous


def test_dense_sum_and_gradients_against_the_full_sum():
    rng = np.random.default_rng(5)
    points = _cities(rng, 800)
    x = points[:40] + rng.normal(0, 100, (40, 2))
    for v in (40.0 ** 2, 230.0 ** 2):  # truncated, then dense (the cut radius spans the points)
        kernel = KernelSum(points, v, rho=1e-9)  # the full sum's value and gradient within 1e-9
        value, grad = kernel.log_sum(x, gradient=True)
        full, d2 = _full(x, points, np.ones(len(points)), v)
        share = np.exp(-d2 / (2 * v)) / full[:, None]
        want = np.einsum("pn,pna->pa", share, points[None] - x[:, None]) / v  # ∇ log S = E_share[o - x] / v
        d_min2 = ((x[:, None, :] - points[None]) ** 2).sum(-1).min(axis=1)
        assert value == pytest.approx(np.log(full) - d_min2 / (2 * v), abs=2e-9)
        assert grad == pytest.approx(want, rel=1e-6, abs=1e-12)
    assert KernelSum(points, 230.0 ** 2).dense


def test_a_sum_over_few_points_is_the_full_sum_in_its_vectorised_loop():
    """Over at most FULL_POINTS points a sum is the full one whatever its width (no truncation, no table, error
    zero): its values alone (the vectorised loop) and beside its gradient (`_dense`) are the full sum written
    here, near the points and thousands of kernel widths away; over at most GRAPH_POINTS points
    `log_kernel_sum` is a PyTensor graph of the same sum."""
    from ddpbayes.geo.kernels import FULL_POINTS, GRAPH_POINTS, log_kernel_sum

    rng = np.random.default_rng(12)
    points = _cities(rng, FULL_POINTS)
    weights = rng.uniform(0.2, 5.0, len(points))
    x = np.vstack([points[:30] + rng.normal(0, 2, (30, 2)), rng.uniform(-2e4, 2e4, (30, 2))])
    for v in (1.3 ** 2, 230.0 ** 2):
        kernel = KernelSum(points, v, weights, domain=(np.zeros(2), np.array([4000.0, 2500.0])))
        assert kernel.dense and kernel.cells is None and kernel.grid is None and kernel.error == (0.0, 0.0)
        want = _log_full(x, points, weights, v)
        assert kernel.log_sum(x)[0] == pytest.approx(want, rel=1e-13, abs=1e-12)
        assert kernel.log_sum(x, gradient=True)[0] == pytest.approx(want, rel=1e-13, abs=1e-12)
    few = KernelSum(points[:GRAPH_POINTS], 40.0 ** 2, weights[:GRAPH_POINTS])
    z = pt.dmatrix("z")
    graph = pytensor.function([z], log_kernel_sum(few, z), mode=FAST)
    assert graph(x) == pytest.approx(few.log_sum(x)[0], rel=1e-13, abs=1e-12)


def test_op_over_a_batch_is_the_op_per_point():
    rng = np.random.default_rng(9)
    points = _cities(rng, 300)
    op = LogKernelSum(KernelSum(points, 50.0 ** 2))
    x = pt.dmatrix("x")  # (members, 2)
    out = op(x).sum() + pt.sum(pytensor.grad(op(x).sum(), x) ** 2)  # value and gradient both
    batch = pt.tensor3("batch")
    batched = pytensor.function([batch], vectorize_graph(out, {x: batch}), mode=FAST)
    single = pytensor.function([x], out, mode=FAST)
    values = rng.uniform([0, 0], [4000, 2500], size=(7, 3, 2))
    want = [float(single(v)) for v in values]
    assert batched(values) == pytest.approx(want, rel=1e-12)
    scaled = _full(values[0], points, np.ones(len(points)), 50.0 ** 2)[0]
    full = (np.log(scaled) - ((values[0][:, None] - points[None]) ** 2).sum(-1).min(axis=1) / (2 * 50.0 ** 2)).sum()
    got = float(pytensor.function([x], op(x).sum(), mode=FAST)(values[0]))
    assert got == pytest.approx(full, abs=3 * log_sum_error())


def _log_full(x: np.ndarray, points: np.ndarray, weights: np.ndarray, v: float) -> np.ndarray:
    """log S at the rows of x, every term summed (scaled by the nearest point's: no underflow)."""
    scaled, _ = _full(x, points, weights, v)
    return np.log(scaled) - ((x[:, None, :] - points[None]) ** 2).sum(-1).min(axis=1) / (2 * v)


def _full_gradient(x: np.ndarray, points: np.ndarray, weights: np.ndarray, v: float) -> np.ndarray:
    """∇ log S at the rows of x: the terms' weighted mean of o - x, over v."""
    full, d2 = _full(x, points, weights, v)
    share = weights * np.exp(-d2 / (2 * v)) / full[:, None]
    return np.einsum("pn,pna->pa", share, points[None] - x[:, None]) / v


def test_table_of_kept_points_within_its_bound():
    """A domain's table keeps, per cell, a superset of the points within each x's cut radius: the
    same bound 0 <= log S - log S̃ <= log1p(ρ) at a loose ρ, in a margin around the domain too; beyond
    it, the full sum."""
    rng = np.random.default_rng(3)
    points = _cities(rng, 2000)
    weights = rng.uniform(0.2, 5.0, len(points))
    v, rho, lo, hi = 40.0 ** 2, 1e-3, np.array([0.0, 0.0]), np.array([4000.0, 2500.0])
    kernel = KernelSum(points, v, weights, rho, domain=(lo, hi))
    assert kernel.cells is not None and kernel.error == (log_sum_error(rho), 0.0)
    x = np.vstack([points[rng.integers(0, len(points), 200)] + rng.normal(0, 30, (200, 2)),
                   rng.uniform(lo, hi, size=(200, 2))])
    x = x[np.all((x >= lo) & (x <= hi), axis=1)]
    got = kernel.log_sum(x)[0]
    gap = _log_full(x, points, weights, v) - got
    assert np.all(gap >= -1e-12) and np.all(gap <= log_sum_error(rho) + 1e-12)
    assert np.any(gap > 1e-9)  # mass was dropped: the check is not vacuous
    tight = KernelSum(points, v, weights, 1e-9, domain=(lo, hi))
    _, want = KernelSum(points, v, weights, 1e-9).log_sum(x, gradient=True)  # at ρ = 1e-9 both are the full gradient
    assert tight.log_sum(x, gradient=True)[1] == pytest.approx(want, rel=1e-7, abs=1e-12)
    margin = np.array([[-300.0, 100.0], [4100.0, 2600.0], [1000.0, -40.0]])  # in the table's margin: the bound
    gap = _log_full(margin, points, weights, v) - kernel.log_sum(margin)[0]
    assert np.all(gap >= -1e-12) and np.all(gap <= log_sum_error(rho) + 1e-12)
    outside = np.array([[-2000.0, 100.0], [6000.0, 4000.0], [1000.0, -900.0]])  # beyond it (a fifth of each side)
    value, grad = kernel.log_sum(np.vstack([x[:3], outside]), gradient=True)
    assert value[3:] == pytest.approx(_log_full(outside, points, weights, v), rel=1e-13)  # the full sum, S̃ = S
    assert value[:3] == pytest.approx(got[:3], rel=1e-15)  # rows inside, beside them, as alone
    assert grad[3:] == pytest.approx(_full_gradient(outside, points, weights, v), rel=1e-9, abs=1e-15)


def test_cell_table_values_in_one_loop_and_from_the_cache_are_the_masked_sums(monkeypatch):
    """`KernelSum.log_sum`'s value path over a cell table (one compiled loop, its exponentials vectorised, rows
    met before read from a cache) gives the cell sums inside the table's rectangle and the full sum beyond it:
    the two paths it replaces within rounding (1e-13), and its own first call's numbers to the bit on a repeat,
    rows in another order, a cache of 4 slots (every slot taken by several rows in turn) and another thread;
    and within the truncation's bound of the full sum written here."""
    import threading

    from ddpbayes.geo import kernels

    rng = np.random.default_rng(5)
    points = _cities(rng, 2000)
    weights = rng.uniform(0.2, 5.0, len(points))
    v, rho, lo, hi = 40.0 ** 2, 1e-6, np.array([0.0, 0.0]), np.array([4000.0, 2500.0])
    x = np.vstack([[[0.0, 0.0]],  # its bits are those of an empty slot's key
                   points[rng.integers(0, len(points), 300)] + rng.normal(0, 30, (300, 2)),
                   rng.uniform(lo - 0.4 * (hi - lo), hi + 0.4 * (hi - lo), size=(300, 2))])

    def expected(kernel: KernelSum, rows: np.ndarray) -> np.ndarray:
        table, out = kernel.cells, np.empty(len(rows))
        inside = table.inside(rows)
        out[inside] = table.log_sum(rows[inside], False)[0]
        out[~inside] = kernel._dense(rows[~inside], False)[0]
        return out

    kernel = KernelSum(points, v, weights, rho, domain=(lo, hi))
    want = expected(kernel, x)
    assert (~kernel.cells.inside(x)).sum() > 50  # rows beyond the table were met
    first = kernel.log_sum(x)[0]
    assert first == pytest.approx(want, rel=1e-13, abs=1e-12)
    want = first
    assert np.array_equal(kernel.log_sum(x)[0], want)  # again: from the cache
    assert kernel.cells._cache().filled.sum() > 0.5 * len(x)
    order = rng.permutation(len(x))
    assert np.array_equal(kernel.log_sum(x[order])[0], want[order])
    gap = _log_full(x, points, weights, v) - want
    assert np.all(gap >= -1e-12) and np.all(gap <= log_sum_error(rho) + 1e-12)
    monkeypatch.setattr(kernels, "CACHE", 4)
    small = KernelSum(points, v, weights, rho, domain=(lo, hi))
    for rows in (np.arange(len(x)), order, np.repeat(order[:20], 3)):
        assert np.array_equal(small.log_sum(x[rows])[0], want[rows])
    twins = np.empty((2 * len(x), 2))  # each row beside one of the same x and another y: the key is both
    twins[0::2], twins[1::2] = x, x + np.array([0.0, 7.0])
    assert small.log_sum(twins)[0] == pytest.approx(expected(kernel, twins), rel=1e-13, abs=1e-12)
    got = {}
    thread = threading.Thread(target=lambda: got.update(value=small.log_sum(x)[0]))
    thread.start()
    thread.join()
    assert np.array_equal(got["value"], want)


def test_cell_table_far_from_every_point_scales_by_the_nearest_term():
    """A narrow kernel over a wide, nearly empty rectangle: in a cell far from every point the cell's floor
    leaves every term below e^-708, and the row is summed again scaled by its nearest term: finite, and the
    full sum written here (at ρ = 1e-9 nothing the nearest keeps is lost)."""
    rng = np.random.default_rng(8)
    points = np.vstack([rng.uniform(0, 20, (150, 2)), rng.uniform(4980, 5000, (150, 2))])  # two far corners
    v, lo, hi = 1.0, np.array([0.0, 0.0]), np.array([5000.0, 5000.0])
    kernel = KernelSum(points, v, None, 1e-9, domain=(lo, hi))
    assert kernel.cells is not None and kernel.cells.floor.max() * 0.5 / v > 1e5
    x = np.array([[2500.0, 2500.0], [1.0, 0.5], [4990.0, 4999.0], [1200.0, 3100.0]])
    got = kernel.log_sum(x)[0]
    assert np.all(np.isfinite(got))
    assert got == pytest.approx(_log_full(x, points, np.ones(len(points)), v), rel=1e-12)


def test_wide_sum_tabulated_within_its_certified_error():
    """The bilinear table of a dense sum's log (geo/grid.py) against the full sum at random points
    and at cell centres (where linear interpolation errs most): within its `error`, and within the
    bound written here from Popoviciu's inequality (a variance over points spread D wide is at most
    D²/4: |∂²log S/∂x²| <= max(1/v, D²/4v² - 1/v)) times each cell's δ²/8."""
    rng = np.random.default_rng(8)
    points = _cities(rng, 1500)
    weights = rng.uniform(0.5, 2.0, len(points))
    v, lo, hi = 230.0 ** 2, np.array([0.0, 0.0]), np.array([4000.0, 2500.0])
    grid = LogSumGrid(points, weights, v, lo, hi, tolerance=1e-3)
    assert grid.error <= 1e-3 + ROUNDING
    kernel = KernelSum(points, v, weights, domain=(lo, hi))
    assert kernel.grid is not None and kernel.error == (kernel.grid.error, kernel.grid.error)
    xs, ys = grid.lines
    i, j = rng.integers(0, len(xs) - 1, 3000), rng.integers(0, len(ys) - 1, 3000)
    middles = np.column_stack([(xs[i] + xs[i + 1]) / 2, (ys[j] + ys[j + 1]) / 2])
    x = np.vstack([rng.uniform(lo, hi, size=(3000, 2)), middles])
    got, grad = grid.log_sum(x, gradient=True)
    err = np.abs(got - _log_full(x, points, weights, v))
    curvature = np.maximum(1 / v, np.ptp(points, axis=0) ** 2 / (4 * v * v) - 1 / v)
    ix = np.clip(np.searchsorted(xs, x[:, 0], side="right") - 1, 0, len(xs) - 2)
    iy = np.clip(np.searchsorted(ys, x[:, 1], side="right") - 1, 0, len(ys) - 2)
    written = (np.diff(xs)[ix] ** 2 * curvature[0] + np.diff(ys)[iy] ** 2 * curvature[1]) / 8
    assert np.all(err <= grid.error)
    assert np.all(err <= written + 1e-10)
    assert err.max() > 0.1 * grid.error  # the certificate is not vacuous
    h = 1e-4  # the gradient is the interpolant's own (NUTS moves on the tabulated density)
    inner = x[:3000]
    for a in range(2):
        step = np.zeros(2)
        step[a] = h
        numeric = (grid.log_sum(inner + step)[0] - grid.log_sum(inner - step)[0]) / (2 * h)
        near_line = np.abs(numeric - grad[:3000, a]) > 1e-6
        assert near_line.mean() < 0.01  # differ only within h of a grid line (the gradient jumps there)


def test_table_too_large_for_the_memory_is_not_built():
    """A tolerance of 1e-16 nats asks for about 1e12 nodes (8 TB): the table is refused by the memory
    check before anything is allocated (`TooFine`, which keeps the sum), with the sizes in its message."""
    rng = np.random.default_rng(8)
    points = _cities(rng, 200)
    with pytest.raises(TooFine, match=r"a kernel sum's table \([\d,]+ x [\d,]+ nodes\) would need about .*available memory"):
        LogSumGrid(points, np.ones(len(points)), 230.0 ** 2, np.array([0.0, 0.0]), np.array([4000.0, 2500.0]),
                   tolerance=1e-16)
