"""Share of the day each member of a household spends at home (continuous, non-Gaussian).

Smart-meter and location data reveal occupancy; household members share a routine (work from
home, school runs, holidays), so their shares are dependent. The household's routine is a
latent logit-scale level r ~ Normal(mu, tau); each member's share of the day at home is
X_k | r ~ LogitNormal(r, sigma), in (0, 1). The intra-household correlation on the logit
scale is tau² / (tau² + sigma²): large `tau` against `sigma` ties members closely together.

Releasing the household's mean share with Laplace noise at the classic scale
(sensitivity (hi - lo)/n, so b = (hi - lo)/(n·eps)) gives dp = eps for every member; under the
model an adversary who knows nothing (idp) learns more, because one member's share predicts
the others'. The adversary compares shares within [lo, hi] (default [0.02, 0.98]). No closed
form is known: the sampling engine estimates it with a confidence interval
(benchmarks/bench_sampling.py measures how fast).
"""

import pymc as pm

from ddpbayes import DependenceModel, Interval


def build(
    n: int = 4, mu: float = 0.0, tau: float = 1.0, sigma: float = 0.5, lo: float = 0.02, hi: float = 0.98
) -> DependenceModel:
    with pm.Model() as model:
        routine = pm.Normal("routine", mu, tau)
        for k in range(n):
            # PyMC gives LogitNormal no default transform; log-odds makes its space unbounded for NUTS
            pm.LogitNormal(f"share{k}", routine, sigma, default_transform=pm.distributions.transforms.logodds)
    names = [f"share{k}" for k in range(n)]
    return DependenceModel(model, tuples=names, domains=Interval(lo, hi))
