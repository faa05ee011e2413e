"""The attack's release audited for a stated sample of users under both dependence models, side by
side (issue 30, DESIGN §7.1): pdp of each user's coordinates with K = every user outside her ego
network (the user and her located friends), at ε = 1 (Laplace scale Δ on every centroid
coordinate, the partition held fixed as seed 002 §IV-B does).

The query is the rows of the centroid vector that the ego network touches: for each cluster c of
a member and coordinate a, the sum of the members of c over n_c (the known members' sum is a
constant shift, which does not change a Laplace mechanism's leakage). The CAR's leakage is exact
(gaussian engine, DESIGN §2.2); the near-friend model's is the sampling engine's estimate with its
interval and diagnostics (DESIGN §2.3), judged against ε = 1 as the engine earns it.
"""

from __future__ import annotations

import time

import numpy as np

from ddpbayes.attack.release import Partition, sensitivity
from ddpbayes.attack.run import AttackData
from ddpbayes.auditing import audit
from ddpbayes.errors import InputError
from ddpbayes.geo.ego import DEGREES, NearEgo, car_submodel, ego_members, friends_of, sample_users
from ddpbayes.geo.near import NearFit, plane_km
from ddpbayes.mechanisms import Laplace
from ddpbayes.notions import IDP
from ddpbayes.queries import LinearRows
from ddpbayes.settings import RunSettings

CLAIM = 1.0  # ε of the release audited; the leakage is linear in ε for the CAR only
COORDINATES = ("x", "y")
DIAGNOSTICS = ("ok", "rhat_max", "ess_bulk_min", "divergences", "runs", "samplers", "sampler", "smc", "pass_blocked")


def ego_query(partition: Partition, members: np.ndarray) -> tuple[LinearRows, list[tuple[int, int]]]:
    """The centroid rows the ego network touches (module docstring) over its 2m tuples, and each
    row's (cluster, coordinate)."""
    m, labels = len(members), partition.labels[members]
    rows, names = [], []
    for c in np.unique(labels):
        for a in range(2):
            row = np.zeros(2 * m)
            row[a * m + np.flatnonzero(labels == c)] = 1.0 / partition.sizes[c]
            rows.append(tuple(row.tolist()))
            names.append((int(c), a))
    return LinearRows(tuple(rows)), names


def audit_sample(data: AttackData, partition: Partition, near_fit: NearFit, users: int = 6, seed: int = 0,
                 draws: int = 500, tune: int = 500, chains: int = 2, where: RunSettings | None = None,
                 ids: list[int] | None = None) -> list[dict]:
    """One row per sampled user (`geo.ego.sample_users`: `users` of those with 1 to 4 located
    friends, the report's user among them; or the users of rows `ids`, for a benchmark): the CAR's
    exact leakage of her x and y tuples and the near model's estimate of each (estimate, lower,
    upper, verdict, its reason, diagnostics), with the seconds each took. `audit` picks the engines (auto: the gaussian engine
    for the CAR, the sampling engine for the near model) and each row names them; `where` carries
    any other run setting (workers, progress)."""
    if near_fit.box != data.fit.box:
        raise InputError(f"the near fit's box {near_fit.box} is not the CAR fit's {data.fit.box}")
    friends = friends_of(data.pairs, data.users)
    km = plane_km(data.lat, data.lon, near_fit.box)
    delta = sensitivity(partition.sizes)
    settings = RunSettings.of(where, seed=seed, draws=draws, tune=tune, chains=chains)
    out = []
    for user in sample_users(friends, users, seed) if ids is None else ids:
        members = ego_members(friends, int(user))
        m = len(members)
        query, rows = ego_query(partition, members)
        start = begin = time.perf_counter()
        car = audit(car_submodel(data.points, data.pairs, data.fit, members), query, Laplace(delta), IDP,
                    targets=[0, m], information=None)
        car_seconds = time.perf_counter() - start
        ego = NearEgo(km, friends, near_fit, members)
        model = ego.submodel()
        row = {"id": int(user), "degree": m - 1, "clusters": sorted({c for c, _ in rows}),
               "cluster_sizes": [int(partition.sizes[c]) for c in sorted({c for c, _ in rows})],
               "car_engine": car.engine, "car_seconds": car_seconds}
        for a, name in enumerate(COORDINATES):
            row[f"car_{name}"] = float(car.per_target[a * m])
            start = time.perf_counter()
            near = audit(model, query, Laplace(delta), IDP, targets=[a * m], claim=CLAIM, information=None,
                         settings=settings)
            row[f"near_{name}"] = _estimate(near, time.perf_counter() - start, 2 * ego.density_error())
        row["seconds"] = time.perf_counter() - begin
        out.append(row)
    return out


def _estimate(result, seconds: float, slack: float) -> dict:
    """The engine's estimate of the truncated density's leakage, its interval widened by `slack`
    (the most the kernel sums' truncation and tables can move the leakage: twice
    `NearEgo.density_error`, DESIGN §7.1) and
    its verdict withdrawn when the claim falls in the widening."""
    lower, upper = max(0.0, float(result.ci[0]) - slack), float(result.ci[1]) + slack
    verdict, reason = result.verdict, result.verdict_reason
    if (verdict == "pass" and upper > CLAIM) or (verdict == "fail" and lower <= CLAIM):
        verdict, reason = "inconclusive", (f"the claim lies within {slack:.2g} of the interval, the most the "
                                           "truncated kernel sums can move the leakage")
    diagnostics = {k: result.diagnostics.get(k) for k in DIAGNOSTICS if k in result.diagnostics}
    return {"estimate": float(result.leakage), "lower": lower, "upper": upper, "density_error": slack,
            "verdict": verdict, "verdict_reason": reason, "diagnostics": diagnostics,
            "engine": result.engine, "seconds": seconds}


def summary(rows: list[dict], users: int, seed: int, draws: int, tune: int, chains: int) -> dict:
    """The sample's rule and size, the runs' settings, and per coordinate how often the CAR's exact
    value lies below, inside or above the near model's interval, and the verdicts."""
    out = {"rule": f"{users} users among those with {DEGREES[0]} to {DEGREES[1]} located friends: one drawn "
                   f"uniformly (numpy default_rng([seed, 30]), the report's user) and {users - 1} more without "
                   f"replacement (default_rng([seed, 31])); pdp with K = every user outside the ego network, "
                   f"ε = {CLAIM}", "users": [r["id"] for r in rows], "seed": seed, "draws": draws, "tune": tune,
           "chains": chains}
    for name in COORDINATES:
        near = [r[f"near_{name}"] for r in rows]
        car = np.array([r[f"car_{name}"] for r in rows])
        lower, upper = np.array([n["lower"] for n in near]), np.array([n["upper"] for n in near])
        out[name] = {"car_below": int(np.sum(car < lower)), "car_inside": int(np.sum((car >= lower) & (car <= upper))),
                     "car_above": int(np.sum(car > upper)),
                     "verdicts": {v: sum(n["verdict"] == v for n in near) for v in ("pass", "fail", "inconclusive")},
                     "diagnostics_ok": sum(bool(n["diagnostics"].get("ok")) for n in near)}
    return out
