"""The Gambia spatial fit's NUTS run alone (issue #41; `clustered --coords x,y`, BYM2, DESIGN §9.8):
4 chains x (1,000 + 1,000) on 2 cores, R-hat and bulk ESS of every parameter (each village's
total effect, and its field value f and iid effect u drawn given it, included), divergences, wall
and CPU seconds and the load average, and the posterior of intercept, sigma, phi, the length scale
and sigma_iid. The variations a careful analyst tries: covariates (the README beside the data lists
them), NUTS's target acceptance, a narrower length-scale prior (its upper 2.5% point moved, its
lower one kept), the collapsed effect non-centred (tried, not kept).

`bench_fit.py --spatial` times the whole `ddpbayes fit` command (three NUTS runs and the checks);
this times the run the convergence depends on. Run from the repository root:

    python benchmarks/bench_spatial.py
    python benchmarks/bench_spatial.py --seed 1835504127 --target-accept 0.9
    python benchmarks/bench_spatial.py --non-centred
    python benchmarks/bench_spatial.py --covariates green,phc
    python benchmarks/bench_spatial.py --length-scale-upper 100000
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "models" / "data" / "gambia_malaria.csv"


def cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def narrower(data, upper: float):
    """The length scale's LogNormal prior with its upper 2.5% point at `upper` (its lower one kept)."""
    from scipy import stats

    from ddpbayes.fitting.spatial import TAIL, scale_range

    low, _ = scale_range(np.unique(data.spatial.coords, axis=0))
    z = stats.norm.ppf(1 - TAIL)
    mu, s = (np.log(low) + np.log(upper)) / 2, np.log(upper / low) / (2 * z)
    return replace(data, spatial=replace(data.spatial, mu=float(mu), s=float(s)))


def non_centred(spatial, sigma, phi, ls):
    """The collapsed effect non-centred: sigma chol(phi R + (1 - phi) I) w, w ~ Normal(0, I_k) (the same law
    as the template's MvNormal; tried first: 787 divergences on Gambia, benchmarks/README.md)."""
    import pymc as pm
    import pytensor.tensor as pt

    from ddpbayes.fitting.spatial import JITTER, _centred

    k = len(spatial.coords)
    correlation = pm.gp.cov.Matern32(2, ls=ls)(_centred(spatial)) + JITTER * pt.eye(k)
    chol = pt.linalg.cholesky(phi * correlation + (1.0 - phi) * pt.eye(k))
    return pm.Deterministic("effect", sigma * (chol @ pm.Normal("gp_w", 0.0, 1.0, shape=k)), dims="cluster")


def main() -> None:
    import arviz as az
    import pymc as pm
    from threadpoolctl import threadpool_limits

    from ddpbayes.fitting.clustered import read, pymc_model
    from ddpbayes.fitting.spatial import add_split

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--covariates", default="")
    parser.add_argument("--target-accept", type=float, default=0.0, help="0: the template's (0.95 with the field)")
    parser.add_argument("--length-scale-upper", type=float, default=0.0, help="metres (0: the template's prior)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--non-centred", action="store_true",
                        help="the collapsed effect non-centred, sigma chol(phi R + (1 - phi) I) w (tried, not kept)")
    parser.add_argument("--draws", type=int, default=1000, help="draws per chain (and as many tuning steps)")
    args = parser.parse_args()
    if args.non_centred:
        import ddpbayes.fitting.spatial as spatial_module
        spatial_module.collapsed = non_centred
    covariates = [c for c in args.covariates.split(",") if c]
    data = read(DATA, {"cluster": ["x", "y"], "outcome": "pos", "covariates": covariates, "coords": ["x", "y"]}, 10**6)
    target_accept = args.target_accept or data.target_accept
    if args.length_scale_upper:
        data = narrower(data, args.length_scale_upper)
    print(f"load average before: {os.getloadavg()[0]:.2f}; length-scale prior LogNormal({data.spatial.mu:.3f}, "
          f"{data.spatial.s:.3f}); covariates {covariates or 'none'}; target_accept {target_accept}")
    start, start_cpu = time.perf_counter(), cpu()
    with threadpool_limits(limits=1, user_api="blas"):  # as fitting/run.py: _sample
        idata = pm.sample(args.draws, tune=args.draws, chains=4, cores=min(4, os.cpu_count() or 1),
                          random_seed=args.seed,
                          target_accept=target_accept, init="jitter+adapt_full", progressbar=False,
                          compute_convergence_checks=False, model=pymc_model(data))
        add_split(idata, data.spatial, args.seed)  # f and u from their law given the effect (fitting/run.py)
    wall, used = time.perf_counter() - start, cpu() - start_cpu
    table = az.summary(idata, var_names=data.variables(), kind="diagnostics")
    print(f"NUTS 4 x ({args.draws:,} + {args.draws:,}): {wall:.0f} s wall, {used:.0f} cpu s; load average after: "
          f"{os.getloadavg()[0]:.2f}; {int(idata.sample_stats['diverging'].sum())} divergences")
    print(f"worst R-hat {table['r_hat'].max():.3f} ({table['r_hat'].idxmax()}), lowest bulk ESS "
          f"{table['ess_bulk'].min():.0f} ({table['ess_bulk'].idxmin()}); parameters over R-hat 1.01: "
          f"{int((table['r_hat'] > 1.01).sum())}, under bulk ESS 400: {int((table['ess_bulk'] < 400).sum())} "
          f"of {len(table)}")
    names = ["intercept", *(["beta"] if covariates else []), "sigma", "phi", "gp_length_scale", "sigma_iid"]
    diverging = idata.sample_stats["diverging"].values.ravel()
    if diverging.any():
        where = {n: idata.posterior[n].values.ravel()[diverging] for n in names[-4:]}
        print("at the divergent draws: " + ", ".join(f"{n} {np.round(np.sort(v), 3).tolist()}"
                                                      for n, v in where.items()))
    print(az.summary(idata, var_names=names, kind="all").to_string())


if __name__ == "__main__":
    main()
