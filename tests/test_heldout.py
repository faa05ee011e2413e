"""The held-out check of the near-friend model against the CAR (ddpbayes/geo/heldout.py; issue 30,
DESIGN §6.1). Expected values: hand computations on tiny inputs, the CAR's conditional from its
precision matrix (geo/car.conditional), closed-form moments."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ddpbayes.errors import InputError
from ddpbayes.geo.car import CarFit, adjacency, car_precision, conditional
from ddpbayes.geo.data import EARTH_RADIUS_KM, US_BOX, Locations
from ddpbayes.geo.heldout import car_conditionals, car_replicates, check, friend_statistics, latlon_of_plane, \
    log_km2_per_unit, oriented, ppc_row, split_edges
from ddpbayes.geo.near import NearFit, plane_km

PAIRS = np.array([[0, 1], [0, 2], [1, 3], [2, 3], [3, 4], [4, 5], [1, 5], [2, 6], [6, 7], [5, 7]])


def test_split_edges_is_seeded_disjoint_and_complete():
    train, held = split_edges(PAIRS, share=0.3, seed=4)
    again = split_edges(PAIRS, share=0.3, seed=4)
    assert np.array_equal(train, again[0]) and np.array_equal(held, again[1]) and len(held) == 3
    rows = lambda a: {tuple(r) for r in a}  # noqa: E731
    assert rows(train) | rows(held) == rows(PAIRS) and not rows(train) & rows(held)
    assert any(not np.array_equal(held, split_edges(PAIRS, 0.3, seed)[1]) for seed in range(5, 10))
    with pytest.raises(InputError, match="strictly between"):
        split_edges(PAIRS, share=1.0)


def test_oriented_lists_both_ends():
    i, j = oriented(np.array([[3, 8], [1, 2]]))
    assert i.tolist() == [3, 1, 8, 2] and j.tolist() == [8, 2, 3, 1]


def test_friend_statistics_by_hand():
    """Five pairs on the equator, 0.1 to 5 degrees of longitude apart: distances R · radians, their
    quantiles by linear interpolation of the sorted values, the share within 50 km (0.1 and 0.4
    degrees: 11.1 and 44.5 km); the x correlation 2.3 / √(10 · 10.32) from deviations written out,
    and a y one of 0.6."""
    gaps = np.array([5.0, 0.1, 2.0, 0.4, 1.0])
    lon_i = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    lat_i = np.array([0.0, 0.0, 0.0, 0.0, 0.0])
    with np.errstate(invalid="ignore", divide="ignore"):  # the latitudes are constant: no y correlation
        out = friend_statistics(lat_i, lon_i, lat_i, lon_i + gaps)
    d = np.sort(gaps) * math.pi / 180 * EARTH_RADIUS_KM  # 0.1, 0.4, 1, 2, 5 degrees
    # position q (n - 1) = 4q: 0.4, 1, 2, 3, 3.6
    hand = [d[0] + 0.4 * (d[1] - d[0]), d[1], d[2], d[3], d[3] + 0.6 * (d[4] - d[3])]
    assert [out[f"distance_q{q}_km"] for q in (10, 25, 50, 75, 90)] == pytest.approx(hand, rel=1e-12)
    assert out["share_within_50_km"] == pytest.approx(0.4)
    # x: i = 1..5, j = 6, 2.1, 5, 4.4, 6; deviations from 3 and 4.7: -2, -1, 0, 1, 2 and 1.3, -2.6, 0.3, -0.3, 1.3
    assert out["correlation_x"] == pytest.approx((-2.6 + 2.6 + 0 - 0.3 + 2.6) / math.sqrt(10 * 10.32), rel=1e-12)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = friend_statistics(np.array([1.0, 2.0, 3.0, 4.0]), np.zeros(4), np.array([2.0, 1.0, 4.0, 3.0]), np.zeros(4))
    assert y["correlation_y"] == pytest.approx(0.6, rel=1e-12)  # deviations ±1.5, ±0.5: 3 / 5


def test_ppc_row_by_hand():
    """Replicates 1..10, observed 7.5: 3 of 10 at or above, p = 2 min(0.3, 0.7) = 0.6; median 5.5;
    the 2.5% and 97.5% quantiles at positions 0.225 and 8.775 of the sorted values."""
    row = ppc_row(7.5, np.arange(1.0, 11.0))
    assert row["p_value"] == pytest.approx(0.6) and row["median"] == 5.5
    assert row["interval_95"] == pytest.approx([1.225, 9.775])
    assert ppc_row(20.0, np.arange(1.0, 11.0))["p_value"] == 0.0


def test_the_plane_inverse_and_its_area():
    """latlon_of_plane undoes plane_km; a unit square of normalised coordinates covers
    59 · 111.32 cos 37° by 26 · 110.574 km², and a finite-difference Jacobian agrees."""
    lat, lon = np.array([30.0, 45.5, 24.0]), np.array([-120.0, -70.25, -95.5])
    back = latlon_of_plane(plane_km(lat, lon, US_BOX), US_BOX)
    assert back[0] == pytest.approx(lat, abs=1e-12) and back[1] == pytest.approx(lon, abs=1e-12)
    hand = math.log(59 * 111.32 * math.cos(math.radians(37)) * 26 * 110.574)
    assert log_km2_per_unit(US_BOX) == pytest.approx(hand, rel=1e-14)
    km = lambda x, y: plane_km(*US_BOX.denormalise(x, y), US_BOX)[0]  # noqa: E731
    jx, jy = (km(0.31, 0.5) - km(0.3, 0.5)) / 0.01, (km(0.3, 0.51) - km(0.3, 0.5)) / 0.01
    assert math.log(abs(jx[0] * jy[1] - jx[1] * jy[0])) == pytest.approx(hand, rel=1e-9)


CAR = CarFit(box=US_BOX, mu=(0.45, 0.55), alpha=0.8, alpha_interval=(0.7, 0.9), tau=(4.0, 9.0), draws=1, chains=1,
             seed=0, rhat_max=1.0, ess_bulk_min=1.0, seconds=0.0)


def test_car_conditional_is_the_precision_matrix_one():
    """Held-out friendship (2, 3) among 8 users, both ends: the mean and variance from the precision of
    the graph with the held-out edge put back (car.conditional), per coordinate; and by hand for user
    2 (training friends 0 and 6, held-out friend 3): mu + alpha (mean of x_0, x_6, x_3 - mu), 1 / (3 tau)."""
    points = np.random.default_rng(2).uniform(size=(8, 2))
    train = PAIRS[[0, 1, 2, 4, 5, 6, 7, 8, 9]]  # PAIRS[3] = (2, 3) held out
    mean, var = car_conditionals(CAR, points, train, np.array([2, 3]), np.array([3, 2]))
    for c in range(2):
        Q = car_precision(adjacency(8, PAIRS), CAR.alpha, CAR.tau[c])
        for row, user in enumerate((2, 3)):
            assert (mean[row, c], var[row, c]) == pytest.approx(conditional(Q, points[:, c], user, CAR.mu[c]),
                                                                rel=1e-12)
    assert mean[0, 0] == pytest.approx(CAR.mu[0] + 0.8 * (points[[0, 6, 3], 0].mean() - CAR.mu[0]), rel=1e-12)
    assert var[0] == pytest.approx([1 / (3 * 4.0), 1 / (3 * 9.0)], rel=1e-12)


def test_car_replicates_have_the_conditional_moments():
    """100,000 draws per coordinate: mean within 4 standard errors, variance within 2%."""
    mean, var = np.array([[0.3, 0.7]]), np.array([[0.02, 0.005]])
    x, y = car_replicates(np.random.default_rng(8), mean, var, 100_000)
    for values, m, v in ((x[0], 0.3, 0.02), (y[0], 0.7, 0.005)):
        assert abs(values.mean() - m) < 4 * math.sqrt(v / 1e5) and values.var() == pytest.approx(v, rel=0.02)


def test_check_on_a_toy_graph_is_reproducible():
    """Eight users, two held-out friendships, 30 replicates: the table's shape, p-values in [0, 1],
    the CAR's log score by the Gaussian formula written here, and the same JSON twice."""
    rng = np.random.default_rng(6)
    lat, lon = rng.uniform(30, 45, 8), rng.uniform(-120, -75, 8)
    locations = Locations(np.arange(8), lat, lon)
    train, held = split_edges(PAIRS, share=0.2, seed=1)
    near = NearFit(US_BOX, 80.0, (0.6, 0.4), (300.0,))
    first = check(locations, train, held, near, CAR, replicates=30, seed=3)
    assert json.dumps(first) == json.dumps(check(locations, train, held, near, CAR, replicates=30, seed=3))
    assert set(first["ppc"]) == {"near", "car"} and len(first["ppc"]["car"]) == 8
    assert all(0 <= row["p_value"] <= 1 for table in first["ppc"].values() for row in table.values())
    i, j = oriented(held)
    mean, var = car_conditionals(CAR, np.column_stack(US_BOX.normalise(lat, lon)), train, i, j)
    x = np.column_stack(US_BOX.normalise(lat, lon))[i]
    normal = -0.5 * ((x - mean) ** 2 / var).sum(axis=1) - 0.5 * np.log(4 * math.pi**2 * var.prod(axis=1))
    assert first["log_score"]["car"] == pytest.approx(np.mean(normal) - log_km2_per_unit(US_BOX), rel=1e-12)
    assert sum(first["histogram"]["observed"]) <= 2 * len(held)
