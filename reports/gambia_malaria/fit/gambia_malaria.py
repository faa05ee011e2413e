"""A clustered dependence model fitted by `ddpbayes fit` from gambia_malaria.csv (DESIGN §9.1).

2,035 records (tuple k is data row k: the vector variable "y") in 65 clusters of
x, y; outcome pos. The template: y_r ~ Bernoulli(logit^-1(intercept +
x_r . beta + u_c(r))), the cluster effects u_c ~ Normal(0, sigma) latent, x_r the covariates
standardised as in the fit. Posterior means: intercept = -0.5952, sigma = 1.042.

build(parameters="mean") fixes the parameters at their posterior means, "draw:K" at posterior
draw K (0 to 3999, chains in order). The fit, its checks and the draws: gambia_malaria.fit.json; the
whole posterior (ArviZ InferenceData): gambia_malaria.posterior.nc. `ddpbayes audit gambia_malaria.py ...`
audits it like any model file (-p parameters="'draw:0'" for one draw).
"""

from pathlib import Path

import pymc as pm

from ddpbayes import DependenceModel
from ddpbayes.fitting.fitted import read_fit

FIT = Path(__file__).with_name("gambia_malaria.fit.json")


def build(parameters: str = "mean") -> DependenceModel:
    fit = read_fit(FIT, parameters)
    with pm.Model() as m:
        u = pm.Normal("u", 0.0, fit.sigma, shape=fit.n_clusters)
        pm.Bernoulli("y", logit_p=fit.intercept + fit.x @ fit.beta + u[fit.cluster_index], shape=fit.n)
    return DependenceModel(m, tuples="y")
