"""A fitted model's posterior as the audits under it read it (DESIGN §9.6): which model files are
fitted (the marker is their `.fit.json` beside them), S posterior draws evenly thinned, and the
Bayesian adversary's model, whose parameters are one of those S draws, uniformly at random."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.fitting.fitted import FORMAT, read_fit
from ddpbayes.fitting.write import companions
from ddpbayes.model import DependenceModel


def fit_of(model_path: str | Path) -> Path | None:
    """MODEL.fit.json beside `model_path` when it is a clustered fit written by `ddpbayes fit`, else None."""
    path = Path(model_path)
    if path.suffix != ".py":
        return None
    fit = companions(path)[0]
    try:
        doc = json.loads(fit.read_text()) if fit.is_file() else None
    except (OSError, ValueError):
        return None
    fitted = isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("template") == "clustered"
    return fit if fitted else None


def thinned(count: int, draws: int) -> np.ndarray:
    """`draws` indices spread evenly over `count` posterior draws (chains in order): the first and
    the last included, rounded to the nearest draw."""
    if draws > count:
        raise InputError(f"--parameters asks for {draws:,} posterior draws; the fit has {count:,}")
    return np.rint(np.linspace(0, count - 1, draws)).astype(np.int64)


@dataclass(frozen=True)
class PosteriorDraws:
    """S posterior draws of a clustered fit: draw `indices[j]` has `intercept[j]`, `beta[j]`,
    `sigma[j]` and a spatial fit's field at the clusters `field[j]` (zeros without one)."""

    indices: np.ndarray  # (S,) into the fit's draws
    intercept: np.ndarray  # (S,)
    beta: np.ndarray  # (S, p)
    sigma: np.ndarray  # (S,)
    field: np.ndarray  # (S, k)


def read_draws(fit_path: str | Path, draws: int) -> PosteriorDraws:
    """`draws` posterior draws of the fit at `fit_path`, evenly thinned."""
    doc = json.loads(Path(fit_path).read_text())
    table = doc["draws"]
    pick = thinned(len(table["intercept"]), draws)
    beta = np.array([np.asarray(table[f"beta_{c}"], dtype=float)[pick] for c in doc["data"]["covariates"]])
    clusters = len(doc["table"]["clusters"])
    field = (np.asarray([doc["field"]["draws"][k] for k in pick], dtype=float) if "field" in doc
             else np.zeros((len(pick), clusters)))
    return PosteriorDraws(pick, np.asarray(table["intercept"], dtype=float)[pick], beta.T.reshape(len(pick), -1),
                          np.asarray(table["sigma"], dtype=float)[pick], field)


def integrated_model(fit_path: str | Path, draws: int) -> DependenceModel:
    """The fitted template with its parameters integrated over the empirical posterior of `draws`
    draws: a latent draw index J ~ Categorical(1/S, ..., 1/S), and given J the template with draw
    J's parameters (a spatial fit's field at the clusters too: draw J's). Non-centred (u_c =
    sigma_J z_c, z_c ~ Normal(0, 1)): the same law as the model file's u_c ~ Normal(0, sigma),
    with a prior on z_c that does not depend on J."""
    import pymc as pm
    import pytensor.tensor as pt

    fixed = read_fit(fit_path, "mean")
    post = read_draws(fit_path, draws)
    fixed_part = pt.as_tensor(post.intercept[None, :] + fixed.x @ post.beta.T  # (n, S): row r under draw j
                              + post.field[:, fixed.cluster_index].T)
    with pm.Model() as m:
        j = pm.Categorical("draw", p=np.full(draws, 1.0 / draws))
        z = pm.Normal("z", 0.0, 1.0, shape=fixed.n_clusters)
        sigma = pt.as_tensor(post.sigma)[j]
        pm.Bernoulli("y", logit_p=fixed_part[:, j] + sigma * z[fixed.cluster_index], shape=fixed.n)
    return DependenceModel(m, tuples="y")
