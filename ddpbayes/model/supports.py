"""Supports of PyMC random variables, read from their distribution and parameters.

Finite supports are inferred for Bernoulli, Categorical, Binomial, DiscreteUniform and a
`DiscreteMarkovChain`'s states (DESIGN §4). A continuous variable's interval is the one PyMC's default
transform maps onto the line (an interval transform's bounds: Uniform, TruncatedNormal, Truncated,
Pareto, ...; log: [0, inf); log-odds: [0, 1]; circular: [-pi, pi]); anything else is unbounded, and so
is an interval whose bounds depend on other random variables (`random_bounds`).
Parameters are read from the graph when they are constants; the others (e.g. a bound written
as an expression) are evaluated together by one function compiled for all variables, so
loading a model costs no compilation per variable. A finite support larger than the state
limit (`--max-states`) is refused before it is built. Each support is cached on its variable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.distributions.discrete import DiscreteUniformRV
from pymc.distributions.transforms import (
    CircularTransform,
    IntervalTransform,
    LogOddsTransform,
    LogTransform,
    _default_transform,
)
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import ancestors
from pytensor.tensor.basic import get_underlying_scalar_constant_value
from pytensor.tensor.exceptions import NotScalarConstantError
from pytensor.tensor.random.basic import BernoulliRV, BinomialRV, CategoricalRV
from pytensor.tensor.random.op import RandomVariable

from ddpbayes.errors import InputError
from ddpbayes.limits import check_states
from ddpbayes.model.chains import chain
from ddpbayes.model.domains import Domain, Finite, Interval
from ddpbayes.model.precision import python_mode

_CACHED = "ddpbayes_support"


def support(rv) -> Domain:
    """The support of one element of `rv` (elements of a vector variable share it)."""
    return supports([rv])[0]


def supports(rvs: Sequence) -> list[Domain]:
    """The support of each of `rvs`, evaluating every non-constant parameter with one function."""
    pending = {id(rv): rv for rv in rvs if not hasattr(rv.tag, _CACHED)}
    needs = {key: _parameters(rv) for key, rv in pending.items()}
    values = _evaluate([g for graphs in needs.values() for g in graphs])
    for key, rv in pending.items():
        setattr(rv.tag, _CACHED, _domain(rv, [values[g] for g in needs[key]]))
    return [getattr(rv.tag, _CACHED) for rv in rvs]


def is_discrete(rv) -> bool:
    return rv.dtype.startswith(("int", "uint", "bool"))


def depends_on_random(param) -> bool:
    """Whether `param` has a random variable among its ancestors (it is not a constant)."""
    return any(a.owner is not None and isinstance(a.owner.op, RandomVariable) for a in ancestors([param]))


def _parameters(rv) -> list[Variable]:
    """The parameter graphs whose values fix the support of `rv` (checked to be constant)."""
    op = rv.owner.op
    if chain(rv) is not None:
        return []
    if not is_discrete(rv):  # an interval transform's bounds, when they are fixed
        bounds = _interval_bounds(rv)
        if bounds is None or random_bounds(rv):
            return []
        return [pt.constant(sign * math.inf) if b is None else b for b, sign in zip(bounds, (-1, 1))]
    params = op.dist_params(rv.owner)
    if isinstance(op, CategoricalRV):
        k = params[0].type.shape[-1]
        return [pytensor.tensor.constant(k) if k is not None else params[0].shape[-1]]
    if isinstance(op, BinomialRV):
        if depends_on_random(params[0]):
            raise InputError(f"Binomial '{rv.name}' has an n that depends on other variables; give it a Finite domain")
        return [params[0]]
    if isinstance(op, DiscreteUniformRV):
        if any(depends_on_random(p) for p in params[:2]):
            raise InputError(f"DiscreteUniform '{rv.name}' has bounds that depend on other variables")
        return list(params[:2])
    return []


def random_bounds(rv) -> bool:
    """Whether a bound of continuous `rv`'s interval depends on another random variable (Uniform(0, s), s
    random): no interval holds it for every value of the others, and `support` reports the line."""
    bounds = _interval_bounds(rv)
    return bounds is not None and any(b is not None and depends_on_random(b) for b in bounds)


def _interval_bounds(rv) -> tuple[Variable | None, Variable | None] | None:
    """The (lower, upper) graphs of a continuous `rv` whose default transform is PyMC's interval transform
    (None: that side unbounded), else None."""
    transform = _default_transform(rv.owner.op, rv)
    return transform.args_fn(*rv.owner.inputs) if isinstance(transform, IntervalTransform) else None


def _evaluate(graphs: list[Variable]) -> dict:
    """Values of constant graphs: read off constants, folded scalars, the rest by one function."""
    out, rest = {}, []
    for g in graphs:
        if g in out or g in rest:
            continue
        if isinstance(g, Constant):
            out[g] = np.asarray(g.data)
            continue
        try:
            out[g] = np.asarray(get_underlying_scalar_constant_value(g))
        except NotScalarConstantError:
            rest.append(g)
    if rest:
        fn = pytensor.function([], rest, mode=python_mode(), on_unused_input="ignore")
        out.update(zip(rest, (np.asarray(v) for v in fn())))
    return out


def _domain(rv, values: list[np.ndarray]) -> Domain:
    op = rv.owner.op
    if (found := chain(rv)) is not None:
        return _integers(rv, 0, found.states - 1)
    if isinstance(op, BernoulliRV):
        return _integers(rv, 0, 1)
    if isinstance(op, CategoricalRV):
        return _integers(rv, 0, int(values[0]) - 1)
    if isinstance(op, BinomialRV):
        return _integers(rv, 0, _whole(rv, np.max(values[0])))
    if isinstance(op, DiscreteUniformRV):
        return _integers(rv, _whole(rv, np.min(values[0])), _whole(rv, np.max(values[1])))
    if values:  # an interval transform's bounds
        return Interval(float(np.min(values[0])), float(np.max(values[1])))
    transform = _default_transform(op, rv)
    if isinstance(transform, LogTransform):
        return Interval(0.0, math.inf)
    if isinstance(transform, LogOddsTransform):
        return Interval(0.0, 1.0)
    if isinstance(transform, CircularTransform):
        return Interval(-math.pi, math.pi)
    return Interval(-math.inf, math.inf)


def _whole(rv, value) -> int:
    value = float(value)
    if not math.isfinite(value):
        raise InputError(f"'{rv.name}' has a non-finite support bound {value}")
    return int(value)


def _integers(rv, lo: int, hi: int) -> Finite:
    """{lo, ..., hi}, one shared (immutable) object per range: a chain's 1,000 days hold one domain, which the
    engines' per-audit checks then read once (issue #44)."""
    if hi < lo:
        raise InputError(f"'{rv.name}' has an empty support {{{lo}, ..., {hi}}}")
    check_states(hi - lo + 1, f"the support of {type(rv.owner.op).__name__.removesuffix('RV')} '{rv.name}'", "values")
    if (lo, hi) not in _RANGES:
        _RANGES[(lo, hi)] = Finite(range(lo, hi + 1))
    return _RANGES[(lo, hi)]


_RANGES: dict[tuple[int, int], Finite] = {}


def wider_than_declared(rvs: Sequence, domains: Sequence[Domain]) -> list[int]:
    """The positions k whose variable's support holds values outside its declared domain
    `domains[k]`: there the declared domain leaves part of the model out (an enumerating engine
    conditions the model on it; the gaussian and sampling engines do not). A support that cannot be
    inferred (bounds that depend on other variables) counts as within: its domain had to be declared."""
    return [k for k, (rv, domain) in enumerate(zip(rvs, domains)) if not _within(_inferred(rv), domain)]


def _inferred(rv) -> Domain | None:
    cached = getattr(rv.tag, _CACHED, None)  # inferred when the model was loaded
    if cached is not None:
        return cached
    try:
        return support(rv)
    except InputError:
        return None


def _within(inner: Domain | None, outer: Domain) -> bool:
    if inner is None or inner is outer:  # an undeclared domain is the inferred support itself
        return True
    if isinstance(inner, Finite):
        if isinstance(outer, Finite):
            return set(inner.values) <= set(outer.values)
        return outer.lo <= inner.lo and inner.hi <= outer.hi
    return isinstance(outer, Interval) and outer.lo <= inner.lo and inner.hi <= outer.hi
