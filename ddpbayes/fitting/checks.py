"""Does the data support the dependence? (DESIGN §9.2.) Posterior predictive checks of the
intra-cluster correlation and of the spread of cluster totals, under the fitted template (fresh
cluster effects u_c ~ Normal(0, sigma): the law the audited model gives the records) and under the
template without cluster effects; and PSIS-LOO (Vehtari, Gelman & Gabry 2017, via ArviZ) of the
two, leaving out one row at a time."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, log_expit, logsumexp

from ddpbayes.fitting.clustered import ClusteredData, fixed_effects
from ddpbayes.limits import check_memory

HDI = 0.94
CHUNK = 1 << 21  # cells (draws x patterns) simulated at once
FLAG_P = 0.01  # the independent template's p-value for the ICC below which the data show dependence


def icc(totals: np.ndarray, sizes: np.ndarray, squares: np.ndarray | None = None) -> np.ndarray:
    """The one-way ANOVA estimator of the intra-cluster correlation from the clusters' sums
    `totals` and sums of squares `squares` (last axis; sizes `sizes`; binary records: squares =
    totals, the default): (MSB - MSW) / (MSB + (n0 - 1) MSW), n0 = (N - sum n_i^2 / N) / (k - 1)
    for unequal sizes. 0 when no row differs from another."""
    totals = np.asarray(totals, dtype=float)
    squares = totals if squares is None else np.asarray(squares, dtype=float)
    big_n, k = sizes.sum(), len(sizes)
    rate = totals / sizes
    mean = totals.sum(axis=-1, keepdims=True) / big_n
    msb = (sizes * (rate - mean) ** 2).sum(axis=-1) / (k - 1)
    msw = (squares - totals**2 / sizes).sum(axis=-1) / (big_n - k)
    n0 = (big_n - (sizes**2).sum() / big_n) / (k - 1)
    denominator = msb + (n0 - 1) * msw
    return np.divide(msb - msw, denominator, out=np.zeros_like(msb), where=denominator > 0)


def total_sd(totals: np.ndarray) -> np.ndarray:
    """The spread of the cluster totals: their standard deviation across clusters."""
    return np.asarray(totals, dtype=float).std(axis=-1)


def replicated_totals(eta: np.ndarray, sigma: np.ndarray | None, data: ClusteredData,
                      rng: np.random.Generator) -> np.ndarray:
    """Cluster totals of one replicated table per draw: `eta` (D, P) the fixed part of the log-odds,
    fresh effects u_c ~ Normal(0, sigma_d) unless `sigma` is None (no cluster effects)."""
    draws, patterns = eta.shape
    k = len(data.labels)
    onehot = sp.csr_matrix((np.ones(patterns), (np.arange(patterns), data.pattern_cluster)), shape=(patterns, k))
    out = np.empty((draws, k))
    step = max(1, CHUNK // max(patterns, 1))
    for start in range(0, draws, step):
        part = eta[start:start + step]
        if sigma is not None:
            u = rng.normal(0.0, 1.0, (len(part), k)) * sigma[start:start + step, None]
            part = part + u[:, data.pattern_cluster]
        counts = rng.binomial(data.trials[None, :], expit(part))
        out[start:start + step] = (onehot.T @ counts.T).T
    return out


def compare(observed: float, replicated: np.ndarray) -> dict:
    """A statistic of the data against its replications: their mean, 94% HDI and the posterior
    predictive p-value P(T_rep >= T_obs)."""
    import arviz as az

    low, high = az.hdi(replicated, hdi_prob=HDI)
    return {"data": float(observed), "replicated": {"mean": float(replicated.mean()), "hdi": [float(low), float(high)]},
            "p_value": float((replicated >= observed).mean())}


def pointwise_loglik(eta: np.ndarray, data: ClusteredData) -> tuple[np.ndarray, np.ndarray]:
    """log p(y_r | draw) for each distinct (pattern, y) (D, 2P) and how many rows have it (2P,):
    rows that share a pattern and an outcome have the same pointwise log-likelihood."""
    ll = np.concatenate([log_expit(eta), log_expit(-eta)], axis=1)
    weights = np.concatenate([data.positives, data.trials - data.positives]).astype(float)
    keep = weights > 0
    return ll[:, keep], weights[keep]


def psis_loo(ll: np.ndarray, weights: np.ndarray, reff: float) -> dict:
    """PSIS-LOO from the pointwise log-likelihood of distinct rows `ll` (D, U), each standing for
    `weights` rows: elpd = sum_r log sum_d w_rd p(y_r | d) with Pareto-smoothed weights w
    (ArviZ's `psislw`), its standard error sqrt(N var_r elpd_r), and the Pareto k diagnostics."""
    import arviz as az

    log_w, k_hat = az.psislw(-ll.T, reff=reff)
    elpd_i = logsumexp(log_w + ll.T, axis=1)
    k_hat = np.asarray(k_hat)
    return {"pointwise": elpd_i, "elpd": float(weights @ elpd_i), "se": _sum_se(elpd_i, weights),
            "pareto_k_max": float(k_hat.max()), "pareto_k_over_0_7": int(weights[k_hat > 0.7].sum())}


def _sum_se(values: np.ndarray, weights: np.ndarray) -> float:
    """The standard error of a sum over rows of pointwise values: sqrt(N var) over the N rows, as ArviZ's."""
    mean = weights @ values / weights.sum()
    return float(np.sqrt(weights @ (values - mean) ** 2))


def dependence_checks(clustered: dict[str, np.ndarray], independent: dict[str, np.ndarray], u: np.ndarray,
                      data: ClusteredData, reff: tuple[float, float], seed: int, max_draws: int = 1000) -> dict:
    """The `checks` block: ICC and the spread of cluster totals against replications under both
    templates (at most `max_draws` draws each, evenly thinned), LOO of both, and whether the data
    support the dependence (the independent template rarely reaches the data's ICC, p < 0.01, and
    LOO prefers the clustered template by more than two standard errors)."""
    rng = np.random.default_rng(seed)
    draws = len(clustered["intercept"])
    pick = np.unique(np.linspace(0, draws - 1, min(max_draws, draws)).astype(int))
    eta_c, eta_i = fixed_effects(clustered, data), fixed_effects(independent, data)
    check_memory(8 * 2 * (eta_c.size + eta_i.size), "the LOO log-likelihood tables", flag="--max-rows")
    rep_c = replicated_totals(eta_c[pick], clustered["sigma"][pick], data, rng)
    rep_i = replicated_totals(eta_i[pick], None, data, rng)
    sizes, totals = data.sizes, data.totals
    checks = {"draws": int(len(pick))}
    for name, statistic in (("icc", lambda t: icc(t, sizes)), ("cluster_total_sd", total_sd)):
        observed = float(statistic(totals))
        checks[name] = compare(observed, statistic(rep_c)) | {"independent": short(compare(observed, statistic(rep_i)))}
    checks["loo"] = loo_comparison(eta_c + u[:, data.pattern_cluster], eta_i, data, reff)
    checks["dependence_supported"] = supported(checks)
    return checks


def supported(checks: dict, statistic: str = "icc") -> bool:
    """The template without the dependence rarely reaches the data's `statistic` (the ICC; p <
    FLAG_P) and LOO prefers the template with it by more than two standard errors."""
    loo = checks["loo"]
    return bool(checks[statistic]["independent"]["p_value"] < FLAG_P and loo["elpd_diff"] > 2 * loo["se_diff"])


def short(block: dict) -> dict:
    """A comparison without the data's value (given once, beside)."""
    return {"replicated": block["replicated"], "p_value": block["p_value"]}


def loo_comparison(eta_c: np.ndarray, eta_i: np.ndarray, data: ClusteredData, reff: tuple[float, float]) -> dict:
    """LOO of the clustered template (its fitted cluster effects in `eta_c`) against the template
    without them; elpd_diff > 0 favours the clustered one, se_diff from the pointwise differences."""
    ll_c, weights = pointwise_loglik(eta_c, data)
    ll_i, _ = pointwise_loglik(eta_i, data)
    return compare_loo(ll_c, ll_i, weights, reff)


def compare_loo(ll_c: np.ndarray, ll_i: np.ndarray, weights: np.ndarray, reff: tuple[float, float]) -> dict:
    """PSIS-LOO of the template with effects (pointwise log-likelihood `ll_c`, (D, U), each distinct
    row standing for `weights` rows) against the template without (`ll_i`)."""
    c, i = psis_loo(ll_c, weights, reff[0]), psis_loo(ll_i, weights, reff[1])
    diff = c["pointwise"] - i["pointwise"]
    return {"elpd": c["elpd"], "se": c["se"], "elpd_independent": i["elpd"], "se_independent": i["se"],
            "elpd_diff": c["elpd"] - i["elpd"], "se_diff": _sum_se(diff, weights),
            "pareto_k_max": c["pareto_k_max"], "pareto_k_over_0_7": c["pareto_k_over_0_7"]}


def spatial_checks(spatial: dict[str, np.ndarray], plain: dict[str, np.ndarray], u: np.ndarray, u_plain: np.ndarray,
                   data: ClusteredData, reff: tuple[float, float], seed: int, max_draws: int = 1000) -> dict:
    """A spatial fit's checks (DESIGN §9.8): Moran's I of the clusters' residual rates over their
    nearest neighbours against replications with the field (its posterior draws, fresh u_c) and
    under the template without it (fresh u_c), LOO against the template without the field, and
    whether the data support the field (p < FLAG_P without it: row-wise LOO, reported beside,
    cannot reward a field whose clusters' other rows already pin their effects down)."""
    from ddpbayes.fitting.spatial import morans_i, neighbour_weights

    rng = np.random.default_rng([seed, 1])
    draws = len(spatial["intercept"])
    pick = np.unique(np.linspace(0, draws - 1, min(max_draws, draws)).astype(int))
    eta_s, eta_p = fixed_effects(spatial, data), fixed_effects(plain, data)
    weights = neighbour_weights(data.spatial.coords)
    expected = _expected_totals(eta_p, data)

    def moran(totals: np.ndarray) -> np.ndarray:
        return morans_i((totals - expected) / data.sizes, weights)

    observed = float(moran(data.totals))
    with_field = compare(observed, moran(replicated_totals(eta_s[pick], spatial["sigma"][pick], data, rng)))
    without = compare(observed, moran(replicated_totals(eta_p[pick], plain["sigma"][pick], data, rng)))
    ll_s, weights_rows = pointwise_loglik(eta_s + u[:, data.pattern_cluster], data)
    ll_p, _ = pointwise_loglik(eta_p + u_plain[:, data.pattern_cluster], data)
    loo = compare_loo(ll_s, ll_p, weights_rows, reff)
    loo = {"elpd": loo["elpd"], "se": loo["se"], "elpd_without_field": loo["elpd_independent"],
           "se_without_field": loo["se_independent"], "elpd_diff": loo["elpd_diff"], "se_diff": loo["se_diff"]}
    return {"morans_i": with_field | {"without_field": short(without)}, "loo_spatial": loo,
            "spatial_supported": bool(without["p_value"] < FLAG_P)}


def _expected_totals(eta: np.ndarray, data: ClusteredData) -> np.ndarray:
    """Each cluster's expected positives from the covariates alone: the posterior mean of
    trials x logit^-1(intercept + x . beta) summed over its patterns (a fixed vector: the residual
    rates of the data and of every replication subtract the same)."""
    per_pattern = data.trials * expit(eta).mean(axis=0)
    return np.bincount(data.pattern_cluster, weights=per_pattern, minlength=len(data.labels))
