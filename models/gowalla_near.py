"""Gowalla: a user lives near a randomly chosen friend or where people live (the model
is ddpbayes/geo/near.py's), fitted with PyMC; and the held-out check of it against the CAR.

Data: models/gowalla_friends.py's (2,392 users, 4,080 friendships, 1,456 users with a friend);
positions in km on `plane_km(lat, lon, US_BOX)`. The population bandwidth h is fixed at the
leave-one-out maximum-likelihood one of all users (`population_bandwidth`, 39.2 km), computed
once. Priors: w ~ Dirichlet(1, ..., 1) over (population, scale 1, ..., scale S); log σ ~ N(log
100, 2), ordered (σ_1 < ... < σ_S, which names the components). The likelihood is the
pseudo-likelihood Σ_i log p(x_i | x_-i) over the users with friends (near.py's docstring, seed
002 §IV-C's dependent prior as a density), one pm.Potential written in PyTensor that equals the
sum of `near.conditional_logpdf` exactly: the population of user i is everyone else, so

    Z^(i)_{f,s} = (Σ_k N(x_f; x_k, v_s I) - N(x_f; x_i, v_s I)) / (n - 1),   v_s = σ_s² + h²,

the sum over all n users (f's own term included, as in the KDE of i's others) taken once per
friend-user from a (friend-users × n) matrix of squared distances, the target's own term taken
out per edge (at most half the sum, since f's own term is at least as large: no cancellation).
The mean over a user's friends is a log-sum-exp per user, users bucketed by degree into padded
matrices (each at most twice its edges). Users without friends add only their population
term, a constant, and are left out. NearFit holds the posterior means of w and σ.

The sums over all n users cost most: `LogKernelSums` does them in numpy (one sorted matrix,
terms below e^-50 skipped), about 16 ms per log-density and gradient against 110 to 240 ms for the
same sums as a compiled PyTensor graph.

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
import time
from dataclasses import dataclass
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from scipy.special import logsumexp

from ddpbayes.geo import heldout
from ddpbayes.geo.data import US_BOX
from ddpbayes.geo.near import NearFit, plane_km, population_bandwidth, save_near_fit

DATA = Path(__file__).parent / "data"
FIT = DATA / "gowalla_near_fit.json"
HELDOUT = DATA / "gowalla_heldout.json"
SEED = 3030
SPLIT_SEED = 30
SCALES = 2
DRAWS = 1000  # per chain, and as many tuning steps: 500 left the smallest bulk ESS at 145


def _friends_model():
    """models/gowalla_friends.py as a module (the models folder is not a package)."""
    spec = importlib.util.spec_from_file_location("gowalla_friends", Path(__file__).parent / "gowalla_friends.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class NearData:
    """The constants of the pseudo-likelihood (module docstring): positions (n, 2) km, bandwidth
    h, the users with friends (`targets`) and their population terms log p(x_i), the directed
    edges (target i, friend f) with their squared distances `d2` and the target's degree, the
    friend-users' squared distances to every user (`d2_friends`, row `frow[e]` for edge e), and
    `buckets`: (edge index matrix, mask) per degree class, one row per target."""

    points: np.ndarray
    h: float
    targets: np.ndarray
    log_pop: np.ndarray
    edge_target: np.ndarray
    edge_friend: np.ndarray
    d2: np.ndarray
    degree: np.ndarray
    d2_friends: np.ndarray
    frow: np.ndarray
    buckets: tuple[tuple[np.ndarray, np.ndarray], ...]


def near_data(points: np.ndarray, pairs: np.ndarray, h: float) -> NearData:
    """The constants for friendships `pairs` (E, 2) among `points` (n, 2) km (module docstring)."""
    n = len(points)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    i = np.concatenate([pairs[:, 0], pairs[:, 1]])
    f = np.concatenate([pairs[:, 1], pairs[:, 0]])
    order = np.lexsort((f, i))
    i, f = i[order], f[order]
    degree = np.bincount(i, minlength=n)
    targets = np.flatnonzero(degree)
    d2_all = ((points[targets, None, :] - points[None, :, :]) ** 2).sum(axis=-1)  # (T, n)
    d2_all[np.arange(len(targets)), targets] = np.inf
    log_pop = logsumexp(-d2_all / (2 * h * h), axis=1) - math.log(2 * math.pi * h * h) - math.log(n - 1)
    friend_users, frow = np.unique(f, return_inverse=True)
    d2_friends = ((points[friend_users, None, :] - points[None, :, :]) ** 2).sum(axis=-1)
    start = np.concatenate([[0], np.cumsum(degree[targets])])
    classes = np.ceil(np.log2(degree[targets])).astype(int)
    buckets = []
    for c in np.unique(classes):
        rows = np.flatnonzero(classes == c)
        width = int(degree[targets[rows]].max())
        offset = np.arange(width)
        mask = offset[None, :] < degree[targets[rows]][:, None]
        buckets.append((np.where(mask, start[rows][:, None] + offset[None, :], 0), mask))
    return NearData(points, float(h), targets, log_pop, i, f, ((points[i] - points[f]) ** 2).sum(axis=1),
                    degree[i], d2_friends, frow, tuple(buckets))


class LogKernelSums(Op):
    """At a scalar v, for a constant (m, n) matrix of squared distances each of whose rows holds a
    0: the (m,) log Σ_k exp(-d2[r, k] / (2 v)), and as a second output their derivatives in v (the
    gradient). The rows are sorted once and the terms with d2 > 100 v skipped (each below e^-50, all
    of them below n e^-50 < 1e-18 of a sum >= 1: within float64 rounding); numpy's vectorised exp,
    5 to 10 times faster here than the compiled graph of the same sums (whose exp of large negative
    arguments is slow)."""

    def __init__(self, d2: np.ndarray):
        self.d2 = np.sort(d2, axis=1)
        self.column_min = self.d2.min(axis=0)  # non-decreasing: past column c, every row is past column_min[c]

    def make_node(self, v):
        return Apply(self, [pt.as_tensor_variable(v)], [pt.dvector(), pt.dvector()])

    def perform(self, node, inputs, outputs):
        v = float(inputs[0])
        d2 = self.d2[:, :np.searchsorted(self.column_min, 100.0 * v)]
        e = np.exp(d2 * (-0.5 / v))
        total = e.sum(axis=1)
        outputs[0][0] = np.log(total)
        outputs[1][0] = np.einsum("ij,ij->i", e, d2) / (total * 2.0 * v * v)

    def grad(self, inputs, output_grads):
        if not isinstance(output_grads[1].type, DisconnectedType):
            raise NotImplementedError("LogKernelSums: the derivative output has no gradient")
        return [pt.dot(output_grads[0], self(inputs[0])[1])]


def pseudo_loglik(data: NearData, w, sigma, scales: int):
    """Σ over the users with friends of log p(x_i | x_-i) (module docstring) as a PyTensor scalar
    of the weights w (scales + 1,) and the scales σ (scales,) in km."""
    n, h2 = len(data.points), data.h**2
    sums = LogKernelSums(data.d2_friends)
    terms = []
    for s in range(scales):
        v = sigma[s] ** 2 + h2
        log_sum = sums(v)[0] - pt.log(2 * np.pi * v)  # (friend-users,)
        own = -data.d2 / (2 * v) - pt.log(2 * np.pi * v) - log_sum[data.frow]  # the target's share of f's sum
        log_z = log_sum[data.frow] + pt.log1p(-pt.exp(own)) - math.log(n - 1)
        terms.append(pt.log(w[s + 1]) - data.d2 / (2 * sigma[s] ** 2) - pt.log(2 * np.pi * sigma[s] ** 2) - log_z
                     - np.log(data.degree))
    per_edge = pt.concatenate(terms)
    edges = len(data.d2)
    total = pt.as_tensor_variable(float(data.log_pop.sum()))
    for index, mask in data.buckets:
        values = pt.switch(np.tile(mask, scales), per_edge[np.concatenate([index + s * edges for s in range(scales)],
                                                                          axis=1)], -np.inf)
        population = pt.log(w[0]) * pt.ones((len(index), 1))
        total = total + pt.logsumexp(pt.concatenate([population, values], axis=1), axis=1).sum()
    return total


def model(data: NearData, scales: int = SCALES) -> pm.Model:
    """The PyMC model (module docstring): w ~ Dirichlet(1), ordered log σ ~ N(log 100, 2), the
    pseudo-likelihood as the Potential "pseudo_loglik"."""
    with pm.Model() as m:
        w = pm.Dirichlet("w", a=np.ones(scales + 1))
        log_sigma = pm.Normal("log_sigma", mu=math.log(100.0), sigma=2.0, shape=scales,
                              transform=pm.distributions.transforms.ordered,
                              initval=np.linspace(math.log(30.0), math.log(300.0), scales))
        sigma = pm.Deterministic("sigma", pt.exp(log_sigma))
        pm.Potential("pseudo_loglik", pseudo_loglik(data, w, sigma, scales))
    return m


def positions() -> tuple[object, np.ndarray, np.ndarray]:
    """Every user's Locations, positions (n, 2) km on plane_km(US_BOX) and the friendships."""
    locations, pairs = _friends_model().users()
    return locations, plane_km(locations.lat, locations.lon, US_BOX), pairs


def fit(pairs: np.ndarray | None = None, draws: int = 500, tune: int = 500, chains: int = 2, seed: int = SEED,
        scales: int = SCALES, n: int | None = None, edges: str = "all") -> NearFit:
    """Sample the posterior with NUTS (2 chains, one core each at most 2) and summarise it as a NearFit
    (posterior means; R-hat, bulk ESS, divergences and provenance in `diagnostics`). `pairs`: the
    friendships to fit on (default every one); `n`: the first n users only (tests); `edges`: what
    `pairs` are, for the record."""
    start = time.perf_counter()
    locations, points, all_pairs = positions()
    pairs = all_pairs if pairs is None else np.asarray(pairs, dtype=np.int64)
    if n is not None:
        points, pairs = points[:n], pairs[(pairs < n).all(axis=1)]
    h = population_bandwidth(points)
    data = near_data(points, pairs, h)
    with model(data, scales):
        idata = pm.sample(draws, tune=tune, chains=chains, cores=min(chains, 2), random_seed=seed, progressbar=False,
                          compute_convergence_checks=False)
    post = idata.posterior
    names = ["w", "sigma"]
    rhat, ess = az.rhat(post[names]), az.ess(post[names], method="bulk")
    interval = {v: np.quantile(post[v].values.reshape(-1, post[v].shape[-1]), [0.025, 0.975], axis=0).T.tolist()
                for v in names}
    files = [DATA / "gowalla_us_user_locations.csv", DATA / "gowalla_us_edges.csv"]
    diagnostics = {
        "rhat": {v: rhat[v].values.round(4).tolist() for v in names},
        "ess_bulk": {v: ess[v].values.round(0).tolist() for v in names},
        "rhat_max": float(max(rhat[v].max() for v in names)),
        "ess_bulk_min": float(min(ess[v].min() for v in names)),
        "divergences": int(idata.sample_stats["diverging"].sum()),
        "draws": draws, "tune": tune, "chains": chains, "seed": seed, "scales": scales,
        "interval_95": {"weights": interval["w"], "sigma_km": interval["sigma"]},
        "users": len(points), "users_with_friends": len(data.targets), "friendships": len(pairs), "edges": edges,
        "pymc": pm.__version__, "seconds": round(time.perf_counter() - start, 1),
        "data_sha256": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files},
    }
    weights = post["w"].mean(("chain", "draw")).values
    return NearFit(US_BOX, h, tuple(weights / weights.sum()), tuple(post["sigma"].mean(("chain", "draw")).values),
                   diagnostics)


def compare_scales(locations, train: np.ndarray, held: np.ndarray, scales=(1, 2)) -> dict:
    """The held-out log score of the model with 1 and with 2 scales, each at its MAP on `train`
    (pm.find_MAP): mean log p(x_i | x_-i, train friends + j) over the oriented held-out pairs, and the
    2-scale model's gain per held-out friendship (both orientations summed) with its standard error."""
    points = plane_km(locations.lat, locations.lon, US_BOX)
    h = population_bandwidth(points)
    data = near_data(points, train, h)
    scores = {}
    for s in scales:
        with model(data, s):
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
