"""Galton's family heights (1886; HistData `GaltonFamilies`): siblings' heights are dependent.

Data: models/data/galton_families.csv, 934 adult children of 205 families (a byte copy of
../shared/data/galton_families.csv; its README gives the provenance). Model, fitted with PyMC
(NUTS, `fit`): child c of family f has height

    h_fc = mu + delta [c is a son] + a_f + e_fc,   a_f ~ N(0, tau^2),   e_fc ~ N(0, sigma^2),

so the k children of one family are jointly Gaussian with Cov = tau^2 J + sigma^2 I:
equicorrelated with rho = tau^2 / (tau^2 + sigma^2). `build` exposes that dependence as one
`pm.MvNormal` "height" over k children, with the posterior means of tau^2 and sigma^2 (so the
covariance is the posterior mean of the covariance), cached in models/data/galton_fit.json
(`refit()` redoes it: `python models/galton_families.py`). Every height's domain is the
data's range [56, 79] inches (width 23).

Publishing a family's mean height with Laplace noise at the classic epsilon = 1 (scale =
sensitivity / epsilon = 23 / k) leaks, by DESIGN §2.2 with w = 1/k, b = 23/k:

    idp = 23 / b * |1/k + (k-1) rho / k| = 1 + (k-1) rho,

and pdp is the same: knowing m siblings leaves the others equicorrelated with rho / (1 + m rho),
and 1 + (k-1-m) rho / (1 + m rho) falls with m, so the weakest adversary leaks most (all
correlations positive, 003 Corollary 1); knowing all k-1 siblings leaves classic DP's 1. The
cached fit (NUTS, 2 chains x 1000 draws, seed 1886, R-hat <= 1.003, no divergences): mu =
64.15 in (daughters), delta = 5.17 in (sons), tau = 1.56 in, sigma = 1.96 in, rho = 0.388.
idp = pdp (engine, and the formula above to 1e-15):

    k = 2: 1.39    k = 4: 2.17    k = 8: 3.72    k = 15: 6.44   (classic epsilon: 1)

    ddpbayes audit models/galton_families.py --query mean --mechanism laplace --epsilon 1 --notion pdp
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pymc as pm

from ddpbayes import DependenceModel, Interval

DATA = Path(__file__).parent / "data" / "galton_families.csv"
FIT = Path(__file__).parent / "data" / "galton_fit.json"
SEED = 1886


def load() -> tuple[list[str], np.ndarray, np.ndarray]:
    """Family ids (strings: '136A' exists), child heights and a son indicator."""
    with DATA.open(newline="") as f:
        rows = list(csv.DictReader(f))
    family = [r["family"] for r in rows]
    height = np.array([float(r["childHeight"]) for r in rows])
    son = np.array([r["gender"] == "male" for r in rows], dtype=float)
    return family, height, son


def fit(draws: int = 1000, tune: int = 1000, chains: int = 2, seed: int = SEED) -> dict:
    """Sample the hierarchical model (non-centred family effects) and summarise the posterior."""
    family, height, son = load()
    ids, fam = np.unique(family, return_inverse=True)
    with pm.Model():
        mu = pm.Normal("mu", 66.0, 10.0)
        delta = pm.Normal("delta", 0.0, 10.0)
        tau = pm.HalfNormal("tau", 5.0)
        sigma = pm.HalfNormal("sigma", 5.0)
        z = pm.Normal("z", 0.0, 1.0, shape=len(ids))
        pm.Normal("h", mu + delta * son + tau * z[fam], sigma, observed=height)
        idata = pm.sample(draws, tune=tune, chains=chains, cores=chains, random_seed=seed, progressbar=False, compute_convergence_checks=False)
    post = idata.posterior
    rhat = pm.stats.rhat(post[["mu", "delta", "tau", "sigma"]])
    return {
        "mu_female": float(post["mu"].mean()),
        "son_effect": float(post["delta"].mean()),
        "tau2": float((post["tau"] ** 2).mean()),
        "sigma2": float((post["sigma"] ** 2).mean()),
        "rhat_max": float(max(rhat[v].max() for v in rhat.data_vars)),
        "divergences": int(idata.sample_stats["diverging"].sum()),
        "sampler": {"draws": draws, "tune": tune, "chains": chains, "seed": seed, "pymc": pm.__version__},
        "data_sha256": hashlib.sha256(DATA.read_bytes()).hexdigest(),
        "families": len(ids),
        "children": len(height),
    }


def refit(**kwargs) -> dict:
    """Fit again and overwrite the cache that `build` reads."""
    params = fit(**kwargs)
    FIT.write_text(json.dumps(params, indent=2) + "\n")
    return params


def build(k: int = 4, sexes: Sequence[str] | None = None, fitted: bool = True) -> DependenceModel:
    """k children of one family as one MvNormal "height"; `sexes` lists "male"/"female" per
    child (default: sons first, k // 2 of them, as Galton ordered them; the sexes move the mean
    only, not the dependence). `fitted` reads the cached fit, else fits now (about 40 s)."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k}")
    sexes = list(sexes) if sexes is not None else ["male"] * (k // 2) + ["female"] * (k - k // 2)
    if len(sexes) != k or not set(sexes) <= {"male", "female"}:
        raise ValueError(f"sexes must list 'male' or 'female' for each of the {k} children, got {sexes}")
    p = json.loads(FIT.read_text()) if fitted else fit()
    mean = p["mu_female"] + p["son_effect"] * np.array([s == "male" for s in sexes], dtype=float)
    cov = p["tau2"] * np.ones((k, k)) + p["sigma2"] * np.eye(k)
    _, height, _ = load()
    with pm.Model() as m:
        pm.MvNormal("height", mu=mean, cov=cov)
    return DependenceModel(m, tuples="height", domains=Interval(height.min(), height.max()))


if __name__ == "__main__":
    print(json.dumps(refit(), indent=2))
