"""DP-Sniper's sparse-vector and geometric benchmark programs (benchmarks/dpsniper_programs.py) are
vectorised; here each is checked draw for draw against the algorithm written row by row (Lyu et
al. 2017, Algs. 1-4, with DP-Sniper's abort; Wang et al.'s numerical SVT; Balcer & Vadhan's
GeoSample by a linear scan of its CDF), fed the same random numbers in the same order."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

_SPEC = importlib.util.spec_from_file_location(
    "dpsniper_programs", Path(__file__).resolve().parent.parent / "benchmarks" / "dpsniper_programs.py")
dp = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("dpsniper_programs", dp)  # its dataclasses look their module up
_SPEC.loader.exec_module(dp)

EPS = dp.EPS
ANSWERS = np.array([[1.0, 0.0, 1.0, 0.0, 2.0, 1.0, 0.0, 0.0, 1.0, 1.0]] * 400)


def _sparse_vector(a, rho, m, fresh, c, t, below, aborted, above=None):
    """Row by row: a query is answered `above(i, j)` (default 1) when m >= rho + t, else `below`,
    and `aborted` once c queries were above; rho is replaced by fresh[j] after an above (Alg. 2)."""
    out = np.empty(a.shape)
    for i in range(len(a)):
        count, r = 0, float(rho[i])
        for j in range(a.shape[1]):
            if count >= c:
                out[i, j] = aborted
                continue
            if float(m[i, j]) >= r + t:
                out[i, j] = 1 if above is None else above(i, j)
                count += 1
                if fresh is not None:
                    r = float(fresh[j][i])
            else:
                out[i, j] = below
    return out


@pytest.mark.parametrize("c", [1, 2])
def test_sparse_vector_1_to_4_row_by_row(c):
    s, k = ANSWERS.shape
    rng = np.random.default_rng(1)
    rho, nu = rng.laplace(scale=2 / EPS, size=s), rng.laplace(scale=2 * c / (EPS / 2), size=(s, k))
    expected = _sparse_vector(ANSWERS, rho, ANSWERS + nu, None, c, 0.5, 0, -1)
    assert np.array_equal(dp.svt1(ANSWERS, np.random.default_rng(1), c=c, t=0.5), expected)

    rng = np.random.default_rng(2)
    rho, m = rng.laplace(scale=c / (EPS / 2), size=s), ANSWERS + rng.laplace(scale=2 * c / (EPS / 2), size=(s, k))
    fresh = [rng.laplace(scale=c / (EPS / 2), size=s) for _ in range(k)]
    expected = _sparse_vector(ANSWERS, rho, m, fresh, c, 1.0, 0, -1)
    assert np.array_equal(dp.svt2(ANSWERS, np.random.default_rng(2), c=c, t=1.0), expected)

    rng = np.random.default_rng(3)
    rho, m = rng.laplace(scale=2 / EPS, size=s), ANSWERS + rng.laplace(scale=c / (EPS / 2), size=(s, k))
    expected = _sparse_vector(ANSWERS, rho, m, None, c, 1.0, -1000.0, -2000.0, above=lambda i, j: m[i, j])
    assert np.array_equal(dp.svt3(ANSWERS, np.random.default_rng(3), c=c, t=1.0), expected)

    rng = np.random.default_rng(4)
    rho, nu = rng.laplace(scale=4 / EPS, size=s), rng.laplace(scale=1 / (EPS - EPS / 4), size=(s, k))
    expected = _sparse_vector(ANSWERS, rho, ANSWERS + nu, None, c, 1.0, 0, -1)
    assert np.array_equal(dp.svt4(ANSWERS, np.random.default_rng(4), c=c, t=1.0), expected)


def test_numerical_sparse_vector_row_by_row():
    s, k = ANSWERS.shape
    rng = np.random.default_rng(5)
    rho1 = rng.laplace(scale=3 / EPS, size=s)
    rho2, rho3 = rng.laplace(scale=12 / EPS, size=(s, k)), rng.laplace(scale=6 / EPS, size=(s, k))
    expected = _sparse_vector(ANSWERS, rho1, ANSWERS + rho2, None, 2, 1.0, 0.0, -1000.0,
                              above=lambda i, j: ANSWERS[i, j] + rho3[i, j])
    assert np.array_equal(dp.numerical_svt(ANSWERS, np.random.default_rng(5)), expected)


@pytest.mark.parametrize("counts", [[3] * 300, [0, 1, 2, 3, 4, 5] * 50])
def test_truncated_geometric_is_the_first_cdf_value_at_least_u(counts):
    a = np.array(counts, dtype=float)[:, None]
    u = np.random.default_rng(6).integers(1, dp._GEO_D + 1, size=len(a))
    expected = [next(z for z, f in enumerate(dp._geo_cdf(c)) if f >= v) for c, v in zip(counts, u)]
    assert dp.truncated_geometric(a, np.random.default_rng(6)).tolist() == expected
