"""Supports of PyMC random variables, read from their distribution and parameters.

Finite supports are inferred for Bernoulli, Categorical, Binomial and DiscreteUniform
(DESIGN §4); a few continuous families give an interval; anything else is unbounded.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
from pymc.distributions.discrete import DiscreteUniformRV
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.basic import (
    BernoulliRV,
    BetaRV,
    BinomialRV,
    CategoricalRV,
    ExponentialRV,
    GammaRV,
    HalfNormalRV,
    UniformRV,
)
from pytensor.tensor.random.op import RandomVariable

from ddpbayes.errors import InputError
from ddpbayes.model.domains import Domain, Finite, Interval


def _constant(param) -> np.ndarray | None:
    """The value of a parameter that depends on no random variable, else None."""
    if any(a.owner is not None and isinstance(a.owner.op, RandomVariable) for a in ancestors([param])):
        return None
    return np.asarray(pm.draw(param))


def support(rv) -> Domain:
    """The support of one element of `rv` (elements of a vector variable share it)."""
    op = rv.owner.op
    params = op.dist_params(rv.owner)
    if isinstance(op, BernoulliRV):
        return Finite([0, 1])
    if isinstance(op, CategoricalRV):
        k = int(pm.draw(params[0].shape[-1]))
        return Finite(range(k))
    if isinstance(op, BinomialRV):
        n = _constant(params[0])
        if n is None:
            raise InputError(f"Binomial '{rv.name}' has an n that depends on other variables; give it a Finite domain")
        return Finite(range(int(np.max(n)) + 1))
    if isinstance(op, DiscreteUniformRV):
        lo, hi = (_constant(p) for p in params[:2])
        if lo is None or hi is None:
            raise InputError(f"DiscreteUniform '{rv.name}' has bounds that depend on other variables")
        return Finite(range(int(np.min(lo)), int(np.max(hi)) + 1))
    if isinstance(op, UniformRV):
        lo, hi = (_constant(p) for p in params[:2])
        if lo is not None and hi is not None:
            return Interval(float(np.min(lo)), float(np.max(hi)))
        return Interval(-math.inf, math.inf)
    if isinstance(op, BetaRV):
        return Interval(0.0, 1.0)
    if isinstance(op, (HalfNormalRV, ExponentialRV, GammaRV)):
        return Interval(0.0, math.inf)
    return Interval(-math.inf, math.inf)


def is_discrete(rv) -> bool:
    return rv.dtype.startswith(("int", "uint", "bool"))
