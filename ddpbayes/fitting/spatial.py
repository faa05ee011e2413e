"""The spatial Gaussian process between clusters of the `clustered` template (DESIGN §9.8):
`--coords X,Y` splits cluster c's effect between a unit-variance Gaussian process over the
clusters' coordinates s_c and unit iid effects, BYM2-style (Riebler et al. 2016; Simpson et al. 2017):

    effect_c = sigma (sqrt(phi) g(s_c) + sqrt(1 - phi) z_c) = f_c + u_c,  z_c ~ Normal(0, 1)
    g ~ GP(0, Matern32(gp_length_scale))  (unit variance: Var effect_c = sigma^2 for every phi)
    gp_length_scale ~ LogNormal(mu, s)   (2.5% below the median nearest-neighbour distance,
                                         2.5% above the largest distance)
    phi ~ Beta(1/2, 1/2)

Up to EXACT_UP_TO clusters the GP is exact and the model sampled collapsed: the total effect
effect ~ MvNormal(0, sigma^2 (phi R + (1 - phi) I)) (R the Matern 3/2 correlations; the same law),
f and u drawn per posterior draw from their Gaussian law given it (`split`). Above, PyMC's
Hilbert-space approximation (HSGP; Solin & Särkkä 2020, Riutort-Mayol et al. 2023) of g, f and u
sampled apart, non-centred. Distances are in the coordinates' own units.
Also the spatial check: Moran's I of the clusters' residual rates over their nearest neighbours."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.spatial.distance import cdist, pdist

from ddpbayes.errors import InputError

EXACT_UP_TO = 100  # clusters up to which the GP is exact (a Cholesky factor per gradient); HSGP above
TAIL = 0.025  # the length scale's prior mass below the shortest and above the longest scale the data can see
PHI_PRIOR = (0.5, 0.5)  # Beta prior of the field's share phi of the effects' variance (DESIGN §9.8)
JITTER = 1e-6  # added to the correlation matrix's diagonal (clusters at one place make it singular)
HSGP_MAX_M = 30  # basis functions per coordinate at most (30 x 30 = 900 coefficients)
NEIGHBOURS = 4  # the Moran's I weights: each cluster's nearest neighbours


@dataclass(frozen=True)
class Spatial:
    """The clusters' coordinates (k, 2) in the data's units, named by `columns`, and the GP's prior
    and approximation: LogNormal(`mu`, `s`) on the length scale, `m` basis functions per
    coordinate and the boundary factor `c` when approximated (m = 0: exact)."""

    columns: tuple[str, str]
    coords: np.ndarray
    mu: float
    s: float
    m: int
    c: float

    def describe(self) -> dict:
        """The `data.spatial` block."""
        approximation = f"HSGP, {self.m} x {self.m} basis functions, c = {self.c:.3g}" if self.m else "exact"
        return {"coords": list(self.columns), "units": f"the units of {self.columns[0]} and {self.columns[1]}",
                "kernel": "Matern32", "approximation": approximation,
                "length_scale_prior": {"mu": self.mu, "sigma": self.s},
                "parametrisation": "BYM2", "phi_prior": {"beta": list(PHI_PRIOR)}}


def cluster_coordinates(table, columns: Sequence[str], index: np.ndarray, labels: Sequence[str], path) -> Spatial:
    """Each cluster's coordinates (the two `columns`: the same in each of its rows), refusing what a GP cannot use."""
    xy = np.column_stack([_numbers(table[c], c, path) for c in columns])
    first = np.zeros(len(labels), dtype=np.int64)
    first[index[::-1]] = np.arange(len(index))[::-1]
    coords = xy[first]
    moved = np.flatnonzero((xy != coords[index]).any(axis=1))
    if moved.size:
        r = int(moved[0])
        raise InputError(f"cluster '{labels[index[r]]}' of '{path}' has two places ({','.join(columns)}): data row "
                         f"{r + 1} differs from its first row (a cluster's coordinates must be the same in each row)")
    places = np.unique(coords, axis=0)
    if len(places) < 3:
        raise InputError(f"the clusters of '{path}' lie at {len(places)} place(s) of {','.join(columns)}: a spatial "
                         "field needs at least three places (its length scale is not identified)")
    mu, s = length_scale_prior(places)
    m, c = basis(places) if len(labels) > EXACT_UP_TO else (0, 0.0)
    return Spatial(tuple(columns), coords, mu, s, m, c)


def _numbers(values, column: str, path) -> np.ndarray:
    """A coordinate column as finite numbers (read as text when it also names the clusters, as Gambia's x,y)."""
    import pandas as pd

    numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(numbers))
    if bad.size:
        raise InputError(f"column '{column}' of '{path}' must hold finite numbers (coordinates): data row "
                         f"{bad[0] + 1} holds '{str(values.iloc[bad[0]])[:40]}'")
    return numbers


def length_scale_prior(places: np.ndarray) -> tuple[float, float]:
    """LogNormal(mu, s) on the length scale with TAIL of its mass below the median distance from a
    place to its nearest other place (shorter scales: each cluster alone, the cluster effects' job)
    and TAIL above the largest distance between places (longer: one level everywhere, the
    intercept's job): mu the mean of their logarithms, s their half-difference over z_0.975."""
    low, high = scale_range(places)
    z = stats.norm.ppf(1 - TAIL)
    return float((np.log(low) + np.log(high)) / 2), float(max(np.log(high / low), 1e-9) / (2 * z))


def basis(places: np.ndarray) -> tuple[int, float]:
    """HSGP basis functions per coordinate and the boundary factor c for length scales from the
    median nearest-neighbour distance to the places' half-width S (PyMC's approx_hsgp_hyperparams:
    the rule of Riutort-Mayol et al. 2023 for the Matern 3/2 kernel; c = 4.5), at most HSGP_MAX_M
    functions. Longer scales, a field nearly constant over the places, are approximated less well."""
    import pymc as pm

    low, _ = scale_range(places)
    half = float((places.max(axis=0) - places.min(axis=0)).max()) / 2
    m, c = pm.gp.hsgp_approx.approx_hsgp_hyperparams([-half, half], [min(low, half / 2), half], "matern32")
    return int(min(max(m, 1), HSGP_MAX_M)), float(c)


def scale_range(places: np.ndarray) -> tuple[float, float]:
    """The median distance from a place to its nearest other place, and the largest distance between places."""
    near = cdist(places, places)
    np.fill_diagonal(near, np.inf)
    return float(np.median(near.min(axis=1))), float(pdist(places).max())


def effects(spatial: Spatial, sigma):
    """The cluster effects' parameters and their total effect_c = f_c + u_c at the clusters (a PyMC
    tensor, inside a model; Deterministic "sigma_iid" = sigma sqrt(1 - phi)). Exact GP: the total
    sampled alone, collapsed (`collapsed`); HSGP: f and u separately (`bym2`)."""
    import pymc as pm
    import pytensor.tensor as pt

    phi = pm.Beta("phi", *PHI_PRIOR)
    pm.Deterministic("sigma_iid", sigma * pt.sqrt(1.0 - phi))
    ls = pm.LogNormal("gp_length_scale", spatial.mu, spatial.s)
    if not spatial.m:
        return collapsed(spatial, sigma, phi, ls)
    f, u = bym2(spatial, sigma, phi, ls)
    return pm.Deterministic("effect", f + u, dims="cluster")


def collapsed(spatial: Spatial, sigma, phi, ls):
    """The total effect, collapsed and centred: effect ~ MvNormal(0, sigma^2 (phi R + (1 - phi) I)), R the
    Matern 3/2 correlations at the clusters (+ JITTER on the diagonal): the law of f + u, sampled as k
    latent values instead of 2k, with no funnel between the field and the iid parts and the intercept's
    trade with the effects' mean linear, which the dense mass matrix adapts to (DESIGN §9.8); f and u
    are drawn afterwards from their Gaussian law given the effect (`split`)."""
    import pymc as pm
    import pytensor.tensor as pt

    k = len(spatial.coords)
    correlation = pm.gp.cov.Matern32(2, ls=ls)(_centred(spatial)) + JITTER * pt.eye(k)
    chol = pt.linalg.cholesky(phi * correlation + (1.0 - phi) * pt.eye(k))
    return pm.MvNormal("effect", mu=pt.zeros(k), chol=sigma * chol, dims="cluster")


def bym2(spatial: Spatial, sigma, phi, ls):
    """The cluster effects' spatial part f = sigma sqrt(phi) g, g the HSGP-approximated unit-variance
    field (non-centred), and iid part u = sigma_iid z, z ~ Normal(0, 1) (PyMC Deterministics "f" and
    "u", inside a model): Var(f_c + u_c) = sigma^2 whatever phi, up to the approximation (Riebler et al.
    2016's BYM2)."""
    import pymc as pm
    import pytensor.tensor as pt

    gp = pm.gp.HSGP(m=[spatial.m, spatial.m], c=spatial.c, cov_func=pm.gp.cov.Matern32(2, ls=ls))
    basis_functions, sqrt_psd = gp.prior_linearized(_centred(spatial))
    w = pm.Normal("gp_w", 0.0, 1.0, shape=spatial.m * spatial.m)
    z = pm.Normal("z", 0.0, 1.0, dims="cluster")
    f = pm.Deterministic("f", sigma * pt.sqrt(phi) * (basis_functions @ (w * sqrt_psd)), dims="cluster")
    return f, pm.Deterministic("u", sigma * pt.sqrt(1.0 - phi) * z, dims="cluster")


def _centred(spatial: Spatial) -> np.ndarray:
    """The clusters' coordinates centred on their bounding box (HSGP's basis is centred at 0)."""
    return spatial.coords - (spatial.coords.max(axis=0) + spatial.coords.min(axis=0)) / 2


def matern32(coords: np.ndarray, length_scales: np.ndarray) -> np.ndarray:
    """Matern 3/2 correlations (1 + sqrt(3) d / l) exp(-sqrt(3) d / l) at `coords` for each length
    scale l: (D, k, k), JITTER added on the diagonal as in the model."""
    d = cdist(coords, coords)[None, :, :] * (np.sqrt(3) / np.asarray(length_scales, dtype=float)[:, None, None])
    return (1 + d) * np.exp(-d) + JITTER * np.eye(len(coords))


def split(effect: np.ndarray, sigma: np.ndarray, phi: np.ndarray, length_scale: np.ndarray, coords: np.ndarray,
          rng: np.random.Generator, chunk: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Per posterior draw, f drawn from its law given the total effect b = f + u (f ~ Normal(0,
    sigma^2 phi R), u ~ Normal(0, sigma^2 (1 - phi) I), independent) and u = b - f: with A = phi R,
    C = A + (1 - phi) I, f | b ~ Normal(A C^-1 b, sigma^2 (A - A C^-1 A)); A and C share R's
    eigenvectors Q (R = Q diag(lam) Q^T), so mean = Q diag(a / c) Q^T b and covariance = sigma^2 Q
    diag(a (1 - phi) / c) Q^T, a = phi lam, c = a + 1 - phi. `effect` (D, k); returns f, u (D, k)."""
    f = np.empty_like(effect)
    for start in range(0, len(effect), chunk):
        part = slice(start, start + chunk)
        lam, q = np.linalg.eigh(matern32(coords, length_scale[part]))
        a = phi[part, None] * np.clip(lam, 0.0, None)
        c = a + (1.0 - phi[part, None])
        rotated = np.einsum("dki,dk->di", q, effect[part])
        noise = sigma[part, None] * np.sqrt(a * (1.0 - phi[part, None]) / c) * rng.standard_normal(a.shape)
        f[part] = np.einsum("dki,di->dk", q, a / c * rotated + noise)
    return f, effect - f


def field_given_others(f: np.ndarray, sigma: np.ndarray, phi: np.ndarray, length_scale: np.ndarray,
                       coords: np.ndarray, chunk: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Per posterior draw and cluster c, the Gaussian process's law of f_c given the other clusters'
    field f_-c (f ~ Normal(0, S), S = sigma^2 phi R): with the precision P = S^-1, mean f_c - (P f)_c / P_cc
    and variance 1 / P_cc (Rue & Held 2005, Theorem 2.3); P = Q diag(1 / (sigma^2 phi lam)) Q^T from R's
    eigendecomposition. `f` (D, k); returns the means and variances (D, k)."""
    mean, variance = np.empty_like(f), np.empty_like(f)
    for start in range(0, len(f), chunk):
        part = slice(start, start + chunk)
        lam, q = np.linalg.eigh(matern32(coords, length_scale[part]))
        inverse = 1.0 / (sigma[part, None] ** 2 * phi[part, None] * np.clip(lam, JITTER / 2, None))
        diagonal = np.einsum("dki,di->dk", q**2, inverse)
        precision_f = np.einsum("dki,di->dk", q, inverse * np.einsum("dki,dk->di", q, f[part]))
        mean[part], variance[part] = f[part] - precision_f / diagonal, 1.0 / diagonal
    return mean, variance


def add_split(idata, spatial: Spatial, seed: int) -> None:
    """A collapsed fit's posterior completed with f and u per draw (`split`, seeded: the same seed, the
    same draws), as "f" and "u" beside "effect"; an HSGP fit's posterior has them already."""
    post = idata.posterior
    if "f" in post:
        return
    effect = post["effect"]
    flat = [post[name].values.reshape(-1) for name in ("sigma", "phi", "gp_length_scale")]
    f, u = split(effect.values.reshape(-1, effect.shape[-1]), *flat, spatial.coords, np.random.default_rng([seed, 1]))
    post["f"], post["u"] = ((effect.dims, v.reshape(effect.shape)) for v in (f, u))


def neighbour_weights(coords: np.ndarray, neighbours: int = NEIGHBOURS) -> np.ndarray:
    """Row-standardised weights: each cluster's `neighbours` nearest other clusters, 1/neighbours each."""
    k = len(coords)
    m = min(neighbours, k - 1)
    distance = cdist(coords, coords)
    np.fill_diagonal(distance, np.inf)
    nearest = np.argsort(distance, axis=1, kind="stable")[:, :m]
    weights = np.zeros((k, k))
    weights[np.repeat(np.arange(k), m), nearest.ravel()] = 1.0 / m
    return weights


def morans_i(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Moran's I of `values` (last axis: the clusters) under row-standardised `weights`:
    sum_ij w_ij d_i d_j / sum_i d_i^2, d the deviations from the mean (k / W = 1). 0 for constant values."""
    d = values - values.mean(axis=-1, keepdims=True)
    top = np.einsum("...i,ij,...j->...", d, weights, d)
    bottom = (d**2).sum(axis=-1)
    return np.divide(top, bottom, out=np.zeros_like(top), where=bottom > 0)
