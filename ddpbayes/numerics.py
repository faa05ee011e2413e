"""Bottom-layer numerics: log-sum-exp on small arrays, the test of dependence on a pairwise table
(DESIGN §3.1), and checks on numeric covariance matrices (the Gaussian engine, the sympy
derivations)."""

from __future__ import annotations

import numpy as np

from ddpbayes.errors import InputError

INDEPENDENT = 1e-10  # conditional probabilities this close count as equal (rounding)


def logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    """log Σ exp along `axis`, -inf where every term is -inf (scipy's wrapper costs ~1 ms a call
    on these small arrays, which dominated the pdp lattice)."""
    peak = np.max(a, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(a - peak), axis=axis)) + np.squeeze(peak, axis=axis)


def law_changes(joint: np.ndarray) -> bool:
    """Whether P(column | row) changes with the row, for a joint probability table P(row, column)."""
    return bool(laws_change(joint[None])[0])


def laws_change(joints: np.ndarray) -> np.ndarray:
    """`law_changes` for a stack of tables (J, rows, columns): P(column | row) differs from its value on the
    first row of positive probability by more than INDEPENDENT on some row of positive probability."""
    marg = joints.sum(axis=2)
    positive = marg > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        cond = joints / marg[:, :, None]
    first = cond[np.arange(len(joints)), np.argmax(positive, axis=1)]
    gap = np.where(positive[:, :, None], np.abs(cond - first[:, None]), 0.0)
    return gap.reshape(len(joints), -1).max(axis=1) > INDEPENDENT


def check_positive_definite(cov: np.ndarray, what: str) -> None:
    """InputError unless `cov` is a finite symmetric positive definite matrix with 2-norm condition
    number at most 1e12. One symmetric eigen-decomposition gives both the smallest eigenvalue and the
    condition number (for a symmetric positive definite matrix its singular values are its
    eigenvalues, so lambda_max / lambda_min is `np.linalg.cond`'s value, without a second, SVD, pass)."""
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1] or not np.all(np.isfinite(cov)):
        raise InputError(f"{what} must be a finite square matrix")
    if not np.allclose(cov, cov.T, rtol=1e-10, atol=1e-12 * np.abs(cov).max()):
        raise InputError(f"{what} is not symmetric")
    eig = np.linalg.eigvalsh((cov + cov.T) / 2)
    low = _rounded_min(eig)
    if low < 0:
        raise InputError(f"{what} is not positive semi-definite (smallest eigenvalue {low:.3g})")
    try:
        np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        raise InputError(
            f"{what} is singular: a tuple is a linear function of others, so a conditional covariance is "
            "singular (the gaussian engine needs a positive definite covariance)"
        ) from None
    condition = eig[-1] / eig[0] if eig[0] > 0 else np.inf
    if condition > 1e12:
        raise InputError(f"{what} is numerically singular (condition number {condition:.3g})")


def eigenvalues_min(cov: np.ndarray) -> float:
    """The smallest eigenvalue of a symmetric matrix, 0 when negative only by rounding."""
    return _rounded_min(np.linalg.eigvalsh((cov + cov.T) / 2))


def _rounded_min(eig: np.ndarray) -> float:
    """The smallest of a symmetric matrix's eigenvalues `eig`, 0 when negative only by rounding."""
    return 0.0 if eig.min() >= -1e-12 * max(1.0, np.abs(eig).max()) else float(eig.min())
