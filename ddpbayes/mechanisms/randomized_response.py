"""Randomized response: each 0/1 tuple reported truthfully with probability e^ε / (1 + e^ε); its
information integrals are exact sums over the outputs (004 Eqs. 26, 28)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from ddpbayes.errors import InputError
from ddpbayes.limits import check_states
from ddpbayes.mechanisms.base import Mechanism, _positive, source_entry
from ddpbayes.mechanisms.information import terms
from ddpbayes.model.domains import Domain, Finite
from ddpbayes.queries import Identity, Query


@dataclass(frozen=True)
class RandomizedResponse(Mechanism):
    """Each binary tuple is reported truthfully with probability e^ε / (1 + e^ε), else flipped.

    Pure ε-DP per bit; the outputs are the 0/1 tuples themselves (`Identity` query only).

    Parameters
    ----------
    epsilon : float
        The per-bit DP level ε (positive).
    kind : str, optional
        The mechanism's name ("randomized_response").
    source : str or None, optional
        The library object it was read from (`from_library`).

    Raises
    ------
    InputError
        When `epsilon` is not a positive normal double.
    """

    epsilon: float
    kind: str = "randomized_response"
    source: str | None = field(default=None, compare=False)  # the library object it was read from (interop)
    aliases = ("rr", "randomized-response")
    flips_bits = True

    def __post_init__(self):
        _positive(self.epsilon, "epsilon")

    @property
    def keep(self) -> float:
        return 1.0 / (1.0 + math.exp(-self.epsilon))

    def log_kernel(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Both outputs 0 and 1 with their exact log-probabilities.

        Parameters
        ----------
        q : numpy.ndarray
            The distinct bits (m,) of one coordinate.

        Returns
        -------
        grid : numpy.ndarray
            The outputs [0, 1].
        log_kernel : numpy.ndarray
            log p(y | q_s) (2, m).
        """
        grid = np.array([0.0, 1.0])
        q = np.asarray(q, dtype=float)
        same = grid[:, None] == q[None, :]
        # log keep = -log1p(e^-eps), log flip = -eps - log1p(e^-eps): exact for any eps
        log_keep = -math.log1p(math.exp(-self.epsilon))
        return grid, np.where(same, log_keep, log_keep - self.epsilon)

    def grid_size(self, levels: int) -> int:
        """Two outputs, whatever the levels.

        Parameters
        ----------
        levels : int
            The number of distinct bits.

        Returns
        -------
        int
            2.
        """
        return 2

    def dp_leakage(self, sensitivity: float) -> float:
        """ε whenever the tuple can change.

        Parameters
        ----------
        sensitivity : float
            The L1 sensitivity.

        Returns
        -------
        float
            `epsilon` if `sensitivity` is positive, else 0.
        """
        return self.epsilon if sensitivity > 0 else 0.0

    def check(self, query: Query, domains: Sequence[Domain]) -> None:
        """Refuse all but the identity query on 0/1 tuples.

        Parameters
        ----------
        query : Query
            The query to release.
        domains : sequence of Domain
            The tuples' domains.

        Raises
        ------
        InputError
            When the query is not `Identity` or a domain is not a finite subset of {0, 1}.
        """
        if not isinstance(query, Identity):
            raise InputError("randomized response perturbs the tuples themselves: use --query identity")
        for k, d in enumerate(domains):
            if not (isinstance(d, Finite) and set(d.values) <= {0.0, 1.0}):
                raise InputError(f"randomized response needs 0/1 tuples, but tuple {k} has domain {d}")

    def information(self, levels: np.ndarray, log_w: np.ndarray,
                    kernels: Sequence[Mechanism]) -> tuple[float, float, float]:
        """Exact sums over the 2^d outputs when every varying coordinate is randomized response.

        Parameters
        ----------
        levels : numpy.ndarray
            The distinct bit vectors (S, d) of the varying output coordinates.
        log_w : numpy.ndarray
            log P(X_i = t, q = q_s) (T, S).
        kernels : sequence of Mechanism
            The noise of the d coordinates, this one first.

        Returns
        -------
        mutual_information : float
            I(X_i; Y).
        sup_divergence : float
            max_y D(y).
        error : float
            0 (exact sums).

        Raises
        ------
        NotAvailable
            When a varying coordinate has other noise.
        InputError
            When the 2^d outputs' sums exceed --max-states.
        """
        if all(isinstance(k, RandomizedResponse) for k in kernels):
            return bits_information(levels, log_w, np.array([k.epsilon for k in kernels]))
        return super().information(levels, log_w, kernels)

    def describe(self) -> dict:
        return {"kind": self.kind, "epsilon": self.epsilon, "noise": f"keep each bit with probability {self.keep:.6g}",
                **source_entry(self)}


def bits_information(levels: np.ndarray, log_w: np.ndarray, epsilon: np.ndarray,
                     limit: int | None = None) -> tuple[float, float, float]:
    """(I(X_i; Y), max_y D, 0) for randomized response on the bits `levels` (S, d), coordinate c
    kept with probability 1 / (1 + e^{-ε_c}): exact sums over the 2^d outputs."""
    d = levels.shape[1]
    check_states((2 ** d) * len(levels) * len(log_w), f"the information sums (2^{d} outputs)", "cells", limit)
    log_p = logsumexp(log_w, axis=1)
    log_keep = -np.log1p(np.exp(-epsilon))
    outputs = (np.arange(2 ** d)[:, None] >> np.arange(d)[None, :]) & 1  # (N, d)
    flips = outputs[:, None, :] != levels[None, :, :]  # (N, S, d)
    log_k = log_keep.sum() - (flips * epsilon).sum(axis=2)  # (N, S)
    log_g = logsumexp(log_w[:, None, :] + log_k[None], axis=2)  # (T, N)
    mi, kl = terms(log_g, log_p)
    return float(mi.sum()), float(kl.max()), 0.0
