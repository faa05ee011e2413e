"""A proper CAR (conditional autoregression) on the friendship graph: users' positions as a
Gaussian Markov random field, the dependence behind seed 002 §IV-C's dependent adversary (its
prior P(D_i = d | D_-i) weights positions near friends, Eq. 9; here it is this model's
conditional).

One coordinate field x (n users) with adjacency W (D = diag of W's row sums), spatial
dependence alpha and precision tau has density N(mu 1, Q^{-1}) with

    Q = tau (D - alpha W)                                                      (pm.CAR)

so that X_i | x_-i ~ N(mu + alpha * (mean of i's friends' x - mu), 1 / (tau d_i)) for a user
with d_i friends. pm.CAR cannot hold a user without friends (its log-density divides by
sqrt(D): nan), so such a user gets Q_ii = tau: independent N(mu, 1/tau). The two coordinates
(x from longitude, y from latitude, normalised in a `Box`) are independent fields sharing alpha
and W, each with its own tau and mu.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from scipy import sparse

from ddpbayes.errors import InputError
from ddpbayes.geo.data import Box


def adjacency(n: int, pairs: np.ndarray) -> sparse.csr_matrix:
    """The symmetric 0/1 adjacency (n, n) of undirected `pairs` (E, 2) of rows (repeats count once).

    Parameters
    ----------
    n : int
        Number of rows (users).
    pairs : numpy.ndarray
        (E, 2) rows joined by an edge, each in [0, n).

    Returns
    -------
    scipy.sparse.csr_matrix
        W, (n, n), 1.0 where two rows are joined.

    Raises
    ------
    InputError
        If a pair leaves [0, n) or joins a row to itself.
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if pairs.size and (pairs.min() < 0 or pairs.max() >= n or np.any(pairs[:, 0] == pairs[:, 1])):
        raise InputError(f"adjacency: pairs must join two different rows in [0, {n}), got {pairs.min()}..{pairs.max()}")
    rows = np.concatenate([pairs[:, 0], pairs[:, 1]])
    cols = np.concatenate([pairs[:, 1], pairs[:, 0]])
    w = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    w.data[:] = 1.0  # a pair listed twice is one edge
    return w


def car_precision(W, alpha: float, tau: float) -> sparse.csr_matrix:
    """Q = tau (D - alpha W), D = diag(row sums of W): pm.CAR's precision (its logp's quadratic
    form, PyMC's `CAR`), with Q_ii = tau for a row without neighbours (an independent user).
    W is symmetric with non-negative weights (0/1 for a graph); -1 < alpha < 1 and tau > 0 make
    D - alpha W strictly diagonally dominant on the connected rows: positive definite.

    Parameters
    ----------
    W : array_like or sparse matrix
        (n, n) symmetric adjacency with finite non-negative weights.
    alpha : float
        Spatial dependence, -1 < alpha < 1.
    tau : float
        Precision, tau > 0.

    Returns
    -------
    scipy.sparse.csr_matrix
        Q, (n, n).

    Raises
    ------
    InputError
        If W is not square, symmetric, finite and non-negative, or alpha or tau is out of range.
    """
    w = sparse.csr_matrix(W, dtype=float)
    alpha, tau = float(alpha), float(tau)
    if w.shape[0] != w.shape[1] or not np.all(np.isfinite(w.data)) or (w.data < 0).any():
        raise InputError(f"car_precision: W must be a square matrix of finite non-negative weights, shape {w.shape}")
    if w.nnz and abs(w - w.T).max() > 0:
        raise InputError("car_precision: W must be symmetric")
    if not (-1 < alpha < 1 and 0 < tau < math.inf):
        raise InputError(f"car_precision needs -1 < alpha < 1 and tau > 0, got alpha = {alpha:g}, tau = {tau:g}")
    degree = np.asarray(w.sum(axis=1)).ravel()
    diag = np.where(degree > 0, degree, 1.0)
    return (tau * (sparse.diags(diag) - alpha * w)).tocsr()


def joint_precision(W, alpha: float, tau: tuple[float, float]) -> sparse.csr_matrix:
    """The precision (2n, 2n) of every user's x, then every user's y: block diagonal, one
    `car_precision` per coordinate (shared alpha and W, tau per coordinate).

    Parameters
    ----------
    W : array_like or sparse matrix
        (n, n) symmetric adjacency, as for `car_precision`.
    alpha : float
        Spatial dependence, -1 < alpha < 1.
    tau : tuple of float
        (tau_x, tau_y), each > 0.

    Returns
    -------
    scipy.sparse.csr_matrix
        The (2n, 2n) block-diagonal precision.

    Raises
    ------
    InputError
        As `car_precision`.
    """
    return sparse.block_diag([car_precision(W, alpha, t) for t in tau], format="csr")


def car_vector_weights(W, alpha: float, tau: tuple[float, float]) -> sparse.csr_matrix:
    """Weights W2 (2n, 2n) for ONE pm.CAR over the 2n coordinates, with tau = 1, whose precision
    D2 - alpha W2 is `joint_precision(W, alpha, tau)` (pm.CAR takes a scalar tau and no row
    without neighbours, so both are folded into W2):

        W2 = blockdiag(tau_x A, tau_y A),   A = W + diag(1 / (1 - alpha) for rows without neighbours),

    since an isolated row of A has D_ii - alpha A_ii = (1 - alpha) / (1 - alpha) = 1. Valid for a
    fixed alpha (the fitted model); pm.CAR drops log|D2| from its log-density, a constant here."""
    w = sparse.csr_matrix(W, dtype=float)
    alone = np.asarray(w.sum(axis=1)).ravel() == 0
    a = (w + sparse.diags(alone / (1.0 - float(alpha)))).tocsr()
    return sparse.block_diag([t * a for t in tau], format="csr")


def conditional(Q, known_values, target, mu: float = 0.0):
    """Mean and variance of one field's X_target given every other user's value (Gaussian Markov
    property, Rue & Held 2005 Thm. 2.3; for the CAR it reads mu + alpha (friends' mean - mu)):

        mean = mu - (1 / Q_ii) sum_{j != i} Q_ij (x_j - mu),   var = 1 / Q_ii.

    `known_values` holds every user's value (the targets' own entries are ignored; pass centred
    values with mu = 0, or raw values with the field's mu); `target` is one row (floats back) or
    an array of rows (arrays back, each target given all others, including the other targets).

    Parameters
    ----------
    Q : array_like or sparse matrix
        (n, n) precision of the field.
    known_values : array_like
        (n,) every user's value.
    target : int or array_like of int
        The row, or rows, to condition.
    mu : float, default 0.0
        The field's mean.

    Returns
    -------
    tuple
        (mean, var): floats for one target, arrays of floats for an array of targets.

    Raises
    ------
    InputError
        If `known_values` is not of length n, a target is outside [0, n), or a value a target depends
        on is not finite.

    References
    ----------
    Rue, H. and Held, L. (2005), Gaussian Markov Random Fields, Theorem 2.3.
    """
    q = sparse.csr_matrix(Q, dtype=float)
    rows = np.asarray(target, dtype=np.int64)
    values = np.asarray(known_values, dtype=float)
    n = q.shape[0]
    if values.shape != (n,) or np.any((rows < 0) | (rows >= n)):
        raise InputError(f"conditional: need {n} values and targets in [0, {n}), got {values.shape} and {target}")
    pick = np.atleast_1d(rows)
    block = q[pick].tocoo()  # the targets' rows only
    other = block.col != pick[block.row]  # a target's own value is never read, not even as 0 * value
    weighted = block.data[other] * (values[block.col[other]] - mu)
    diag = q.diagonal()[pick]
    mean = mu - np.bincount(block.row[other], weights=weighted, minlength=len(pick)) / diag
    if not np.all(np.isfinite(mean)):
        raise InputError("conditional: a known value the target depends on is not finite")
    var = 1.0 / diag
    return (float(mean[0]), float(var[0])) if rows.ndim == 0 else (mean, var)


@dataclass(frozen=True)
class CarFit:
    """A PyMC fit of the CAR model (models/gowalla_friends.py): the box the positions are
    normalised in, posterior means of the regional means `mu` (x, y), of `alpha` (with its 95%
    central posterior interval) and of the precisions `tau` (x, y); the sampler's settings,
    diagnostics (largest R-hat, smallest bulk ESS, divergences) and wall time; `details`: what
    else the fit recorded (data, counts, what alpha says).

    Parameters
    ----------
    box : Box
        The box the positions are normalised in.
    mu : tuple of float
        Posterior means of the regional means (x, y).
    alpha : float
        Posterior mean of the spatial dependence.
    alpha_interval : tuple of float
        95% central posterior interval of alpha.
    tau : tuple of float
        Posterior means of the precisions (x, y).
    draws, chains, seed : int
        The sampler's draws per chain, chains and seed.
    rhat_max : float
        Largest R-hat.
    ess_bulk_min : float
        Smallest bulk effective sample size.
    seconds : float
        Wall time of the fit.
    tune : int, default 0
        Tuning steps per chain.
    divergences : int, default 0
        Divergent transitions.
    details : dict, default {}
        What else the fit recorded; not compared.
    """

    box: Box
    mu: tuple[float, float]
    alpha: float
    alpha_interval: tuple[float, float]
    tau: tuple[float, float]
    draws: int
    chains: int
    seed: int
    rhat_max: float
    ess_bulk_min: float
    seconds: float
    tune: int = 0
    divergences: int = 0
    details: dict = field(default_factory=dict, compare=False)


_PAIRS = ("mu", "alpha_interval", "tau")


def save_fit(fit: CarFit, path: str | Path) -> None:
    """Write `fit` as JSON (the box as {"lat": [lo, hi], "lon": [lo, hi]}), atomically.

    Parameters
    ----------
    fit : CarFit
        The fit to write.
    path : str or Path
        The JSON file, replaced whole.
    """
    data = asdict(fit)
    data["box"] = {"lat": list(fit.box.lat), "lon": list(fit.box.lon)}
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def load_fit(path: str | Path) -> CarFit:
    """The fit `save_fit` wrote; InputError naming the file for unreadable or incomplete JSON.

    Parameters
    ----------
    path : str or Path
        The JSON file.

    Returns
    -------
    CarFit
        The fit.

    Raises
    ------
    InputError
        If the file cannot be read or parsed, lacks a field, or holds alpha outside (-1, 1), or not
        two means and two positive taus.
    """
    try:
        data = json.loads(Path(path).read_text())
        box = data.pop("box")
        box = Box(lat=tuple(box["lat"]), lon=tuple(box["lon"]))
        fields = {k: tuple(map(float, data[k])) if k in _PAIRS else data[k] for k in data}
        fit = CarFit(box=box, **fields)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"cannot read the CAR fit {path}: {type(exc).__name__}: {exc}") from exc
    if not (-1 < fit.alpha < 1 and all(t > 0 for t in fit.tau) and len(fit.mu) == 2 and len(fit.tau) == 2):
        raise InputError(f"the CAR fit {path} needs -1 < alpha < 1 and two positive taus, got alpha = {fit.alpha}, "
                         f"tau = {fit.tau}")
    return fit


def pymc_model(x: np.ndarray, y: np.ndarray, W, independent: bool = False):
    """The CAR model of models/gowalla_friends.py as a PyMC model, positions normalised in a box
    (x from longitude, y from latitude): alpha ~ U(0, 1), sigma_c = tau_c^{-1/2} ~ HalfNormal(1),
    mu_c ~ N(0.5, 0.5); the users with friends as two observed pm.CAR on W, the others as observed
    Normals (pm.CAR cannot hold a row without neighbours). `independent`: every user N(mu_c, sigma_c),
    no alpha (the template without dependence, fitting/graph.py)."""
    import pymc as pm

    w = sparse.csr_matrix(W, dtype=float)
    linked = np.zeros(len(x), dtype=bool) if independent else np.asarray(w.sum(axis=1)).ravel() > 0
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.5, 0.5, shape=2)
        alpha = None if independent else pm.Uniform("alpha", 0.0, 1.0)
        sigma = pm.HalfNormal("sigma", 1.0, shape=2)
        pm.Deterministic("tau", sigma**-2)
        for c, values in enumerate((x, y)):
            if alpha is not None:
                pm.CAR(f"friends_{c}", mu=mu[c] * np.ones(linked.sum()), W=w[linked][:, linked], alpha=alpha,
                       tau=sigma[c] ** -2, observed=values[linked])
            pm.Normal(f"alone_{c}", mu[c], sigma[c], observed=values[~linked])
    return model
