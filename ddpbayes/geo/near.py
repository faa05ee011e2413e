"""Near a friend or where people live: a dependence model of users' positions on the friendship
graph that fits the Gowalla data (issue 30), and seed 002 Eq. 9's weighted prior it gives.

A user i with friends F(i) lives, with probability w_0, where people live (the population
density p, a Gaussian kernel density of the other users' positions with bandwidth h), and with
probability w_s near a friend f drawn uniformly from F(i), at scale σ_s, where people live:

    p(x_i | x_-i) = p(x_i) · [w_0 + Σ_s w_s · (1/|F(i)|) Σ_{f ∈ F(i)} N(x_i; x_f, σ_s² I) / Z_{f,s}],
    Z_{f,s} = ∫ p(x) N(x; x_f, σ_s² I) dx = (1/N) Σ_k N(x_f; x_k, (σ_s² + h²) I).

A user without friends follows p. Positions are in km on the plane of `plane_km` (the box's
equirectangular projection at its middle latitude). These conditionals are fitted jointly as a
pseudo-likelihood (Besag 1975; models/gowalla_near.py): consistent point estimates, intervals
narrower than a full likelihood's.

Eq. 9 (seed 002 §IV-C) is P_de(d̂) ∝ weight(d̂) · |{d_j ∈ grid(d̂)}|: the histogram of the known
others reweighted near friends. This model gives it exactly: the cell's mass is the sum over the
known others k in it of weight(x_k) = w_0 + Σ_s w_s mean_f N(x_k; x_f, (σ_s² + h²) I) / Z_{f,s}
(each kernel bump of p integrated against the friend's kernel: `log_weights`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

from ddpbayes.errors import InputError
from ddpbayes.geo.data import Box

KM_PER_DEGREE_LAT = 110.574  # WGS84, at 37 degrees; the plane's north-south scale
KM_PER_DEGREE_LON = 111.320  # at the equator; times cos(middle latitude)


def plane_km(lat, lon, box: Box) -> np.ndarray:
    """(n, 2) positions in km on the box's equirectangular plane: x east of the box's middle
    longitude at cos(middle latitude) · 111.32 km per degree, y north of its middle latitude at
    110.574 km per degree. Distances on it differ from great-circle ones by the cosine's change
    over the box's latitudes (within ±20% east-west across the continental US, < 1% in a city)."""
    lat0, lon0 = sum(box.lat) / 2, sum(box.lon) / 2
    x = (np.asarray(lon, float) - lon0) * KM_PER_DEGREE_LON * math.cos(math.radians(lat0))
    y = (np.asarray(lat, float) - lat0) * KM_PER_DEGREE_LAT
    return np.column_stack([x, y])


@dataclass(frozen=True)
class NearFit:
    """The fitted model (module docstring): the component weights (population first, then one per
    scale), the scales σ_s and the population bandwidth h in km, on `box`'s plane; and the fit's
    provenance and diagnostics (`models/gowalla_near.py`)."""

    box: Box
    bandwidth_km: float
    weights: tuple[float, ...]  # (w_0, w_1, ..., w_S), summing to 1
    sigma_km: tuple[float, ...]  # (σ_1, ..., σ_S), increasing
    diagnostics: dict = field(default_factory=dict)

    def __post_init__(self):
        w, s = tuple(map(float, self.weights)), tuple(map(float, self.sigma_km))
        ok = (len(w) == len(s) + 1 and all(v >= 0 for v in w) and abs(sum(w) - 1) < 1e-9 and w[0] > 0
              and all(v > 0 and math.isfinite(v) for v in s) and self.bandwidth_km > 0)
        if not ok:
            raise InputError(f"a NearFit needs weights >= 0 summing to 1 with w_0 > 0, one more weight than scales, "
                             f"scales and bandwidth > 0; got weights {self.weights}, scales {self.sigma_km}, "
                             f"bandwidth {self.bandwidth_km}")
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "sigma_km", s)
        object.__setattr__(self, "bandwidth_km", float(self.bandwidth_km))


def save_near_fit(fit: NearFit, path: str | Path) -> None:
    """Write the fit as JSON (atomically: a temporary file renamed over `path`)."""
    doc = asdict(fit)
    doc["box"] = {"lat": list(fit.box.lat), "lon": list(fit.box.lon)}
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


def load_near_fit(path: str | Path) -> NearFit:
    """The fit saved by `save_near_fit`; InputError naming the file when it cannot be read."""
    try:
        doc = json.loads(Path(path).read_text())
        return NearFit(Box(**doc["box"]), doc["bandwidth_km"], tuple(doc["weights"]), tuple(doc["sigma_km"]),
                       doc.get("diagnostics", {}))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"cannot read the near-friend fit {path}: {exc}") from exc


def _log_normal2(d2: np.ndarray, var: float) -> np.ndarray:
    """log N(x; y, var I) in two dimensions for squared distances d2."""
    return -d2 / (2 * var) - math.log(2 * math.pi * var)


def _sq_dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(len(a), len(b)) squared distances."""
    return ((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=-1)


def log_weights(known: np.ndarray, friends: np.ndarray, fit: NearFit) -> np.ndarray:
    """(N,) log weight(x_k) of each known other k (km, `plane_km`) given the known friends'
    positions (F, 2): Eq. 9's weight, w_0 + Σ_s w_s mean_f N(x_k; x_f, (σ_s² + h²) I) / Z_{f,s} with
    Z_{f,s} = mean_k N(x_f; x_k, (σ_s² + h²) I) over the same known others. No friend: 0."""
    if len(friends) == 0 or len(known) == 0:
        return np.zeros(len(known))
    d2 = _sq_dist(known, friends)  # (N, F)
    terms = [np.full(len(known), math.log(fit.weights[0]))]
    for w, s in zip(fit.weights[1:], fit.sigma_km):
        if w == 0:
            continue
        lk = _log_normal2(d2, s * s + fit.bandwidth_km**2)
        log_z = logsumexp(lk, axis=0) - math.log(len(known))  # (F,)
        terms.append(math.log(w) + logsumexp(lk - log_z, axis=1) - math.log(len(friends)))
    return logsumexp(np.stack(terms), axis=0)


def conditional_logpdf(x: np.ndarray, others: np.ndarray, friends: np.ndarray, fit: NearFit) -> np.ndarray:
    """log p(x | x_-i) (module docstring) at the points x (m, 2), the population being `others`
    (N, 2) and the friends `friends` (F, 2), all in km; without friends, log p(x)."""
    h2 = fit.bandwidth_km**2
    log_pop = logsumexp(_log_normal2(_sq_dist(x, others), h2), axis=1) - math.log(len(others))
    if len(friends) == 0:
        return log_pop
    d2_xf, d2_fo = _sq_dist(x, friends), _sq_dist(friends, others)
    terms = [np.full(len(x), math.log(fit.weights[0]))]
    for w, s in zip(fit.weights[1:], fit.sigma_km):
        if w == 0:
            continue
        log_z = logsumexp(_log_normal2(d2_fo, s * s + h2), axis=1) - math.log(len(others))  # (F,)
        terms.append(math.log(w) + logsumexp(_log_normal2(d2_xf, s * s) - log_z, axis=1) - math.log(len(friends)))
    return log_pop + logsumexp(np.stack(terms), axis=0)


def sample_conditional(rng: np.random.Generator, others: np.ndarray, friends: np.ndarray, fit: NearFit,
                       size: int) -> np.ndarray:
    """`size` exact draws (size, 2) from p(x | x_-i): pick the component; the population is a
    uniform other k plus N(0, h² I); near friend f at scale σ, the density ∝ p(x) N(x; x_f, σ² I)
    is a mixture over k with weights ∝ N(x_f; x_k, (σ² + h²) I) of the Gaussian products
    N((σ² x_k + h² x_f)/(σ² + h²), σ² h²/(σ² + h²) I)."""
    h2 = fit.bandwidth_km**2
    weights = np.asarray(fit.weights if len(friends) else (1.0,) + (0.0,) * len(fit.sigma_km))
    comp = rng.choice(len(weights), size=size, p=weights / weights.sum())
    out = np.empty((size, 2))
    pop = comp == 0
    out[pop] = others[rng.integers(len(others), size=int(pop.sum()))] + rng.normal(0, math.sqrt(h2), (int(pop.sum()), 2))
    for s_index, s in enumerate(fit.sigma_km, start=1):
        rows = np.flatnonzero(comp == s_index)
        if not len(rows):
            continue
        f = friends[rng.integers(len(friends), size=len(rows))]
        v = s * s + h2
        lw = _log_normal2(_sq_dist(f, others), v)  # (m, N)
        p = np.exp(lw - lw.max(axis=1, keepdims=True))
        cum = np.cumsum(p, axis=1)
        k = (cum < rng.random(len(rows))[:, None] * cum[:, -1:]).sum(axis=1)
        mean = (s * s * others[k] + h2 * f) / v
        out[rows] = mean + rng.normal(0, math.sqrt(s * s * h2 / v), (len(rows), 2))
    return out


def population_bandwidth(points: np.ndarray, grid: np.ndarray | None = None) -> float:
    """The leave-one-out maximum-likelihood bandwidth (km) of the population's Gaussian kernel
    density, searched on a log grid (default 1 to 1,000 km, 31 points) and refined by 30 steps of
    golden section between the grid neighbours of the best point."""
    d2 = _sq_dist(points, points)
    np.fill_diagonal(d2, np.inf)

    def score(h: float) -> float:
        return float(np.mean(logsumexp(_log_normal2(d2, h * h), axis=1)))

    grid = np.geomspace(1.0, 1000.0, 31) if grid is None else grid
    scores = [score(h) for h in grid]
    k = int(np.argmax(scores))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    a, b = math.log(lo), math.log(hi)
    for _ in range(30):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if score(math.exp(c)) >= score(math.exp(d)):
            b = d
        else:
            a = c
    return math.exp((a + b) / 2)
