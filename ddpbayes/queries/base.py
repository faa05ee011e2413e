"""Queries q(x): a scalar or vector statistic of the tuples (DESIGN §1).

Every query maps tuple values `x` (shape (S, n)) to outputs (shape (S, C)) and knows its
per-tuple L1 sensitivity over the tuples' domains, which fixes classic DP's noise scale. Each
family of kinds has its module (`linear`, `centroids`, `histogram`, `expr`, `fn`) and one line
in `parse.KINDS`, the registry `parse_query` reads a query's text with.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.model.domains import Domain, Finite


class Query(ABC):
    """A statistic q(x) of the tuples: its values, its per-tuple L1 sensitivity over the domains,
    and `spec`, the text `parse_query` reads it back from."""

    name: str
    given: float | None = None  # the sensitivity the user stated (`--sensitivity`; expr:/fn: only)

    @property
    def spec(self) -> str:
        """The text `parse_query` reads this query back from (here its name)."""
        return self.name

    @abstractmethod
    def values(self, x: np.ndarray) -> np.ndarray:
        """Outputs for tuple values `x` of shape (S, n): an array of shape (S, C).

        Parameters
        ----------
        x : numpy.ndarray
            S states of the n tuples, shape (S, n).

        Returns
        -------
        numpy.ndarray
            The query's C outputs at each state, shape (S, C).
        """

    @abstractmethod
    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
        """sup over x_{-k} and t, t' in the domain of tuple k of ``||q(t, x_{-k}) - q(t', x_{-k})||_1``.

        Parameters
        ----------
        k : int
            The tuple whose change is bounded.
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Returns
        -------
        float
            Tuple k's L1 sensitivity (seed 000 §III).
        """

    def check(self, domains: Sequence[Domain]) -> None:
        """Raise InputError if the query does not apply to tuples with these domains.

        Parameters
        ----------
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Raises
        ------
        InputError
            When the query does not fit these tuples; here it always fits.
        """

    def bind(self, model) -> Query:
        """This query on `model`'s tuples: `expr:`/`fn:` queries resolve the names they use here.

        Parameters
        ----------
        model : DependenceModel
            The model whose tuples the query reads.

        Returns
        -------
        Query
            The bound query (here this query itself).
        """
        return self

    def weights(self, n: int) -> np.ndarray | None:
        """w for a scalar linear query w·x, else None.

        Parameters
        ----------
        n : int
            The number of tuples.

        Returns
        -------
        numpy.ndarray or None
            The n weights, or None when the query is not a scalar linear one (here None).
        """
        return None

    def matrix(self, n: int) -> np.ndarray | None:
        """A (C, n) for a linear query A x (the row w of w·x for a scalar one), else None.

        Parameters
        ----------
        n : int
            The number of tuples.

        Returns
        -------
        numpy.ndarray or None
            A of shape (C, n), or None when the query is not linear.
        """
        w = self.weights(n)
        return None if w is None else w[None, :]

    def contributions(self, values: np.ndarray) -> np.ndarray | None:
        """c_k(v), tuple k's term at each value v, when q(x) = Σ_k c_k(x_k) has one output, else None: here w_k·v
        for a scalar linear query w·x (`weights`), None otherwise. The structured engine reads the query
        through this table alone (DESIGN §2.1b).

        Parameters
        ----------
        values : numpy.ndarray
            Shape (n, m): row k holds values of tuple k (padded as the caller likes).

        Returns
        -------
        numpy.ndarray or None
            Shape (n, m), tuple k's term of the query at each of those values, or None.
        """
        w = self.weights(values.shape[0])
        return None if w is None else w[:, None] * values

    def global_sensitivity(self, domains: Sequence[Domain]) -> float:
        """The global L1 sensitivity: the largest of the tuples' (`sensitivity`).

        Parameters
        ----------
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Returns
        -------
        float
            max over k of ``sensitivity(k, domains)``.
        """
        return max(self.sensitivity(k, domains) for k in range(len(domains)))

    def sensitivity_range(self, k: int, domains: Sequence[Domain]) -> tuple[float, float] | None:
        """(lower, upper) when tuple k's sensitivity is only bounded (DESIGN §1.1), else None:
        here it is computed.

        Parameters
        ----------
        k : int
            The tuple.
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Returns
        -------
        tuple of float or None
            (lower, upper) bounds on tuple k's sensitivity, or None when it is exact (here None).
        """
        return None

    def sensitivity_pair(self, k: int, domains: Sequence[Domain]) -> tuple[float, float] | None:
        """Values (t, t') of tuple k for dp's witness, None when unknown: here the ends of its
        domain (hi, lo).

        Parameters
        ----------
        k : int
            The tuple.
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Returns
        -------
        tuple of float or None
            (t, t'), here (hi, lo) of tuple k's domain.
        """
        return domains[k].hi, domains[k].lo

    def sensitivity_notes(self, domains: Sequence[Domain]) -> list[str]:
        """How the sensitivity was obtained, for the audit's notes: here nothing to say.

        Parameters
        ----------
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Returns
        -------
        list of str
            One line per note (here none).
        """
        return []


def no_argument(kind: str, arg: str, spec: str) -> None:
    """Refuse an argument after a kind that takes none (`sum:3`)."""
    if arg:
        raise InputError(f"query '{kind}' takes no argument, got '{spec}'")


def join_numbers(values: tuple[float, ...]) -> str:
    """Numbers as `parse_query` reads them back exactly (integers without a decimal point)."""
    return ",".join(str(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v)) for v in values)


def read_numbers(text: str, spec: str) -> tuple[float, ...]:
    """The comma-separated finite numbers of `text`, the argument of the query `spec`."""
    try:
        vals = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise InputError(f"query '{spec}' needs comma-separated numbers after ':'") from None
    if not vals or not all(math.isfinite(v) for v in vals):
        raise InputError(f"query '{spec}' needs finite numbers after ':'")
    return vals


def output_count(query: Query, domains: Sequence[Domain]) -> int:
    """How many output coordinates `query` has: its value at one point of every domain.

    Parameters
    ----------
    query : Query
        The query, bound to the model when it names its variables.
    domains : sequence of Domain
        The domains of the model's tuples, in tuple order.

    Returns
    -------
    int
        C, the number of outputs.
    """
    point = [float(d.values[0]) if isinstance(d, Finite) else _inside(d.lo, d.hi) for d in domains]
    return int(query.values(np.array([point])).shape[1])


def _inside(lo: float, hi: float) -> float:
    ends = [v for v in (lo, hi) if math.isfinite(v)]
    return float(np.mean(ends)) if ends else 0.0
