"""Read a linear-Gaussian model from its PyMC graph: the tuples' covariance (DESIGN §2.2).

Every free variable must be a `pm.Normal` (scalar or vector; elements independent given
their means) or a `pm.MvNormal` (one vector), whose mean is affine in the other free variables
and whose sigma or covariance is constant. Affinity is read from the graph: every operation
between a variable and a mean must be affine (sums, products with one random factor,
division by a constant, indexing, reshaping, stacking, sums, matrix products with a constant).
The coefficients are the mean's Jacobian (constant for an affine graph).

Stacking the scalar elements of all free variables into Z gives Z = B Z + a + e with B strictly
lower triangular (a PyMC variable is created after the variables its parameters use) and
e ~ N(0, Psi), Psi block diagonal, so Cov(Z) = T Psi T^T with T = (I - B)^{-1}. The tuples'
covariance is its restriction to them: latent Gaussian variables are marginalised.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.scalar as ps
import pytensor.tensor as pt
from pytensor.compile.mode import Mode
from pytensor.gradient import jacobian
from pytensor.graph.traversal import ancestors
from pytensor.tensor.basic import Alloc, Join, MakeVector
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.math import Dot, Sum
from pytensor.tensor.random.basic import MvNormalRV, NormalRV
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.shape import Reshape, SpecifyShape
from pytensor.tensor.subtensor import AdvancedSubtensor, AdvancedSubtensor1, Subtensor
from scipy.linalg import solve_triangular

from ddpbayes.errors import InputError
from ddpbayes.linalg import check_positive_definite
from ddpbayes.model import DependenceModel
from ddpbayes.model.precision import in_float64

_LINEAR_SCALARS = (ps.Add, ps.Sub, ps.Neg, ps.Identity, ps.Cast)
_RESHAPING = (DimShuffle, SpecifyShape, Reshape, Alloc, Subtensor, AdvancedSubtensor1, AdvancedSubtensor)


def unsupported_reason(model: DependenceModel) -> str | None:
    """Why `model` is not a linear-Gaussian network the engine can read, or None."""
    pm_model = model.model
    if pm_model.observed_RVs:
        return "the model has observed variables (conditioning on data is not read)"
    if pm_model.potentials:
        return "the model has potentials"
    free = set(pm_model.free_RVs)
    for rv in pm_model.free_RVs:
        op = rv.owner.op
        if not isinstance(op, (NormalRV, MvNormalRV)):
            return f"variable '{rv.name}' is a {type(op).__name__.removesuffix('RV')}, not a Normal or MvNormal"
        if any(s is None for s in rv.type.shape) or rv.ndim > 1:
            return f"variable '{rv.name}' must be a scalar or a vector of static length"
        mu, spread = op.dist_params(rv.owner)
        if _random(spread):
            what = "sigma" if isinstance(op, NormalRV) else "covariance"
            return f"the {what} of '{rv.name}' depends on random variables"
        reason = _affine_reason(mu, free, {})
        if reason:
            return f"the mean of '{rv.name}' is not affine in the model's Gaussian variables ({reason})"
    return None


def tuple_covariance(model: DependenceModel) -> np.ndarray:
    """Cov(X) of the tuples (n, n), latents marginalised; InputError unless positive definite."""
    return model.memo("gaussian", "covariance", lambda: _tuple_covariance(model))


def _tuple_covariance(model: DependenceModel) -> np.ndarray:
    reason = unsupported_reason(model)
    if reason:
        raise InputError(f"the gaussian engine needs a linear-Gaussian model: {reason}")
    cov = _joint_covariance(model)
    index = _offsets(model.model.free_RVs)
    rows = [index[s.rv] + (s.index or 0) for s in model.slots]
    sigma = cov[np.ix_(rows, rows)]
    check_positive_definite(sigma, "the tuples' covariance")
    return sigma


def _random(var) -> bool:
    return any(a.owner is not None and isinstance(a.owner.op, RandomVariable) for a in ancestors([var]))


def _affine_reason(var, free: set, memo: dict) -> str | None:
    """None if `var` is affine in the free random variables, else the operation that is not."""
    if var in free or not _random(var):
        return None
    if var in memo:
        return memo[var]
    node = var.owner
    op = node.op
    random_in = [i for i, x in enumerate(node.inputs) if _random(x)]
    if isinstance(op, RandomVariable):
        reason = f"'{var.name or op}' is a random variable outside the model"
    elif isinstance(op, Elemwise):
        s = op.scalar_op
        ok = (
            isinstance(s, _LINEAR_SCALARS)
            or (isinstance(s, ps.Mul) and len(random_in) == 1)
            or (isinstance(s, ps.TrueDiv) and random_in == [0])
            or (isinstance(s, ps.Second) and random_in == [1])
        )
        reason = None if ok else f"operation {s}"
    elif isinstance(op, _RESHAPING):
        reason = None if random_in == [0] else f"{type(op).__name__} with random indices or shape"
    elif isinstance(op, Join):
        reason = None if 0 not in random_in else "a join along a random axis"
    elif isinstance(op, (MakeVector, Sum)):
        reason = None
    elif isinstance(getattr(op, "core_op", op), Dot):
        reason = None if len(random_in) == 1 else "a product of two random matrices"
    else:
        reason = f"operation {type(op).__name__}"
    if reason is None:
        reason = next((r for i in random_in if (r := _affine_reason(node.inputs[i], free, memo))), None)
    memo[var] = reason
    return reason


def tuple_mean(model: DependenceModel) -> np.ndarray:
    """E[X] of a linear-Gaussian model: each variable's mean parameter evaluated at its parents'
    means, in the model's (topological) order — exact, as every mean is affine."""
    return model.memo("gaussian", "mean", lambda: _tuple_mean(model))


def _tuple_mean(model: DependenceModel) -> np.ndarray:
    pm_model = model.model
    rvs = pm_model.free_RVs
    values = [pm_model.rvs_to_values[rv] for rv in rvs]
    mus = [pt.broadcast_to(rv.owner.op.dist_params(rv.owner)[0], rv.type.shape) for rv in rvs]
    fn = pytensor.function(values, pm_model.replace_rvs_by_values(mus), on_unused_input="ignore")
    means = [np.zeros(v.type.shape, dtype=v.dtype) for v in values]
    for k in range(len(rvs)):  # a variable's mean uses earlier variables' means only
        means[k] = np.asarray(fn(*means)[k], dtype=values[k].dtype)
    index = {rv: k for k, rv in enumerate(rvs)}
    return np.array([float(means[index[s.rv]] if s.index is None else means[index[s.rv]][s.index])
                     for s in model.slots])


def _offsets(rvs) -> dict:
    out, k = {}, 0
    for rv in rvs:
        out[rv] = k
        k += int(np.prod(rv.type.shape, dtype=int))
    return out


def _joint_covariance(model: DependenceModel) -> np.ndarray:
    """Cov(Z) of every scalar element of every free variable: T Psi T^T, T = (I - B)^{-1}."""
    pm_model = model.model
    rvs = pm_model.free_RVs
    offsets = _offsets(rvs)
    size = sum(int(np.prod(rv.type.shape, dtype=int)) for rv in rvs)
    values = [pm_model.rvs_to_values[rv] for rv in rvs]
    params = []
    for rv in rvs:
        mu, spread = rv.owner.op.dist_params(rv.owner)
        params.append(pt.broadcast_to(mu, rv.type.shape).reshape((-1,)))
        if isinstance(rv.owner.op, NormalRV):
            spread = pt.broadcast_to(spread, rv.type.shape).reshape((-1,))
        params.append(spread)
    params = in_float64(pm_model.replace_rvs_by_values(params))  # once: it clones the whole graph
    outputs, plan = [], []
    for rv, mu, spread in zip(rvs, params[::2], params[1::2]):
        used = set(ancestors([mu]))  # with values in place of variables: the direct parents only
        parents = [r for r, v in zip(rvs, values) if v in used]
        jac = jacobian(mu, [pm_model.rvs_to_values[r] for r in parents], vectorize=True) if parents else []
        outputs += [spread, *jac]
        plan.append((rv, parents))
    fn = pytensor.function(values, outputs, on_unused_input="ignore", mode=Mode(linker="py", optimizer=None))
    evaluated = iter(fn(*[np.zeros(v.type.shape, dtype=v.dtype) for v in values]))
    coef, psi = np.zeros((size, size)), np.zeros((size, size))
    for rv, parents in plan:
        o = offsets[rv]
        d = int(np.prod(rv.type.shape, dtype=int))
        block = slice(o, o + d)
        spread = np.asarray(next(evaluated), dtype=float)
        if isinstance(rv.owner.op, NormalRV):
            if not np.all(spread > 0):
                raise InputError(f"the sigma of '{rv.name}' must be positive, got {spread.min():g}")
            psi[block, block] = np.diag(spread**2)
        else:
            check_positive_definite(spread, f"the covariance of '{rv.name}'")
            psi[block, block] = spread
        for parent in parents:
            p, k = offsets[parent], int(np.prod(parent.type.shape, dtype=int))
            coef[block, p : p + k] = np.asarray(next(evaluated), dtype=float).reshape(d, k)
    # unit lower triangular: substitution keeps the structural zeros of T exact
    t = solve_triangular(np.eye(size) - coef, np.eye(size), lower=True, unit_diagonal=True)
    return t @ psi @ t.T
