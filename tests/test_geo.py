"""ddpbayes.geo and models/gowalla_friends.py (issue 14): the Gowalla readers and their bad input,
the normalising box, great-circle distances, the CAR precision and its conditionals, and the
fitted model. Expected values come from the csv module, dense numpy algebra and hand formulas."""

from __future__ import annotations

import csv
import hashlib
import math
from pathlib import Path

import numpy as np
import pymc as pm
import pytest
from scipy import sparse, stats

from ddpbayes import InputError, Interval, load_model
from ddpbayes.geo import (
    US_BOX,
    Box,
    CarFit,
    Locations,
    adjacency,
    box_of,
    car_precision,
    conditional,
    haversine_km,
    joint_precision,
    load_fit,
    read_edges,
    read_locations,
    save_fit,
)
from ddpbayes.geo.car import car_vector_weights

DATA = Path(__file__).resolve().parent.parent / "models" / "data"
LOCATIONS, EDGES, FIT = (DATA / f for f in ("gowalla_us_user_locations.csv", "gowalla_us_edges.csv",
                                            "gowalla_fit.json"))
SHA256 = {  # ../shared/data/README.md
    LOCATIONS: "b379200a4f55f69c6a806839becde3acf03ea5459e4bf5027f28b4877f57ea07",
    EDGES: "478dc28ba616eb3fd3892b3caee33a9575008e3109eb14e76b52f22968fd71c0",
}


def _csv_rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        return list(csv.reader(f))[1:]


# --- the shipped files ------------------------------------------------------------------------


def test_shipped_files_are_the_shared_bytes():
    for path, digest in SHA256.items():
        raw = path.read_bytes()
        assert hashlib.sha256(raw).hexdigest() == digest
        assert not raw.endswith(b"\n") and b"\r" not in raw and not raw.startswith(b"\xef\xbb\xbf")


def test_shipped_locations_and_edges():
    rows, edge_rows = _csv_rows(LOCATIONS), _csv_rows(EDGES)
    locations = read_locations(LOCATIONS)
    assert len(rows) == len(locations) == 2392  # the 2,391 is `wc -l` of a file without a final newline
    assert len(set(locations.ids.tolist())) == 2392
    assert locations.ids.tolist() == [int(r[0]) for r in rows]
    assert np.array_equal(locations.lat, [float(r[1]) for r in rows])
    assert US_BOX.contains(locations.lat, locations.lon).all()

    edges = read_edges(EDGES, locations)
    ids = set(locations.ids.tolist())
    located = [(int(a), int(b)) for a, b in edge_rows if int(a) in ids and int(b) in ids]
    assert len(edge_rows) == 10473 and len(located) == 4481 and edges.dropped == 10473 - 4481
    friendships = {frozenset(p) for p in located}
    assert len(edges.pairs) == len(friendships) == 4080 and edges.duplicates == 4481 - 4080 and edges.self_loops == 0
    assert edges.pairs.dtype == np.int64 and np.all(edges.pairs[:, 0] < edges.pairs[:, 1])
    as_ids = {frozenset(locations.ids[p].tolist()) for p in edges.pairs}
    assert as_ids == friendships
    assert len(np.unique(edges.pairs)) == 1456  # users with a located friend (data README)


# --- bad input --------------------------------------------------------------------------------


def _write(tmp_path: Path, text: str, name: str = "f.csv", raw: bytes | None = None) -> Path:
    path = tmp_path / name
    path.write_bytes(raw if raw is not None else text.encode())
    return path


GOOD = "UserID,Latitude,Longitude\n1,40.7,-74.0\n2,34.05,-118.25\n"


@pytest.mark.parametrize("text, expect", [
    ("UserID,Lat,Longitude\n1,40,-74\n", ["line 1", "'Latitude'"]),
    ("UserID,Latitude,Longitude\n1,forty,-74\n", ["line 2", "'Latitude'", "'forty' is not a number"]),
    ("UserID,Latitude,Longitude\n1,40,-74\n2,nan,-74\n", ["line 3", "'Latitude'", "not a finite"]),
    ("UserID,Latitude,Longitude\n1,40,inf\n", ["line 2", "'Longitude'", "not a finite"]),
    ("UserID,Latitude,Longitude\n1,90.5,-74\n", ["line 2", "'Latitude'", "outside [-90, 90]"]),
    ("UserID,Latitude,Longitude\n1,40,-180.01\n", ["line 2", "'Longitude'", "outside [-180, 180]"]),
    ("UserID,Latitude,Longitude\n1,40,-74\n1,41,-75\n", ["line 3", "'UserID'", "user 1 repeats", "line 2"]),
    ("UserID,Latitude,Longitude\n1.5,40,-74\n", ["line 2", "'UserID'", "not an integer"]),
    ("UserID,Latitude,Longitude\n1,40\n", ["line 2", "'Longitude'", "missing value"]),
    ("", ["is empty"]),
    ("UserID,Latitude,Longitude\n\n", ["no data rows"]),
])
def test_bad_locations(tmp_path, text, expect):
    path = _write(tmp_path, text)
    with pytest.raises(InputError) as err:
        read_locations(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    for part in expect:
        assert part in message


def test_locations_quirks_bom_crlf_extra_columns(tmp_path):
    raw = b"\xef\xbb\xbfName,Longitude,UserID,Latitude\r\na,-74.0,7,40.7\r\n\r\nb,-118.25,-3,34.05"
    locations = read_locations(_write(tmp_path, "", raw=raw))
    assert locations.ids.tolist() == [7, -3] and locations.ids.dtype == np.int64
    assert locations.lat.tolist() == [40.7, 34.05] and locations.lon.tolist() == [-74.0, -118.25]


def test_edges_dropped_duplicates_self_loops(tmp_path):
    locations = read_locations(_write(tmp_path, GOOD + "5,41,-87\n", "loc.csv"))
    text = "Destination,Source\n2,1\n1,2\n5,5\n9,1\n9,8\n5,1\n"
    edges = read_edges(_write(tmp_path, text, "e.csv"), locations)
    assert edges.pairs.tolist() == [[0, 1], [0, 2]]
    assert (edges.dropped, edges.duplicates, edges.self_loops) == (2, 1, 1)


@pytest.mark.parametrize("text, expect", [
    ("Source,Target\n1,2\n", ["line 1", "'Destination'"]),
    ("Source,Destination\n1,x\n", ["line 2", "'Destination'", "not an integer"]),
    ("Source,Destination\n1,2\n8,9\n", ["no edge joins two located users", "no located user pair", "2 edges"]),
    ("Source,Destination\n1,1\n", ["no edge joins two located users", "only self loops"]),
    ("Source,Destination\n", ["no data rows"]),
])
def test_bad_edges(tmp_path, text, expect):
    locations = read_locations(_write(tmp_path, GOOD.replace("2,34.05", "3,34.05"), "loc.csv"))
    path = _write(tmp_path, text, "e.csv")
    with pytest.raises(InputError) as err:
        read_edges(path, locations)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    for part in expect:
        assert part in message


# --- box and distances ------------------------------------------------------------------------


def test_box_round_trip_and_orientation():
    rng = np.random.default_rng(0)
    lat, lon = rng.uniform(24, 50, 100), rng.uniform(-125, -66, 100)
    x, y = US_BOX.normalise(lat, lon)
    assert np.all((0 <= x) & (x <= 1) & (0 <= y) & (y <= 1))
    back = US_BOX.denormalise(x, y)
    np.testing.assert_allclose(back[0], lat, rtol=0, atol=1e-12)
    np.testing.assert_allclose(back[1], lon, rtol=0, atol=1e-12)
    assert US_BOX.normalise(24.0, -66.0) == (1.0, 0.0)  # x from longitude, y from latitude
    assert US_BOX.normalise(37.0, -95.5) == (0.5, 0.5)
    assert not US_BOX.contains(51.0, -100.0)


def test_box_of_and_bad_boxes():
    locations = Locations(np.array([1, 2]), np.array([10.0, 20.0]), np.array([179.8, 100.0]))
    assert box_of(locations, 0.5) == Box(lat=(9.5, 20.5), lon=(99.5, 180.0))
    with pytest.raises(InputError, match="same latitude or longitude"):
        box_of(Locations(np.array([1]), np.array([10.0]), np.array([5.0])), 0.0)
    with pytest.raises(InputError, match="lat_min < lat_max"):
        Box(lat=(50.0, 24.0), lon=(-125.0, -66.0))


def test_haversine_by_hand():
    r = 6371.0088
    assert haversine_km(0.0, 0.0, 0.0, 90.0) == pytest.approx(r * math.pi / 2, rel=1e-14)
    assert haversine_km(-90.0, 0.0, 90.0, 0.0) == pytest.approx(r * math.pi, rel=1e-14)
    # New York -> Los Angeles and London -> Paris by the spherical law of cosines
    cities = [(40.7128, -74.0060, 34.0522, -118.2437), (51.5074, -0.1278, 48.8566, 2.3522)]
    for lat1, lon1, lat2, lon2 in cities:
        p1, p2, dl = math.radians(lat1), math.radians(lat2), math.radians(lon2 - lon1)
        hand = r * math.acos(math.sin(p1) * math.sin(p2) + math.cos(p1) * math.cos(p2) * math.cos(dl))
        assert haversine_km(lat1, lon1, lat2, lon2) == pytest.approx(hand, rel=1e-9)
    assert haversine_km(40.7128, -74.0060, 34.0522, -118.2437) == pytest.approx(3936, abs=1)
    many = haversine_km(np.zeros(3), np.zeros(3), np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, -1.0]))
    np.testing.assert_allclose(many, [0.0, r * math.pi / 180, r * math.pi / 180], rtol=1e-12)


# --- the CAR precision and its conditionals ---------------------------------------------------


def _dense_car(a: np.ndarray, alpha: float, tau: float) -> np.ndarray:
    degree = a.sum(axis=1)
    q = tau * (np.diag(degree) - alpha * a)
    q[degree == 0, degree == 0] = tau
    return q


def test_car_precision_against_dense_with_an_isolated_user():
    pairs = np.array([[0, 1], [1, 2], [2, 0], [2, 3], [1, 0]])  # user 4 has no friend; (1, 0) repeats (0, 1)
    a = np.zeros((5, 5))
    for i, j in pairs:
        a[i, j] = a[j, i] = 1.0
    w = adjacency(5, pairs)
    assert np.array_equal(w.toarray(), a)
    q = car_precision(w, 0.7, 2.5)
    assert sparse.issparse(q)
    np.testing.assert_allclose(q.toarray(), _dense_car(a, 0.7, 2.5), rtol=0, atol=1e-15)
    assert q[4, 4] == 2.5 and np.all(np.linalg.eigvalsh(q.toarray()) > 0)
    with pytest.raises(InputError):
        car_precision(w, 1.0, 2.5)
    with pytest.raises(InputError):
        adjacency(3, np.array([[0, 3]]))


def test_one_pm_car_carries_both_fields():
    """The weights of the model's single pm.CAR (tau = 1) give joint_precision exactly."""
    a = adjacency(5, np.array([[0, 1], [1, 2], [2, 3]]))  # user 4 alone
    alpha, tau = 0.9, (3.0, 7.0)
    joint = joint_precision(a, alpha, tau).toarray()
    expected = np.zeros((10, 10))
    expected[:5, :5], expected[5:, 5:] = _dense_car(a.toarray(), alpha, 3.0), _dense_car(a.toarray(), alpha, 7.0)
    np.testing.assert_allclose(joint, expected, rtol=0, atol=1e-14)
    weights = car_vector_weights(a, alpha, tau)
    np.testing.assert_allclose(car_precision(weights, alpha, 1.0).toarray(), expected, rtol=0, atol=1e-12)
    with pm.Model() as m:  # and PyMC's own log-density of that pm.CAR is N(mu, expected^-1)'s, up to a constant
        pm.CAR("pos", mu=np.full(10, 0.5), W=weights, alpha=alpha, tau=1.0)
    logp = m.compile_logp()
    law = stats.multivariate_normal(np.full(10, 0.5), np.linalg.inv(expected))
    points = np.random.default_rng(2).uniform(0, 1, (3, 10))
    np.testing.assert_allclose(np.diff([float(logp({"pos": p})) for p in points]), np.diff(law.logpdf(points)),
                               rtol=1e-10)


def test_conditional_against_dense_schur_complement():
    rng = np.random.default_rng(3)
    n = 12
    pairs = np.array([(i, j) for i in range(n - 2) for j in range(i + 1, n - 2) if rng.random() < 0.3])
    q = car_precision(adjacency(n, pairs), 0.8, 4.0)  # users 10 and 11 alone
    sigma = np.linalg.inv(q.toarray())
    mu = 0.4
    x = rng.normal(mu, 0.3, n)
    means, variances = [], []
    for i in range(n):
        rest = np.delete(np.arange(n), i)
        gain = sigma[i, rest] @ np.linalg.inv(sigma[np.ix_(rest, rest)])
        means.append(mu + gain @ (x[rest] - mu))
        variances.append(sigma[i, i] - gain @ sigma[rest, i])
        garbage = x.copy()
        garbage[i] = np.nan  # the target's own value is not used
        mean, var = conditional(q, garbage, i, mu=mu)
        assert isinstance(mean, float) and mean == pytest.approx(means[-1], abs=1e-12)
        assert var == pytest.approx(variances[-1], rel=1e-10)
        centred = conditional(q, garbage - mu, i)
        assert centred[0] + mu == pytest.approx(mean, abs=1e-12) and centred[1] == var
    mean, var = conditional(q, x, np.arange(n), mu=mu)
    np.testing.assert_allclose(mean, means, rtol=0, atol=1e-12)
    np.testing.assert_allclose(var, variances, rtol=1e-10)
    assert mean[11] == mu and var[11] == 1 / 4.0


# --- the fit and the model --------------------------------------------------------------------


def test_fit_round_trip_and_bad_fit(tmp_path):
    fit = CarFit(box=US_BOX, mu=(0.5, 0.4), alpha=0.9, alpha_interval=(0.8, 0.95), tau=(5.0, 9.0), draws=10,
                 chains=2, seed=1, rhat_max=1.01, ess_bulk_min=300.0, seconds=1.5, tune=10, divergences=0,
                 details={"users": 3})
    path = tmp_path / "fit.json"
    save_fit(fit, path)
    again = load_fit(path)
    assert again == fit and again.details == {"users": 3} and isinstance(again.box, Box)
    path.write_text(path.read_text().replace('"alpha": 0.9', '"alpha": 1.5'))
    with pytest.raises(InputError, match="alpha"):
        load_fit(path)
    path.write_text('{"box": {"lat": [24, 50]}}')
    with pytest.raises(InputError, match="cannot read the CAR fit"):
        load_fit(path)


def test_shipped_fit():
    fit = load_fit(FIT)
    assert fit.box == US_BOX and fit.draws * fit.chains >= 1000
    assert fit.alpha_interval[0] < fit.alpha < fit.alpha_interval[1] < 1
    assert fit.rhat_max < 1.01 and fit.ess_bulk_min > 400 and fit.divergences == 0
    assert all(0 < m < 1 for m in fit.mu) and all(t > 0 for t in fit.tau)
    assert fit.details["users"] == 2392 and fit.details["friendships"] == 4080


@pytest.fixture(scope="module")
def model30(models_dir):
    return load_model(models_dir / "gowalla_friends.py", {"n": 30})


def _precision30() -> tuple[np.ndarray, np.ndarray]:
    """The first 30 users' joint precision and mean, built here from the files and the fit."""
    fit = load_fit(FIT)
    locations = read_locations(LOCATIONS)
    pairs = read_edges(EDGES, locations).pairs
    pairs = pairs[(pairs < 30).all(axis=1)]
    a = np.zeros((30, 30))
    a[pairs[:, 0], pairs[:, 1]] = a[pairs[:, 1], pairs[:, 0]] = 1.0
    assert (a.sum(axis=1) > 0).all()  # user 0 befriends many: the first users all have friends
    q = np.zeros((60, 60))
    q[:30, :30], q[30:, 30:] = _dense_car(a, fit.alpha, fit.tau[0]), _dense_car(a, fit.alpha, fit.tau[1])
    return q, np.repeat(fit.mu, 30)


def test_model_tuples_and_log_density(model30):
    assert model30.n == 60 and model30.names[0] == "pos[0]" and model30.names[30] == "pos[30]"
    assert all(d == Interval(0.0, 1.0) for d in model30.domains) and model30.latent_rvs == []
    q, mean = _precision30()
    logp = model30.model.compile_logp()
    law = stats.multivariate_normal(mean, np.linalg.inv(q))
    rng = np.random.default_rng(5)
    points = [rng.uniform(0, 1, 60) for _ in range(3)]
    ours = [float(logp({"pos": p})) for p in points]
    exact = [law.logpdf(p) for p in points]
    # pm.CAR drops the constant log|D| / 2 and 2pi terms: compare differences
    np.testing.assert_allclose(np.diff(ours), np.diff(exact), rtol=1e-9)


def test_model_covariance_as_the_gaussian_engine_reads_it(model30):
    from ddpbayes.engines.gaussian import graph

    reason = graph.unsupported_reason(model30)
    if reason is not None:
        pytest.skip(f"the gaussian engine cannot read pm.CAR yet: {reason}")
    q, mean = _precision30()
    np.testing.assert_allclose(graph.tuple_covariance(model30), np.linalg.inv(q), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(graph.tuple_mean(model30), mean, rtol=1e-12)
