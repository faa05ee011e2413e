"""The worst case of the attacked release (issue 14 part 2), for the report beside the attack.

Under the fitted CAR the users' coordinates are jointly Gaussian, so every user's exact idp of the
same noisy centroids (the same partition, held fixed) comes from the gaussian engine's closed form
(DESIGN §2.2): per coordinate tuple, then summed over a user's two coordinates, because the x and
y fields are independent and every centroid row reads one of them ("A record of several tuples").
The leakage is (hi - lo)/b · ||c||_1 with b = Δ/ε: linear in ε, so one audit at ε = 1 gives
every ε of the attack.
"""

from __future__ import annotations

import time

import numpy as np
import pymc as pm

from ddpbayes.auditing import audit
from ddpbayes.geo.car import adjacency, car_vector_weights
from ddpbayes.mechanisms import Laplace
from ddpbayes.model import DependenceModel
from ddpbayes.model.domains import Interval
from ddpbayes.notions import IDP
from ddpbayes.queries import Centroids

QUANTILES = (0.5, 0.9, 0.99, 1.0)


def user_idp(points: np.ndarray, pairs: np.ndarray, fit, labels: np.ndarray, delta: float) -> tuple[np.ndarray, float]:
    """Each user's idp at ε = 1 (Laplace scale Δ) for her whole record, and the seconds it took."""
    start = time.perf_counter()
    n = len(points)
    w = adjacency(n, pairs)
    with pm.Model() as m:
        pm.CAR("pos", mu=np.repeat(np.asarray(fit.mu, float), n), W=car_vector_weights(w, fit.alpha, fit.tau),
               alpha=fit.alpha, tau=1.0)
    model = DependenceModel(m, tuples="pos", domains=Interval(0.0, 1.0))
    query = Centroids("the attack's K-means partition", tuple(int(c) for c in labels))
    per = np.asarray(audit(model, query, Laplace(delta), IDP, information=None).per_target, dtype=float)
    return per[:n] + per[n:], time.perf_counter() - start


def summary(users: np.ndarray, epsilons: list[float]) -> list[dict]:
    """Per ε: how many users' worst-case leakage exceeds ε, and its quantiles (leakage ∝ ε)."""
    rows = []
    for e in epsilons:
        leak = users * e
        row = {"epsilon": e, "users_above": int(np.sum(leak > e * (1 + 1e-12))), "users": len(leak)}
        row.update({f"q{round(q * 100)}": float(np.quantile(leak, q)) for q in QUANTILES})
        rows.append(row)
    return rows
