"""The `clustered` template (DESIGN §9.1): binary records in clusters, a logit with a cluster
random effect, non-centred:

    intercept ~ Normal(0, 2.5),  beta_j ~ Normal(0, 2.5)  (covariate j standardised),
    sigma ~ Exponential(1),  z_c ~ Normal(0, 1),  u_c = sigma z_c,
    y_r ~ Bernoulli(logit^-1(intercept + x_r . beta + u_{c(r)})).

Rows with the same cluster and covariates are one Binomial observation (the same posterior as the
Bernoulli rows, the likelihood differing by a constant), so a fit costs per pattern, not per row.
`independent=True` is the same template without the cluster effects (LOO's and the checks'
reference model). With `--coords X,Y` the effects' variance sigma^2 is split by phi between a
spatial Gaussian process f between the clusters and iid effects u (BYM2; fitting/spatial.py, DESIGN §9.8)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.fitting.spatial import Spatial, cluster_coordinates

PRIOR_SD = 2.5  # intercept and standardised coefficients: rstanarm's weakly informative defaults (Gelman et al. 2008)
SIGMA_RATE = 1.0  # the cluster effects' SD: Exponential(1), rstanarm's default for one varying intercept
_GP = ["phi", "gp_length_scale", "sigma_iid"]  # a spatial fit's parameters besides (BYM2, DESIGN §9.8)


@dataclass(frozen=True)
class ClusteredData:
    """A table as the template sees it: rows in the file's order, clusters in order of first
    appearance, covariates standardised (`center`, `scale` per column), and the distinct
    (cluster, covariates) patterns with their row counts `trials` and positive counts `positives`."""

    outcome: str
    cluster_columns: tuple[str, ...]
    covariates: tuple[str, ...]
    y: np.ndarray  # (n,) 0/1
    cluster_index: np.ndarray  # (n,) into labels
    labels: tuple[str, ...]
    x: np.ndarray  # (n, p) standardised
    center: np.ndarray
    scale: np.ndarray
    pattern: np.ndarray  # (n,) each row's pattern
    pattern_cluster: np.ndarray  # (P,)
    pattern_x: np.ndarray  # (P, p)
    trials: np.ndarray  # (P,)
    positives: np.ndarray  # (P,)
    spatial: Spatial | None = None  # --coords: the GP between the clusters

    def without_field(self) -> ClusteredData:
        """The same table under the template without the spatial field (the spatial checks' reference)."""
        return replace(self, spatial=None)

    @property
    def target_accept(self) -> float:
        """NUTS's target acceptance: 0.95 with the spatial field (smaller steps: the collapsed effect's funnel
        as phi -> 1 diverged at 0.8 and 0.9 on Gambia for some seeds, DESIGN §9.8), else PyMC's 0.8."""
        return 0.95 if self.spatial else 0.8

    @property
    def sizes(self) -> np.ndarray:
        """Rows per cluster."""
        return np.bincount(self.cluster_index, minlength=len(self.labels))

    @property
    def totals(self) -> np.ndarray:
        """Positive rows per cluster."""
        return np.bincount(self.cluster_index, weights=self.y, minlength=len(self.labels))

    def parameter_names(self, independent: bool = False) -> list[str]:
        """The template's parameters, as the JSON names them."""
        return ["intercept", *(f"beta_{c}" for c in self.covariates), *([] if independent else ["sigma"]),
                *(_GP if self.spatial and not independent else [])]

    def variables(self, independent: bool = False) -> list[str]:
        """The PyMC variables whose convergence is checked."""
        effects = [] if independent else ["sigma", "u", *([*_GP, "f", "effect"] if self.spatial else [])]
        return ["intercept", *(["beta"] if self.covariates else []), *effects]

    def hyperparameters(self, independent: bool = False) -> list[str]:
        """The scalar variables whose ESS gives LOO's r_eff."""
        return ["intercept", *([] if independent else ["sigma", *(_GP[:2] if self.spatial else [])])]

    def element_names(self, variable: str) -> list[str]:
        """Each scalar of a PyMC variable, as the diagnostics name it: beta_<covariate>, u[<cluster>], f[<cluster>],
        effect[<cluster>] (f + u)."""
        named = {"beta": [f"beta_{c}" for c in self.covariates],
                 **{v: [f"{v}[{c}]" for c in self.labels] for v in ("u", "f", "effect")}}
        return named.get(variable, [variable])

    def cells_per_draw(self) -> int:
        """Numbers kept per posterior draw: effects, parameters, the checks' pattern tables."""
        return (5 if self.spatial else 2) * len(self.labels) + len(self.covariates) + 4 + 6 * len(self.trials)

    def describe(self) -> dict:
        """The `data` block's template part."""
        return {"outcome": self.outcome, "cluster": list(self.cluster_columns), "clusters": len(self.labels),
                "covariates": list(self.covariates), "covariate_mean": self.center.tolist(),
                "covariate_sd": self.scale.tolist()} | ({"spatial": self.spatial.describe()} if self.spatial else {})

    def table(self) -> dict:
        """What the model file needs of the table."""
        coords = {"coords": self.spatial.coords.ravel().tolist()} if self.spatial else {}
        return {"clusters": list(self.labels), "cluster_index": self.cluster_index.tolist(),
                "x": self.x.ravel().tolist()} | coords


def read(path: str | Path, options: dict, max_rows: int) -> ClusteredData:
    """The template's view of the table at `path`: `options` names `cluster`, `outcome`, `covariates`
    and `coords` (none, or the X,Y columns of each cluster's place)."""
    from ddpbayes.fitting.table import read_table

    cluster, outcome, covariates = options["cluster"], options["outcome"], options["covariates"]
    coords = options.get("coords") or []
    if not cluster or not outcome:
        raise InputError("the clustered template needs --cluster COL and --outcome COL")
    if coords and len(coords) != 2:
        raise InputError(f"--coords names two columns X,Y, got {len(coords)}: {','.join(coords)}")
    numbers = [outcome, *covariates, *(c for c in coords if c not in cluster)]
    table = read_table(path, cluster, list(dict.fromkeys(numbers)), max_rows)
    data = prepare(table, cluster, outcome, covariates, path)
    if coords:
        data = replace(data, spatial=cluster_coordinates(table, coords, data.cluster_index, data.labels, path))
    return data


def group_index(table, columns: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's group (the values of `columns` together), numbered in order of first appearance, and the labels."""
    import pandas as pd

    key = table[list(columns)].astype(str).agg(",".join, axis=1) if len(columns) > 1 else table[columns[0]]
    index, labels = pd.factorize(key, sort=False)
    return index, np.asarray(labels, dtype=str)


def prepare(table, cluster: Sequence[str], outcome: str, covariates: Sequence[str], path: str | Path) -> ClusteredData:
    """The template's view of `table` (read by `read_table`), refusing what it cannot fit."""
    y = _binary(table[outcome], outcome, path)
    index, labels = group_index(table, cluster)
    check_clusters(index, labels, cluster, path)
    x, center, scale = standardised(table, covariates, path)
    rows = np.column_stack([index.astype(float), x])
    _, first, pattern = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    pattern = pattern.ravel()
    trials = np.bincount(pattern)
    return ClusteredData(
        outcome=outcome, cluster_columns=tuple(cluster), covariates=tuple(covariates), y=y,
        cluster_index=index.astype(np.int64), labels=tuple(str(v) for v in labels), x=x, center=center, scale=scale,
        pattern=pattern, pattern_cluster=index[first].astype(np.int64), pattern_x=x[first], trials=trials,
        positives=np.bincount(pattern, weights=y, minlength=len(trials)).astype(np.int64),
    )


def _binary(values, column: str, path) -> np.ndarray:
    """The outcome (numbers, `read_table` checked) as 0/1 integers; a category or a count is refused."""
    data = values.to_numpy()
    if data.dtype == bool:
        data = data.astype(np.int64)
    other = ~np.isin(data, (0, 1))
    if other.any():
        first = int(np.flatnonzero(other)[0])
        raise InputError(f"column '{column}' of '{path}' must be binary (0 or 1) for the clustered template: data row "
                         f"{first + 1} holds {data[first]:g} (code a category as 0/1 first)")
    y = data.astype(np.int64)
    if y.min() == y.max():
        raise InputError(f"column '{column}' of '{path}' is {y[0]} in every row: nothing to fit (the intercept and "
                         "the cluster effects are not identified)")
    return y


def check_clusters(index: np.ndarray, labels: np.ndarray, cluster: Sequence[str], path, word: str = "cluster") -> None:
    """At least two clusters, each of at least two rows: a cluster of one says nothing about the
    dependence within clusters."""
    name = ",".join(cluster)
    if len(labels) < 2:
        raise InputError(f"column '{name}' of '{path}' has one {word}: the template needs at least two")
    sizes = np.bincount(index, minlength=len(labels))
    single = np.flatnonzero(sizes == 1)
    if single.size:
        raise InputError(f"{word} '{labels[single[0]]}' ({name}) of '{path}' has one row ({single.size:,} {word}(s) "
                         f"of one in all): a {word} effect needs at least two rows per {word} (drop or merge them)")


def standardised(table, covariates: Sequence[str], path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Covariates centred and scaled to unit SD (the priors are on that scale); a constant one is refused."""
    if not covariates:
        return np.zeros((len(table), 0)), np.zeros(0), np.ones(0)
    x = table[list(covariates)].to_numpy(dtype=float)
    center, scale = x.mean(axis=0), x.std(axis=0)
    if (scale == 0).any():
        raise InputError(f"covariate '{covariates[int(np.flatnonzero(scale == 0)[0])]}' of '{path}' is the same in every "
                         "row: its coefficient cannot be estimated")
    return (x - center) / scale, center, scale


def pymc_model(data: ClusteredData, independent: bool = False):
    """The template as a PyMC model of the Binomial patterns; `independent` drops the cluster effects
    (and the spatial field)."""
    import pymc as pm

    from ddpbayes.fitting.spatial import effects

    coords = {"covariate": list(data.covariates), "cluster": list(data.labels)}
    with pm.Model(coords=coords) as model:
        eta = pm.Normal("intercept", 0.0, PRIOR_SD)
        if data.covariates:
            beta = pm.Normal("beta", 0.0, PRIOR_SD, dims="covariate")
            eta = eta + pm.math.dot(data.pattern_x, beta)
        if not independent:
            sigma = pm.Exponential("sigma", SIGMA_RATE)
            if data.spatial:  # sigma the SD of f + u, split between them by phi (BYM2, DESIGN §9.8)
                effect = effects(data.spatial, sigma)
            else:
                effect = pm.Deterministic("u", sigma * pm.Normal("z", 0.0, 1.0, dims="cluster"), dims="cluster")
            eta = eta + effect[data.pattern_cluster]
        pm.Binomial("positives", n=data.trials, logit_p=eta, observed=data.positives)
    return model


def hyperparameter_draws(posterior, data: ClusteredData, independent: bool = False) -> dict[str, np.ndarray]:
    """Each named parameter's draws, chains flattened (chain-major), keyed as the JSON names them;
    a spatial fit's field at the clusters under `f` (D, k)."""
    out = {"intercept": _flat(posterior["intercept"])}
    if data.covariates:
        beta = posterior["beta"].values.reshape(-1, len(data.covariates))
        out |= {f"beta_{c}": beta[:, j] for j, c in enumerate(data.covariates)}
    if not independent:
        out["sigma"] = _flat(posterior["sigma"])
    if data.spatial and not independent:
        out |= {name: _flat(posterior[name]) for name in _GP}
        out["f"] = posterior["f"].values.reshape(-1, len(data.labels))
    return out


def iid_sd(draws: dict[str, np.ndarray]) -> np.ndarray:
    """The SD of the latent cluster effects u_c: sigma, or a spatial fit's sigma_iid = sigma sqrt(1 - phi)."""
    return draws.get("sigma_iid", draws["sigma"])


def _flat(values) -> np.ndarray:
    return np.asarray(values).reshape(-1)


def fixed_effects(draws: dict[str, np.ndarray], data: ClusteredData) -> np.ndarray:
    """The linear predictor without the cluster effects u (with a spatial fit's field f), per draw
    and pattern: (D, P)."""
    eta = draws["intercept"][:, None] + np.zeros((1, len(data.trials)))
    for j, c in enumerate(data.covariates):
        eta = eta + draws[f"beta_{c}"][:, None] * data.pattern_x[None, :, j]
    return eta + draws["f"][:, data.pattern_cluster] if "f" in draws else eta


MODEL_FILE = '''"""A clustered dependence model fitted by `ddpbayes fit` from {data} (DESIGN §9.1).

{rows:,} records (tuple k is data row k: the vector variable "y") in {clusters:,} clusters of
{cluster}; outcome {outcome}{covariate_text}. The template: y_r ~ Bernoulli(logit^-1(intercept +
x_r . beta + u_c(r))), the cluster effects u_c ~ Normal(0, sigma) latent, x_r the covariates
standardised as in the fit. Posterior means: {means}.

build(parameters="mean") fixes the parameters at their posterior means, "draw:K" at posterior
draw K (0 to {last_draw}, chains in order). The fit, its checks and the draws: {fit_name}; the
whole posterior (ArviZ InferenceData): {posterior_name}. `ddpbayes audit {model_name} ...`
audits it like any model file (-p parameters="'draw:0'" for one draw).
"""

from pathlib import Path

import pymc as pm

from ddpbayes import DependenceModel
from ddpbayes.fitting.fitted import read_fit

FIT = Path(__file__).with_name("{fit_name}")


def build(parameters: str = "mean") -> DependenceModel:
    fit = read_fit(FIT, parameters)
    with pm.Model() as m:
        u = pm.Normal("u", 0.0, fit.sigma, shape=fit.n_clusters)
        pm.Bernoulli("y", logit_p=fit.intercept + fit.x @ fit.beta + u[fit.cluster_index], shape=fit.n)
    return DependenceModel(m, tuples="y")
'''

SPATIAL_MODEL_FILE = '''"""A clustered dependence model with a spatial field, fitted by `ddpbayes fit` from {data}
(DESIGN §9.1, §9.8).

{rows:,} records (tuple k is data row k: the vector variable "y") in {clusters:,} clusters of
{cluster}; outcome {outcome}{covariate_text}. The template: y_r ~ Bernoulli(logit^-1(intercept +
x_r . beta + f_c(r) + u_c(r))): each cluster's effect split (BYM2) into the spatial field
f = sigma sqrt(phi) g, g a unit-variance Gaussian process over the clusters' places ({coords},
the length scale in their units), and the latent iid effects u_c ~ Normal(0, sigma_iid),
sigma_iid = sigma sqrt(1 - phi); x_r the covariates standardised as in the fit. Posterior
means: {means}.

The audit engines need each cluster's effect one-dimensional, so the field is FIXED here, as a
parameter: build(parameters="mean") takes each cluster's posterior mean of f_c (and the parameters'
posterior means), "draw:K" posterior draw K's field and parameters (0 to {last_draw}, chains in
order). Under `mean` and `draws` the spatial field is treated as known: the villages are then
independent of one another, and dependence across them enters only through `ddpbayes audit
--parameters integrated:S`, the mixture over posterior draws. The fit, its checks and the draws:
{fit_name}; the whole posterior (ArviZ InferenceData): {posterior_name}.
"""

from pathlib import Path

import pymc as pm

from ddpbayes import DependenceModel
from ddpbayes.fitting.fitted import read_fit

FIT = Path(__file__).with_name("{fit_name}")


def build(parameters: str = "mean") -> DependenceModel:
    fit = read_fit(FIT, parameters)
    with pm.Model() as m:
        u = pm.Normal("u", 0.0, fit.sigma, shape=fit.n_clusters)  # fit.sigma: sigma_iid
        field = fit.offset[fit.cluster_index]  # the spatial field at each row's cluster, fixed
        pm.Bernoulli("y", logit_p=fit.intercept + fit.x @ fit.beta + field + u[fit.cluster_index], shape=fit.n)
    return DependenceModel(m, tuples="y")
'''


def model_file(doc: dict) -> tuple[str, dict]:
    """The model file's template text for the fit `doc` (with a fixed spatial field when it has one) and its
    own fields, for write.model_text."""
    if "levels" in doc["data"]:  # a categorical outcome (DESIGN §9.9)
        from ddpbayes.fitting.categorical import model_file as categorical_file

        return categorical_file(doc)
    data = doc["data"]
    covariates = data["covariates"]
    fields = {"clusters": data["clusters"], "cluster": ", ".join(data["cluster"]), "outcome": data["outcome"],
              "covariate_text": f"; covariates {', '.join(covariates)}" if covariates else "",
              "coords": ", ".join(data.get("spatial", {}).get("coords", []))}
    return (SPATIAL_MODEL_FILE if "field" in doc else MODEL_FILE), fields
