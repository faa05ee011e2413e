"""Read a linear-Gaussian model from its PyMC graph: the tuples' covariance, or the joint
precision when it is sparse and large (DESIGN §2.2).

Every free variable must be a `pm.Normal` (scalar or vector; elements independent given
their means), a `pm.MvNormal` (one vector; given its covariance, or its precision `tau`) or a
`pm.CAR` (one vector: precision tau (D - alpha W), D = diag of W's row sums), whose mean is
affine in the other free variables and whose sigma, covariance, precision or CAR parameters
are constant. Affinity is read from the graph: every operation between a variable and a mean
must be affine (sums, products with one random factor, division by a constant, indexing,
reshaping, stacking, sums, matrix products with a constant). The coefficients are the mean's
Jacobian (constant for an affine graph).

Stacking the scalar elements of all free variables into Z gives Z = B Z + a + e with B strictly
lower triangular (a PyMC variable is created after the variables its parameters use) and
e ~ N(0, Psi), Psi block diagonal (`Network`), so Cov(Z) = T Psi T^T with T = (I - B)^{-1}. The
tuples' covariance is its restriction to them: latent Gaussian variables are marginalised. The
joint precision is P = (I - B)^T Psi^{-1} (I - B), sparse when B and Psi^{-1} are (a CAR's
block of Psi^{-1} is its precision, never inverted).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytensor
import pytensor.scalar as ps
import pytensor.tensor as pt
from pymc.distributions.multivariate import CARRV
from pytensor.compile.mode import Mode
from pytensor.gradient import jacobian
from pytensor.graph.traversal import ancestors
from pytensor.tensor.basic import Alloc, Join, MakeVector
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.math import Dot, Sum
from pytensor.tensor.nlinalg import MatrixInverse
from pytensor.tensor.random.basic import MvNormalRV, NormalRV
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.shape import Reshape, SpecifyShape
from pytensor.tensor.subtensor import AdvancedSubtensor, AdvancedSubtensor1, Subtensor
from scipy import sparse
from scipy.linalg import solve_triangular
from scipy.sparse.linalg import splu
from threadpoolctl import threadpool_limits

from ddpbayes.errors import InputError
from ddpbayes.numerics import check_positive_definite
from ddpbayes.model import DependenceModel
from ddpbayes.model.precision import in_float64

SPARSE_SIZE = 1000  # joints with at least this many scalar elements use the sparse precision ...
SPARSE_DENSITY = 0.05  # ... when at most this share of its entries is nonzero
_GAUSSIAN = (NormalRV, MvNormalRV, CARRV)
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
        if not isinstance(op, _GAUSSIAN):
            return f"variable '{rv.name}' is a {type(op).__name__.removesuffix('RV')}, not a Normal, MvNormal or CAR"
        if any(s is None for s in rv.type.shape) or rv.ndim > 1:
            return f"variable '{rv.name}' must be a scalar or a vector of static length"
        mu, *spread = op.dist_params(rv.owner)
        if any(_random(x) for x in spread):
            what = {NormalRV: "sigma", MvNormalRV: "covariance"}.get(type(op), "W, alpha or tau")
            return f"the {what} of '{rv.name}' depends on random variables"
        reason = _affine_reason(mu, free, {})
        if reason:
            return f"the mean of '{rv.name}' is not affine in the model's Gaussian variables ({reason})"
    return None


@dataclass(frozen=True)
class Network:
    """The model as Z = B Z + a + e: every free variable's scalar elements stacked in Z.

    `links` are the nonzero blocks of B (rows, columns, values); `noise` the blocks of e's law,
    one per variable: ("variance", vector) for a Normal, ("covariance", matrix) or ("precision",
    sparse matrix) for an MvNormal, ("precision", sparse matrix) for a CAR."""

    size: int
    tuple_rows: np.ndarray  # the element of Z that is each tuple
    links: tuple[tuple[slice, slice, np.ndarray], ...]
    noise: tuple[tuple[slice, str, object], ...]

    def precision(self) -> sparse.csc_matrix:
        """P = (I - B)^T Psi^{-1} (I - B), sparse (no block of Psi is inverted but an MvNormal's covariance)."""
        blocks = []
        for block, kind, value in self.noise:
            if kind == "variance":
                blocks.append(sparse.diags(1.0 / value))
            elif kind == "covariance":
                blocks.append(sparse.csr_matrix(np.linalg.inv(value)))
            else:
                blocks.append(value)
        psi_inv = sparse.block_diag(blocks, format="csr")
        rest = sparse.identity(self.size, format="csr") - self._coefficients()
        return (rest.T @ psi_inv @ rest).tocsc()

    def covariance(self, rows: np.ndarray) -> np.ndarray:
        """Cov(Z)'s rows and columns `rows`: T_R Psi T_R^T, T = (I - B)^{-1}, T_R its rows `rows`: dense.
        T_R Psi is formed block by block of Psi (a Normal's block scales columns; Psi is never formed)."""
        coef = self._coefficients().toarray()
        # unit lower triangular: substitution keeps the structural zeros of T exact
        t = solve_triangular(np.eye(self.size) - coef, np.eye(self.size), lower=True, unit_diagonal=True)[rows]
        left = np.empty_like(t)
        for block, kind, value in self.noise:
            left[:, block] = t[:, block] * value if kind == "variance" else \
                t[:, block] @ (np.asarray(value) if kind == "covariance" else _inverse(value))
        return left @ t.T

    def is_sparse(self) -> bool:
        """Large, with a sparse precision: solved by sparse factorisations (`gaussian.sparse`)."""
        if self.size < SPARSE_SIZE:
            return False
        nonzero = sum(v.size for _, _, v in self.links) * 2 + sum(
            v.size if k == "variance" else v.shape[0] ** 2 if k == "covariance" else v.nnz for _, k, v in self.noise)
        return nonzero <= SPARSE_DENSITY * self.size**2

    def _coefficients(self) -> sparse.csr_matrix:
        b = sparse.lil_matrix((self.size, self.size))
        for rows, cols, value in self.links:
            b[rows, cols] = value
        return b.tocsr()


def network(model: DependenceModel) -> Network:
    """The model's `Network`; InputError unless it is a linear-Gaussian model with valid parameters."""
    return model.memo("gaussian", "network", lambda: _network(model))


def use_sparse(model: DependenceModel) -> bool:
    """Whether the model is solved from its sparse precision (decided once per model)."""
    return model.memo("gaussian", "sparse", lambda: network(model).is_sparse())


def tuple_covariance(model: DependenceModel) -> np.ndarray:
    """Cov(X) of the tuples (n, n), latents marginalised; InputError unless positive definite."""
    return model.memo("gaussian", "covariance", lambda: _tuple_covariance(model))


@threadpool_limits.wrap(limits=1, user_api="blas")
def _tuple_covariance(model: DependenceModel) -> np.ndarray:
    """One BLAS thread: on two busy cores OpenBLAS's threads made the checks of Galton's 934 x 934
    covariance 50 to 100 times slower (benchmarks/README.md, "gaussian fits under draws:S")."""
    net = network(model)
    sigma = net.covariance(net.tuple_rows)
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


def _network(model: DependenceModel) -> Network:
    """Evaluate every variable's noise parameters and the Jacobian of its mean in its parents."""
    reason = unsupported_reason(model)
    if reason:
        raise InputError(f"the gaussian engine needs a linear-Gaussian model: {reason}")
    pm_model = model.model
    rvs = pm_model.free_RVs
    offsets = _offsets(rvs)
    values = [pm_model.rvs_to_values[rv] for rv in rvs]
    params, kinds = [], []
    for rv in rvs:
        mu, *spread = rv.owner.op.dist_params(rv.owner)
        kind, spread = _noise_parameters(rv, spread)
        params += [pt.broadcast_to(mu, rv.type.shape).reshape((-1,)), *spread]
        kinds.append((kind, len(spread)))
    params = in_float64(pm_model.replace_rvs_by_values(params))  # once: it clones the whole graph
    outputs, plan, at = [], [], 0
    for rv, (kind, count) in zip(rvs, kinds):
        mu, spread = params[at], params[at + 1 : at + 1 + count]
        at += 1 + count
        used = set(ancestors([mu]))  # with values in place of variables: the direct parents only
        parents = [r for r, v in zip(rvs, values) if v in used]
        jac = jacobian(mu, [pm_model.rvs_to_values[r] for r in parents], vectorize=True) if parents else []
        outputs += [*spread, *jac]
        plan.append((rv, kind, count, parents))
    fn = pytensor.function(values, outputs, on_unused_input="ignore", mode=Mode(linker="py", optimizer=None))
    evaluated = iter(fn(*[np.zeros(v.type.shape, dtype=v.dtype) for v in values]))
    links, noise = [], []
    for rv, kind, count, parents in plan:
        o, d = offsets[rv], int(np.prod(rv.type.shape, dtype=int))
        block = slice(o, o + d)
        noise.append((block, *_noise(kind, rv.name, [next(evaluated) for _ in range(count)], d)))
        for parent in parents:
            p, k = offsets[parent], int(np.prod(parent.type.shape, dtype=int))
            coef = np.asarray(next(evaluated), dtype=float).reshape(d, k)
            if np.any(coef):
                links.append((block, slice(p, p + k), coef))
    size = sum(int(np.prod(rv.type.shape, dtype=int)) for rv in rvs)
    rows = np.array([offsets[s.rv] + (s.index or 0) for s in model.slots])
    return Network(size, rows, tuple(links), tuple(noise))


def _noise_parameters(rv, spread: list) -> tuple[str, list]:
    """What a variable's noise is given as ("sigma", "covariance", "precision" or "car") and the
    graphs to evaluate for it: sigma, the covariance, the precision an MvNormal was given as `tau`
    (PyMC inverts it in the graph: the inverse is skipped), or the CAR's W, alpha and tau."""
    op = rv.owner.op
    if isinstance(op, NormalRV):
        return "sigma", [pt.broadcast_to(spread[0], rv.type.shape).reshape((-1,))]
    if isinstance(op, MvNormalRV):
        cov = spread[0]
        if cov.owner is not None and isinstance(getattr(cov.owner.op, "core_op", cov.owner.op), MatrixInverse):
            return "precision", [cov.owner.inputs[0]]
        return "covariance", [cov]
    return "car", spread[:3]  # W, alpha, tau; PyMC's W_is_valid is checked in `_car_precision`


def _noise(kind: str, name: str, evaluated: list, d: int) -> tuple[str, object]:
    """A variable's noise block: ("variance", vector), ("covariance", matrix) or ("precision", sparse)."""
    if kind == "sigma":
        sigma = np.asarray(evaluated[0], dtype=float)
        if not np.all(sigma > 0):
            raise InputError(f"the sigma of '{name}' must be positive, got {sigma.min():g}")
        return "variance", sigma**2
    if kind == "covariance":
        value = np.asarray(evaluated[0], dtype=float)
        check_positive_definite(value, f"the covariance of '{name}'")
        return "covariance", value
    if kind == "precision":
        return "precision", _check_precision(sparse.csr_matrix(evaluated[0], dtype=float), f"the precision of '{name}'")
    return "precision", _car_precision(name, *evaluated, d)


def _car_precision(name: str, w, alpha, tau, d: int) -> sparse.csr_matrix:
    """tau (D - alpha W), D = diag(row sums of W): pm.CAR's precision (its logp's quadratic form;
    a diagonal entry of W is a weight like any other, so a self loop of weight 1 / (1 - alpha) gives
    a node without neighbours the precision tau, as models/gowalla_friends.py does).

    A node with a zero row is refused: pm.CAR cannot evaluate such a model (its log-density divides
    by sqrt(D))."""
    w = sparse.csr_matrix(w, dtype=float)
    alpha, tau = float(np.asarray(alpha)), float(np.asarray(tau))
    if w.shape != (d, d) or not np.all(np.isfinite(w.data)):
        raise InputError(f"the W of CAR '{name}' must be a finite {d} x {d} matrix")
    if abs(w - w.T).max() > 0 or (w.data < 0).any():
        raise InputError(f"the W of CAR '{name}' must be a symmetric adjacency matrix with non-negative weights")
    if not (-1 < alpha < 1 and 0 < tau < np.inf):
        raise InputError(f"CAR '{name}' needs -1 < alpha < 1 and tau > 0, got alpha = {alpha:g}, tau = {tau:g}")
    degree = np.asarray(w.sum(axis=1)).ravel()
    if np.any(degree == 0):
        k = int(np.flatnonzero(degree == 0)[0])
        raise InputError(f"node {k} of CAR '{name}' has no neighbours (a zero row of W), where its precision "
                         "tau (D - alpha W) is singular; give it a self loop of weight 1/(1 - alpha) (precision tau) "
                         "or pass the precision to pm.MvNormal(tau=...)")
    # with W >= 0 and |alpha| < 1, D - alpha W is strictly diagonally dominant: positive definite
    return (tau * (sparse.diags(degree) - alpha * w)).tocsr()


def _check_precision(q: sparse.csr_matrix, what: str) -> sparse.csr_matrix:
    """`q`, if symmetric and positive definite: diagonally dominant with a positive diagonal, or
    with positive pivots in a symmetric sparse LDL^T (SuperLU with diagonal pivoting)."""
    if not np.all(np.isfinite(q.data)):
        raise InputError(f"{what} must be finite")
    top = abs(q).max()
    if abs(q - q.T).max() > 1e-10 * top:
        raise InputError(f"{what} is not symmetric")
    diag = q.diagonal()
    if np.all(diag > np.asarray(abs(q).sum(axis=1)).ravel() - diag):
        return q
    try:
        lu = splu(q.tocsc(), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
        positive = np.array_equal(lu.perm_r, lu.perm_c) and np.all(lu.U.diagonal() > 0)
    except RuntimeError:  # exactly singular
        positive = False
    if not positive:
        raise InputError(f"{what} is not positive definite")
    return q


def _inverse(precision: sparse.spmatrix) -> np.ndarray:
    return np.linalg.inv(precision.toarray())
