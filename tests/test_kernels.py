"""Truncated kernel sums (geo/kernels.py, DESIGN §7.1): against the full sum written here, within the
bound the test derives from the cut radius (the dropped points' count times the kernel at that radius),
the gradient against the full sum's, and the Op over a batch against the Op point by point."""

from __future__ import annotations

import math

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.graph.replace import vectorize_graph

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
        kernel = KernelSum(points, v)
        value, grad = kernel.log_sum(x, gradient=True)
        full, d2 = _full(x, points, np.ones(len(points)), v)
        share = np.exp(-d2 / (2 * v)) / full[:, None]
        want = np.einsum("pn,pna->pa", share, points[None] - x[:, None]) / v  # ∇ log S = E_share[o - x] / v
        d_min2 = ((x[:, None, :] - points[None]) ** 2).sum(-1).min(axis=1)
        assert value == pytest.approx(np.log(full) - d_min2 / (2 * v), abs=2e-9)
        assert grad == pytest.approx(want, rel=1e-6, abs=1e-12)
    assert KernelSum(points, 230.0 ** 2).dense


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
    assert got == pytest.approx(full, abs=3 * math.log1p(1e-9))
