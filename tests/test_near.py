"""The near-friend model (ddpbayes/geo/near.py) and its PyMC fit (geo/near_pymc.py, models/gowalla_near.py; issue 30,
DESIGN §6.1). Expected values: near.conditional_logpdf summed user by user (the Potential), the
closed form of a one-friend toy case, numerical integration on a grid, a brute-force bandwidth
search written here."""

from __future__ import annotations

import importlib.util
import math
import sys

import numpy as np
import pymc as pm
import pytest
import pytensor
import pytensor.tensor as pt
from pytensor.compile.mode import Mode
from scipy import stats

from ddpbayes.errors import InputError
from ddpbayes.geo import near_pymc
from ddpbayes.geo.data import US_BOX
from ddpbayes.geo.near import NearFit, conditional_logpdf, load_near_fit, log_weights, population_bandwidth, \
    sample_conditional, save_near_fit


@pytest.fixture(scope="module")
def gowalla_near(models_dir):
    spec = importlib.util.spec_from_file_location("gowalla_near", models_dir / "gowalla_near.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gowalla_near"] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def first300(gowalla_near):
    """The first 300 users' positions (km) and the friendships among them."""
    _, points, pairs = gowalla_near.positions()
    return points[:300], pairs[(pairs < 300).all(axis=1)]


def _normal2(d2: np.ndarray, var: float) -> np.ndarray:
    return np.exp(-d2 / (2 * var)) / (2 * math.pi * var)


@pytest.mark.parametrize("weights, sigma", [((0.7, 0.3), (150.0,)),  # two scales: slow (the default run's budget)
                                           pytest.param((0.6, 0.1, 0.3), (3.0, 220.0), marks=pytest.mark.slow)])
def test_the_potential_is_the_sum_of_the_conditionals(gowalla_near, first300, weights, sigma):
    """The model's compiled Potential at (w, σ) = Σ over the first 300 users with a friend among them
    of near.conditional_logpdf(x_i | everyone else), to 1e-9."""
    points, pairs = first300
    n, h = len(points), 40.0
    fit = NearFit(US_BOX, h, weights, sigma)
    expected = 0.0
    for i in range(n):
        mine = np.concatenate([pairs[pairs[:, 0] == i, 1], pairs[pairs[:, 1] == i, 0]])
        if len(mine):
            expected += conditional_logpdf(points[i:i + 1], np.delete(points, i, axis=0), points[mine], fit)[0]
    m = near_pymc.pymc_model(near_pymc.near_data(points, pairs, h), scales=len(sigma))
    point = {"w_simplex__": pm.distributions.transforms.simplex.forward(pt.as_tensor(np.array(weights))).eval(),
             "log_sigma_ordered__": pm.distributions.transforms.ordered.forward(pt.as_tensor(np.log(sigma))).eval()}
    got = m.compile_fn(m.logp(vars=m.potentials, jacobian=False), inputs=m.value_vars,
                       mode=Mode(optimizer="fast_compile"))(point)  # one evaluation: the rewrites would cost more
    assert len(pairs) > 20 and got == pytest.approx(expected, abs=1e-9)


def test_the_potentials_gradient_is_its_finite_difference(gowalla_near, first300):
    """LogKernelSums' derivative: the pseudo-likelihood's gradient in (w, σ) at two scales against
    central differences (step 1e-5 relative) on the first 300 users. The graph compiled with the fast_compile
    rewrites (2 s rather than 4 s; the same values): what is checked is the symbolic derivative."""
    points, pairs = first300
    w, s = pt.dvector("w"), pt.dvector("s")
    value = near_pymc.pseudo_loglik(near_pymc.near_data(points, pairs, 40.0), w, s, 2)
    f = pytensor.function([w, s], [value, *pt.grad(value, [w, s])], mode=Mode(optimizer="fast_compile"))
    at = (np.array([0.6, 0.1, 0.3]), np.array([3.0, 220.0]))
    grad = f(*at)[1:]
    for k, x in enumerate(at):
        for c in range(len(x)):
            step = 1e-5 * x[c]
            up, down = [a.copy() for a in at], [a.copy() for a in at]
            up[k][c] += step
            down[k][c] -= step
            assert grad[k][c] == pytest.approx((f(*up)[0] - f(*down)[0]) / (2 * step), rel=1e-5)


def test_one_friend_at_the_only_other_closed_form():
    """Population = one other k, the friend is k: p(x | x_-i) = w_0 N(x_k, h²) + w_1 N(x_k, σ²h²/(σ²+h²)),
    so the distance r from the friend has CDF Σ w (1 - exp(-r²/(2 s²))); the density and the draws
    (KS test, 20,000 draws, fixed seed) both agree."""
    h, s, w = 30.0, 50.0, (0.4, 0.6)
    fit = NearFit(US_BOX, h, w, (s,))
    k = np.array([[10.0, -5.0]])
    s2 = s * s * h * h / (s * s + h * h)
    x = np.array([[10.0, -5.0], [40.0, 0.0], [-60.0, 80.0]])
    d2 = ((x - k) ** 2).sum(axis=1)
    expected = np.log(w[0] * _normal2(d2, h * h) + w[1] * _normal2(d2, s2))
    assert conditional_logpdf(x, k, k, fit) == pytest.approx(expected, rel=1e-12)
    r = np.linalg.norm(sample_conditional(np.random.default_rng(5), k, k, fit, 20000) - k, axis=1)
    cdf = lambda t: w[0] * (1 - np.exp(-t**2 / (2 * h * h))) + w[1] * (1 - np.exp(-t**2 / (2 * s2)))  # noqa: E731
    assert stats.kstest(r, cdf).pvalue > 0.01


def _grid(half: float, step: float) -> tuple[np.ndarray, float]:
    c = np.arange(-half + step / 2, half, step)
    gx, gy = np.meshgrid(c, c, indexing="ij")
    return np.column_stack([gx.ravel(), gy.ravel()]), step * step


OTHERS = np.array([[0.0, 0.0], [40.0, 10.0], [-30.0, 25.0], [15.0, -45.0], [60.0, 60.0]])
FRIENDS = OTHERS[[1, 3]]
TOY = NearFit(US_BOX, 12.0, (0.5, 0.2, 0.3), (8.0, 35.0))


def test_the_density_integrates_to_one_and_the_draws_follow_it():
    """Toy: 5 others, 2 of them friends, 2 scales. The density summed over a 1 km grid is 1, and
    50,000 draws binned in 20 km cells agree with the cells' grid masses (chi-square, fixed seed)."""
    points, area = _grid(200.0, 1.0)
    density = np.exp(conditional_logpdf(points, OTHERS, FRIENDS, TOY))
    assert density.sum() * area == pytest.approx(1.0, abs=1e-6)
    cell = lambda p: (np.floor((p[:, 0] + 200) / 20) * 20 + np.floor((p[:, 1] + 200) / 20)).astype(int)  # noqa: E731
    mass = np.bincount(cell(points), weights=density * area, minlength=400)
    draws = sample_conditional(np.random.default_rng(11), OTHERS, FRIENDS, TOY, 50000)
    inside = (np.abs(draws) < 200).all(axis=1)
    counts = np.bincount(cell(draws[inside]), minlength=400)
    big = mass * 50000 > 20
    observed, expected = counts[big], mass[big] * 50000
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    assert big.sum() > 30 and stats.chi2.sf(chi2, big.sum() - 1) > 0.001


def test_log_weights_are_the_kernel_bumps_masses():
    """Eq. 9: p(x | x_-i) = (1/N) Σ_k N(x; x_k, h²) · bracket(x); each bump's mass, integrated on a
    0.5 km grid, is weight(x_k) / N, and the weights' mean is 1."""
    points, area = _grid(200.0, 0.5)
    h2 = TOY.bandwidth_km**2
    bracket = np.full(len(points), TOY.weights[0])
    for w, s in zip(TOY.weights[1:], TOY.sigma_km):
        z = [np.mean(_normal2(((OTHERS - f) ** 2).sum(axis=1), s * s + h2)) for f in FRIENDS]
        bracket += w * np.mean([_normal2(((points - f) ** 2).sum(axis=1), s * s) / zf for f, zf in zip(FRIENDS, z)],
                               axis=0)
    mass = [(_normal2(((points - k) ** 2).sum(axis=1), h2) * bracket).sum() * area for k in OTHERS]
    got = np.exp(log_weights(OTHERS, FRIENDS, TOY))
    assert got == pytest.approx(mass, rel=1e-6) and got.mean() == pytest.approx(1.0, rel=1e-12)
    assert np.all(log_weights(OTHERS, FRIENDS[:0], TOY) == 0)


def test_population_bandwidth_is_the_best_on_a_fine_grid():
    """The leave-one-out log-likelihood maximised by brute force over 4,001 bandwidths (loops written
    here) lands within one grid step of population_bandwidth's."""
    rng = np.random.default_rng(3)
    points = np.concatenate([rng.normal(0, 20, (25, 2)), rng.normal(300, 60, (15, 2))])
    grid = np.geomspace(5.0, 200.0, 4001)

    def loo(h: float) -> float:
        total = 0.0
        for i in range(len(points)):
            d2 = ((np.delete(points, i, axis=0) - points[i]) ** 2).sum(axis=1)
            total += math.log(np.mean(_normal2(d2, h * h)))
        return total

    best = grid[int(np.argmax([loo(h) for h in grid[::40]])) * 40]
    fine = grid[(grid > best / 1.2) & (grid < best * 1.2)]
    best = fine[int(np.argmax([loo(h) for h in fine]))]
    assert population_bandwidth(points) == pytest.approx(best, rel=2 * (grid[1] / grid[0] - 1))


def test_a_fit_round_trips_and_bad_ones_are_refused(tmp_path):
    fit = NearFit(US_BOX, 39.2, (0.7, 0.3), (213.0,), {"seed": 1})
    save_near_fit(fit, tmp_path / "f.json")
    assert load_near_fit(tmp_path / "f.json") == fit
    with pytest.raises(InputError, match="summing to 1"):
        NearFit(US_BOX, 39.2, (0.7, 0.2), (213.0,))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(InputError, match="bad.json"):
        load_near_fit(tmp_path / "bad.json")
