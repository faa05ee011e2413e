"""`histogram:e0,e1,...`: counts of tuples in bins, noise on every bin (DESIGN §1)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.model.domains import Domain, Finite
from ddpbayes.queries.base import Query, join_numbers, read_numbers


@dataclass(frozen=True)
class Histogram(Query):
    """Counts of tuples in bins [e0,e1), ..., [e_{m-1}, e_m] (numpy's convention); noise on every bin.

    Parameters
    ----------
    edges : tuple of float
        The m + 1 increasing bin edges.
    name : str, default "histogram"
        The kind.
    """

    edges: tuple[float, ...]
    name: str = "histogram"

    @property
    def spec(self) -> str:
        """The text `parse_query` reads this query back from (`histogram:` and the edges)."""
        return f"histogram:{join_numbers(self.edges)}"

    def bins(self, v: np.ndarray) -> np.ndarray:
        """Bin index of each value, -1 outside every bin.

        Parameters
        ----------
        v : numpy.ndarray
            Values, any shape.

        Returns
        -------
        numpy.ndarray
            The bin index of each value (same shape), -1 below the first edge or above the last.
        """
        e = np.asarray(self.edges)
        idx = np.searchsorted(e, v, side="right") - 1
        idx = np.where(v == e[-1], len(e) - 2, idx)
        return np.where((v < e[0]) | (v > e[-1]), -1, idx)

    def values(self, x: np.ndarray) -> np.ndarray:
        """The count of tuples in each bin at each state.

        Parameters
        ----------
        x : numpy.ndarray
            S states of the n tuples, shape (S, n).

        Returns
        -------
        numpy.ndarray
            Shape (S, m), one column per bin.
        """
        b = self.bins(x)
        nbins = len(self.edges) - 1
        return np.stack([(b == j).sum(axis=1) for j in range(nbins)], axis=1).astype(float)

    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
        """2 when tuple k can move from one bin to another, 1 when it can only enter or leave one
        bin, 0 when it cannot change bin.

        Parameters
        ----------
        k : int
            The tuple.
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Returns
        -------
        float
            Tuple k's L1 sensitivity.
        """
        reach = self._reachable_bins(domains[k])
        inside = reach - {-1}
        if len(reach) < 2:
            return 0.0
        return 2.0 if len(inside) >= 2 else 1.0

    def _reachable_bins(self, domain: Domain) -> set[int]:
        if isinstance(domain, Finite):
            return set(self.bins(np.asarray(domain.values)).tolist())
        e, m = np.asarray(self.edges), len(self.edges) - 1
        reach = {-1} if domain.lo < e[0] or domain.hi > e[-1] else set()
        for j in range(m):
            below_top = domain.lo <= e[j + 1] if j == m - 1 else domain.lo < e[j + 1]
            if below_top and domain.hi >= e[j]:
                reach.add(j)
        return reach


def parse_histogram(kind: str, arg: str, spec: str) -> Query:
    """`histogram:e0,e1,...`: at least two increasing edges."""
    edges = read_numbers(arg, spec)
    if len(edges) < 2 or any(b <= a for a, b in itertools.pairwise(edges)):
        raise InputError(f"histogram edges must be at least two increasing numbers, got '{arg}'")
    return Histogram(edges)
