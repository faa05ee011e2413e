"""Convergence of a fit (DESIGN §9.2): ArviZ's rank-normalised split R-hat and bulk ESS (Vehtari et
al. 2021) for every parameter, the cluster effects included, and NUTS's divergent transitions; a
fit fails when any R-hat exceeds 1.01, any bulk ESS is below 400 or any transition diverged, and
the failure names the parameter."""

from __future__ import annotations

import numpy as np

RHAT_MAX = 1.01
ESS_MIN = 400


def convergence(idata, idata_independent, data) -> dict:
    """The `diagnostics` block of a fit (`data`: a template's table, naming its `variables`); the
    failures of the fit without cluster effects (the checks' reference; None: not checked) are
    failures too, named as such."""
    table = _table(idata, data)
    summary = {name: {"rhat": r, "ess_bulk": e} for name, (r, e) in table.items() if not name.startswith("u[")}
    worst_rhat = max(table, key=lambda name: _nan_high(table[name][0]))
    worst_ess = min(table, key=lambda name: _nan_low(table[name][1]))
    divergences = int(idata.sample_stats["diverging"].sum())
    failures = _failures(table, divergences)
    if idata_independent is not None:  # None: the template without dependence has no free parameter
        failures += [f"without cluster effects, {f}" for f in _failures(
            _table(idata_independent, data, True), int(idata_independent.sample_stats["diverging"].sum()))]
    return {"ok": not failures, "rhat_max": RHAT_MAX, "ess_bulk_min": ESS_MIN, "parameters": summary,
            "worst_rhat": {"parameter": worst_rhat, "value": table[worst_rhat][0]},
            "worst_ess_bulk": {"parameter": worst_ess, "value": table[worst_ess][1]},
            "divergences": divergences, "failures": failures}


def _table(idata, data, independent: bool = False) -> dict[str, tuple[float, float]]:
    """(R-hat, bulk ESS) of every scalar parameter; the effects are `u`, the covariates' coefficients `beta`."""
    import arviz as az

    names = data.variables(independent)
    rhat, ess = az.rhat(idata.posterior, var_names=names), az.ess(idata.posterior, var_names=names, method="bulk")
    return {name: (float(r), float(e)) for name, r, e in _flatten(rhat, ess, data)}


def _failures(table: dict[str, tuple[float, float]], divergences: int) -> list[str]:
    """Each failed check, naming its parameter."""
    failures = [f"{name} has R-hat {r:.3f} (over {RHAT_MAX})" for name, (r, _) in table.items() if not r <= RHAT_MAX]
    failures += [f"{name} has bulk ESS {e:.0f} (under {ESS_MIN})" for name, (_, e) in table.items() if not e >= ESS_MIN]
    return failures + ([f"{divergences:,} divergent transitions"] if divergences else [])


def _flatten(rhat, ess, data):
    """(name, R-hat, ESS) per scalar: beta_<covariate>, u[<cluster>], the others by their names."""
    for name in rhat.data_vars:
        r, e = np.ravel(rhat[name].values), np.ravel(ess[name].values)
        labels = data.element_names(name)
        yield from zip(labels, r, e)


def _nan_high(value: float) -> float:
    return np.inf if np.isnan(value) else value


def _nan_low(value: float) -> float:
    return -np.inf if np.isnan(value) else value


def relative_ess(idata, names: list[str]) -> float:
    """The mean bulk ESS of the named parameters over the number of draws (PSIS's r_eff), at most 1."""
    import arviz as az

    post = idata.posterior
    ess = az.ess(post, var_names=names, method="mean")
    total = post.sizes["chain"] * post.sizes["draw"]
    return float(min(1.0, np.mean([np.mean(ess[v].values) for v in ess.data_vars]) / total))
