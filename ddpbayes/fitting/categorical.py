"""Categorical outcomes of the `clustered` template (DESIGN §9.9): K > 2 levels in clusters.

The levels in sorted order (numbers numerically, text as text), level 0 the reference; j = 1..K-1
the others. Baseline-category (multinomial) logit, non-centred:

    intercept_j ~ Normal(0, 2.5),  beta_{c,j} ~ Normal(0, 2.5)  (covariate c standardised),
    sigma_j ~ Exponential(1),  z_{g,j} ~ Normal(0, 1),  u_{g,j} = sigma_j z_{g,j},
    P(y_r = j) = softmax_j(0, eta_{r,1}, ..., eta_{r,K-1}),  eta_{r,j} = intercept_j + x_r . beta_j + u_{g(r),j},

u_{g,j} independent across j. `ordered=True` (--ordered): the cumulative logit with one effect per cluster,

    cut_1 < ... < cut_{K-1} ~ Normal(0, 2.5) (restricted to the ordered ones), beta_c ~ Normal(0, 2.5),
    sigma ~ Exponential(1), u_g = sigma z_g,  P(y_r <= k) = logit^-1(cut_{k+1} - x_r . beta - u_{g(r)}).

Rows sharing a (cluster, covariates) pattern are one Multinomial observation of their level counts (the
same posterior as the Categorical rows). `independent=True` drops the cluster effects (LOO's and the
checks' reference). A binary 0/1 outcome is the binary template's (`clustered`, DESIGN §9.1)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.special import log_expit, log_softmax

from ddpbayes.errors import InputError
from ddpbayes.fitting import checks as ppc
from ddpbayes.fitting import clustered
from ddpbayes.fitting.clustered import PRIOR_SD, SIGMA_RATE, ClusteredData
from ddpbayes.limits import check_memory

MAX_LEVELS = 20  # levels of a categorical outcome at most (each adds a cluster effect per cluster)
BINARY = ({"0", "1"}, {"False", "True"})  # outcomes (as text) that are the binary template's


@dataclass(frozen=True)
class CategoricalData:
    """A table with a categorical outcome as the template sees it: `y` each row's level index into
    `levels` (sorted, the first the reference), clusters in order of first appearance, covariates
    standardised, and the distinct (cluster, covariates) patterns with their level counts `counts` (P, K)."""

    outcome: str
    cluster_columns: tuple[str, ...]
    covariates: tuple[str, ...]
    levels: tuple[str, ...]
    ordered: bool
    y: np.ndarray  # (n,) level indices
    cluster_index: np.ndarray  # (n,)
    labels: tuple[str, ...]
    x: np.ndarray  # (n, p) standardised
    center: np.ndarray
    scale: np.ndarray
    pattern_cluster: np.ndarray  # (P,)
    pattern_x: np.ndarray  # (P, p)
    counts: np.ndarray  # (P, K)
    spatial: None = None  # --coords is refused for K > 2 levels

    @property
    def trials(self) -> np.ndarray:
        return self.counts.sum(axis=1)

    @property
    def sizes(self) -> np.ndarray:
        """Rows per cluster."""
        return np.bincount(self.cluster_index, minlength=len(self.labels))

    @property
    def totals(self) -> np.ndarray:
        """Rows of each level per cluster (k, K)."""
        return cluster_totals(self.counts, self)

    @property
    def others(self) -> tuple[str, ...]:
        """The non-reference levels (the multinomial logit's j = 1..K-1)."""
        return self.levels[1:]

    def parameter_names(self, independent: bool = False) -> list[str]:
        """The template's parameters, as the JSON names them."""
        if self.ordered:
            return [*(f"cut_{k}" for k in range(1, len(self.levels))), *(f"beta_{c}" for c in self.covariates),
                    *([] if independent else ["sigma"])]
        return [*(f"intercept_{v}" for v in self.others),
                *(f"beta_{c}_{v}" for c in self.covariates for v in self.others),
                *([] if independent else [f"sigma_{v}" for v in self.others])]

    def variables(self, independent: bool = False) -> list[str]:
        """The PyMC variables whose convergence is checked (every scalar of each)."""
        first = "cut" if self.ordered else "intercept"
        return [first, *(["beta"] if self.covariates else []), *([] if independent else ["sigma", "u"])]

    def hyperparameters(self, independent: bool = False) -> list[str]:
        """The variables whose ESS gives LOO's r_eff."""
        return ["cut" if self.ordered else "intercept", *([] if independent else ["sigma"])]

    def element_names(self, variable: str) -> list[str]:
        """Each scalar of a PyMC variable, as the diagnostics name it (row-major, as ArviZ flattens)."""
        if self.ordered:
            named = {"cut": [f"cut_{k}" for k in range(1, len(self.levels))],
                     "beta": [f"beta_{c}" for c in self.covariates], "u": [f"u[{g}]" for g in self.labels]}
        else:
            named = {"intercept": [f"intercept_{v}" for v in self.others], "sigma": [f"sigma_{v}" for v in self.others],
                     "beta": [f"beta_{c}_{v}" for c in self.covariates for v in self.others],
                     "u": [f"u[{g},{v}]" for g in self.labels for v in self.others]}
        return named.get(variable, [variable])

    def cells_per_draw(self) -> int:
        """Numbers kept per posterior draw: effects, parameters, the checks' pattern tables."""
        k, levels = len(self.labels), len(self.levels)
        return (2 * k + len(self.covariates) + 2) * levels + 8 * len(self.counts) * levels

    def describe(self) -> dict:
        """The `data` block's template part."""
        return {"outcome": self.outcome, "levels": list(self.levels), "reference": self.levels[0],
                "link": "cumulative logit" if self.ordered else "baseline-category logit",
                "cluster": list(self.cluster_columns), "clusters": len(self.labels),
                "covariates": list(self.covariates),
                "covariate_mean": self.center.tolist(), "covariate_sd": self.scale.tolist()}

    def table(self) -> dict:
        """What the model file needs of the table."""
        return {"clusters": list(self.labels), "cluster_index": self.cluster_index.tolist(),
                "x": self.x.ravel().tolist()}

    def summary(self) -> str:
        """The progress line after reading."""
        kind = "ordered" if self.ordered else "reference"
        return (f"{len(self.y):,} rows in {len(self.labels):,} clusters; outcome {self.outcome}: {len(self.levels)} "
                f"levels {', '.join(self.levels)} ({kind} {self.levels[0]} first)")


def read(path: str | Path, options: dict, max_rows: int) -> ClusteredData | CategoricalData:
    """The clustered template's view of the table at `path`: a binary 0/1 outcome is `clustered.read`'s;
    K > 2 levels (text or integers) this module's; `options["ordered"]` asks for the cumulative logit."""
    from ddpbayes.fitting.table import read_table

    cluster, outcome, covariates = options["cluster"], options["outcome"], options["covariates"]
    if not cluster or not outcome:
        raise InputError("the clustered template needs --cluster COL and --outcome COL")
    table = read_table(path, [*cluster, outcome], [c for c in covariates if c not in cluster], max_rows)
    levels, y = outcome_levels(table[outcome], outcome, path)
    ordered = bool(options.get("ordered"))
    if any(set(levels) <= binary for binary in BINARY):  # --ordered too: with two levels the cumulative logit is
        return clustered.read(path, options, max_rows)   # the binary logit, its cutpoint -intercept (DESIGN §9.9)
    if ordered and len(levels) == 2:
        raise InputError(f"column '{outcome}' of '{path}' has two levels ({', '.join(levels)}): with two levels the "
                         "ordered (cumulative) logit is the binary logit (its cutpoint is minus the intercept); code "
                         f"them as 0/1, {levels[0]} as 0, and fit the clustered template")
    if len(levels) < 3:
        raise InputError(f"column '{outcome}' of '{path}' has {len(levels)} level(s) ({', '.join(levels)}): the "
                         f"clustered template takes a 0/1 outcome{'' if ordered else ' (code two levels as 0/1)'} or "
                         f"one of 3 to {MAX_LEVELS} levels")
    if options.get("coords"):
        raise InputError(f"--coords is not built for a categorical outcome ({len(levels)} levels of '{outcome}'): the "
                         "spatial field is one effect per cluster on one log-odds scale, and this fit has a scale per "
                         "level (a field per level is not built); fit the cluster effects alone, or code the outcome "
                         "as 0/1")
    return prepare(table, cluster, outcome, covariates, levels, y, ordered, path)


def outcome_levels(values, column: str, path) -> tuple[tuple[str, ...], np.ndarray]:
    """The outcome's levels, sorted (integers numerically, else as text), and each row's level index;
    a fractional number or more than MAX_LEVELS levels is refused."""
    import pandas as pd

    text = values.astype(str).str.strip()
    numbers = pd.to_numeric(text, errors="coerce")
    if numbers.notna().all():
        whole = np.mod(numbers.to_numpy(dtype=float), 1) == 0
        if not whole.all():
            r = int(np.flatnonzero(~whole)[0])
            raise InputError(f"column '{column}' of '{path}' holds a fractional number ({text.iloc[r]}, data row "
                             f"{r + 1}): the clustered template's outcome is 0/1 or categorical (text or integers)")
        codes = numbers.to_numpy(dtype=float).astype(np.int64)
        distinct = np.unique(codes)
        names, y = tuple(str(v) for v in distinct), np.searchsorted(distinct, codes)
    else:
        distinct = np.unique(text.to_numpy(dtype=str))
        names, y = tuple(str(v) for v in distinct), np.searchsorted(distinct, text.to_numpy(dtype=str))
    if len(names) > MAX_LEVELS:
        raise InputError(f"column '{column}' of '{path}' has {len(names):,} levels, over {MAX_LEVELS}: a categorical "
                         f"outcome takes at most {MAX_LEVELS} (merge rare levels, or is it a number?)")
    return names, y.astype(np.int64)


def prepare(table, cluster, outcome: str, covariates, levels: tuple[str, ...], y: np.ndarray, ordered: bool,
            path) -> CategoricalData:
    """The template's view of `table`, refusing what it cannot fit (clusters as `clustered.check_clusters`)."""
    index, labels = clustered.group_index(table, cluster)
    clustered.check_clusters(index, labels, cluster, path)
    x, center, scale = clustered.standardised(table, covariates, path)
    rows = np.column_stack([index.astype(float), x])
    _, first, pattern = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    pattern = pattern.ravel()
    counts = np.zeros((len(first), len(levels)), dtype=np.int64)
    np.add.at(counts, (pattern, y), 1)
    return CategoricalData(outcome, tuple(cluster), tuple(covariates), levels, ordered, y, index.astype(np.int64),
                           tuple(str(v) for v in labels), x, center, scale, index[first].astype(np.int64), x[first],
                           counts)


def cluster_totals(counts: np.ndarray, data: CategoricalData) -> np.ndarray:
    """Per-pattern level counts (..., P, K) summed by cluster: (..., k, K)."""
    k = len(data.labels)
    onehot = sp.csr_matrix((np.ones(len(data.pattern_cluster)), (np.arange(len(data.pattern_cluster)),
                                                                  data.pattern_cluster)), shape=(len(data.counts), k))
    moved = np.moveaxis(counts, -2, 0)  # (P, ..., K)
    out = onehot.T @ moved.reshape(len(data.counts), -1)
    return np.moveaxis(np.asarray(out).reshape(k, *moved.shape[1:]), 0, -2)


def pymc_model(data, independent: bool = False):
    """The template's PyMC model: the binary one for a 0/1 outcome, else the multinomial or cumulative logit."""
    if not isinstance(data, CategoricalData):
        return clustered.pymc_model(data, independent)
    import pymc as pm

    coords = {"covariate": list(data.covariates), "cluster": list(data.labels), "level": list(data.others)}
    with pm.Model(coords=coords) as model:
        if data.ordered:
            _ordered_likelihood(data, independent)
        else:
            _multinomial_likelihood(data, independent)
    return model


def _multinomial_likelihood(data: CategoricalData, independent: bool) -> None:
    import pymc as pm
    import pytensor.tensor as pt

    eta = pm.Normal("intercept", 0.0, PRIOR_SD, dims="level")[None, :] + pt.zeros((len(data.counts), 1))
    if data.covariates:
        eta = eta + pt.dot(data.pattern_x, pm.Normal("beta", 0.0, PRIOR_SD, dims=("covariate", "level")))
    if not independent:
        sigma = pm.Exponential("sigma", SIGMA_RATE, dims="level")
        z = pm.Normal("z", 0.0, 1.0, dims=("cluster", "level"))
        eta = eta + pm.Deterministic("u", z * sigma[None, :], dims=("cluster", "level"))[data.pattern_cluster]
    logits = pt.concatenate([pt.zeros((len(data.counts), 1)), eta], axis=1)
    pm.Multinomial("counts", n=data.trials, p=pt.special.softmax(logits, axis=-1), observed=data.counts)


def _ordered_likelihood(data: CategoricalData, independent: bool) -> None:
    import pymc as pm
    import pytensor.tensor as pt

    k = len(data.levels) - 1
    cut = pm.Normal("cut", 0.0, PRIOR_SD, shape=k, transform=pm.distributions.transforms.ordered,
                    initval=np.linspace(-1.0, 1.0, k))
    eta = pt.zeros(len(data.counts))
    if data.covariates:
        eta = eta + pt.dot(data.pattern_x, pm.Normal("beta", 0.0, PRIOR_SD, dims="covariate"))
    if not independent:
        sigma = pm.Exponential("sigma", SIGMA_RATE)
        z = pm.Normal("z", 0.0, 1.0, dims="cluster")
        eta = eta + pm.Deterministic("u", sigma * z, dims="cluster")[data.pattern_cluster]
    pm.OrderedMultinomial("counts", eta=eta, cutpoints=cut, n=data.trials, observed=data.counts)


def hyperparameter_draws(posterior, data, independent: bool = False) -> dict[str, np.ndarray]:
    """Each named parameter's draws, chains flattened (chain-major), keyed as the JSON names them."""
    if not isinstance(data, CategoricalData):
        return clustered.hyperparameter_draws(posterior, data, independent)
    names = data.parameter_names(independent)
    flat = {}
    for variable in data.variables(independent):
        if variable != "u":
            values = posterior[variable].values
            flat |= dict(zip(data.element_names(variable), values.reshape(-1, values[0, 0].size).T))
    return {name: np.asarray(flat[name], dtype=float) for name in names}


def probabilities(draws: dict[str, np.ndarray], data: CategoricalData, u: np.ndarray | None) -> np.ndarray:
    """log P(y = level) per draw and pattern (D, P, K), the cluster effects `u` (D, k, K-1) multinomial or
    (D, k) ordered added (None: without them)."""
    x = data.pattern_x
    if data.ordered:
        eta = sum(draws[f"beta_{c}"][:, None] * x[None, :, j] for j, c in enumerate(data.covariates)) + \
            np.zeros((1, len(x)))
        if u is not None:
            eta = eta + u[:, data.pattern_cluster]
        cuts = np.stack([draws[f"cut_{k}"] for k in range(1, len(data.levels))], axis=1)  # (D, K-1)
        return ordered_log_p(cuts[:, None, :] - eta[:, :, None])
    eta = np.stack([draws[f"intercept_{v}"][:, None] + sum(draws[f"beta_{c}_{v}"][:, None] * x[None, :, j]
                                                             for j, c in enumerate(data.covariates))
                    for v in data.others], axis=-1) + np.zeros((1, len(x), 1))
    if u is not None:
        eta = eta + u[:, data.pattern_cluster, :]
    return log_softmax(np.concatenate([np.zeros((*eta.shape[:2], 1)), eta], axis=-1), axis=-1)


def ordered_log_p(a: np.ndarray) -> np.ndarray:
    """log P(y = k) of the cumulative logit from a = cut - eta (..., K-1) increasing: level 0 log sigma(a_1),
    level k log(sigma(a_{k+1}) - sigma(a_k)) = log sigma(a_{k+1}) + log sigma(-a_k) + log(1 - e^(a_k - a_{k+1}))
    (no cancellation in either tail), the last log sigma(-a_{K-1})."""
    with np.errstate(divide="ignore"):
        middle = log_expit(a[..., 1:]) + log_expit(-a[..., :-1]) + np.log(-np.expm1(a[..., :-1] - a[..., 1:]))
    return np.concatenate([log_expit(a[..., :1]), middle, log_expit(-a[..., -1:])], axis=-1)


def _fresh_effects(draws: dict[str, np.ndarray], data: CategoricalData, rng: np.random.Generator) -> np.ndarray:
    """New cluster effects per draw: u ~ Normal(0, sigma) (D, k) ordered, (D, k, K-1) independent across levels."""
    count, k = len(next(iter(draws.values()))), len(data.labels)
    if data.ordered:
        return rng.normal(0.0, 1.0, (count, k)) * draws["sigma"][:, None]
    sigma = np.stack([draws[f"sigma_{v}"] for v in data.others], axis=1)
    return rng.normal(0.0, 1.0, (count, k, len(data.others))) * sigma[:, None, :]


def replicated_totals(draws: dict[str, np.ndarray], data: CategoricalData, rng: np.random.Generator,
                      effects: bool) -> np.ndarray:
    """Each level's cluster totals of one replicated table per draw (D, k, K): fresh cluster effects when
    `effects`, none otherwise."""
    u = _fresh_effects(draws, data, rng) if effects else None
    p = np.exp(probabilities(draws, data, u))
    p /= p.sum(axis=-1, keepdims=True)
    counts = rng.multinomial(np.broadcast_to(data.trials, p.shape[:2]), p)
    return cluster_totals(counts, data)


def dependence_checks(draws_c: dict[str, np.ndarray], draws_i: dict[str, np.ndarray], u: np.ndarray | None, data,
                      reff: tuple[float, float], seed: int, max_draws: int = 1000) -> dict:
    """The `checks` block: for each level its indicator's intra-cluster correlation and the spread of its
    cluster totals against replications with fresh cluster effects and without them (at most `max_draws`
    draws each, evenly thinned); LOO of both templates; the dependence supported when some level's ICC is
    rarely reached without the effects (p < FLAG_P / K, Bonferroni over the levels) and LOO prefers the
    effects by more than two standard errors. A binary outcome's are `checks.dependence_checks`."""
    if not isinstance(data, CategoricalData):
        return ppc.dependence_checks(draws_c, draws_i, u, data, reff, seed, max_draws)
    rng = np.random.default_rng(seed)
    count = len(next(iter(draws_c.values())))
    pick = np.unique(np.linspace(0, count - 1, min(max_draws, count)).astype(int))
    check_memory(8 * 4 * count * data.counts.size, "the LOO log-likelihood tables", flag="--draws")
    thin = {name: v[pick] for name, v in draws_c.items()}
    thin_i = {name: v[pick] for name, v in draws_i.items()}
    rep_c, rep_i = replicated_totals(thin, data, rng, True), replicated_totals(thin_i, data, rng, False)
    sizes, totals = data.sizes, data.totals
    per_level = {}
    for j, level in enumerate(data.levels):
        block = {}
        for name, statistic in (("icc", lambda t: ppc.icc(t, sizes)), ("cluster_total_sd", ppc.total_sd)):
            observed = float(statistic(totals[:, j]))
            block[name] = ppc.compare(observed, statistic(rep_c[..., j])) | {
                "independent": ppc.short(ppc.compare(observed, statistic(rep_i[..., j])))}
        per_level[level] = block
    checks = {"draws": int(len(pick)), "levels": per_level}
    checks["loo"] = _loo(draws_c, draws_i, u, data, reff)
    least = min(b["icc"]["independent"]["p_value"] for b in per_level.values())
    loo = checks["loo"]
    checks["dependence_supported"] = bool(least < ppc.FLAG_P / len(data.levels)
                                          and loo["elpd_diff"] > 2 * loo["se_diff"])
    return checks


def _loo(draws_c: dict, draws_i: dict, u: np.ndarray, data: CategoricalData, reff: tuple[float, float]) -> dict:
    """PSIS-LOO of the template with its fitted cluster effects against the template without, one row at a
    time (rows sharing a pattern and a level share their pointwise log-likelihood)."""
    weights = data.counts.ravel().astype(float)
    keep = weights > 0
    count = len(next(iter(draws_c.values())))
    ll_c = probabilities(draws_c, data, u).reshape(count, -1)[:, keep]
    ll_i = probabilities(draws_i, data, None).reshape(count, -1)[:, keep]
    return ppc.compare_loo(ll_c, ll_i, weights[keep], reff)


def cluster_effects(idata, data) -> np.ndarray | None:
    """The posterior's cluster effects, chains flattened: (D, k) or (D, k, K-1)."""
    if "u" not in idata.posterior:
        return None
    values = idata.posterior["u"].values
    return values.reshape(-1, *values.shape[2:])


MODEL_FILE = '''"""A clustered dependence model with a categorical outcome, fitted by `ddpbayes fit` from {data}
(DESIGN §9.9).

{rows:,} records (tuple k is data row k: the vector variable "y", its value the index of the
row's level in {levels}; {reference} is level 0, the reference) in {clusters:,} clusters of
{cluster}; outcome {outcome}{covariate_text}. The template: the baseline-category logit,
P(y_r = j) = softmax_j(0, eta_r1, ..., eta_r{last_level}), eta_rj = intercept_j + x_r . beta_j + u_jc(r),
the cluster effects u_jc ~ Normal(0, sigma_j) latent (the vector "u_j" for level j), independent
across levels, x_r the covariates standardised as in the fit. Posterior means: {means}.

build(parameters="mean") fixes the parameters at their posterior means, "draw:K" at posterior
draw K (0 to {last_draw}, chains in order). The fit, its checks and the draws: {fit_name}; the
whole posterior (ArviZ InferenceData): {posterior_name}. `ddpbayes audit {model_name} ...`
audits it like any model file (a linear query weighs each row's level index).
"""

from pathlib import Path

import pymc as pm

from ddpbayes import DependenceModel
from ddpbayes.fitting.fitted import level_probabilities, read_categorical

FIT = Path(__file__).with_name("{fit_name}")


def build(parameters: str = "mean") -> DependenceModel:
    fit = read_categorical(FIT, parameters)
    with pm.Model() as m:
        u = [pm.Normal(f"u_{{j}}", 0.0, fit.sigma[j - 1], shape=fit.n_clusters) for j in range(1, fit.k)]
        eta = [fit.fixed[:, j - 1] + u[j - 1][fit.cluster_index] for j in range(1, fit.k)]
        pm.Categorical("y", p=level_probabilities(eta, ordered=False), shape=fit.n)
    return DependenceModel(m, tuples="y")
'''

ORDERED_MODEL_FILE = '''"""A clustered dependence model with an ordered outcome, fitted by `ddpbayes fit` from {data}
(DESIGN §9.9).

{rows:,} records (tuple k is data row k: the vector variable "y", its value the index of the
row's level in {levels}, in their order) in {clusters:,} clusters of {cluster}; outcome
{outcome}{covariate_text}. The template: the cumulative logit, P(y_r <= k) = logit^-1(cut_(k+1) -
x_r . beta - u_c(r)), the cluster effects u_c ~ Normal(0, sigma) latent, x_r the covariates
standardised as in the fit. Posterior means: {means}.

build(parameters="mean") fixes the parameters at their posterior means, "draw:K" at posterior
draw K (0 to {last_draw}, chains in order). The fit, its checks and the draws: {fit_name}; the
whole posterior (ArviZ InferenceData): {posterior_name}. `ddpbayes audit {model_name} ...`
audits it like any model file (a linear query weighs each row's level index: a sum of scores).
"""

from pathlib import Path

import pymc as pm

from ddpbayes import DependenceModel
from ddpbayes.fitting.fitted import level_probabilities, read_categorical

FIT = Path(__file__).with_name("{fit_name}")


def build(parameters: str = "mean") -> DependenceModel:
    fit = read_categorical(FIT, parameters)
    with pm.Model() as m:
        u = pm.Normal("u", 0.0, fit.sigma[0], shape=fit.n_clusters)
        eta = fit.fixed[:, 0] + u[fit.cluster_index]
        pm.Categorical("y", p=level_probabilities([c - eta for c in fit.cut], ordered=True), shape=fit.n)
    return DependenceModel(m, tuples="y")
'''


def model_file(doc: dict) -> tuple[str, dict]:
    """The model file's template text for the categorical fit `doc` and its own fields."""
    data = doc["data"]
    covariates = data["covariates"]
    levels = data["levels"]
    fields = {"clusters": data["clusters"], "cluster": ", ".join(data["cluster"]), "outcome": data["outcome"],
              "covariate_text": f"; covariates {', '.join(covariates)}" if covariates else "",
              "levels": "(" + ", ".join(levels) + ")", "reference": levels[0], "last_level": len(levels) - 1}
    return (ORDERED_MODEL_FILE if data["link"] == "cumulative logit" else MODEL_FILE), fields
