"""Fitting a dependence model from a data table (DESIGN §9, issue #41): `fit` reads the table,
fits a template with PyMC, checks convergence and the dependence, and writes a model file that
`load_model` and `ddpbayes audit` read like any other."""

from ddpbayes.fitting.run import TEMPLATES, FitResult, fit

__all__ = ["TEMPLATES", "FitResult", "fit"]
