"""Several releases' queries as one (seed 000 §V-A; DESIGN §3.1b): their outputs stacked into
one vector, audited as any vector release (`composition` pairs it with the releases' noise)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ddpbayes.model.domains import Domain
from ddpbayes.queries.base import Query

if TYPE_CHECKING:
    from ddpbayes.model import DependenceModel


@dataclass(frozen=True)
class ComposedQuery(Query):
    """The releases' queries, their outputs stacked into one vector (release by release).

    Parameters
    ----------
    queries : tuple of Query
        The releases' queries, in release order.
    name : str, default "composition"
        The kind.
    """

    queries: tuple[Query, ...]
    name: str = "composition"

    @property
    def spec(self) -> str:
        """The releases' query texts, joined by plus signs (``sum + count``)."""
        return " + ".join(q.spec for q in self.queries)

    def values(self, x: np.ndarray) -> np.ndarray:
        """The releases' outputs side by side.

        Parameters
        ----------
        x : numpy.ndarray
            S states of the n tuples, shape (S, n).

        Returns
        -------
        numpy.ndarray
            Shape (S, C), C the sum of the releases' output counts.
        """
        return np.concatenate([q.values(x) for q in self.queries], axis=1)

    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
        """The L1 sensitivity of the stacked output: the sum of the releases' (a bound when
        they are attained by different changes of tuple k).

        Parameters
        ----------
        k : int
            The tuple.
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Returns
        -------
        float
            The sum of the releases' sensitivities to tuple k.
        """
        return float(sum(q.sensitivity(k, domains) for q in self.queries))

    def check(self, domains: Sequence[Domain]) -> None:
        """Check every release's query.

        Parameters
        ----------
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Raises
        ------
        InputError
            When a release's query does not fit these tuples.
        """
        for q in self.queries:
            q.check(domains)

    def bind(self, model: DependenceModel) -> ComposedQuery:
        """Every release's query bound to `model`.

        Parameters
        ----------
        model : DependenceModel
            The model whose tuples the queries read.

        Returns
        -------
        ComposedQuery
            The bound queries, stacked.
        """
        return ComposedQuery(tuple(q.bind(model) for q in self.queries))

    def matrix(self, n: int) -> np.ndarray | None:
        """The releases' matrices stacked, when every release is linear.

        Parameters
        ----------
        n : int
            The number of tuples.

        Returns
        -------
        numpy.ndarray or None
            The stacked A of shape (C, n), or None when a release is not linear.
        """
        rows = [q.matrix(n) for q in self.queries]
        return None if any(r is None for r in rows) else np.vstack(rows)
