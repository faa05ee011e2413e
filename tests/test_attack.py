"""`ddpbayes attack` (seed 002 §IV): the grid posterior against brute force, the centroids'
sensitivity against every move on a lattice, k-means through SciPy, both priors against direct
computations, the leaked information's limits, determinism, the JSON schema and bad input.
Expected values come from the definitions, computed here without the module's shortcuts."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.cluster.vq import vq

from ddpbayes.attack import adversary, posterior
from ddpbayes.attack.grid import Grid
from ddpbayes.attack.metrics import THEOREM_2, car_line, left_out_edges
from ddpbayes.attack.release import kmeans, partition, sensitivity
from ddpbayes.attack.run import AttackData, AttackSettings, run_attack
from ddpbayes.cli.main import main
from ddpbayes.errors import InputError
from ddpbayes.geo.car import adjacency, car_precision, conditional
from ddpbayes.geo.data import US_BOX
from ddpbayes.geo.near import NearFit
from ddpbayes.geo.regions import region

SMALL = ["--targets", "40", "--grid", "10", "--epsilons", "0.5,2"]  # on the shipped data: about a second
NEAR = NearFit(US_BOX, 40.0, (0.7, 0.3), (200.0,))  # a near-friend model for synthetic data
ADVERSARIES = ("independent", "dependent", "car")


# --------------------------------------------------------------------------- the posterior


def _brute_posterior(points, labels, target, noisy, b, grid):
    """Eq. 6 from scratch: every cell centre, every centroid recomputed, the L1 distance over all
    2K coordinates, times the histogram of the others' cells."""
    others = np.delete(np.arange(len(points)), target)
    k = noisy.shape[0]
    post = np.zeros((grid, grid))
    for ix in range(grid):
        for iy in range(grid):
            moved = points.copy()
            moved[target] = ((ix + 0.5) / grid, (iy + 0.5) / grid)
            cents = np.array([moved[labels == c].mean(axis=0) for c in range(k)])
            inside = [j for j in others if min(int(points[j, 0] * grid), grid - 1) == ix
                      and min(int(points[j, 1] * grid), grid - 1) == iy]
            post[ix, iy] = math.exp(-np.abs(noisy - cents).sum() / b) * len(inside) / len(others)
    return (post / post.sum()).ravel()


def test_posterior_matches_brute_force():
    rng = np.random.default_rng(5)
    points = rng.random((9, 2))
    labels = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    part = partition(points, labels, 3)
    noisy = part.centroids + rng.normal(0, 0.05, size=(3, 2))
    grid, b = 4, 0.04
    for target in (0, 4, 8):
        t = np.array([target])
        mask = adversary.known_row(9, target, 8, rng)[None, :]
        view = adversary.cluster_view(points, part, t, mask)
        log_lik = posterior.log_likelihood(noisy[labels[t]], view.expected_others, view.sigma, view.size, b,
                                           Grid.unit(grid))
        counts = adversary.histogram_counts(Grid.unit(grid).index(points), mask, grid**2)
        got = np.exp(posterior.normalise(posterior.histogram_log_prior(counts) + log_lik))[0]
        assert got == pytest.approx(_brute_posterior(points, labels, target, noisy, b, grid), abs=1e-12)


def _convolution(s: float, r: float, b: float, sigma: float) -> float:
    return math.exp(-abs(r - s) / b) / (2 * b) * stats.norm.pdf(s, 0, sigma)


def test_laplace_normal_density_matches_quadrature():
    """The likelihood with unknown cluster members: Laplace(b) convolved with Normal(0, σ²)."""
    b = 0.3
    for sigma in (1e-3, 0.05, 0.3, 2.0):
        for r in (-2.0, -0.1, 0.0, 0.25, 1.5):
            cuts = sorted({-12 * sigma, 12 * sigma, min(max(r, -12 * sigma), 12 * sigma)})  # the normal's mass, the kink
            exact = sum(integrate.quad(_convolution, lo, hi, args=(r, b, sigma), epsabs=0, epsrel=1e-11, limit=200)[0]
                        for lo, hi in itertools.pairwise(cuts))
            got = posterior.laplace_normal_logpdf(np.array([r]), b, np.array([sigma]))[0]
            assert got == pytest.approx(math.log(exact), abs=1e-7), (sigma, r)
    r = np.array([-1.0, 0.2])
    assert posterior.laplace_normal_logpdf(r, b, np.zeros(2)) == pytest.approx(-np.abs(r) / b - math.log(2 * b))


def test_partial_knowledge_integrates_unknown_members():
    """With u unknown members in the target's cluster, the expected sum is S_known + u m and the
    spread sqrt(u V)/n_c, m and V the known members' mean and variance; with none unknown, σ = 0."""
    points = np.array([[0.1, 0.2], [0.3, 0.6], [0.5, 0.1], [0.9, 0.9], [0.7, 0.4], [0.2, 0.8]])
    labels = np.array([0, 0, 0, 0, 1, 1])
    part = partition(points, labels, 2)
    mask = np.array([[False, True, True, False, True, True]])  # target 0 knows 1 and 2 of its cluster, not 3
    view = adversary.cluster_view(points, part, np.array([0]), mask)
    known = points[[1, 2]]
    assert view.size[0] == 4
    assert view.expected_others[0] == pytest.approx(known.sum(axis=0) + known.mean(axis=0))
    assert view.sigma[0] == pytest.approx(np.sqrt(known.var(axis=0)) / 4)
    full = adversary.cluster_view(points, part, np.array([0]), np.array([[False, True, True, True, True, True]]))
    assert full.sigma[0] == pytest.approx([0, 0]) and full.expected_others[0] == pytest.approx(points[1:4].sum(axis=0))


# --------------------------------------------------------------------------- the release


def test_sensitivity_is_the_largest_move_on_a_lattice():
    """Δ = 2 / min n_c equals the largest L1 change of the centroid vector when one user moves
    between any two points of a 5 × 5 lattice of the box (corners included), partition fixed."""
    rng = np.random.default_rng(1)
    points = rng.random((9, 2))
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2])
    lattice = np.array([(x, y) for x in np.linspace(0, 1, 5) for y in np.linspace(0, 1, 5)])
    largest = 0.0
    for user in range(len(points)):
        cents = []
        for p in lattice:
            moved = points.copy()
            moved[user] = p
            cents.append(partition(moved, labels, 3).centroids.ravel())
        cents = np.array(cents)
        largest = max(largest, np.abs(cents[:, None, :] - cents[None, :, :]).sum(axis=2).max())
    assert sensitivity(np.bincount(labels)) == pytest.approx(largest, abs=1e-12)
    assert largest == pytest.approx(2 / 2)


def test_kmeans_is_scipys_partition():
    rng = np.random.default_rng(3)
    centres = np.array([[0.2, 0.2], [0.8, 0.3], [0.5, 0.85]])
    points = np.clip(np.concatenate([c + rng.normal(0, 0.03, (40, 2)) for c in centres]), 0, 1)
    part = kmeans(points, 3, np.random.default_rng(0))
    assert np.array_equal(part.labels, vq(points, part.centroids)[0])  # every user in its nearest centroid's cluster
    assert part.centroids == pytest.approx(np.array([points[part.labels == c].mean(axis=0) for c in range(3)]))
    assert sorted(part.sizes) == [40, 40, 40]
    assert all(len(set(part.labels[40 * k:40 * (k + 1)])) == 1 for k in range(3))
    again = kmeans(points, 3, np.random.default_rng(0))
    assert np.array_equal(again.labels, part.labels)
    with pytest.raises(InputError, match="distinct positions"):
        kmeans(np.zeros((5, 2)), 2, np.random.default_rng(0))


# --------------------------------------------------------------------------- the priors


def test_independent_prior_is_the_histogram_of_known_others():
    rng = np.random.default_rng(2)
    points = rng.random((50, 2))
    grid = 5
    mask = np.stack([adversary.known_row(50, i, 20, rng) for i in (0, 7)])
    log_prior = posterior.histogram_log_prior(adversary.histogram_counts(Grid.unit(grid).index(points), mask,
                                                                         grid**2))
    for row, m in zip(np.exp(log_prior), mask):
        hist, _, _ = np.histogram2d(points[m, 0], points[m, 1], bins=grid, range=[[0, 1], [0, 1]])
        assert m.sum() == 20
        assert row == pytest.approx((hist / hist.sum()).ravel(), abs=1e-12)


def test_dependent_prior_is_the_gaussian_mass_of_each_cell():
    grid = 4
    edges = np.linspace(0, 1, grid + 1)
    for mean, sd in (((0.3, 0.7), (0.2, 0.4)), ((1.6, -0.4), (0.15, 0.3)), ((0.51, 0.5), (0.004, 0.9))):
        got = np.exp(posterior.gaussian_log_prior(np.array([mean]), np.array([sd]), Grid.unit(grid)))[0]
        mass = [[integrate.quad(stats.norm(mean[a], sd[a]).pdf, lo, hi, epsabs=0, epsrel=1e-12)[0]
                 for lo, hi in itertools.pairwise(edges)] for a in range(2)]
        want = np.outer(mass[0], mass[1]).ravel()
        assert got == pytest.approx(want / want.sum(), rel=1e-8, abs=1e-300)


def test_subset_conditional_matches_dense_gaussian_conditioning():
    """The CAR conditional given a known subset (unknowns marginalised) against the covariance
    formula, and given everyone against geo.car.conditional."""
    rng = np.random.default_rng(4)
    n = 14
    pairs = np.array([(0, 1), (1, 2), (2, 3), (3, 4), (1, 5), (5, 6), (6, 7), (8, 9), (9, 10), (2, 6)])
    W = adjacency(n, pairs)  # users 11-13 have no friends
    Qs = [car_precision(W, 0.8, 3.0), car_precision(W, 0.8, 7.0)]
    values = rng.normal(0, 0.2, (n, 2))
    for target in (2, 6, 9, 12):
        known = rng.random(n) < 0.5
        known[target] = False
        mean, var = adversary.subset_conditional(Qs, values, target, known)
        for a, Q in enumerate(Qs):
            cov = np.linalg.inv(Q.toarray())
            k = np.flatnonzero(known)
            gain = cov[target, k] @ np.linalg.inv(cov[np.ix_(k, k)])
            assert mean[a] == pytest.approx(gain @ values[k, a], abs=1e-12)
            assert var[a] == pytest.approx(cov[target, target] - gain @ cov[k, target], rel=1e-10)
        everyone = np.ones(n, dtype=bool)
        everyone[target] = False
        mean, var = adversary.subset_conditional(Qs, values, target, everyone)
        for a, Q in enumerate(Qs):
            assert (mean[a], var[a]) == pytest.approx(conditional(Q, values[:, a], target), abs=1e-12)


# --------------------------------------------------------------------------- leaked information


def _synthetic(n: int = 60, seed: int = 0) -> AttackData:
    """Users in three blobs inside the US box, friendships within blobs, a made-up CAR fit."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.2, 0.3], [0.7, 0.6], [0.45, 0.8]])
    points = np.clip(centres[np.arange(n) % 3] + rng.normal(0, 0.06, (n, 2)), 0.01, 0.99)
    pairs = np.array([(i, j) for i in range(n) for j in range(i + 3, n, 3) if rng.random() < 0.08])
    lat, lon = US_BOX.denormalise(points[:, 0], points[:, 1])
    fit = SimpleNamespace(box=US_BOX, mu=(0.45, 0.55), alpha=0.9, tau=(8.0, 12.0))
    return AttackData(lat, lon, points, pairs, 0, 0, fit, NEAR, region("us", US_BOX))


def test_leaked_bits_vanish_for_tiny_epsilon_and_reach_the_prior_entropy_for_huge():
    """ε → 0: the posterior is the prior (no bits from the release). ε → ∞ with every other user
    known: the posterior is one cell, so the release leaks all of the prior's entropy. With unknown
    cluster members their spread keeps the posterior wide however large ε is."""
    result = run_attack(_synthetic(), AttackSettings(k=3, epsilons=(1e-9, 1e9), grid=6, n_prior=(None, 30)),
                        progress=False)
    for n_prior in (59, 30):
        for a in ADVERSARIES:
            assert abs(result.row(n_prior, 1e-9, a)["release_bits"]) < 1e-6
        ind, dep = result.row(n_prior, 1e-9, "independent"), result.row(n_prior, 1e-9, "dependent")
        assert ind["leaked_bits"] == ind["release_bits"]
        assert dep["leaked_bits"] == pytest.approx(ind["prior_bits"] - dep["prior_bits"], abs=1e-6)
    for a in ADVERSARIES:
        huge = result.row(59, 1e9, a)
        assert huge["posterior_bits"] < 1e-6
        assert huge["release_bits"] == pytest.approx(huge["prior_bits"], abs=1e-6)
        assert 0.5 < result.row(30, 1e9, a)["posterior_bits"]
    assert result.row(59, 1e9, "independent")["leaked_bits"] == pytest.approx(result.row(59, 1e9, "independent")[
        "prior_bits"], abs=1e-6)


def test_independent_leakage_stays_under_theorem_2():
    """The histogram adversary's posterior-to-prior ratio is within e^{±ε} (the partition is fixed,
    so Δ bounds every cell-to-cell likelihood ratio): here its leaked bits stay under ε log2 e
    (Theorem 2, seed 000)."""
    result = run_attack(_synthetic(90, 1), AttackSettings(k=3, epsilons=(0.5, 2.0, 8.0), grid=8), progress=False)
    for e in (0.5, 2.0, 8.0):
        row = result.row(89, e, "independent")
        assert abs(row["leaked_bits"]) <= row["bound_bits"] == pytest.approx(e / math.log(2))


# --------------------------------------------------------------------------- the command line


def _json(args: list[str], capsys) -> dict:
    assert main(["attack", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_same_seed_same_json_and_schema(capsys):
    first = _json([*SMALL, "--n-prior", "all,300", "--seed", "7"], capsys)
    second = _json([*SMALL, "--n-prior", "all,300", "--seed", "7"], capsys)
    other = _json([*SMALL, "--n-prior", "all,300", "--seed", "8"], capsys)
    assert first.pop("seconds") >= 0 and second.pop("seconds") >= 0
    assert first == second
    other.pop("seconds")
    assert other["rows"] != first["rows"]
    assert len(first["rows"]) == 2 * 2 * 3
    for row in first["rows"]:
        assert {"epsilon", "adversary", "n_prior", "mean_error_km", "median_error_km", "leaked_bits"} <= set(row)
        assert row["adversary"] in ADVERSARIES and row["n_prior"] in (2391, 300)
        assert all(isinstance(row[k], float) for k in ("mean_error_km", "median_error_km", "leaked_bits"))
    assert first["users"] == 2392 and first["located_edges"] == 4080 and first["dropped_edges"] == 5992
    assert first["k"] == 8 and first["grid"] == 10 and first["seed"] == 7 and first["targets"] == 40
    assert first["box"] == {"lat": [24.0, 50.0], "lon": [-125.0, -66.0]}


def test_text_output_and_report(tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["attack", *SMALL, "--report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "independent" in text and "dependent" in text and "Thm 2 bound" in text
    html = (out / "index.html").read_text()
    assert "data:image/png;base64," in html and "http" not in html.replace("http://www.w3.org", "")
    data = json.loads((out / "results.json").read_text())
    # What the table's words mean (issue #40): the shipped edges file's 10,473 rows are 4,080 friendships between
    # located users, 5,992 rows naming a user without a location and 401 repeats (DESIGN §6).
    left_out = "the edges file's other rows are left out: 5,992 name a user with no location, 401 repeat a friendship"
    assert f"friendships 4,080 between these users; {left_out}" in text.splitlines()
    markdown = (out / "report.md").read_text()
    assert f"4,080 friendships between them (models/data/gowalla_us_edges.csv; {left_out})" in markdown
    assert THEOREM_2 in text and THEOREM_2 in markdown
    # the bound is exceeded only by adversaries whose prior is not the histogram: for the independent adversary the
    # leaked bits are the release's, within the bound
    for row in data["rows"]:
        if row["adversary"] == "independent":
            assert row["leaked_bits"] == pytest.approx(row["release_bits"], abs=1e-12)
            assert row["leaked_bits"] <= row["bound_bits"]
    car = next(r for r in data["rows"] if r["adversary"] == "car" and r["leaked_bits"] < 0)
    ind = next(r for r in data["rows"] if (r["adversary"], r["epsilon"], r["n_prior"]) ==
               ("independent", car["epsilon"], car["n_prior"]))
    assert car["prior_bits"] > ind["prior_bits"]
    assert (f"car: the fitted CAR model's conditional law as the prior; broader than the histogram (entropy "
            f"{car['prior_bits']:.3f} against {ind['prior_bits']:.3f} bits)") in text
    assert data["reproducibility"]["command"].startswith("ddpbayes attack --region us --k 8")
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["error_cdf.png", "leaked_information.png",
                                                                  "release.png"]
    assert (out / "report.md").read_text().startswith("# ")


@pytest.mark.parametrize("car, expected", [
    ({"leaked_bits": -0.4, "prior_bits": 5.2}, "entropy 5.200 against 4.800 bits"),
    ({"leaked_bits": 0.1, "prior_bits": 5.2}, None),  # not negative: nothing to explain
    ({"leaked_bits": -0.1, "prior_bits": 4.7}, None),  # negative, but not for a broader prior
])
def test_the_car_line_explains_negative_leaked_bits_only_by_a_broader_prior(car, expected):
    rows = [{"adversary": "independent", "epsilon": 1.0, "n_prior": 9, "leaked_bits": 0.01, "prior_bits": 4.8},
            {"adversary": "car", "epsilon": 1.0, "n_prior": 9, **car}]
    line = car_line(rows)
    assert (line is None) if expected is None else (expected in line)


def test_left_out_edges_names_every_kind():
    doc = {"dropped_edges": 1234, "duplicate_edges": 5, "outside_edges": 7}
    assert left_out_edges(doc) == ("the edges file's other rows are left out: 1,234 name a user with no location, "
                                   "5 repeat a friendship, 7 have an end outside the region")
    assert "outside" not in left_out_edges({**doc, "outside_edges": 0})


def _csv(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.fixture
def files(tmp_path) -> dict[str, str]:
    users = "UserID,Latitude,Longitude\n" + "".join(f"{i},{30 + i * 0.5},{-100 + i}\n" for i in range(12))
    return {
        "users": _csv(tmp_path / "users.csv", users),
        "edges": _csv(tmp_path / "edges.csv", "Source,Destination\n0,1\n2,3\n4,5\n"),
        "no_lat": _csv(tmp_path / "no_lat.csv", "UserID,Longitude\n1,-100\n"),
        "text_lat": _csv(tmp_path / "text_lat.csv", "UserID,Latitude,Longitude\n1,north,-100\n2,31,-99\n"),
        "foreign": _csv(tmp_path / "foreign.csv", "Source,Destination\n100,101\n0,100\n"),
        "abroad": _csv(tmp_path / "abroad.csv", "UserID,Latitude,Longitude\n0,48.8,2.3\n1,30,-100\n"),
        "near": _csv(tmp_path / "near.json", '{"box": {"lat": [24, 50], "lon": [-125, -66]}, "bandwidth_km": 40, '
                                             '"weights": [0.5, 0.6], "sigma_km": [100]}'),
    }


BAD = {
    "missing column": (lambda f: ["--locations", f["no_lat"], "--edges", f["edges"]], "Latitude"),
    "non-numeric coordinate": (lambda f: ["--locations", f["text_lat"], "--edges", f["edges"]], "not a number"),
    "edges naming no located user": (lambda f: ["--locations", f["users"], "--edges", f["foreign"]], "no edge"),
    "K larger than the users": (lambda f: ["--locations", f["users"], "--edges", f["edges"], "--k", "13"], "--k"),
    "grid 0": (lambda f: ["--grid", "0"], "--grid"),
    "epsilon 0": (lambda f: ["--epsilons", "0.1,0"], "epsilon"),
    "epsilon negative": (lambda f: ["--epsilons", "-1"], "epsilon"),
    "epsilon not a number": (lambda f: ["--epsilons", "one"], "epsilons"),
    "n-prior 0": (lambda f: ["--n-prior", "0"], "--n-prior"),
    "n-prior too large": (lambda f: ["--n-prior", "2392"], "--n-prior"),
    "targets 0": (lambda f: ["--targets", "0"], "--targets"),
    "seed negative": (lambda f: ["--seed", "-1"], "--seed"),
    "missing file": (lambda f: ["--locations", f["users"] + ".gone"], "missing input file"),
    "outside the box": (lambda f: ["--locations", f["abroad"], "--edges", f["edges"]], "outside"),
    "unknown region": (lambda f: ["--region", "mars"], "--region"),
    "nobody in the region": (lambda f: ["--locations", f["users"], "--edges", f["edges"], "--region", "ny"],
                             "at least two located users in the region"),
    "audit users negative": (lambda f: ["--audit-users", "-1"], "--audit-users"),
    "near fit weights not summing to 1": (lambda f: ["--near", f["near"]], "near-friend fit"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_exit_2_one_line(case, files, capsys):
    args, fragment = BAD[case]
    code = main(["attack", *args(files)])
    out, err = capsys.readouterr()
    assert code == 2, (case, err)
    assert out == "" and "Traceback" not in err
    assert len(err.strip("\n").split("\n")) == 1, err
    assert fragment in err, (case, err)


def test_own_files_run(files, capsys):
    doc = _json(["--locations", files["users"], "--edges", files["edges"], "--k", "3", "--grid", "5"], capsys)
    assert doc["users"] == 12 and doc["located_edges"] == 3 and doc["inputs"]["locations"] == files["users"]


# --------------------------------------------------------------------------- the whole experiment


@pytest.mark.slow
def test_full_run_on_the_shipped_data(capsys):
    doc = _json(["--n-prior", "all,1195"], capsys)
    assert len(doc["rows"]) == 2 * 5 * 3 and doc["targets"] == 2392
    for row in doc["rows"]:
        assert 0 < row["median_error_km"] < 5000 and 0 < row["mean_error_km"] < 5000
        if row["adversary"] == "independent":
            assert row["leaked_bits"] <= row["bound_bits"]
    assert sum(doc["cluster_sizes"]) == 2392 and doc["sensitivity"] == pytest.approx(2 / min(doc["cluster_sizes"]))
    rows = {(r["n_prior"], r["epsilon"], r["adversary"]): r for r in doc["rows"]}
    for e in doc["epsilons"]:  # issue 30: Liu et al.'s Fig. 5 ordering, every other user known
        dep, ind = rows[(2391, e, "dependent")], rows[(2391, e, "independent")]
        assert dep["leaked_bits"] > ind["leaked_bits"] and dep["mean_error_km"] < ind["mean_error_km"]


def test_worst_case_user_idp_is_the_dense_gaussian_formula():
    """Each user's exact idp of the centroid release (the report's audit section) equals
    Σ_coordinates Σ_c |A_c Σ e_i| / (Σ_ii b) with Σ the dense inverse of the CAR precision."""
    from ddpbayes.attack.worst import summary, user_idp

    data = _synthetic(40, seed=3)
    labels = np.arange(40) % 3
    delta = 0.2
    users, _ = user_idp(data.points, data.pairs, data.fit, labels, delta)
    n = len(labels)
    w = adjacency(n, data.pairs)
    expected = np.zeros(n)
    for tau in data.fit.tau:
        sigma = np.linalg.inv(car_precision(w, data.fit.alpha, tau).toarray())
        a = np.stack([(labels == c) / np.sum(labels == c) for c in range(3)])  # one centroid row per cluster
        expected += np.abs(a @ sigma).sum(axis=0) / np.diag(sigma) / delta
    assert np.allclose(users, expected, rtol=1e-9, atol=0)
    rows = summary(users, [1.0, 2.0])
    assert rows[0]["users_above"] == int(np.sum(expected > 1.0)) and rows[1]["q100"] == pytest.approx(2 * expected.max())


# --------------------------------------------------------------------------- issue 30: Eq. 9, regions, references


def _normal2(d2: float, var: float) -> float:
    return math.exp(-d2 / (2 * var)) / (2 * math.pi * var)


def test_eq9_prior_is_the_histogram_reweighted_near_friends():
    """Eq. 9 from its definition, loop by loop: each known other k adds weight(x_k) = w_0 + Σ_s w_s ·
    mean over the known friends f of N(x_k; x_f, (σ_s² + h²) I) / Z_f,s (Z_f,s that kernel's mean over
    the known others) to its cell; unknown friends add nothing; a user without friends gets Eq. 8."""
    rng = np.random.default_rng(11)
    n, grid = 40, 4
    km = rng.normal(0, 300, (n, 2))
    points = rng.random((n, 2))
    cells = Grid.unit(grid).index(points)
    pairs = np.array([(0, 1), (0, 2), (0, 3), (5, 6)])
    friends = adjacency(n, pairs)
    fit = NearFit(US_BOX, 30.0, (0.5, 0.2, 0.3), (5.0, 250.0))
    targets = np.array([0, 5, 9])
    mask = np.stack([adversary.known_row(n, t, 25, np.random.default_rng(t)) for t in targets])
    mask[0, [1, 2]] = True, False  # friend 1 known, friend 2 unknown
    got = posterior.histogram_log_prior(adversary.weighted_counts(cells, mask, km, friends, targets, fit, grid**2))
    for r, t in enumerate(targets):
        known = [k for k in range(n) if mask[r, k]]
        mine = [f for f in ((1, 2, 3) if t == 0 else (6,) if t == 5 else ()) if mask[r, f]]
        want = np.zeros(grid**2)
        for k in known:
            w = fit.weights[0]
            for ws, s in zip(fit.weights[1:], fit.sigma_km):
                var = s * s + fit.bandwidth_km**2
                for f in mine:
                    z = sum(_normal2(((km[j] - km[f]) ** 2).sum(), var) for j in known) / len(known)
                    w += ws * _normal2(((km[k] - km[f]) ** 2).sum(), var) / z / len(mine)
            want[cells[k]] += w if mine else 1.0
        with np.errstate(divide="ignore"):
            assert np.exp(got[r]) == pytest.approx(want / want.sum(), abs=1e-12)


def test_city_grid_cells_centres_and_likelihood():
    """Several boxes: every point's cell by direct search over the boxes' cells, the centres, and the
    Eq. 6 likelihood at each centre computed directly."""
    grid = Grid(3, ((0.0, 0.2, 0.5, 0.7), (0.6, 1.0, 0.0, 0.3)))
    rng = np.random.default_rng(3)
    points = np.concatenate([rng.random((200, 2)), [[0.2, 0.7], [1.0, 0.0], [0.6, 0.3]]])
    centres = grid.centres()
    for p, c in zip(points, grid.index(points)):
        hits = [b * 9 + ix * 3 + iy for b, (x0, x1, y0, y1) in enumerate(grid.boxes)
                for ix in range(3) for iy in range(3)
                if x0 + ix * (x1 - x0) / 3 <= p[0] <= x0 + (ix + 1) * (x1 - x0) / 3
                and y0 + iy * (y1 - y0) / 3 <= p[1] <= y0 + (iy + 1) * (y1 - y0) / 3]
        assert (c in hits) if hits else c == -1  # the closed cell holds the point; no cell: -1
    assert centres[9 + 2 * 3 + 1] == pytest.approx((0.6 + 2.5 * 0.4 / 3, 1.5 * 0.3 / 3))
    noisy, others, sigma, size, b = np.array([[0.3, 0.4]]), np.array([[1.1, 0.9]]), np.array([[0.0, 0.02]]), \
        np.array([4.0]), 0.05
    got = posterior.log_likelihood(noisy, others, sigma, size, b, grid)[0]
    for c, (x, y) in enumerate(centres):
        want = -abs(0.3 - (1.1 + x) / 4) / b - math.log(2 * b) + math.log(integrate.quad(
            lambda s: math.exp(-abs(0.4 - (0.9 + y) / 4 - s) / b) / (2 * b) * stats.norm.pdf(s, 0, 0.02),
            -0.3, 0.3, points=[0.4 - (0.9 + y) / 4], epsabs=0, epsrel=1e-11, limit=200)[0])
        assert got[c] == pytest.approx(want, abs=1e-8)


def test_car_prior_in_a_city_frame_is_the_fit_box_mass():
    """The CAR adversary's prior on a city's cells: the mass of the conditional normal (in the fit's
    box coordinates) over each cell's latitude/longitude rectangle, by quadrature."""
    from ddpbayes.attack.run import _affine
    from ddpbayes.geo.regions import CITIES

    frame = CITIES["sf"]
    scale, offset = _affine(US_BOX, frame)
    mean_us, sd_us = np.array([[0.05, 0.52]]), np.array([[0.004, 0.01]])
    got = np.exp(posterior.gaussian_log_prior(offset + scale * mean_us, scale * sd_us, Grid.unit(3)))[0]
    lon = np.linspace(*frame.lon, 4)
    lat = np.linspace(*frame.lat, 4)
    xs, ys = US_BOX.normalise(lat, lon)
    mass = [[integrate.quad(stats.norm(mean_us[0, a], sd_us[0, a]).pdf, lo, hi, epsabs=0, epsrel=1e-12)[0]
             for lo, hi in itertools.pairwise(e)] for a, e in enumerate((xs, ys))]
    want = np.outer(mass[0], mass[1]).ravel()
    assert got == pytest.approx(want / want.sum(), rel=1e-8)


def test_reference_guesses_and_bayes_estimate():
    """The regional mean is the other users' mean position; the cluster's mean its other members';
    the Bayes cell minimises the posterior expected distance (brute force over the cells)."""
    from ddpbayes.attack import metrics
    from ddpbayes.attack.run import _guess_errors
    from ddpbayes.geo.data import haversine_km

    data = _synthetic(30, 2)
    part = partition(data.points, np.arange(30) % 3, 3)
    guess = _guess_errors(data, part, np.array([4, 7]))
    for r, t in enumerate((4, 7)):
        others = [j for j in range(30) if j != t]
        mates = [j for j in others if j % 3 == t % 3]
        for name, group in (("regional", others), ("cluster", mates)):
            x, y = data.points[group].mean(axis=0)
            lat, lon = US_BOX.denormalise(x, y)
            assert guess[name][r] == pytest.approx(float(haversine_km(data.lat[t], data.lon[t], lat, lon)), rel=1e-12)
    rng = np.random.default_rng(1)
    log_post = posterior.normalise(rng.normal(0, 2, (5, 9)))
    d = rng.random((9, 9)) * 100
    want = [min(range(9), key=lambda c: sum(math.exp(log_post[r, g]) * d[g, c] for g in range(9))) for r in range(5)]
    assert metrics.bayes_cells(log_post, d).tolist() == want


def test_region_keeps_its_users_and_their_friendships(tmp_path, capsys):
    """--region ny keeps the users inside New York's box, renumbers the friendships among them and
    counts what it left out."""
    from ddpbayes.geo.regions import NEW_YORK

    inside = [(40.6 + 0.01 * i, -74.0 + 0.01 * i) for i in range(6)]
    rows = "".join(f"{i},{la},{lo}\n" for i, (la, lo) in enumerate(inside)) + "6,34.0,-118.3\n7,37.7,-122.4\n"
    users = _csv(tmp_path / "u.csv", "UserID,Latitude,Longitude\n" + rows)
    edges = _csv(tmp_path / "e.csv", "Source,Destination\n0,1\n1,6\n2,5\n6,7\n")
    doc = _json(["--locations", users, "--edges", edges, "--region", "ny", "--k", "2", "--grid", "4"], capsys)
    assert (doc["users"], doc["outside_users"], doc["located_edges"], doc["outside_edges"]) == (6, 2, 2, 2)
    assert doc["box"] == {"lat": list(NEW_YORK.lat), "lon": list(NEW_YORK.lon)} and doc["cells"] == 16
    assert doc["region"] == "ny" and len(doc["rows"]) == 5 * 3
