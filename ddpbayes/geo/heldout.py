"""Held-out friendships: a posterior predictive check of the near-friend model (geo/near.py)
against the CAR (geo/car.py) on friendships neither was fitted on (issue 30; DESIGN §6.1).

For each held-out friendship (i, j), in both orientations, user i's position is replicated R
times from each model's conditional given every other user's real position and i's friends =
her training friends + j (the friendship is known; the parameters were fitted without it): the
near model by `near.sample_conditional`, the CAR by its Gaussian conditional per normalised
coordinate, N(mu + alpha (friends' mean - mu), 1 / (tau d)). Statistics of the held-out pairs
(the friend-distance quantiles, the share within 50 km, the friends' coordinate correlations)
are compared, observed against each model's replicates, and the real positions are scored by
each model's log density in km⁻² on the `plane_km` plane (a proper score).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse

from ddpbayes.errors import InputError
from ddpbayes.geo.car import CarFit, adjacency
from ddpbayes.geo.data import Box, Locations, haversine_km
from ddpbayes.geo.near import KM_PER_DEGREE_LAT, KM_PER_DEGREE_LON, NearFit, conditional_logpdf, plane_km, \
    sample_conditional

QUANTILES = (0.10, 0.25, 0.50, 0.75, 0.90)
NEAR_KM = 50.0
HISTOGRAM_KM = np.geomspace(1.0, 5000.0, 19)  # log bins, 1 to 5,000 km


def split_edges(pairs: np.ndarray, share: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(train, heldout): a seeded random `share` of the friendships (rows of `pairs`, not users)
    held out, round(share · E) of them; both parts keep `pairs`' row order."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if not 0 < share < 1:
        raise InputError(f"the held-out share must lie strictly between 0 and 1, got {share}")
    held = np.zeros(len(pairs), dtype=bool)
    held[np.random.default_rng(seed).permutation(len(pairs))[:round(share * len(pairs))]] = True
    return pairs[~held], pairs[held]


def oriented(heldout: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(i, j) for both orientations of each held-out friendship: the replicated end i, the other j."""
    return np.concatenate([heldout[:, 0], heldout[:, 1]]), np.concatenate([heldout[:, 1], heldout[:, 0]])


def friend_statistics(lat_i, lon_i, lat_j, lon_j) -> dict[str, float]:
    """The PPC's statistics of oriented friend pairs (i, j): the haversine distance's quantiles
    (`QUANTILES`, km), the share within `NEAR_KM`, and the Pearson correlation of the two ends'
    x (longitude) and y (latitude) over the rows, as models/gowalla_friends.what_alpha_says."""
    dist = haversine_km(lat_i, lon_i, lat_j, lon_j)
    out = {f"distance_q{round(100 * q)}_km": float(v) for q, v in zip(QUANTILES, np.quantile(dist, QUANTILES))}
    out[f"share_within_{NEAR_KM:g}_km"] = float(np.mean(dist <= NEAR_KM))
    out["correlation_x"] = float(np.corrcoef(lon_i, lon_j)[0, 1])
    out["correlation_y"] = float(np.corrcoef(lat_i, lat_j)[0, 1])
    return out


def ppc_row(observed: float, replicated: np.ndarray) -> dict[str, float]:
    """Observed, the replicates' median and central 95% interval, and the two-sided
    posterior-predictive p-value 2 · min(p, 1 - p), p the share of replicates >= observed."""
    replicated = np.asarray(replicated, dtype=float)
    p = float(np.mean(replicated >= observed))
    lo, mid, hi = np.quantile(replicated, [0.025, 0.5, 0.975])
    return {"observed": observed, "median": float(mid), "interval_95": [float(lo), float(hi)],
            "p_value": 2 * min(p, 1 - p)}


def latlon_of_plane(points: np.ndarray, box: Box) -> tuple[np.ndarray, np.ndarray]:
    """(lat, lon) of positions (..., 2) km on `plane_km`'s plane: its inverse."""
    lat0, lon0 = sum(box.lat) / 2, sum(box.lon) / 2
    lon = lon0 + points[..., 0] / (KM_PER_DEGREE_LON * math.cos(math.radians(lat0)))
    return lat0 + points[..., 1] / KM_PER_DEGREE_LAT, lon


def log_km2_per_unit(box: Box) -> float:
    """log of the area (km², on `plane_km`'s plane) of one unit square of the box's normalised
    coordinates: both maps are affine, so a density in normalised units minus this is the same
    density in km⁻² on the plane, exactly."""
    lat0 = sum(box.lat) / 2
    return (math.log((box.lon[1] - box.lon[0]) * KM_PER_DEGREE_LON * math.cos(math.radians(lat0)))
            + math.log((box.lat[1] - box.lat[0]) * KM_PER_DEGREE_LAT))


def car_conditionals(car: CarFit, normalised: np.ndarray, train: np.ndarray, i: np.ndarray,
                     j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean (m, 2) and variance (m, 2) of the CAR's conditional of user i given everyone else, her
    friends being her `train` friends + j: per normalised coordinate c, mean mu_c + alpha
    (friends' mean - mu_c) and variance 1 / (tau_c d), d = her training degree + 1."""
    W = adjacency(len(normalised), train)
    sums = np.asarray(W @ normalised)[i] + normalised[j]
    degree = np.asarray(W.sum(axis=1)).ravel()[i] + 1.0
    mu, tau = np.asarray(car.mu), np.asarray(car.tau)
    return mu + car.alpha * (sums / degree[:, None] - mu), 1.0 / (tau[None, :] * degree[:, None])


def car_replicates(rng: np.random.Generator, mean: np.ndarray, var: np.ndarray,
                   replicates: int) -> tuple[np.ndarray, np.ndarray]:
    """Normalised (x, y), each (m, replicates), drawn from independent N(mean, var) per coordinate."""
    x = mean[:, None, :] + np.sqrt(var)[:, None, :] * rng.normal(size=(len(mean), replicates, 2))
    return x[..., 0], x[..., 1]


def _table(rep_lat: np.ndarray, rep_lon: np.ndarray, lat_i, lon_i, lat_j, lon_j) -> dict:
    """The PPC rows of every statistic: observed (i, j) pairs against replicates (m, R) of i."""
    observed = friend_statistics(lat_i, lon_i, lat_j, lon_j)
    stats = [friend_statistics(rep_lat[:, r], rep_lon[:, r], lat_j, lon_j) for r in range(rep_lat.shape[1])]
    return {key: ppc_row(value, np.array([s[key] for s in stats])) for key, value in observed.items()}


def _friend_lists(n: int, train: np.ndarray) -> list[np.ndarray]:
    W = sparse.csr_matrix(adjacency(n, train))
    return [W.indices[W.indptr[k]:W.indptr[k + 1]] for k in range(n)]


def log_scores(points: np.ndarray, train: np.ndarray, heldout: np.ndarray, near: NearFit,
               population: bool = False) -> np.ndarray:
    """log p(x_i | x_-i, i's train friends + j) in log km⁻² at the real x_i (`points`, km on
    `plane_km`), one per oriented held-out pair (`oriented`); `population`: the population term
    alone (no friend), near.py's p(x_i)."""
    i, j = oriented(heldout)
    friends = _friend_lists(len(points), train)
    return np.array([conditional_logpdf(points[a:a + 1], np.delete(points, a, axis=0),
                                        points[np.append(friends[a], b)][:0 if population else None], near)[0]
                     for a, b in zip(i, j)])


def check(locations: Locations, train: np.ndarray, heldout: np.ndarray, near: NearFit, car: CarFit,
          replicates: int = 200, seed: int = 0) -> dict:
    """The held-out check (module docstring) with each model at its posterior means (`near`,
    `car`, both fitted on `train`): the PPC table, the mean log predictive density of the real
    positions in log km⁻² (and the population alone's, near.py's p(x) with w_0 = 1), the PPC again
    for the pairs where j is i's only friend and where i has training friends too, a histogram of
    the held-out friend distances (observed, each model's replicate median), the fits."""
    if near.box != car.box:
        raise InputError(f"the two fits use different boxes: {near.box} and {car.box}")
    rng = {name: np.random.default_rng([seed, k]) for k, name in enumerate(("near", "car"))}
    lat, lon = locations.lat, locations.lon
    km = plane_km(lat, lon, near.box)
    normalised = np.column_stack(car.box.normalise(lat, lon))
    i, j = oriented(heldout)
    friends = _friend_lists(len(locations), train)
    rep_lat, rep_lon = {}, {}
    log_score = {"near": log_scores(km, train, heldout, near), "population": log_scores(km, train, heldout, near, True)}
    draws = np.empty((len(i), replicates, 2))
    for row, (a, b) in enumerate(zip(i, j)):
        draws[row] = sample_conditional(rng["near"], np.delete(km, a, axis=0), km[np.append(friends[a], b)], near,
                                        replicates)
    rep_lat["near"], rep_lon["near"] = latlon_of_plane(draws, near.box)
    mean, var = car_conditionals(car, normalised, train, i, j)
    rep_lat["car"], rep_lon["car"] = car.box.denormalise(*car_replicates(rng["car"], mean, var, replicates))
    log_score["car"] = (-0.5 * ((normalised[i] - mean) ** 2 / var + np.log(2 * math.pi * var)).sum(axis=1)
                        - log_km2_per_unit(car.box))
    only = np.array([len(friends[a]) == 0 for a in i])
    groups = {"j_only_friend": only, "j_one_of_several": ~only}
    by_degree = {group: {"oriented_pairs": int(rows.sum())} for group, rows in groups.items()}
    observed = np.histogram(haversine_km(lat[i], lon[i], lat[j], lon[j]), HISTOGRAM_KM)[0]
    ppc, histogram = {}, {"edges_km": HISTOGRAM_KM.tolist(), "observed": observed.tolist()}
    for name in ("near", "car"):
        ppc[name] = _table(rep_lat[name], rep_lon[name], lat[i], lon[i], lat[j], lon[j])
        for group, rows in ((g, r) for g, r in groups.items() if r.sum() >= 3):  # a correlation needs a few
            by_degree[group][name] = _table(rep_lat[name][rows], rep_lon[name][rows], lat[i][rows], lon[i][rows],
                                            lat[j][rows], lon[j][rows])
        counts = [np.histogram(haversine_km(rep_lat[name][:, r], rep_lon[name][:, r], lat[j], lon[j]), HISTOGRAM_KM)[0]
                  for r in range(replicates)]
        histogram[f"{name}_median"] = np.median(counts, axis=0).tolist()
    return {
        "heldout_friendships": len(heldout), "oriented_pairs": len(i), "train_friendships": len(train),
        "replicates": replicates, "seed": seed, "parameters": "posterior means",
        "log_score": {name: float(np.mean(v)) for name, v in log_score.items()},
        "log_score_median": {name: float(np.median(v)) for name, v in log_score.items()},
        "log_score_unit": "mean log density of the real position, log km^-2 on plane_km(US_BOX)",
        "ppc": ppc, "ppc_by_degree": by_degree, "histogram": histogram,
        "near_fit": {"weights": near.weights, "sigma_km": near.sigma_km, "bandwidth_km": near.bandwidth_km,
                     "diagnostics": near.diagnostics},
        "car_fit": {"mu": car.mu, "alpha": car.alpha, "alpha_interval": car.alpha_interval, "tau": car.tau,
                    "rhat_max": car.rhat_max, "ess_bulk_min": car.ess_bulk_min, "divergences": car.divergences,
                    "draws": car.draws, "chains": car.chains, "seed": car.seed, "seconds": car.seconds},
    }
