"""`level:L` and `level:L:w0,w1,...`: the (weighted) count of tuples equal to L, e.g. the records of one
level of a categorical outcome in a cluster (DESIGN §1, §2.1b; issue #41)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.model.domains import Domain, Finite
from ddpbayes.queries.base import Query, join_numbers, read_numbers
from ddpbayes.queries.linear import weight_vector


@dataclass(frozen=True)
class LevelCount(Query):
    """Σ_k w_k·1[x_k = L]: every weight 1 (`level:L`) or the weights given (`level:L:w0,w1,...`).

    Not linear in x (`weights` and `matrix` stay None), but a sum of one term per tuple: its
    `contributions` table lets the structured engine solve it as it solves w·x.

    Parameters
    ----------
    level : float
        The value L counted.
    coefficients : tuple of float or None, default None
        The weights w; None gives every tuple the weight 1.
    name : str, default "level"
        The kind.
    """

    level: float
    coefficients: tuple[float, ...] | None = None
    name: str = "level"

    @property
    def spec(self) -> str:
        """The text `parse_query` reads this query back from (`level:L`, then `:` and the weights if given)."""
        head = f"level:{join_numbers((self.level,))}"
        return head if self.coefficients is None else f"{head}:{join_numbers(self.coefficients)}"

    def counted(self, n: int) -> np.ndarray:
        """w, the weight of each tuple's indicator (read-only).

        Parameters
        ----------
        n : int
            The number of tuples.

        Returns
        -------
        numpy.ndarray
            The n weights.
        """
        return weight_vector(self.coefficients, False, n)

    def values(self, x: np.ndarray) -> np.ndarray:
        """Σ_k w_k·1[x_k = L] at each state.

        Parameters
        ----------
        x : numpy.ndarray
            S states of the n tuples, shape (S, n).

        Returns
        -------
        numpy.ndarray
            Shape (S, 1).
        """
        return ((np.asarray(x) == self.level) @ self.counted(x.shape[1]))[:, None]

    def contributions(self, values: np.ndarray) -> np.ndarray:
        """w_k·1[v = L] for each value v of each tuple k.

        Parameters
        ----------
        values : numpy.ndarray
            Shape (n, m): row k holds values of tuple k (padded as the caller likes).

        Returns
        -------
        numpy.ndarray
            Shape (n, m), tuple k's term of the query at each of those values.
        """
        return self.counted(values.shape[0])[:, None] * (values == self.level)

    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
        """``|w_k|`` when tuple k can be L and another value, else 0.

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
        w = self.counted(len(domains))[k]
        return 0.0 if w == 0 or self._other(domains[k]) is None else abs(float(w))

    def sensitivity_pair(self, k: int, domains: Sequence[Domain]) -> tuple[float, float] | None:
        """(L, another value of tuple k's domain), the pair whose change moves the count; None when there is none.

        Parameters
        ----------
        k : int
            The tuple.
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Returns
        -------
        tuple of float or None
            (t, t').
        """
        other = self._other(domains[k])
        return None if other is None else (self.level, other)

    def check(self, domains: Sequence[Domain]) -> None:
        """Refuse weights that do not match the tuples.

        Parameters
        ----------
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Raises
        ------
        InputError
            When `coefficients` has not one weight per tuple.
        """
        if self.coefficients is not None and len(self.coefficients) != len(domains):
            raise InputError(f"level query has {len(self.coefficients)} weights but the model has {len(domains)} "
                             "tuples")

    def _other(self, domain: Domain) -> float | None:
        """A value of `domain` other than L when L is in it too, else None."""
        if isinstance(domain, Finite):
            others = [v for v in domain.values if v != self.level]
            return others[0] if self.level in domain.values and others else None
        if not domain.lo <= self.level <= domain.hi:
            return None
        return domain.hi if domain.hi != self.level else domain.lo


def parse_level(kind: str, arg: str, spec: str) -> Query:
    """`level:L` or `level:L:w0,w1,...`: one finite number L, then optionally the weights."""
    value, sep, weights = arg.partition(":")
    if not value.strip():
        raise InputError(f"query '{spec}' needs the value counted: level:L or level:L:w0,w1,...")
    level = read_numbers(value, spec)
    if len(level) != 1:
        raise InputError(f"query '{spec}' counts one value L (level:L or level:L:w0,w1,...), got {len(level)}")
    if sep and not weights.strip():
        raise InputError(f"query '{spec}' needs comma-separated weights after 'level:L:'")
    return LevelCount(level[0], read_numbers(weights, spec) if sep else None)

