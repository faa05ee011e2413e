"""Checks on numeric covariance matrices, shared by the Gaussian engine and the sympy derivations."""

from __future__ import annotations

import numpy as np

from ddpbayes.errors import InputError


def check_positive_definite(cov: np.ndarray, what: str) -> None:
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1] or not np.all(np.isfinite(cov)):
        raise InputError(f"{what} must be a finite square matrix")
    if not np.allclose(cov, cov.T, rtol=1e-10, atol=1e-12 * np.abs(cov).max()):
        raise InputError(f"{what} is not symmetric")
    low = eigenvalues_min(cov)
    if low < 0:
        raise InputError(f"{what} is not positive semi-definite (smallest eigenvalue {low:.3g})")
    try:
        np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        raise InputError(
            f"{what} is singular: a tuple is a linear function of others, so a conditional covariance is "
            "singular (the gaussian engine needs a positive definite covariance)"
        ) from None
    if np.linalg.cond(cov) > 1e12:
        raise InputError(f"{what} is numerically singular (condition number {np.linalg.cond(cov):.3g})")


def eigenvalues_min(cov: np.ndarray) -> float:
    """The smallest eigenvalue of a symmetric matrix, 0 when negative only by rounding."""
    eig = np.linalg.eigvalsh((cov + cov.T) / 2)
    return 0.0 if eig.min() >= -1e-12 * max(1.0, np.abs(eig).max()) else float(eig.min())
