"""The `gaussian` template (DESIGN §9.4): a continuous column within groups, a normal linear
model with a group random effect, non-centred (covariates standardised, s_y the column's SD):

    intercept ~ Normal(mean(y), 2.5 s_y),  beta_j ~ Normal(0, 2.5 s_y),
    sigma_group ~ Exponential(1 / s_y),  sigma_residual ~ Exponential(1 / s_y),
    z_g ~ Normal(0, 1),  u_g = sigma_group z_g,
    y_r ~ Normal(intercept + x_r . beta + u_{g(r)}, sigma_residual).

The rows of a group are jointly Gaussian, Cov = sigma_group^2 J + sigma_residual^2 I
(equicorrelated, rho = sigma_group^2 / (sigma_group^2 + sigma_residual^2)): Galton's families.
`independent=True` drops the group effects (the checks' and LOO's reference)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ddpbayes.errors import InputError
from ddpbayes.fitting import checks as ppc
from ddpbayes.fitting.clustered import group_index, standardised
from ddpbayes.fitting.table import read_table
from ddpbayes.limits import check_memory

PRIOR_SD = 2.5  # intercept and standardised coefficients, in units of the column's SD (rstanarm's autoscaled defaults)
CHUNK = 1 << 21  # cells (draws x rows) replicated at once


@dataclass(frozen=True)
class GaussianData:
    """A table as the template sees it: rows in the file's order, groups in order of first
    appearance, covariates standardised (a text covariate of two values coded 0/1 first,
    `levels`), and the declared domain [low, high] of every value."""

    outcome: str
    cluster_columns: tuple[str, ...]
    covariates: tuple[str, ...]
    levels: dict[str, list[str]]
    y: np.ndarray  # (n,)
    cluster_index: np.ndarray  # (n,) into labels
    labels: tuple[str, ...]
    x: np.ndarray  # (n, p) standardised
    center: np.ndarray
    scale: np.ndarray
    domain: tuple[float, float]

    @property
    def sizes(self) -> np.ndarray:
        return np.bincount(self.cluster_index, minlength=len(self.labels))

    def parameter_names(self, independent: bool = False) -> list[str]:
        """The template's parameters, as the JSON names them."""
        group = [] if independent else ["sigma_group"]
        return ["intercept", *(f"beta_{c}" for c in self.covariates), *group, "sigma_residual"]

    def variables(self, independent: bool = False) -> list[str]:
        """The PyMC variables whose convergence is checked."""
        return ["intercept", *(["beta"] if self.covariates else []), "sigma_residual",
                *([] if independent else ["sigma_group", "u"])]

    def hyperparameters(self, independent: bool = False) -> list[str]:
        """The scalar variables whose ESS gives LOO's r_eff."""
        return ["intercept", "sigma_residual", *([] if independent else ["sigma_group"])]

    def element_names(self, variable: str) -> list[str]:
        """Each scalar of a PyMC variable, as the diagnostics name it: beta_<covariate>, u[<cluster>]."""
        named = {"beta": [f"beta_{c}" for c in self.covariates], "u": [f"u[{c}]" for c in self.labels]}
        return named.get(variable, [variable])

    def cells_per_draw(self) -> int:
        """Numbers kept per posterior draw: effects, parameters, replicated rows and LOO's tables."""
        return 2 * len(self.labels) + len(self.covariates) + 3 + 4 * len(self.y)

    def describe(self) -> dict:
        """The `data` block's template part."""
        return {"outcome": self.outcome, "cluster": list(self.cluster_columns), "clusters": len(self.labels),
                "covariates": list(self.covariates), "covariate_mean": self.center.tolist(),
                "covariate_sd": self.scale.tolist(), "covariate_levels": self.levels, "domain": list(self.domain)}

    def table(self) -> dict:
        """What the model file needs of the table."""
        return {"clusters": list(self.labels), "cluster_index": self.cluster_index.tolist(),
                "x": self.x.ravel().tolist()}


def read(path: str | Path, options: dict, max_rows: int):
    """The template's view of the table at `path`: `options` names `group`, `columns` (one
    column: GaussianData; several: `gaussian_joint.JointData`, DESIGN §9.4b), `covariates` and
    `domain` (None: the data's range)."""
    group, columns, covariates = options["group"], options["columns"], options["covariates"]
    if not group:
        raise InputError("the gaussian template needs --group COL (the column naming each row's group)")
    if not columns:
        raise InputError("the gaussian template needs --columns COL[,COL] (the continuous column(s): the records)")
    if len(columns) > 1:
        from ddpbayes.fitting import gaussian_joint

        return gaussian_joint.read(path, options, max_rows)
    table = read_table(path, [*group, *covariates], columns, max_rows)
    column = columns[0]
    y = table[column].to_numpy(dtype=float)
    if y.min() == y.max():
        raise InputError(f"column '{column}' of '{path}' is {y[0]:g} in every row: nothing to fit")
    index, labels = group_index(table, group)
    _check_groups(index, labels, group, path)
    coded, levels = _coded(table, covariates, path)
    x, center, scale = standardised(coded, covariates, path)
    return GaussianData(outcome=column, cluster_columns=tuple(group), covariates=tuple(covariates), levels=levels,
                        y=y, cluster_index=index.astype(np.int64), labels=tuple(str(v) for v in labels), x=x,
                        center=center, scale=scale, domain=_domain(options.get("domain"), y, column, path))


def _check_groups(index: np.ndarray, labels: np.ndarray, group, path) -> None:
    """At least two groups and one of at least two rows. Groups of one are kept (unlike the
    clustered template's clusters): under a normal model they inform the total variance
    sigma_group^2 + sigma_residual^2, and Galton's 33 only children are in his families' fit."""
    name = ",".join(group)
    if len(labels) < 2:
        raise InputError(f"column '{name}' of '{path}' has one group: the template needs at least two")
    if np.bincount(index).max() < 2:
        raise InputError(f"every group ({name}) of '{path}' has one row: nothing says how rows within a group depend")


def _coded(table, covariates, path):
    """Covariates as numbers: numeric text as it is, a text column of two values as 0/1 (the
    later value in sorted order is 1: `levels[col] = [value0, value1]`); anything else refused."""
    import pandas as pd

    coded, levels = pd.DataFrame(index=table.index), {}
    for column in covariates:
        values = pd.to_numeric(table[column], errors="coerce")
        if values.notna().all():
            if not np.isfinite(values.to_numpy(dtype=float)).all():
                raise InputError(f"column '{column}' of '{path}' has an infinite value")
            coded[column] = values.astype(float)
            continue
        distinct = sorted(table[column].unique())
        if len(distinct) != 2:
            raise InputError(f"covariate '{column}' of '{path}' must hold numbers or exactly two values (coded 0/1), "
                             f"it holds {len(distinct):,} distinct values, e.g. '{str(distinct[0])[:40]}'")
        levels[column] = [str(v) for v in distinct]
        coded[column] = (table[column] == distinct[1]).astype(float)
    return coded, levels


def _domain(domain, y: np.ndarray, column: str, path) -> tuple[float, float]:
    """The declared range of every value: `domain` (low, high) if given, else the data's range;
    it must hold every value of the data."""
    if domain is None:
        return float(y.min()), float(y.max())
    low, high = (float(v) for v in domain)
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise InputError(f"--domain must be two finite numbers LOW,HIGH with LOW < HIGH, got {low:g},{high:g}")
    if y.min() < low or y.max() > high:
        raise InputError(f"--domain {low:g},{high:g} does not hold column '{column}' of '{path}' "
                         f"(its range: {y.min():g} to {y.max():g})")
    return low, high


def pymc_model(data: GaussianData, independent: bool = False):
    """The template as a PyMC model; `independent` drops the group effects."""
    import pymc as pm

    if not isinstance(data, GaussianData):
        return _joint().pymc_model(data, independent)
    scale = float(data.y.std())
    coords = {"covariate": list(data.covariates), "cluster": list(data.labels)}
    with pm.Model(coords=coords) as model:
        mu = pm.Normal("intercept", float(data.y.mean()), PRIOR_SD * scale)
        if data.covariates:
            beta = pm.Normal("beta", 0.0, PRIOR_SD * scale, dims="covariate")
            mu = mu + pm.math.dot(data.x, beta)
        if not independent:
            sigma_group = pm.Exponential("sigma_group", 1.0 / scale)
            z = pm.Normal("z", 0.0, 1.0, dims="cluster")
            u = pm.Deterministic("u", sigma_group * z, dims="cluster")
            mu = mu + u[data.cluster_index]
        pm.Normal("y", mu, pm.Exponential("sigma_residual", 1.0 / scale), observed=data.y)
    return model


def hyperparameter_draws(posterior, data: GaussianData, independent: bool = False) -> dict[str, np.ndarray]:
    """Each named parameter's draws, chains flattened (chain-major), keyed as the JSON names them."""
    if not isinstance(data, GaussianData):
        return _joint().hyperparameter_draws(posterior, data, independent)
    out = {"intercept": posterior["intercept"].values.reshape(-1)}
    if data.covariates:
        beta = posterior["beta"].values.reshape(-1, len(data.covariates))
        out |= {f"beta_{c}": beta[:, j] for j, c in enumerate(data.covariates)}
    if not independent:
        out["sigma_group"] = posterior["sigma_group"].values.reshape(-1)
    out["sigma_residual"] = posterior["sigma_residual"].values.reshape(-1)
    return out


def fixed_part(draws: dict[str, np.ndarray], data: GaussianData) -> np.ndarray:
    """The mean without group effects, per draw and row: (D, n)."""
    mean = draws["intercept"][:, None] + np.zeros((1, len(data.y)))
    for j, c in enumerate(data.covariates):
        mean = mean + draws[f"beta_{c}"][:, None] * data.x[None, :, j]
    return mean


def within_icc(values: np.ndarray, data: GaussianData) -> np.ndarray:
    """The one-way ANOVA intra-group correlation of the residuals of the least-squares fit on the
    covariates (a fixed linear map of the data, so a valid statistic of replications too), last axis rows."""
    design = np.column_stack([np.ones(len(data.y)), data.x])
    residual = values - (values @ np.linalg.pinv(design).T) @ design.T
    onehot = sp.csr_matrix((np.ones(len(data.y)), (np.arange(len(data.y)), data.cluster_index)),
                           shape=(len(data.y), len(data.labels)))
    sums = np.atleast_2d(residual) @ onehot
    squares = np.atleast_2d(residual**2) @ onehot
    value = ppc.icc(sums, data.sizes, squares)
    return value if np.ndim(values) > 1 else value[0]


def replicated(mean: np.ndarray, sigma_group: np.ndarray | None, sigma: np.ndarray, data: GaussianData,
               rng: np.random.Generator) -> np.ndarray:
    """The ICC of one replicated table per draw: fresh effects u_g ~ Normal(0, sigma_group) unless None."""
    draws, n = mean.shape
    out = np.empty(draws)
    step = max(1, CHUNK // max(n, 1))
    for start in range(0, draws, step):
        part = mean[start:start + step]
        if sigma_group is not None:
            u = rng.normal(0.0, 1.0, (len(part), len(data.labels))) * sigma_group[start:start + step, None]
            part = part + u[:, data.cluster_index]
        values = part + rng.normal(0.0, 1.0, part.shape) * sigma[start:start + step, None]
        out[start:start + step] = within_icc(values, data)
    return out


def loglik(mean: np.ndarray, sigma: np.ndarray, y: np.ndarray) -> np.ndarray:
    """log Normal(y_r | mean_dr, sigma_d), (D, n)."""
    z = (y[None, :] - mean) / sigma[:, None]
    return -0.5 * z**2 - np.log(sigma)[:, None] - 0.5 * np.log(2 * np.pi)


def dependence_checks(grouped: dict[str, np.ndarray], independent: dict[str, np.ndarray], u: np.ndarray,
                      data: GaussianData, reff: tuple[float, float], seed: int, max_draws: int = 1000) -> dict:
    """The `checks` block (DESIGN §9.4): the within-group correlation against replications under
    both templates, LOO of both, and whether the data support the dependence (as §9.2's)."""
    if not isinstance(data, GaussianData):
        return _joint().dependence_checks(grouped, independent, u, data, reff, seed)
    rng = np.random.default_rng(seed)
    draws = len(grouped["intercept"])
    pick = np.unique(np.linspace(0, draws - 1, min(max_draws, draws)).astype(int))
    mean_g, mean_i = fixed_part(grouped, data), fixed_part(independent, data)
    check_memory(8 * 3 * (mean_g.size + mean_i.size), "the LOO log-likelihood tables", flag="--draws")
    rep_g = replicated(mean_g[pick], grouped["sigma_group"][pick], grouped["sigma_residual"][pick], data, rng)
    rep_i = replicated(mean_i[pick], None, independent["sigma_residual"][pick], data, rng)
    observed = float(within_icc(data.y, data))
    checks = {"draws": int(len(pick)),
              "icc": ppc.compare(observed, rep_g) | {"independent": ppc.short(ppc.compare(observed, rep_i))}}
    ll_g = loglik(mean_g + u[:, data.cluster_index], grouped["sigma_residual"], data.y)
    ll_i = loglik(mean_i, independent["sigma_residual"], data.y)
    checks["loo"] = ppc.compare_loo(ll_g, ll_i, np.ones(len(data.y)), reff)
    checks["dependence_supported"] = ppc.supported(checks)
    return checks


def _joint():
    """The template on several columns (`gaussian_joint`), imported when used."""
    from ddpbayes.fitting import gaussian_joint

    return gaussian_joint


def model_file(doc: dict) -> tuple[str, dict]:
    """The model file's text and its fields (`write.model_text`): one column's MODEL_FILE, or the
    joint template's for several columns."""
    data = doc["data"]
    if len(data.get("columns", [])) > 1:
        return _joint().model_text(doc)
    covariates, (low, high) = data["covariates"], data["domain"]
    return MODEL_FILE, {"clusters": data["clusters"], "cluster": ", ".join(data["cluster"]), "outcome": data["outcome"],
                        "covariate_text": f"; covariates {', '.join(covariates)}" if covariates else "",
                        "low": low, "high": high}


MODEL_FILE = '''"""A gaussian dependence model fitted by `ddpbayes fit` from {data} (DESIGN §9.4).

{rows:,} values of {outcome} (tuple k is data row k: the vector variable "y") in {clusters:,}
groups of {cluster}{covariate_text}. The template: y_r ~ Normal(intercept + x_r . beta + u_g(r),
sigma_residual), the group effects u_g ~ Normal(0, sigma_group) latent, x_r the covariates
standardised as in the fit: the rows of a group are jointly Gaussian, equicorrelated. Every
value's domain is [{low:g}, {high:g}]. Posterior means: {means}.

build(parameters="mean") fixes the parameters at their posterior means, "draw:K" at posterior
draw K (0 to {last_draw}, chains in order). The fit, its checks and the draws: {fit_name}; the
whole posterior (ArviZ InferenceData): {posterior_name}. `ddpbayes audit {model_name} ...`
audits it like any model file (the gaussian engine reads it exactly).
"""

from pathlib import Path

import pymc as pm

from ddpbayes import DependenceModel, Interval
from ddpbayes.fitting.fitted import read_fit

FIT = Path(__file__).with_name("{fit_name}")


def build(parameters: str = "mean") -> DependenceModel:
    fit = read_fit(FIT, parameters)
    with pm.Model() as m:
        u = pm.Normal("u", 0.0, fit.sigma_group, shape=fit.n_clusters)
        pm.Normal("y", fit.intercept + fit.x @ fit.beta + u[fit.cluster_index], fit.sigma_residual, shape=fit.n)
    return DependenceModel(m, tuples="y", domains=Interval(*fit.domain))
'''
