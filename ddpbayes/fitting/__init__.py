"""Fitting a dependence model from a data table (DESIGN §9, issue #41): `fit` reads the table,
fits a template with PyMC, checks convergence and the dependence, and writes a model file that
`load_model` and `ddpbayes audit` read like any other. The names are imported on first use, so a
fitted model file, which imports `ddpbayes.fitting.fitted`, loads none of the fitting code."""

from __future__ import annotations

from ddpbayes.lazy import listing, on_first_use

_LAZY = {"FitResult": "ddpbayes.fitting.run", "fit": "ddpbayes.fitting.run"}

__all__ = ["FitResult", "fit"]

__getattr__ = on_first_use(__name__, _LAZY, globals())
__dir__ = listing(_LAZY, globals())
