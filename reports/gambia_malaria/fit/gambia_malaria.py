"""A clustered dependence model with a spatial field, fitted by `ddpbayes fit` from gambia_malaria.csv
(DESIGN §9.1, §9.8).

2,035 records (tuple k is data row k: the vector variable "y") in 65 clusters of
x, y; outcome pos. The template: y_r ~ Bernoulli(logit^-1(intercept +
x_r . beta + f_c(r) + u_c(r))): each cluster's effect split (BYM2) into the spatial field
f = sigma sqrt(phi) g, g a unit-variance Gaussian process over the clusters' places (x, y,
the length scale in their units), and the latent iid effects u_c ~ Normal(0, sigma_iid),
sigma_iid = sigma sqrt(1 - phi); x_r the covariates standardised as in the fit. Posterior
means: intercept = -0.4288, sigma = 1.195, phi = 0.7055, gp_length_scale = 3.404e+04, sigma_iid = 0.5975.

The audit engines need each cluster's effect one-dimensional, so the field is FIXED here, as a
parameter: build(parameters="mean") takes each cluster's posterior mean of f_c (and the parameters'
posterior means), "draw:K" posterior draw K's field and parameters (0 to 3999, chains in
order). Under `mean` and `draws` the spatial field is treated as known: the villages are then
independent of one another, and dependence across them enters only through `ddpbayes audit
--parameters integrated:S`, the mixture over posterior draws. The fit, its checks and the draws:
gambia_malaria.fit.json; the whole posterior (ArviZ InferenceData): gambia_malaria.posterior.nc.
"""

from pathlib import Path

import pymc as pm

from ddpbayes import DependenceModel
from ddpbayes.fitting.fitted import read_fit

FIT = Path(__file__).with_name("gambia_malaria.fit.json")


def build(parameters: str = "mean") -> DependenceModel:
    fit = read_fit(FIT, parameters)
    with pm.Model() as m:
        u = pm.Normal("u", 0.0, fit.sigma, shape=fit.n_clusters)  # fit.sigma: sigma_iid
        field = fit.offset[fit.cluster_index]  # the spatial field at each row's cluster, fixed
        pm.Bernoulli("y", logit_p=fit.intercept + fit.x @ fit.beta + field + u[fit.cluster_index], shape=fit.n)
    return DependenceModel(m, tuples="y")
