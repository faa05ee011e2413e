"""Gowalla: a user lives near a randomly chosen friend or where people live (the model
is ddpbayes/geo/near.py's), fitted with PyMC; and the held-out check of it against the CAR.

Data: models/gowalla_friends.py's (2,392 users, 4,080 friendships, 1,456 users with a friend);
positions in km on `plane_km(lat, lon, US_BOX)`. The population bandwidth h is fixed at the
leave-one-out maximum-likelihood one of all users (`population_bandwidth`, 39.2 km), computed
once. The model, its priors and its pseudo-likelihood are ddpbayes/geo/near_pymc.py's (the sum of
`near.conditional_logpdf` over the users with friends as one pm.Potential); `fit` runs it through
`ddpbayes fit --template graph --model near` (ddpbayes/fitting/graph.py, DESIGN §9.7): the one
path by which a graph model is fitted, its convergence and dependence checks included. NearFit
holds the posterior means of w and σ.

S = 2 scales (`SCALES`): `compare_scales` fits S = 1 and S = 2 at their MAP on the training
edges; S = 2 scores higher on the held-out friendships by several standard errors (its small scale,
a few km, holds the friends who live in the same place; DESIGN §6.1 gives the figures).
`python models/gowalla_near.py` fits on every friendship (models/data/gowalla_near_fit.json),
then splits the friendships 80/20 (seeded), refits both models on the training edges and writes
the held-out check (`ddpbayes.geo.heldout`) with the scale comparison to
models/data/gowalla_heldout.json.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pymc as pm

from ddpbayes.geo import heldout
from ddpbayes.geo.data import US_BOX
from ddpbayes.geo.near import NearFit, plane_km, population_bandwidth, save_near_fit
from ddpbayes.geo.near_pymc import SCALES, near_data, pymc_model

DATA = Path(__file__).parent / "data"
FIT = DATA / "gowalla_near_fit.json"
HELDOUT = DATA / "gowalla_heldout.json"
SEED = 3030
SPLIT_SEED = 30
DRAWS = 1000  # per chain, and as many tuning steps: 500 left the smallest bulk ESS at 145


def _friends_model():
    """models/gowalla_friends.py as a module (the models folder is not a package)."""
    spec = importlib.util.spec_from_file_location("gowalla_friends", Path(__file__).parent / "gowalla_friends.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def positions() -> tuple[object, np.ndarray, np.ndarray]:
    """Every user's Locations, positions (n, 2) km on plane_km(US_BOX) and the friendships."""
    locations, pairs = _friends_model().users()
    return locations, plane_km(locations.lat, locations.lon, US_BOX), pairs


def fit(pairs: np.ndarray | None = None, draws: int = 500, tune: int = 500, chains: int = 2, seed: int = SEED,
        n: int | None = None, edges: str = "all") -> NearFit:
    """Fit with `ddpbayes fit --template graph --model near` (fitting/graph.py: NUTS, chains on up to
    2 cores) and summarise it as a NearFit (posterior means; R-hat, bulk ESS, divergences, the checks
    and provenance in `diagnostics`). `pairs`: the friendships to fit on (default every one, read
    from the shipped files; a subset is written to a scratch table first); `n`: the first n users
    only (tests); `edges`: what `pairs` are, for the record."""
    friends = _friends_model()
    result = friends.fit_graph("near", n=n, pairs=pairs, draws=draws, tune=tune, chains=chains, seed=seed)
    return near_fit(result.doc, edges)


def near_fit(doc: dict, edges: str = "all") -> NearFit:
    """The NearFit of a graph fit's document (`ddpbayes.fit(...).doc`), in the format of
    models/data/gowalla_near_fit.json."""
    names = {"w": ["w_population", *(f"w_{s + 1}" for s in range(SCALES))],
             "sigma": [f"sigma_{s + 1}_km" for s in range(SCALES)]}
    draws = {v: np.column_stack([doc["draws"][name] for name in names[v]]) for v in names}
    stats = doc["diagnostics"]["parameters"]
    rhat = {v: [round(stats[name]["rhat"], 4) for name in names[v]] for v in names}
    ess = {v: [round(stats[name]["ess_bulk"], 0) for name in names[v]] for v in names}
    sampler, data = doc["sampler"], doc["data"]
    diagnostics = {
        "rhat": rhat, "ess_bulk": ess,
        "rhat_max": float(max(max(r) for r in rhat.values())),
        "ess_bulk_min": float(min(min(e) for e in ess.values())),
        "divergences": doc["diagnostics"]["divergences"],
        "draws": sampler["draws"], "tune": sampler["tune"], "chains": sampler["chains"], "seed": sampler["seed"],
        "scales": SCALES,
        "interval_95": {"weights": np.quantile(draws["w"], [0.025, 0.975], axis=0).T.tolist(),
                        "sigma_km": np.quantile(draws["sigma"], [0.025, 0.975], axis=0).T.tolist()},
        "users": data["nodes"], "users_with_friends": data["nodes_with_edges"], "friendships": data["edges"],
        "edges": edges, "pymc": sampler["pymc"], "seconds": round(doc["seconds"], 1),
        "data_sha256": {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                        for p in (DATA / "gowalla_us_user_locations.csv", DATA / "gowalla_us_edges.csv")},
        "checks": doc["checks"],
    }
    weights = np.array([doc["parameters"][name]["mean"] for name in names["w"]])
    return NearFit(US_BOX, data["bandwidth_km"], tuple(weights / weights.sum()),
                   tuple(doc["parameters"][name]["mean"] for name in names["sigma"]), diagnostics)


def compare_scales(locations, train: np.ndarray, held: np.ndarray, scales=(1, 2)) -> dict:
    """The held-out log score of the model with 1 and with 2 scales, each at its MAP on `train`
    (pm.find_MAP): mean log p(x_i | x_-i, train friends + j) over the oriented held-out pairs, and the
    2-scale model's gain per held-out friendship (both orientations summed) with its standard error."""
    points = plane_km(locations.lat, locations.lon, US_BOX)
    h = population_bandwidth(points)
    data = near_data(points, train, h)
    scores = {}
    for s in scales:
        with pymc_model(data, s):
            best = pm.find_MAP(progressbar=False, seed=SEED)
        fit_s = NearFit(US_BOX, h, tuple(best["w"] / best["w"].sum()), tuple(best["sigma"]))
        scores[s] = (fit_s, heldout.log_scores(points, train, held, fit_s))
    gain = scores[scales[1]][1] - scores[scales[0]][1]
    per_pair = gain.reshape(2, -1).sum(axis=0)
    return {"how": "MAP on the training edges, held-out log density in log km^-2",
            **{f"scales_{s}": {"weights": f.weights, "sigma_km": f.sigma_km, "log_score": float(v.mean())}
               for s, (f, v) in scores.items()},
            "gain_per_heldout_friendship": float(per_pair.mean()),
            "gain_standard_error": float(per_pair.std(ddof=1) / math.sqrt(len(per_pair)))}


def _write(doc: dict, path: Path) -> None:
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


def main() -> None:
    """Fit on every friendship, then the held-out check (module docstring)."""
    near = fit(draws=DRAWS, tune=DRAWS)
    save_near_fit(near, FIT)
    print(f"all edges: w = {np.round(near.weights, 3)}, sigma = {np.round(near.sigma_km, 1)} km, h = "
          f"{near.bandwidth_km:.1f} km; {near.diagnostics}", flush=True)
    locations, points, pairs = positions()
    train, held = heldout.split_edges(pairs, share=0.2, seed=SPLIT_SEED)
    near_train = fit(train, draws=DRAWS, tune=DRAWS, edges=f"train: split_edges(share=0.2, seed={SPLIT_SEED})")
    car_train = _friends_model().fit(pairs=train)
    scales = compare_scales(locations, train, held)
    print(json.dumps(scales), flush=True)
    doc = heldout.check(locations, train, held, near_train, car_train, replicates=200, seed=SEED)
    doc["scales"] = scales
    doc["split"] = {"share": 0.2, "seed": SPLIT_SEED, "train": len(train), "heldout": len(held)}
    _write(doc, HELDOUT)
    print(json.dumps(doc["log_score"], indent=1), flush=True)


if __name__ == "__main__":
    sys.exit(main())
