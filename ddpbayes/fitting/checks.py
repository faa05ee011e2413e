"""Does the data support the dependence? (DESIGN §9.2.) Posterior predictive checks of the
intra-cluster correlation and of the spread of cluster totals, under the fitted template (fresh
cluster effects u_c ~ Normal(0, sigma): the law the audited model gives the records) and under the
template without cluster effects; and PSIS-LOO (Vehtari, Gelman & Gabry 2017, via ArviZ) of the
two, leaving out one row at a time."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, log_expit, logsumexp

from ddpbayes.fitting.clustered import ClusteredData, fixed_effects, iid_sd
from ddpbayes.limits import check_memory

HDI = 0.94
CHUNK = 1 << 21  # cells (draws x patterns, or x quadrature nodes) computed at once
NODES = 32  # adaptive Gauss-Hermite nodes of a cluster's likelihood integrated over its latent effect u_c
K_RELIABLE = 0.7  # Pareto k-hat above which a PSIS term is not to be trusted (Vehtari et al. 2024)
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
            "pareto_k_max": float(k_hat.max()), "pareto_k_over_0_7": int(weights[k_hat > K_RELIABLE].sum())}


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
    rep_c = replicated_totals(eta_c[pick], iid_sd(clustered)[pick], data, rng)
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
    under the template without it (fresh u_c), LOO against the template without the field, row by
    row and cluster by cluster, and whether the data support the field (p < FLAG_P without it:
    row-wise LOO cannot reward a field whose clusters' other rows already pin their effects down;
    leave-one-cluster-out LOO is the comparison that speaks to it, reported beside with its k-hats)."""
    from ddpbayes.fitting.spatial import morans_i, neighbour_weights

    rng_field, rng_plain = (np.random.default_rng([seed, stream]) for stream in (1, 2))  # one stream per fit
    draws = len(spatial["intercept"])
    pick = np.unique(np.linspace(0, draws - 1, min(max_draws, draws)).astype(int))
    eta_s, eta_p = fixed_effects(spatial, data), fixed_effects(plain, data)
    weights = neighbour_weights(data.spatial.coords)
    expected = _expected_totals(eta_p, data)

    def moran(totals: np.ndarray) -> np.ndarray:
        return morans_i((totals - expected) / data.sizes, weights)

    observed = float(moran(data.totals))
    with_field = compare(observed, moran(replicated_totals(eta_s[pick], spatial["sigma_iid"][pick], data,
                                                           rng_field)))
    without = compare(observed, moran(replicated_totals(eta_p[pick], plain["sigma"][pick], data, rng_plain)))
    ll_s, weights_rows = pointwise_loglik(eta_s + u[:, data.pattern_cluster], data)
    ll_p, _ = pointwise_loglik(eta_p + u_plain[:, data.pattern_cluster], data)
    loo = compare_loo(ll_s, ll_p, weights_rows, reff)
    loo = {"elpd": loo["elpd"], "se": loo["se"], "elpd_without_field": loo["elpd_independent"],
           "se_without_field": loo["se_independent"], "elpd_diff": loo["elpd_diff"], "se_diff": loo["se_diff"]}
    village = compare_cluster_loo(_field_integrated_loglik(spatial, eta_s, data),
                                  cluster_loglik(eta_p, plain["sigma"], data), reff)
    return {"morans_i": with_field | {"without_field": short(without)}, "loo_spatial": loo, "loo_cluster": village,
            "spatial_supported": bool(without["p_value"] < FLAG_P)}


def _field_integrated_loglik(spatial: dict[str, np.ndarray], eta: np.ndarray, data: ClusteredData) -> np.ndarray:
    """log p(y_c | draw, f_-c) per draw and cluster of an exact spatial fit: cluster c's field value
    and iid effect integrated out given the other clusters' field, b_c = f_c + u_c | f_-c ~
    Normal(m_c, v_c + sigma_iid^2) (`spatial.field_given_others`); an HSGP fit keeps f_c as drawn
    (`eta` includes it) and integrates u_c alone."""
    from ddpbayes.fitting.spatial import field_given_others

    if data.spatial.m:
        return cluster_loglik(eta, spatial["sigma_iid"], data)
    f = spatial["f"]
    mean, variance = field_given_others(f, spatial["sigma"], spatial["phi"], spatial["gp_length_scale"],
                                        data.spatial.coords)
    shift = (mean - f)[:, data.pattern_cluster]
    return cluster_loglik(eta + shift, np.sqrt(variance + spatial["sigma_iid"][:, None] ** 2), data)


def cluster_loglik(eta: np.ndarray, sd: np.ndarray, data: ClusteredData, nodes: int = NODES) -> np.ndarray:
    """log p(y_c | draw) per draw and cluster (D, k): the log-likelihood of cluster c's rows summed
    (Bernoulli rows), its latent effect u_c ~ Normal(0, sd) integrated out by adaptive Gauss-Hermite
    quadrature (Liu & Pierce 1994: `nodes` points around the integrand's mode, scaled by its curvature
    there); `eta` (D, P) the rest of the log-odds, `sd` per draw (D,) or per draw and cluster (D, k)."""
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    log_w = np.log(w) + z**2 / 2  # the integrand against dz, not against the weight exp(-z^2 / 2)
    draws, patterns = eta.shape
    k = len(data.labels)
    onehot = sp.csr_matrix((np.ones(patterns), (data.pattern_cluster, np.arange(patterns))), shape=(k, patterns))
    out = np.empty((draws, k))
    sd = np.broadcast_to(np.reshape(sd, (draws, -1)), (draws, k))
    step = max(1, CHUNK // max(patterns * nodes, 1))
    for start in range(0, draws, step):
        part, scale = eta[start:start + step], sd[start:start + step]
        mode, spread = _mode(part, scale, data, onehot)
        u = mode[:, :, None] + spread[:, :, None] * z  # (d, k, nodes)
        a = part[:, :, None] + u[:, data.pattern_cluster]  # (d, P, nodes)
        ll = data.positives[:, None] * log_expit(a) + (data.trials - data.positives)[:, None] * log_expit(-a)
        per_cluster = (onehot @ ll.transpose(1, 0, 2).reshape(patterns, -1)).reshape(k, len(part), nodes)
        log_prior = -0.5 * (u / scale[:, :, None]) ** 2 - np.log(scale[:, :, None] * np.sqrt(2 * np.pi))
        integrand = per_cluster.transpose(1, 0, 2) + log_prior + log_w
        out[start:start + step] = np.log(spread) + logsumexp(integrand, axis=2)
    return out


def _mode(eta: np.ndarray, sd: np.ndarray, data: ClusteredData, onehot,
          steps: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """Each (draw, cluster)'s mode of log p(y_c | u) + log Normal(u; 0, sd) in u by Newton's method
    (the function is concave), and 1 / sqrt of its negative second derivative there."""
    u = np.zeros((len(eta), onehot.shape[0]))
    for _ in range(steps + 1):
        p = expit(eta + u[:, data.pattern_cluster])
        gradient = (onehot @ (data.positives - data.trials * p).T).T - u / sd**2
        curvature = (onehot @ (data.trials * p * (1 - p)).T).T + 1 / sd**2
        u = u + gradient / curvature
    return u, 1 / np.sqrt(curvature)


def compare_cluster_loo(ll_s: np.ndarray, ll_p: np.ndarray, reff: tuple[float, float]) -> dict:
    """Leave-one-cluster-out PSIS-LOO (`psis_loo` over clusters: `ll_*` (D, k) from `cluster_loglik`)
    of the spatial fit against the fit without the field; `reliable` when no cluster's Pareto k-hat
    exceeds K_RELIABLE in either (else the comparison is reported, not to be trusted)."""
    ones = np.ones(ll_s.shape[1])
    s, p = psis_loo(ll_s, ones, reff[0]), psis_loo(ll_p, ones, reff[1])
    return {"clusters": len(ones), "elpd": s["elpd"], "se": s["se"], "elpd_without_field": p["elpd"],
            "se_without_field": p["se"], "elpd_diff": s["elpd"] - p["elpd"],
            "se_diff": _sum_se(s["pointwise"] - p["pointwise"], ones),
            "pareto_k_max": s["pareto_k_max"], "pareto_k_over_0_7": s["pareto_k_over_0_7"],
            "pareto_k_max_without_field": p["pareto_k_max"], "pareto_k_over_0_7_without_field": p["pareto_k_over_0_7"],
            "reliable": s["pareto_k_over_0_7"] + p["pareto_k_over_0_7"] == 0}


def _expected_totals(eta: np.ndarray, data: ClusteredData) -> np.ndarray:
    """Each cluster's expected positives from the covariates alone: the posterior mean of
    trials x logit^-1(intercept + x . beta) summed over its patterns (a fixed vector: the residual
    rates of the data and of every replication subtract the same)."""
    per_pattern = data.trials * expit(eta).mean(axis=0)
    return np.bincount(data.pattern_cluster, weights=per_pattern, minlength=len(data.labels))
