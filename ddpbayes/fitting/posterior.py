"""A fitted model's posterior as the audits under it read it (DESIGN §9.6): which model files are
fitted (the marker is their `.fit.json` beside them), S posterior draws evenly thinned, and the
Bayesian adversary's model, whose parameters are one of those S draws, uniformly at random."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.fitting.fitted import FORMAT, categorical_fit, chain_draws, level_probabilities, read_fit, regime_draws
from ddpbayes.fitting.write import companions
from ddpbayes.model import DependenceModel


TEMPLATES = ("clustered", "gaussian", "chain")  # fits whose model files build(parameters="mean" | "draw:K")
BUILD_KEYS = {"chain": ("individual", "n")}  # a model file's build's other keywords (-p), by template


def fit_of(model_path: str | Path) -> Path | None:
    """MODEL.fit.json beside `model_path` when it is a fit written by `ddpbayes fit` (`TEMPLATES`), else None."""
    path = Path(model_path)
    if path.suffix != ".py":
        return None
    fit = companions(path)[0]
    try:
        doc = json.loads(fit.read_text()) if fit.is_file() else None
    except (OSError, ValueError):
        return None
    fitted = isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("template") in TEMPLATES
    return fit if fitted else None


def template_of(fit_path: str | Path) -> str:
    """The template of the fit at `fit_path` (one `fit_of` found)."""
    return json.loads(Path(fit_path).read_text())["template"]


def per_cluster(fit_path: str | Path) -> bool:
    """Whether the fit at `fit_path` is a binary clustered one, whose draws `read_draws` reads (the engines'
    per-cluster paths); a categorical clustered fit (DESIGN §9.9) is audited model by model."""
    doc = json.loads(Path(fit_path).read_text())
    return doc["template"] == "clustered" and "levels" not in doc["data"]


def draw_indices(fit_path: str | Path, draws: int) -> np.ndarray:
    """`draws` of the fit's posterior draws, evenly thinned (`thinned`), whatever its template."""
    columns = json.loads(Path(fit_path).read_text())["draws"]
    return thinned(len(next(iter(columns.values()))), draws)


def thinned(count: int, draws: int) -> np.ndarray:
    """`draws` indices spread evenly over `count` posterior draws (chains in order): the first and
    the last included, rounded to the nearest draw."""
    if draws > count:
        raise InputError(f"--parameters asks for {draws:,} posterior draws; the fit has {count:,}")
    return np.rint(np.linspace(0, count - 1, draws)).astype(np.int64)


@dataclass(frozen=True)
class PosteriorDraws:
    """S posterior draws of a clustered fit: draw `indices[j]` has `intercept[j]`, `beta[j]`,
    the latent effects' SD `sigma[j]` (a spatial fit's sigma_iid) and a spatial fit's field at the
    clusters `field[j]` (zeros without one)."""

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
                          np.asarray(table.get("sigma_iid", table["sigma"]), dtype=float)[pick], field)


def integrated_model(fit_path: str | Path, draws: int, build: dict | None = None) -> DependenceModel:
    """The fitted template with its parameters integrated over the empirical posterior of `draws`
    draws: a latent draw index J ~ Categorical(1/S, ..., 1/S), and given J the model file's model at
    draw J (`build`: the model file's other keywords, a chain's individual and length). A gaussian
    fit is refused: a mixture over draws is not jointly Gaussian, which its engine needs."""
    template = template_of(fit_path)
    mixed = {"clustered": _integrated_clustered if per_cluster(fit_path) else _integrated_categorical,
             "chain": _integrated_chain}.get(template)
    if mixed is None:
        raise InputError(f"--parameters integrated is not built for {template} fits: a mixture of Gaussian models over "
                         "posterior draws is not jointly Gaussian, which the gaussian engine needs (use mean or draws:S)")
    return mixed(fit_path, draws, **(build or {}))


def _integrated_clustered(fit_path: str | Path, draws: int) -> DependenceModel:  # its build takes no keywords
    """Given J the clustered template with draw J's parameters (a spatial fit's field at the clusters
    too: draw J's), non-centred (u_c = sigma_J z_c, z_c ~
    Normal(0, 1)): the same law as the model file's u_c ~ Normal(0, sigma), with a prior on z_c that does
    not depend on J."""
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


def _integrated_categorical(fit_path: str | Path, draws: int) -> DependenceModel:
    """Given J the categorical model file's model at draw J (DESIGN §9.9), non-centred: u_{c,j} =
    sigma_{j,J} z_{c,j} with z_{c,j} ~ Normal(0, 1) (the cumulative logit: one z_c), so the latents'
    prior does not depend on J."""
    import pymc as pm
    import pytensor.tensor as pt

    doc = json.loads(Path(fit_path).read_text())
    fits = [categorical_fit(doc, f"draw:{k}", Path(fit_path)) for k in draw_indices(fit_path, draws)]
    first, ordered = fits[0], len(fits[0].cut) > 0
    fixed = pt.as_tensor(np.stack([f.fixed for f in fits], axis=-1))  # (n, levels - 1 or 1, S)
    sigma = pt.as_tensor(np.stack([f.sigma for f in fits], axis=-1))  # (levels - 1 or 1, S)
    with pm.Model() as m:
        j = pm.Categorical("draw", p=np.full(draws, 1.0 / draws))
        if ordered:
            cut = pt.as_tensor(np.stack([f.cut for f in fits], axis=-1))
            z = pm.Normal("z", 0.0, 1.0, shape=first.n_clusters)
            eta = fixed[:, 0, j] + sigma[0, j] * z[first.cluster_index]
            columns = [cut[i, j] - eta for i in range(first.k - 1)]
        else:
            z = [pm.Normal(f"z_{i}", 0.0, 1.0, shape=first.n_clusters) for i in range(1, first.k)]
            columns = [fixed[:, i - 1, j] + sigma[i - 1, j] * z[i - 1][first.cluster_index] for i in range(1, first.k)]
        pm.Categorical("y", p=level_probabilities(columns, ordered), shape=first.n)
    return DependenceModel(m, tuples="y")


def _integrated_chain(fit_path: str | Path, draws: int, individual: str | None = None,
                      n: int | None = None) -> DependenceModel:
    """Given J the model file's chain at draw J: x_0 ~ Categorical(init_J), x_t ~ Categorical(P_J[x_t-1]),
    in its loop form (each day's term reads J and the day before: the structured engine's small cliques);
    a fit with hidden regimes: `_integrated_regimes`."""
    if json.loads(Path(fit_path).read_text())["data"].get("regimes"):
        return _integrated_regimes(fit_path, draws, individual, n)
    import pymc as pm
    import pytensor.tensor as pt

    init, transition, length = chain_draws(fit_path, draw_indices(fit_path, draws), individual)
    n = length if n is None else n
    with pm.Model() as m:
        j = pm.Categorical("draw", p=np.full(draws, 1.0 / draws))
        x = pm.Categorical("x0", p=pt.as_tensor(init)[j])
        for t in range(1, n):
            x = pm.Categorical(f"x{t}", p=pt.as_tensor(transition)[j, x])
    return DependenceModel(m, tuples=[f"x{t}" for t in range(n)])


def _integrated_regimes(fit_path: str | Path, draws: int, individual: str | None = None,
                        n: int | None = None) -> DependenceModel:
    """Given J the regime model file's chain at draw J (DESIGN §9.5), J a parent of every regime and
    day: cliques of J, two regimes and two days (S·R²·K² cells)."""
    import pymc as pm
    import pytensor.tensor as pt

    init, rho, a, p, length = regime_draws(fit_path, draw_indices(fit_path, draws), individual)
    n = length if n is None else n
    with pm.Model() as m:
        j = pm.Categorical("draw", p=np.full(draws, 1.0 / draws))
        x = pm.Categorical("x0", p=pt.as_tensor(init)[j])
        for t in range(1, n):
            z = pm.Categorical(f"z{t}", p=pt.as_tensor(rho)[j] if t == 1 else pt.as_tensor(a)[j, z])
            x = pm.Categorical(f"x{t}", p=pt.as_tensor(p)[j, z, x])
    return DependenceModel(m, tuples=[f"x{t}" for t in range(n)])
