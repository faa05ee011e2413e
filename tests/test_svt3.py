"""Lyu et al. 2017 Alg. 3 (`sparse_vector` variant 3; issue #43 item 3): the law of the released noisy answers
against scipy's quadrature, and the supremum of the log-ratio against a brute force written here (the densities by
`quad`, a fine grid of released values, then scipy's bounded scalar search around the grid's best point)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize

from ddpbayes.errors import InputError
from ddpbayes.mechanisms import SparseVector

T = 1.0
S = 2.0  # the scale s = Δ/ε: ρ ~ Lap(2s), ν ~ Lap(2cs)
B_RHO = B_NU = 2 * S  # c = 1


def lap_pdf(x: float, b: float) -> float:
    return math.exp(-abs(x) / b) / (2 * b)


def lap_cdf(x: float, b: float) -> float:
    return 0.5 * math.exp(x / b) if x < 0 else 1 - 0.5 * math.exp(-x / b)


def h(u: float, false_answers, b_nu: float = B_NU) -> float:
    """H(u) = ∫_{−∞}^{u−T} f_ρ(ρ) Π_F F_ν(T + ρ − a_j) dρ by scipy's quad: the threshold noise lets every TRUE
    value pass and every FALSE query fail."""
    def f(r):
        return lap_pdf(r, B_RHO) * math.prod(lap_cdf(T + r - a, b_nu) for a in false_answers)

    cuts = sorted({a - T for a in false_answers} | {0.0})
    top = u - T
    first, last = min(cuts[0], top), min(cuts[-1], top)
    opts = dict(limit=400, epsabs=1e-15, epsrel=1e-13)
    total = integrate.quad(f, -np.inf, first, **opts)[0]
    if last > first:
        total += integrate.quad(f, first, last, points=[c for c in cuts if first < c < last] or None, **opts)[0]
    if top > last:
        total += integrate.quad(f, last, top, **opts)[0]
    return total


def density(pattern: tuple[int, int], v: float, a) -> float:
    """p(y | a) for two queries, c = 1: (1, −1) the first TRUE with value v; (0, 1) the second; (0, 0) none."""
    if pattern == (1, -1):
        return lap_pdf(v - a[0], B_NU) * h(v, [])
    if pattern == (0, 1):
        return lap_pdf(v - a[1], B_NU) * h(v, [a[0]])
    return h(np.inf, [a[0], a[1]])


def test_density_and_total_mass_by_quad():
    mech = SparseVector(S, 3, T, 1)
    a = np.array([[0.5, 2.0]])
    outputs = np.array([[1, -1, 3.2, 0], [0, 1, 0, -1.5], [0, 0, 0, 0], [0, 1, 0, 7.0]], dtype=float)
    got = np.exp(mech.log_prob(outputs, a))[:, 0]
    want = [density((1, -1), 3.2, a[0]), density((0, 1), -1.5, a[0]), density((0, 0), 0, a[0]),
            density((0, 1), 7.0, a[0])]
    assert np.allclose(got, want, rtol=1e-9, atol=0)
    mass = sum(integrate.quad(lambda v: density(p, v, a[0]), -np.inf, np.inf, limit=400, epsabs=1e-12)[0]
               for p in ((1, -1), (0, 1)))
    assert abs(mass + want[2] - 1) < 1e-8
    bad = np.array([[1, 0, 3.0, 0], [0, 0, 1.0, 0], [1, -1, 3.0, 2.0]], dtype=float)  # no -1 after; value of FALSE
    assert np.all(mech.log_prob(bad, a) == -np.inf)


def test_sampling_matches_the_law():
    mech = SparseVector(S, 3, T, 1)
    a = np.array([0.5, 2.0])
    y = mech.sample(np.tile(a, (200_000, 1)), np.random.default_rng(3))
    none = np.mean(np.all(y[:, :2] == 0, axis=1))
    p = density((0, 0), 0, a)
    assert abs(none - p) < 4 * math.sqrt(p * (1 - p) / len(y))
    first = y[y[:, 0] == 1, 2]  # the first query's released values: P(v ≤ 3) by quad
    p3 = integrate.quad(lambda v: density((1, -1), v, a), -np.inf, 3.0, limit=400)[0]
    assert abs(np.mean(first <= 3.0) * len(first) / len(y) - p3) < 4 * math.sqrt(p3 / len(y))
    assert np.all(y[y[:, 0] != 1, 2] == 0) and np.all(y[:, 1][y[:, 0] == 1] == -1)


def brute_sup(w: np.ndarray, answers: np.ndarray) -> float:
    """max over ordered pairs of rows of `w` (T, R) (weights over the answer vectors) and outputs of the log-ratio of
    the mixtures: each pattern's value on a grid of step 1 over [−120, 120], then a bounded search in the two cells
    around each of the grid's three best points; the limit v → ∞ by evaluating far out (v = 600: within 1e-12 of it)."""
    best = -np.inf

    def ratio(pattern, v):
        like = w @ np.array([density(pattern, v, a) for a in answers])
        return math.log(like.max()) - math.log(like.min())

    for pattern in ((1, -1), (0, 1)):
        grid = np.linspace(-120, 120, 241)
        values = np.array([ratio(pattern, v) for v in grid])
        best = max(best, values.max(), ratio(pattern, 600.0))
        for g in np.argsort(values)[-3:]:  # the three best grid points: the function is Lipschitz (slope < 1)
            lo, hi = grid[max(g - 1, 0)], grid[min(g + 1, len(grid) - 1)]
            found = optimize.minimize_scalar(lambda v: -ratio(pattern, v), bounds=(lo, hi), method="bounded",
                                             options={"xatol": 1e-10})
            best = max(best, -found.fun)
    return max(best, ratio((0, 0), 0.0))


@pytest.mark.parametrize("w", [np.eye(2), np.array([[0.3, 0.7], [0.8, 0.2]])], ids=["pair", "mixture"])
def test_supremum_against_brute_force(w):
    mech = SparseVector(S, 3, T, 1)
    answers = np.array([[1.0, 0.0], [-1.5, 2.5]])
    with np.errstate(divide="ignore"):
        value, t, t_prime, y = mech.sup_log_ratio(np.log(w), answers)
    assert abs(value - brute_sup(w, answers)) < 1e-6
    # the witness attains the value: the pattern then the value (inf: the limit)
    pattern = (int(y[0]), int(y[1]))
    v = y[2] if pattern == (1, -1) else y[3]
    like = w @ np.array([density(pattern, min(v, 600.0), a) for a in answers])
    assert abs(math.log(like[t]) - math.log(like[t_prime]) - value) < 1e-6


@pytest.mark.slow
def test_two_true_values_against_a_grid():
    """c = 2, three queries, one answer vector per side: the sup over two released values (a 2-D grid on the
    densities written here, then Nelder-Mead from its best point) equals the branch and bound through u = min v."""
    mech = SparseVector(S, 3, T, 2)  # ν ~ Lap(4s) now
    b_nu = 4 * S
    a, b = np.array([1.0, 0.0, 2.0]), np.array([0.0, 1.0, 1.0])

    def log_ratio(true, false, vs):
        pa = math.prod(lap_pdf(v - a[i], b_nu) for i, v in zip(true, vs)) * h(min(vs), [a[j] for j in false], b_nu)
        pb = math.prod(lap_pdf(v - b[i], b_nu) for i, v in zip(true, vs)) * h(min(vs), [b[j] for j in false], b_nu)
        return math.log(pa) - math.log(pb)

    with np.errstate(divide="ignore"):
        value, t, t_prime, y = mech.sup_log_ratio(np.log(np.eye(2)), np.vstack([a, b]), directed=True)
    best = -np.inf
    for true, false in (((0, 1), ()), ((0, 2), (1,)), ((1, 2), (0,))):
        grid = np.linspace(-40, 80, 25)
        table = np.array([[log_ratio(true, false, (u, v)) for v in grid] for u in grid])
        i, j = np.unravel_index(np.argmax(table), table.shape)
        found = optimize.minimize(lambda x: -log_ratio(true, false, x), [grid[i], grid[j]], method="Nelder-Mead",
                                  options={"xatol": 1e-9, "fatol": 1e-12})
        best = max(best, table.max(), -found.fun)
    assert value >= best - 1e-9  # the grid and the local search are attained outputs: below the supremum
    assert value - best < 1e-6
    assert tuple(y[:3]) in {(1, 1, -1), (1, 0, 1), (0, 1, 1)}


def test_classic_level_and_refusals():
    mech = SparseVector(S, 3, T, 1)
    assert mech.continuous and mech.dp_leakage(1.0) == math.inf and (mech.rho_scale, mech.nu_scale) == (B_RHO, B_NU)
    with pytest.raises(InputError, match="continuous output"):
        mech.output_space(np.zeros((1, 2)))
    mixed = np.log(np.array([[0.5, 0.5], [0.9, 0.1]]))
    with pytest.raises(InputError, match="several released values"):
        SparseVector(S, 3, T, 2).sup_log_ratio(mixed, np.array([[1.0, 0.0], [0.0, 2.0]]))
