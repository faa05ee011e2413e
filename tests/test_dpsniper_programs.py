"""DP-Sniper's sparse-vector and geometric benchmark programs (benchmarks/dpsniper_programs.py) are
vectorised; here each is checked draw for draw against the algorithm written row by row (Lyu et
al. 2017, Algs. 1-4, with DP-Sniper's abort; Wang et al.'s numerical SVT; Balcer & Vadhan's
GeoSample by a linear scan of its CDF), fed the same random numbers in the same order (query-major:
query j's noise for every run, then query j + 1's; Algs. 1, 2 and 4 draw it for every run and read
it only while the run compares), and the first-above law of Algs. 1, 2 and 4 against its integral; and the
programs' Laplace noise (`laplace_noise`) against the Laplace law's CDF."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chisquare, kstest

_SPEC = importlib.util.spec_from_file_location(
    "dpsniper_programs", Path(__file__).resolve().parent.parent / "benchmarks" / "dpsniper_programs.py")
dp = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("dpsniper_programs", dp)  # its dataclasses look their module up
_SPEC.loader.exec_module(dp)

EPS = dp.EPS
ANSWERS = np.array([[1.0, 0.0, 1.0, 0.0, 2.0, 1.0, 0.0, 0.0, 1.0, 1.0]] * 400)


def _lap(rng, scale, size):
    return dp.laplace_noise(rng, scale, size)


@pytest.mark.parametrize("scale", [0.1, 20.0])
def test_laplace_noise_has_the_laplace_law(scale):
    """Kolmogorov-Smirnov against F(x) = 1/2 e^(x/b) (x < 0), 1 - 1/2 e^(-x/b) (x >= 0), written
    here; and the shape asked for."""
    x = dp.laplace_noise(np.random.default_rng(7), scale, (200, 500))
    assert x.shape == (200, 500)
    cdf = lambda v: np.where(v < 0, 0.5 * np.exp(np.minimum(v, 0) / scale), 1 - 0.5 * np.exp(-np.maximum(v, 0) / scale))
    assert kstest(x.ravel(), cdf).pvalue > 1e-3
    assert kstest(np.abs(x.ravel()) + 1.0, cdf).pvalue < 1e-6  # the test sees a missing sign


def _sparse_vector(a, rho, m, c, t, below, aborted, above=None):
    """Row by row: a query is answered `above(i, j)` (default 1) when m >= rho + t, else `below`,
    and `aborted` once c queries were above."""
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
            else:
                out[i, j] = below
    return out


def _compared_rows(a, rng, rho_scale, scale, c, t, redraw=None):
    """Algs. 1, 2 and 4 row by row from the programs' draws in their order: the threshold noise
    (S), every query's noise (K, S) query-major, and with `redraw` (Alg. 2) at c > 1 a threshold
    noise (K - 1, S) for every run after each query but the last. A run reads its query's noise
    while it compares (fewer than c aboves so far) and, after an above that leaves it comparing,
    the threshold drawn after that query; 1 above, 0 below, -1 aborted."""
    s, k = a.shape
    rho = _lap(rng, rho_scale, s)
    noise = _lap(rng, scale, (k, s))
    fresh = _lap(rng, redraw, (k - 1, s)) if redraw is not None and c > 1 else None
    out = np.full(a.shape, -1.0)
    for i in range(s):
        count, r = 0, float(rho[i])
        for j in range(k):
            if count >= c:
                break
            above = float(a[i, j]) + float(noise[j, i]) >= r + t
            out[i, j] = int(above)
            count += above
            if above and count < c and fresh is not None and j < k - 1:
                r = float(fresh[j, i])
    return out


@pytest.mark.parametrize("c", [1, 2])
def test_sparse_vector_1_to_4_row_by_row(c):
    s, k = ANSWERS.shape
    expected = _compared_rows(ANSWERS, np.random.default_rng(1), 2 / EPS, 2 * c / (EPS / 2), c, 0.5)
    assert np.array_equal(dp.svt1(ANSWERS, np.random.default_rng(1), c=c, t=0.5), expected)

    expected = _compared_rows(ANSWERS, np.random.default_rng(2), c / (EPS / 2), 2 * c / (EPS / 2), c, 1.0,
                              redraw=c / (EPS / 2))
    assert np.array_equal(dp.svt2(ANSWERS, np.random.default_rng(2), c=c, t=1.0), expected)

    rng = np.random.default_rng(3)
    rho, m = _lap(rng, 2 / EPS, s), ANSWERS + _lap(rng, c / (EPS / 2), (k, s)).T
    expected = _sparse_vector(ANSWERS, rho, m, c, 1.0, -1000.0, -2000.0, above=lambda i, j: m[i, j])
    assert np.array_equal(dp.svt3(ANSWERS, np.random.default_rng(3), c=c, t=1.0), expected)

    expected = _compared_rows(ANSWERS, np.random.default_rng(4), 4 / EPS, 1 / (EPS - EPS / 4), c, 1.0)
    assert np.array_equal(dp.svt4(ANSWERS, np.random.default_rng(4), c=c, t=1.0), expected)


def _first_above_law(a, rho_scale, scale, t):
    """P(the first query above is j), j = 0..K-1, and P(none above) (index K), for c = 1: the
    integral over the threshold noise r ~ Laplace(rho_scale) of prod_{i<j} F_i(r) (1 - F_j(r)),
    F_i(r) = P(a_i + Laplace(scale) < r + t), by the trapezoid rule on a fine grid."""
    r = np.linspace(-50 * rho_scale, 50 * rho_scale, 200_001)
    weight = np.exp(-np.abs(r) / rho_scale) / (2 * rho_scale)
    law, none = [], np.ones_like(r)
    for ai in a:
        x = r + t - ai
        below = np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0) / scale), 1 - 0.5 * np.exp(-np.maximum(x, 0) / scale))
        law.append(np.trapezoid(weight * none * (1 - below), r))
        none = none * below
    return np.array(law + [np.trapezoid(weight * none, r)])


@pytest.mark.parametrize("name, rho_scale, scale, t", [("svt1", 2 / EPS, 2 / (EPS / 2), 0.5),
                                                       ("svt2", 2 / EPS, 2 / (EPS / 2), 1.0),
                                                       ("svt4", 4 / EPS, 1 / (EPS - EPS / 4), 1.0)])
def test_sparse_vector_first_above_has_its_law(name, rho_scale, scale, t):
    """c = 1: each output is 0 before the first above, 1 there, -1 after (all 0 when none is
    above), and its first-above index has the law integrated above (chi-square on 100,000 runs of
    the pair (2,...,2,0,...,0); a query's noise dropped or reused would move it)."""
    a = np.array([2.0] * 5 + [0.0] * 5)
    out = getattr(dp, name)(np.tile(a, (100_000, 1)), np.random.default_rng(11), c=1, t=t)
    first = np.where((out == 1).any(axis=1), np.argmax(out == 1, axis=1), len(a))
    pattern = np.where(np.arange(len(a)) < first[:, None], 0, np.where(np.arange(len(a)) == first[:, None], 1, -1))
    assert np.array_equal(out, pattern)
    expected = len(out) * _first_above_law(a, rho_scale, scale, t)
    observed = np.bincount(first, minlength=len(a) + 1)
    assert np.isclose(expected.sum(), len(out), rtol=1e-6)
    assert chisquare(observed, expected * len(out) / expected.sum()).pvalue > 1e-3


def test_numerical_sparse_vector_row_by_row():
    s, k = ANSWERS.shape
    rng = np.random.default_rng(5)
    rho1 = _lap(rng, 3 / EPS, s)
    rho2, rho3 = _lap(rng, 12 / EPS, (k, s)).T, _lap(rng, 6 / EPS, (k, s)).T
    expected = _sparse_vector(ANSWERS, rho1, ANSWERS + rho2, 2, 1.0, 0.0, -1000.0,
                              above=lambda i, j: ANSWERS[i, j] + rho3[i, j])
    assert np.array_equal(dp.numerical_svt(ANSWERS, np.random.default_rng(5)), expected)


@pytest.mark.parametrize("counts", [[3] * 300, [0, 1, 2, 3, 4, 5] * 50])
def test_truncated_geometric_is_the_first_cdf_value_at_least_u(counts):
    a = np.array(counts, dtype=float)[:, None]
    u = np.random.default_rng(6).integers(1, dp._GEO_D + 1, size=len(a))
    expected = [next(z for z, f in enumerate(dp._geo_cdf(c)) if f >= v) for c, v in zip(counts, u)]
    assert dp.truncated_geometric(a, np.random.default_rng(6)).tolist() == expected


def test_report_noisy_max_values_row_by_row():
    """RNM3 (Laplace) and RNM4 (exponential) release the largest noisy answer; their noise is drawn
    query-major ((K, S): query j's noise for every row, then query j + 1's)."""
    a = ANSWERS[:, :5]
    s, k = a.shape
    noise = _lap(np.random.default_rng(8), 2 / EPS, (k, s))
    expected = [max(float(a[i, j] + noise[j, i]) for j in range(k)) for i in range(s)]
    assert dp.report_noisy_max3(a.copy(), np.random.default_rng(8)).tolist() == expected
    noise = np.random.default_rng(9).exponential(scale=2 / EPS, size=(k, s))
    expected = [max(float(a[i, j] + noise[j, i]) for j in range(k)) for i in range(s)]
    assert dp.report_noisy_max4(a.copy(), np.random.default_rng(9)).tolist() == expected


@pytest.mark.parametrize("f", [0.75, 0.95, 0.33])
def test_permanent_response_has_its_law(f):
    """RAPPOR's permanent response sets a bit to 1 with probability f/2, to 0 with probability f/2, else keeps it:
    P(1) = f/2 on a 0 bit and 1 - f/2 on a 1 bit, within 5 binomial standard errors over 2 million bits each (f on
    the byte grid, 0.75 and 0.95, and off it, 0.33), 0/1 as int8."""
    rng = np.random.default_rng(11)
    filters = np.zeros((100_000, 40), dtype=np.int8)
    filters[:, 20:] = 1
    out = dp._permanent(filters, f, rng)
    assert out.dtype == np.int8 and set(np.unique(out).tolist()) <= {0, 1}
    n = out[:, :20].size
    for got, p in ((out[:, :20].mean(), f / 2), (out[:, 20:].mean(), 1 - f / 2)):
        assert abs(got - p) <= 5 * np.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("half", [15, 19])
def test_permanent_response_by_words_is_exact(half):
    """Every word below 65,520 once, on a 0 bit and on a 1 bit: exactly half/40 of them set the bit to 1 and as many
    to 0 (f = 0.75: 15/40; 0.95: 19/40), the rest keep it; and the words drawn are below 65,520 (1 in 4,096 of the
    raw 16-bit words, a 64-bit output read as four, is not: they are drawn again), the same for the same seed."""
    words = np.arange(65_520, dtype=np.uint16)
    for bit in (0, 1):
        out = dp._decided(words, np.full(len(words), bit, dtype=np.int8), half)
        ones = int(out.sum())
        expected = half * 65_520 // 40 + (65_520 - 2 * half * 65_520 // 40 if bit else 0)
        assert out.dtype == np.int8 and ones == expected
    drawn = dp._grid_words((500, 4_000), np.random.default_rng(5))
    assert drawn.max() < 65_520 and np.array_equal(drawn, dp._grid_words((500, 4_000), np.random.default_rng(5)))
    raw = np.random.default_rng(5).bit_generator.random_raw(500_000).view("<u2").reshape(500, 4_000)
    assert (raw >= 65_520).sum() > 300 and np.array_equal(drawn[raw < 65_520], raw[raw < 65_520])


def _rows_kept(program, a1, a2, rows: int = 300) -> tuple[bool, bool]:
    """(same stream used, other rows unchanged): the program on `rows` copies of a2, and on the same
    rows with the first half set to a1, from equal generators — what `aligned` declares: row i's
    randomness is the same part of the stream whatever any row's answers."""
    base = np.tile(a2, (rows, 1))
    changed = base.copy()
    changed[:rows // 2] = a1
    g, h = np.random.default_rng(5), np.random.default_rng(5)
    x = np.asarray(program(base, g), dtype=float).reshape(rows, -1)
    y = np.asarray(program(changed, h), dtype=float).reshape(rows, -1)
    return g.bit_generator.state == h.bit_generator.state, bool(np.array_equal(x[rows // 2:], y[rows // 2:]))


def _first_above_drawn_for_comparers(a, rng, t=0.5):
    """SVT1 as it was written before: each query's noise drawn only for the runs still comparing."""
    s, k = a.shape
    bar = dp.laplace_noise(rng, 2 / EPS, s) + t
    out = np.full((s, k), -1, dtype=np.int8)
    live = np.arange(s)
    for j in range(k):
        above = a[live, j] + dp.laplace_noise(rng, 40 / EPS, len(live)) >= bar[live]
        out[live, j] = above
        live = live[~above]
    return out


DISCRETE_INPUTS = ("TruncatedGeometricMechanism", "Rappor", "OneTimeRappor")  # a count 0..5, a hashed integer


@pytest.mark.parametrize("bench", dp.BENCHMARK, ids=lambda b: b.name)
def test_the_aligned_declarations_hold(bench):
    """Every program is declared `aligned`, reads the same stream whatever the answers and keeps the
    other rows' outputs when half the rows' answers change: from all 1000 to all -1000 (every
    comparison flips), or for the three discrete inputs along the last input pair; SVT1 drawing
    noise only for the runs still comparing fails the check."""
    k = len(bench.pairs[0][0])
    a1, a2 = bench.pairs[-1] if bench.name in DISCRETE_INPUTS else (np.full(k, 1000.0), np.full(k, -1000.0))
    assert getattr(bench.program, "aligned", False)
    assert _rows_kept(bench.program, a1, a2) == (True, True)
    if bench.name == "SparseVectorTechnique1":
        assert _rows_kept(_first_above_drawn_for_comparers, a1, a2) != (True, True)


def test_filters_are_each_runs_bloom_filter():
    """`_filters`: row i is the Bloom filter of round(a[i, 0]) (bits murmur3_32(str(v), i) % 20, i < 4, written here),
    for runs of one value (a repeated view) and of several, and one-time RAPPOR on the repeated view draws the same
    outputs as on the filters copied."""
    def bloom(v):
        bits = np.zeros(dp.RAPPOR_BITS, dtype=np.int8)
        bits[[dp.murmur3_32(str(v), i) % dp.RAPPOR_BITS for i in range(dp.RAPPOR_HASHES)]] = 1
        return bits
    for a in (np.full((7, 1), 3.0), np.array([[0.0], [2.2], [1.0], [0.0], [5.0]])):
        expected = np.stack([bloom(int(round(v))) for v in a[:, 0]])
        assert np.array_equal(dp._filters(a), expected)
        copied = dp._permanent(expected, 0.95, np.random.default_rng(4))
        assert np.array_equal(dp.one_time_rappor(a, np.random.default_rng(4)), copied)
