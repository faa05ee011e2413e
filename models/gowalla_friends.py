"""Gowalla friends and places (seed 002 §IV, the papers' real-data experiment):
friends' positions are dependent, as a Gaussian Markov random field on the friendship graph.

Data: models/data/gowalla_us_user_locations.csv (each user's average check-in position) and
models/data/gowalla_us_edges.csv (friendships), byte copies of ../shared/data/ (its README gives
the provenance: SNAP loc-gowalla, Cho, Myers and Leskovec, KDD 2011, via mstovy/socnetProject).
2,392 users (no repeated id, every position in the continental US; the issue's "2,391 users"
and "10,472 edges" are line counts of files without a final newline, one short), 10,473 edge
rows: 5,992 name a user without a location and are dropped, the 4,481 that join two located
users are 4,080 friendships (401 are listed in both directions), no self loops; 1,456 users
have a located friend, 936 have none.

Model (`ddpbayes.geo.car`): a position is normalised in `US_BOX` (lat 24 to 50, lon -125 to
-66 degrees) to x (longitude) and y (latitude) in [0, 1], as seed 002 normalises location
patterns. Each coordinate is a proper CAR on the friendship graph W (D = degrees) plus a
regional mean, one shared spatial dependence alpha and one precision per coordinate:

    x ~ N(mu_x 1, Q_x^{-1}),  y ~ N(mu_y 1, Q_y^{-1}),  Q_c = tau_c (D - alpha W),  x, y independent,

so a user with d located friends has X_i | rest ~ N(mu + alpha (friends' mean - mu), 1 / (tau d));
a user without one is independent N(mu, 1 / tau) (pm.CAR cannot hold a row without neighbours:
its log-density divides by sqrt(D)). `fit` samples alpha ~ U(0, 1), sigma_c = tau_c^{-1/2} ~
HalfNormal(1) and mu_c ~ N(0.5, 0.5) with NUTS: the friends' positions as two observed pm.CAR,
the others as observed Normals (`ddpbayes.geo.car.pymc_model`), through `ddpbayes fit --template
graph --model car` (ddpbayes/fitting/graph.py, DESIGN §9.7: the one path, with its convergence and
dependence checks). `python models/gowalla_friends.py` refits and rewrites models/data/gowalla_fit.json.

The cached fit (NUTS, 2 chains x 500 draws after 500 tuning steps, seed 2011; R-hat <= 1.004,
bulk ESS >= 930, no divergences; 42 s with PyTensor's compile cache warm, 103 s cold):

    alpha = 0.997 (95% interval 0.992 to 0.9996),  tau = 5.02 (x), 14.46 (y),  mu = 0.503, 0.501

What it says: alpha is not a correlation. A user's expected position moves 99.7% of the way
from the regional mean to her friends' mean, but with conditional variance 1 / (tau d): her
friends explain a median 9% of her variance (5% at the median degree, 1). The model's
correlation between two friends' coordinates (median over friendships) is 0.38; the data's is
0.05 (x) and 0.21 (y). The proper CAR overstates both the dependence and the spread (1/tau_x =
0.20 against a variance of 0.064 in the data): its conditional precision grows with the degree,
its tau is shared with the users without friends, and one user has 872 friends; the likelihood
pushes alpha to 1, as is usual for proper CARs (Wall 2004). Stronger positive dependence
raises the leakage of sums and means, so an audit of this model likely overstates theirs.

`build` is the fitted model: alpha, tau, mu at their posterior means, the tuples one pm.CAR
"pos" of length 2n, jointly Gaussian with precision `joint_precision(W, alpha, tau)`: pos[k] is
user k's x (longitude) and pos[n + k] user k's y (latitude), user k being row k of the
locations file (`n` keeps the first n rows and the friendships among them). pm.CAR takes one
scalar tau and no user without friends, so both are folded into its weights
(`car_vector_weights`: tau = 1, a self loop of weight 1 / (1 - alpha) on each user without
friends); its precision tau (D - alpha W) is then exactly the model's. The declared domain is
the box, [0, 1] per coordinate (the Gaussian puts a little mass outside it; the domain bounds
the values t, t' an adversary compares). Do not draw from the model with pm.draw: PyMC 5.28's
CAR sampler solves Q x = z, so its draws have covariance Q^{-2}, not Q^{-1} (its log-density is
right).
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pymc as pm
from scipy import sparse

import ddpbayes
from ddpbayes import DependenceModel, Interval
from ddpbayes.geo.car import CarFit, adjacency, car_precision, car_vector_weights, load_fit, save_fit
from ddpbayes.geo.data import US_BOX, Locations, read_edges, read_locations

DATA = Path(__file__).parent / "data"
LOCATIONS = DATA / "gowalla_us_user_locations.csv"
EDGES = DATA / "gowalla_us_edges.csv"
FIT = DATA / "gowalla_fit.json"
SEED = 2011


def users(n: int | None = None) -> tuple[Locations, np.ndarray]:
    """The first n users (all by default) in file order and the friendships (E, 2) among them."""
    locations = read_locations(LOCATIONS)
    pairs = read_edges(EDGES, locations).pairs
    if n is None:
        return locations, pairs
    if not isinstance(n, int) or not 1 <= n <= len(locations):
        raise ValueError(f"n must be an integer from 1 to {len(locations)}, got {n!r}")
    first = Locations(locations.ids[:n], locations.lat[:n], locations.lon[:n])
    return first, pairs[(pairs < n).all(axis=1)]


def fit_graph(model: str, n: int | None = None, pairs: np.ndarray | None = None, **sampler):
    """`ddpbayes.fit(..., template="graph", model=model)` on the shipped tables (the edges naming a user
    without a location dropped), or, for the first n users or other `pairs` (rows into them), on
    the same users and friendships written to a scratch table first; `sampler`: draws, tune,
    chains, seed. The one path by which both Gowalla models are fitted (DESIGN §9.7)."""
    options = {"id": "UserID", "columns": "Latitude,Longitude", "ends": "Source,Destination", "model": model,
               "box": (*US_BOX.lat, *US_BOX.lon)}
    if n is None and pairs is None:
        return ddpbayes.fit(LOCATIONS, "graph", edges=EDGES, drop_unknown=True, **options, **sampler)
    locations, file_pairs = users(n)
    pairs = file_pairs if pairs is None else np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    with tempfile.TemporaryDirectory() as scratch:
        nodes, edges = Path(scratch) / "users.csv", Path(scratch) / "edges.csv"
        rows = zip(locations.ids, locations.lat.tolist(), locations.lon.tolist())
        nodes.write_text("UserID,Latitude,Longitude\n" + "".join(f"{i},{lat!r},{lon!r}\n" for i, lat, lon in rows))
        edges.write_text("Source,Destination\n" + "".join(f"{locations.ids[a]},{locations.ids[b]}\n" for a, b in pairs))
        return ddpbayes.fit(nodes, "graph", edges=edges, **options, **sampler)


def fit(n: int | None = None, draws: int = 500, tune: int = 500, chains: int = 2, seed: int = SEED,
        pairs: np.ndarray | None = None) -> CarFit:
    """Fit the CAR model with `ddpbayes fit --template graph --model car` (module docstring) and
    summarise it as a CarFit; `pairs`: the friendships (rows into the n users) to fit on instead of
    the file's (models/gowalla_near.py's held-out check fits on a training share)."""
    result = fit_graph("car", n, pairs, draws=draws, tune=tune, chains=chains, seed=seed)
    locations, file_pairs = users(n)
    pairs = file_pairs if pairs is None else np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return car_fit(result.doc, adjacency(len(locations), pairs),
                   np.column_stack(US_BOX.normalise(locations.lat, locations.lon)))


def car_fit(doc: dict, W: sparse.csr_matrix, points: np.ndarray) -> CarFit:
    """The CarFit of a graph fit's document (`ddpbayes.fit(...).doc`), in the format of
    models/data/gowalla_fit.json; `W` and `points` (normalised) for `what_alpha_says`."""
    p, stats, sampler, data = doc["parameters"], doc["diagnostics"]["parameters"], doc["sampler"], doc["data"]
    names = ["alpha", "mu_x", "mu_y", "tau_x", "tau_y"]
    car = CarFit(
        box=US_BOX, mu=(p["mu_x"]["mean"], p["mu_y"]["mean"]), alpha=p["alpha"]["mean"],
        alpha_interval=tuple(float(v) for v in np.quantile(doc["draws"]["alpha"], [0.025, 0.975])),
        tau=(p["tau_x"]["mean"], p["tau_y"]["mean"]),
        draws=sampler["draws"], chains=sampler["chains"], seed=sampler["seed"],
        rhat_max=float(max(stats[v]["rhat"] for v in names)),
        ess_bulk_min=float(min(stats[v]["ess_bulk"] for v in names)),
        seconds=round(doc["seconds"], 1), tune=sampler["tune"], divergences=doc["diagnostics"]["divergences"])
    details = {
        "users": data["nodes"], "friendships": data["edges"], "users_with_friends": data["nodes_with_edges"],
        "pymc": sampler["pymc"],
        "data_sha256": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (LOCATIONS, EDGES)},
        **what_alpha_says(car, W, points),
        "checks": doc["checks"],
    }
    return replace(car, details=details)


def what_alpha_says(car: CarFit, W: sparse.csr_matrix, points: np.ndarray) -> dict:
    """How strongly friends' places predict a user's under the fit, and what the data say.

    A user's expected position moves a share alpha of the way from the regional mean to her
    friends' mean, with conditional variance 1 / (tau d); her friends explain a share
    1 - 1 / (Q_ii Sigma_ii) of her variance (tau cancels: the same for x and y), given at the
    median degree and as the median over users with friends. Friends' model correlation
    Sigma_ij / sqrt(Sigma_ii Sigma_jj) (median over friendships) stands beside the data's: the
    Pearson correlation of the two ends' coordinates over friendships (both orders)."""
    degree = np.asarray(W.sum(axis=1)).ravel()
    linked = degree > 0
    q = car_precision(W, car.alpha, 1.0).toarray()
    sigma = np.linalg.inv(q)
    explained = 1.0 - 1.0 / (np.diag(q) * np.diag(sigma))
    median = int(np.median(degree[linked]))
    i, j = sparse.triu(W).nonzero()
    ends = np.concatenate([i, j]), np.concatenate([j, i])
    return {
        "median_degree": median,
        "explained_share_at_median_degree": float(np.median(explained[degree == median])),
        "explained_share_median": float(np.median(explained[linked])),
        "friend_correlation_model": float(np.median(sigma[i, j] / np.sqrt(sigma[i, i] * sigma[j, j]))),
        "friend_correlation_data_xy": [float(np.corrcoef(points[ends[0], c], points[ends[1], c])[0, 1])
                                       for c in range(2)],
    }


def refit(**kwargs) -> CarFit:
    """Fit again and overwrite the cache that `build` reads."""
    car = fit(**kwargs)
    save_fit(car, FIT)
    return car


def build(n: int | None = None, fitted: bool = True) -> DependenceModel:
    """The first n users' normalised positions (all 2,392 by default) as one pm.CAR "pos" of
    length 2n: every x, then every y (module docstring). `fitted` reads the cached fit, else fits
    now on the same users (about a minute for all of them)."""
    locations, pairs = users(n)
    car = load_fit(FIT) if fitted else fit(n)
    W = adjacency(len(locations), pairs)
    with pm.Model() as m:
        pm.CAR("pos", mu=np.repeat(car.mu, len(locations)), W=car_vector_weights(W, car.alpha, car.tau),
               alpha=car.alpha, tau=1.0)
    return DependenceModel(m, tuples="pos", domains=Interval(0.0, 1.0))


if __name__ == "__main__":
    result = refit()
    lo, hi = result.alpha_interval
    d = result.details
    print(f"alpha = {result.alpha:.3f} (95% interval {lo:.3f} to {hi:.3f}); tau = {result.tau[0]:.1f} (x), "
          f"{result.tau[1]:.1f} (y); mu = {result.mu[0]:.3f}, {result.mu[1]:.3f}")
    print(f"R-hat <= {result.rhat_max:.3f}, bulk ESS >= {result.ess_bulk_min:.0f}, {result.divergences} divergences, "
          f"{result.seconds:.0f} s; {d['users']} users, {d['friendships']} friendships")
    print(f"A user's expected position moves {result.alpha:.1%} of the way from the regional mean to her friends' "
          f"mean, but with conditional variance 1 / (tau d): friends explain {d['explained_share_median']:.0%} of the "
          f"variance of a user with friends (median; {d['explained_share_at_median_degree']:.0%} at the median degree "
          f"{d['median_degree']}). Friends' positions correlate at {d['friend_correlation_model']:.2f} in the model "
          f"(median over friendships), at {d['friend_correlation_data_xy'][0]:.2f} (x) and "
          f"{d['friend_correlation_data_xy'][1]:.2f} (y) in the data.")
