"""The `gaussian` template on several columns jointly (DESIGN §9.4b): each row a vector of C
values, y_r = mu + B^T x_r + u_g(r) + e_r, non-centred (covariates standardised, s_c column c's SD):

    mu_c ~ Normal(mean(y_c), 2.5 s_c),  B_jc ~ Normal(0, 2.5 s_c),
    Sigma_group = diag(sd_g) R_g diag(sd_g),  sd_g,c ~ Exponential(1 / s_c),  R_g ~ LKJCorr(eta = 2),
    Sigma_residual likewise (its own sd_e, R_e),
    z_g ~ Normal(0, I_C),  u_g = L_group z_g  (L_group L_group^T = Sigma_group),
    y_r ~ MvNormal(mu + B^T x_r + u_g(r), Sigma_residual).

Records are cells: tuple k = r C + c is row r's value of column c (row-major). The cells' joint
covariance is Kronecker-structured: Cov(y_rc, y_r'c') = [g(r) = g(r')] Sigma_group[c, c'] +
[r = r'] Sigma_residual[c, c']. `independent=True` drops the group effects and the residual
correlation (every cell independent: the checks' and LOO's reference)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.fitting import checks as ppc
from ddpbayes.fitting.clustered import group_index, standardised
from ddpbayes.fitting.table import read_table
from ddpbayes.limits import check_memory

PRIOR_SD = 2.5  # as the one-column template (§9.4): rstanarm's autoscaled defaults
LKJ_ETA = 2.0  # LKJCorr(2): mild shrinkage of the correlations towards 0
MAX_COLUMNS = 8


@dataclass(frozen=True)
class JointData:
    """A table as the joint template sees it: rows in the file's order, `y` (n, C) the columns'
    values, groups in order of first appearance, covariates standardised, each column's domain."""

    columns: tuple[str, ...]
    cluster_columns: tuple[str, ...]
    covariates: tuple[str, ...]
    levels: dict[str, list[str]]
    y: np.ndarray  # (n, C)
    cluster_index: np.ndarray
    labels: tuple[str, ...]
    x: np.ndarray  # (n, p) standardised
    center: np.ndarray
    scale: np.ndarray
    domains: tuple[tuple[float, float], ...]
    # NUTS adapts a diagonal mass matrix: with PyMC's dense adaptation one of 4 chains stayed stuck on a
    # simulated table (R-hat 1.96; the diagonal one converged, DESIGN §9.4b)
    dense_mass_matrix = False

    @property
    def sizes(self) -> np.ndarray:
        return np.bincount(self.cluster_index, minlength=len(self.labels))

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return list(combinations(self.columns, 2))

    def parameter_names(self, independent: bool = False) -> list[str]:
        """The template's parameters, as the JSON names them (column names as suffixes)."""
        cols, pairs = self.columns, [f"{a}_{b}" for a, b in self.pairs]
        names = [f"intercept_{c}" for c in cols] + [f"beta_{v}_{c}" for v in self.covariates for c in cols]
        if not independent:
            names += [f"sigma_group_{c}" for c in cols]
        names += [f"sigma_residual_{c}" for c in cols]
        if not independent:
            names += [f"rho_group_{p}" for p in pairs] + [f"rho_residual_{p}" for p in pairs]
        return names

    def variables(self, independent: bool = False) -> list[str]:
        """The PyMC variables whose convergence is checked."""
        beta = ["beta"] if self.covariates else []
        if independent:
            return ["intercept", *beta, "sigma_residual"]
        return ["intercept", *beta, "sigma_group", "sigma_residual", "rho_group", "rho_residual", "u"]

    def hyperparameters(self, independent: bool = False) -> list[str]:
        """The variables whose ESS gives LOO's r_eff."""
        return ["intercept", "sigma_residual", *([] if independent else ["sigma_group"])]

    def element_names(self, variable: str) -> list[str]:
        """Each scalar of a PyMC variable, as the diagnostics name it."""
        cols, pairs = self.columns, [f"{a}_{b}" for a, b in self.pairs]
        if variable == "u":
            return [f"u[{g},{c}]" for g in self.labels for c in cols]
        if variable == "beta":
            return [f"beta_{v}_{c}" for v in self.covariates for c in cols]
        if variable.startswith("rho_"):
            return [f"{variable}_{p}" for p in pairs]
        return [f"{variable}_{c}" for c in cols]

    def cells_per_draw(self) -> int:
        """Numbers kept per posterior draw: effects, parameters, replicated cells and LOO's tables."""
        c = len(self.columns)
        return c * (2 * len(self.labels) + len(self.covariates) + 4) + c * c + 4 * self.y.size

    def describe(self) -> dict:
        """The `data` block's template part."""
        return {"outcome": ",".join(self.columns), "columns": list(self.columns), "cluster": list(self.cluster_columns),
                "clusters": len(self.labels), "covariates": list(self.covariates),
                "covariate_mean": self.center.tolist(), "covariate_sd": self.scale.tolist(),
                "covariate_levels": self.levels, "domains": [list(d) for d in self.domains]}

    def table(self) -> dict:
        """What the model file needs of the table."""
        return {"clusters": list(self.labels), "cluster_index": self.cluster_index.tolist(),
                "x": self.x.ravel().tolist()}

    def summary(self) -> str:
        return (f"{len(self.y):,} rows of {len(self.columns)} columns ({self.y.size:,} cells) in "
                f"{len(self.labels):,} groups")


def read(path: str | Path, options: dict, max_rows: int) -> JointData:
    """The joint template's view of the table at `path` (`options["columns"]`: two or more)."""
    from ddpbayes.fitting.gaussian import _check_groups, _coded, _domain

    group, columns, covariates = options["group"], options["columns"], options["covariates"]
    if len(columns) > MAX_COLUMNS:
        raise InputError(f"the gaussian template takes at most {MAX_COLUMNS} columns jointly, got {len(columns)}")
    if set(columns) & set(covariates):
        raise InputError(f"column '{sorted(set(columns) & set(covariates))[0]}' is both in --columns and --covariates")
    table = read_table(path, [*group, *covariates], columns, max_rows)
    y = np.column_stack([table[c].to_numpy(dtype=float) for c in columns])
    index, labels = group_index(table, group)
    _check_groups(index, labels, group, path)
    for c, column in enumerate(columns):
        _check_varies_within(y[:, c], index, column, path)
    coded, levels = _coded(table, covariates, path)
    x, center, scale = standardised(coded, covariates, path)
    domains = tuple(_domain(options.get("domain"), y[:, c], column, path) for c, column in enumerate(columns))
    return JointData(columns=tuple(columns), cluster_columns=tuple(group), covariates=tuple(covariates), levels=levels,
                     y=y, cluster_index=index.astype(np.int64), labels=tuple(str(v) for v in labels), x=x,
                     center=center, scale=scale, domains=domains)


def _check_varies_within(y: np.ndarray, index: np.ndarray, column: str, path) -> None:
    """A column must vary within some group: one constant within every group (Galton's `father`,
    one value per family repeated for each child) has no residual variance, and its residual SD
    and correlations are not identified."""
    low = np.full(index.max() + 1, np.inf)
    high = np.full(index.max() + 1, -np.inf)
    np.minimum.at(low, index, y)
    np.maximum.at(high, index, y)
    if np.all(low == high):
        raise InputError(f"column '{column}' of '{path}' is constant within every group: it has no residual variance "
                         "(a group-level column: fit it at the group level, or leave it out)")


def pymc_model(data: JointData, independent: bool = False):
    """The joint template as a PyMC model; `independent`: no group effects and independent cells."""
    import pymc as pm

    scale = data.y.std(axis=0)
    pairs = [f"{a}_{b}" for a, b in data.pairs]
    coords = {"covariate": list(data.covariates), "column": list(data.columns), "cluster": list(data.labels),
              "pair": pairs}
    upper = np.triu_indices(len(data.columns), 1)
    with pm.Model(coords=coords) as model:
        mean = pm.Normal("intercept", data.y.mean(axis=0), PRIOR_SD * scale, dims="column")[None, :]
        if data.covariates:
            beta = pm.Normal("beta", 0.0, PRIOR_SD * scale[None, :], dims=("covariate", "column"))
            mean = mean + pm.math.dot(data.x, beta)
        if independent:
            sigma = pm.Exponential("sigma_residual", 1.0 / scale, dims="column")
            pm.Normal("y", mean, sigma[None, :], observed=data.y)
            return model
        chol_g = _lkj("group", scale, upper)
        z = pm.Normal("z", 0.0, 1.0, dims=("cluster", "column"))
        u = pm.Deterministic("u", pm.math.dot(z, chol_g.T), dims=("cluster", "column"))
        chol_e = _lkj("residual", scale, upper)
        pm.MvNormal("y", mean + u[data.cluster_index], chol=chol_e, observed=data.y)
    return model


def _lkj(name: str, scale: np.ndarray, upper):
    """diag(sd) LKJCorr(eta) diag(sd) with sd_c ~ Exponential(1 / s_c) (PyMC's LKJCholeskyCov), its
    SDs and correlations kept as `sigma_<name>` and `rho_<name>`; returns the Cholesky factor."""
    import pymc as pm

    chol, corr, sd = pm.LKJCholeskyCov(f"chol_{name}", n=len(scale), eta=LKJ_ETA,
                                       sd_dist=pm.Exponential.dist(1.0 / scale, shape=len(scale)), compute_corr=True)
    pm.Deterministic(f"sigma_{name}", sd, dims="column")
    pm.Deterministic(f"rho_{name}", corr[upper], dims="pair")
    return chol


def hyperparameter_draws(posterior, data: JointData, independent: bool = False) -> dict[str, np.ndarray]:
    """Each named parameter's draws, chains flattened (chain-major), keyed as the JSON names them."""
    cols, pairs = data.columns, [f"{a}_{b}" for a, b in data.pairs]

    def flat(name: str, width: int) -> np.ndarray:
        return posterior[name].values.reshape(-1, width)

    out = dict(zip((f"intercept_{c}" for c in cols), flat("intercept", len(cols)).T))
    if data.covariates:
        beta = flat("beta", len(data.covariates) * len(cols))
        out |= dict(zip((f"beta_{v}_{c}" for v in data.covariates for c in cols), beta.T))
    if not independent:
        out |= dict(zip((f"sigma_group_{c}" for c in cols), flat("sigma_group", len(cols)).T))
    out |= dict(zip((f"sigma_residual_{c}" for c in cols), flat("sigma_residual", len(cols)).T))
    if not independent:  # a draw whose SD underflowed to 0 has R = L L^T / (sd sd^T) = 0/0: any R gives its
        for kind in ("group", "residual"):  # Sigma, so its correlation is set to 0
            rho = np.nan_to_num(flat(f"rho_{kind}", len(pairs)), nan=0.0)
            out |= dict(zip((f"rho_{kind}_{p}" for p in pairs), rho.T))
    return out


def factor(draws: dict[str, np.ndarray], data: JointData, kind: str) -> np.ndarray:
    """L with L L^T = Sigma_kind = diag(sd) R diag(sd), per draw (D, C, C): diag(sd) chol(R), never
    factorising Sigma itself (a draw with sd near 0 makes Sigma's Cholesky fail in rounding; R's does not)."""
    cols = data.columns
    sd = np.column_stack([draws[f"sigma_{kind}_{c}"] for c in cols])
    corr = np.broadcast_to(np.eye(len(cols)), (len(sd), len(cols), len(cols))).copy()
    for (a, b), (i, j) in zip(data.pairs, combinations(range(len(cols)), 2)):
        corr[:, i, j] = corr[:, j, i] = draws.get(f"rho_{kind}_{a}_{b}", np.zeros(len(sd)))
    return sd[:, :, None] * np.linalg.cholesky(corr)


def fixed_part(draws: dict[str, np.ndarray], data: JointData) -> np.ndarray:
    """The mean without group effects, per draw, row and column: (D, n, C)."""
    cols = data.columns
    mean = np.column_stack([draws[f"intercept_{c}"] for c in cols])[:, None, :] + np.zeros((1, len(data.y), 1))
    for j, v in enumerate(data.covariates):
        beta = np.column_stack([draws[f"beta_{v}_{c}"] for c in cols])
        mean = mean + data.x[None, :, j, None] * beta[:, None, :]
    return mean


def statistics(values: np.ndarray, data: JointData) -> dict[str, np.ndarray]:
    """Each column's within-group ICC (§9.4's: of the least-squares residuals on the covariates) and
    each pair's correlation of those residuals within rows, keyed "column_icc:<c>" and
    "row_correlation:<a>_<b>"; `values` (..., n, C)."""
    from ddpbayes.fitting.gaussian import within_icc

    design = np.column_stack([np.ones(len(data.y)), data.x])
    residual = values - design @ (np.linalg.pinv(design) @ values)
    out = {f"column_icc:{c}": within_icc(values[..., k], data) for k, c in enumerate(data.columns)}
    centred = residual - residual.mean(axis=-2, keepdims=True)
    sd = np.sqrt((centred**2).sum(axis=-2))
    for (a, b), (i, j) in zip(data.pairs, combinations(range(len(data.columns)), 2)):
        out[f"row_correlation:{a}_{b}"] = (centred[..., i] * centred[..., j]).sum(axis=-1) / (sd[..., i] * sd[..., j])
    return out


def replicate(mean: np.ndarray, l_group: np.ndarray | None, l_residual: np.ndarray, data: JointData,
              rng: np.random.Generator) -> np.ndarray:
    """One replicated table per draw (D, n, C): fresh u_g = L_group z_g unless None, and e_r = L_residual w_r
    (z, w standard normal; the independent template's L diagonal)."""
    draws, n, c = mean.shape
    values = mean + rng.standard_normal((draws, n, c)) @ l_residual.transpose(0, 2, 1)
    if l_group is not None:
        u = rng.standard_normal((draws, len(data.labels), c)) @ l_group.transpose(0, 2, 1)
        values = values + u[:, data.cluster_index]
    return values


def row_loglik(residual: np.ndarray, chol: np.ndarray) -> np.ndarray:
    """log MvNormal(residual_r | 0, L_d L_d^T) per draw and row: residual (D, n, C), chol (D, C, C)."""
    solved = np.linalg.solve(chol[:, None], residual[..., None])[..., 0]
    logdet = 2 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
    c = residual.shape[-1]
    return -0.5 * (solved**2).sum(axis=-1) - 0.5 * logdet[:, None] - 0.5 * c * np.log(2 * np.pi)


def dependence_checks(grouped: dict[str, np.ndarray], independent: dict[str, np.ndarray], u: np.ndarray,
                      data: JointData, reff: tuple[float, float], seed: int, max_draws: int = 400) -> dict:
    """The `checks` block (DESIGN §9.4b): each column's ICC and each pair's within-row correlation
    against replications under both templates, row-wise LOO of both, and whether the data support
    the dependence (some column's ICC out of the independent template's reach, p < 0.01, and LOO
    preferring the template by two standard errors)."""
    rng = np.random.default_rng(seed)
    draws = len(grouped[f"intercept_{data.columns[0]}"])
    pick = np.unique(np.linspace(0, draws - 1, min(max_draws, draws)).astype(int))
    check_memory(8 * 4 * draws * data.y.size, "the LOO log-likelihood tables", flag="--draws")
    mean_g, mean_i = fixed_part(grouped, data), fixed_part(independent, data)
    l_g, l_e = factor(grouped, data, "group"), factor(grouped, data, "residual")
    l_i = factor(independent, data, "residual")
    rep_g = statistics(replicate(mean_g[pick], l_g[pick], l_e[pick], data, rng), data)
    rep_i = statistics(replicate(mean_i[pick], None, l_i[pick], data, rng), data)
    observed = statistics(data.y, data)
    checks: dict = {"draws": int(len(pick)), "column_icc": {}, "row_correlation": {}}
    for key, value in observed.items():
        block, _, name = key.partition(":")
        checks[block][name] = ppc.compare(float(value), rep_g[key]) | {
            "independent": ppc.short(ppc.compare(float(value), rep_i[key]))}
    u = u.reshape(draws, len(data.labels), len(data.columns))
    ll_g = row_loglik(data.y[None] - mean_g - u[:, data.cluster_index], l_e)
    ll_i = row_loglik(data.y[None] - mean_i, l_i)
    checks["loo"] = ppc.compare_loo(ll_g, ll_i, np.ones(len(data.y)), reff)
    loo = checks["loo"]
    flagged = any(c["independent"]["p_value"] < ppc.FLAG_P for c in checks["column_icc"].values())
    checks["dependence_supported"] = bool(flagged and loo["elpd_diff"] > 2 * loo["se_diff"])
    return checks


MODEL_FILE = '''"""A gaussian dependence model on several columns, fitted by `ddpbayes fit` from {data} (DESIGN §9.4b).

{rows:,} rows of {outcome} in {clusters:,} groups of {cluster}{covariate_text}. The records are
cells: tuple k = r * {width} + c is row r's value of column c (the vector variable "y", row-major).
The template: y_r = mu + B^T x_r + u_g(r) + e_r, the group effects u_g ~ MvNormal(0, Sigma_group)
latent (non-centred: u_g = L_group z_g), e_r ~ MvNormal(0, Sigma_residual), x_r the covariates
standardised as in the fit: Cov(y_rc, y_r'c') = [same group] Sigma_group[c, c'] + [same row]
Sigma_residual[c, c']. Each column's domain: {domains}. Posterior means: {means}.

build(parameters="mean") fixes the parameters at their posterior means, "draw:K" at posterior
draw K (0 to {last_draw}, chains in order). The fit, its checks and the draws: {fit_name}; the
whole posterior (ArviZ InferenceData): {posterior_name}. `ddpbayes audit {model_name} ...`
audits it like any model file (the gaussian engine reads it exactly).
"""

from pathlib import Path

import pymc as pm

from ddpbayes import DependenceModel
from ddpbayes.fitting.fitted import read_gaussian_joint

FIT = Path(__file__).with_name("{fit_name}")


def build(parameters: str = "mean") -> DependenceModel:
    fit = read_gaussian_joint(FIT, parameters)
    with pm.Model() as m:
        z = pm.Normal("z", 0.0, 1.0, shape=fit.n_clusters * fit.width)  # the group effects, non-centred
        u = pm.math.dot(z.reshape((fit.n_clusters, fit.width)), fit.chol_group.T)
        pm.MvNormal("y", (fit.mean + u[fit.cluster_index]).ravel(), cov=fit.cells_residual_covariance(),
                    shape=fit.n * fit.width)
    return DependenceModel(m, tuples="y", domains=fit.cell_domains())
'''


def model_text(doc: dict) -> tuple[str, dict]:
    """The model file's text and its template-specific fields (`write.model_text`)."""
    data = doc["data"]
    covariates = data["covariates"]
    domains = ", ".join(f"{c} [{lo:g}, {hi:g}]" for c, (lo, hi) in zip(data["columns"], data["domains"]))
    return MODEL_FILE, {"clusters": data["clusters"], "cluster": ", ".join(data["cluster"]),
                        "outcome": ", ".join(data["columns"]), "width": len(data["columns"]), "domains": domains,
                        "covariate_text": f"; covariates {', '.join(covariates)}" if covariates else ""}
