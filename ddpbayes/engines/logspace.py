"""Numeric helpers the exact engines share: log-sum-exp on small arrays, and the test of
dependence on a pairwise table (DESIGN §3.1)."""

from __future__ import annotations

import numpy as np

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
    marg = joint.sum(axis=1)
    cond = joint[marg > 0] / marg[marg > 0, None]
    return bool(np.abs(cond - cond[0]).max() > INDEPENDENT)
