"""Linear queries A x (DESIGN §1, §2.2): `sum`, `count`, `mean` and `linear:w0,...` (one row,
`Linear`), `linear:` with rows separated by `;` (`LinearRows`) and `identity` (A = I)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.model.domains import Domain, Finite, distinct
from ddpbayes.queries.base import Query, join_numbers, no_argument, read_numbers


@dataclass(frozen=True)
class Linear(Query):
    """w·x: `sum` (w = 1), `count` (w = 1 on 0/1 tuples), `mean` (w = 1/n) and `linear:w0,...`.

    Parameters
    ----------
    name : str
        The kind: ``"sum"``, ``"count"``, ``"mean"`` or ``"linear"``.
    coefficients : tuple of float or None, default None
        The weights w of `linear:`; None gives every tuple the weight 1 (or 1/n with `scale_by_n`).
    scale_by_n : bool, default False
        Weights 1/n instead of 1 (`mean`); used only when `coefficients` is None.
    """

    name: str
    coefficients: tuple[float, ...] | None = None  # None: every weight is 1, or 1/n with scale_by_n
    scale_by_n: bool = False

    @property
    def spec(self) -> str:
        """The text `parse_query` reads this query back from (its name, or `linear:` and its weights)."""
        return self.name if self.coefficients is None else f"linear:{join_numbers(self.coefficients)}"

    def weights(self, n: int) -> np.ndarray:
        """w (read-only, computed once per n: sensitivities ask for it once per tuple).

        Parameters
        ----------
        n : int
            The number of tuples.

        Returns
        -------
        numpy.ndarray
            The n weights, a read-only array.
        """
        return weight_vector(self.coefficients, self.scale_by_n, n)

    def values(self, x: np.ndarray) -> np.ndarray:
        """w·x at each state.

        Parameters
        ----------
        x : numpy.ndarray
            S states of the n tuples, shape (S, n).

        Returns
        -------
        numpy.ndarray
            Shape (S, 1).
        """
        return (x @ self.weights(x.shape[1]))[:, None]

    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
        """``|w_k|`` times the width of tuple k's domain (0 when w_k = 0).

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
        w = self.weights(len(domains))[k]
        return 0.0 if w == 0 else abs(w) * domains[k].width

    def global_sensitivity(self, domains: Sequence[Domain]) -> float:
        """The largest of the tuples' `sensitivity`, ``|w_k|`` times the width of tuple k's domain (0 when w_k = 0),
        over every tuple at once: the same products, each distinct domain object's width read once.

        Parameters
        ----------
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Returns
        -------
        float
            max over k of ``sensitivity(k, domains)``.
        """
        w = np.abs(self.weights(len(domains)))
        shared, which = distinct(domains)
        widths = np.array([d.width for d in shared], dtype=float)[which]
        return float(np.multiply(w, widths, out=np.zeros(len(domains)), where=w != 0).max())

    def check(self, domains: Sequence[Domain]) -> None:
        """Refuse weights that do not match the tuples, and `count` on tuples that are not 0/1.

        Parameters
        ----------
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Raises
        ------
        InputError
            When `coefficients` has not one weight per tuple, or (`count`) a tuple's domain is not a finite
            subset of {0, 1}.
        """
        if self.coefficients is not None and len(self.coefficients) != len(domains):
            raise InputError(f"linear query has {len(self.coefficients)} weights but the model has {len(domains)} tuples")
        if self.name == "count":
            bad = [k for k, d in enumerate(domains) if not (isinstance(d, Finite) and set(d.values) <= {0.0, 1.0})]
            if bad:
                raise InputError(f"count needs 0/1 tuples, but tuple {bad[0]} has domain {domains[bad[0]]}")


class MatrixQuery(Query):
    """A x for a matrix A (C, n) fixed by the query: C linear statistics released together, each
    with its own noise (DESIGN §2.2). A tuple's sensitivity is the L1 norm of its column of A
    times its domain's width."""

    def values(self, x: np.ndarray) -> np.ndarray:
        return x @ self.matrix(x.shape[1]).T

    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
        column = float(np.abs(self.matrix(len(domains))[:, k]).sum())
        return 0.0 if column == 0 else column * domains[k].width


@dataclass(frozen=True)
class LinearRows(MatrixQuery):
    """`linear:a00,a01,...;a10,a11,...`: the rows of A, one output coordinate each.

    Parameters
    ----------
    rows : tuple of tuple of float
        The rows of A, each with one weight per tuple.
    name : str, default "linear"
        The kind.
    """

    rows: tuple[tuple[float, ...], ...]
    name: str = "linear"

    @property
    def spec(self) -> str:
        """The text `parse_query` reads this query back from (`linear:` and its rows)."""
        return "linear:" + ";".join(join_numbers(r) for r in self.rows)

    def matrix(self, n: int) -> np.ndarray:
        """A, from `rows`.

        Parameters
        ----------
        n : int
            The number of tuples (A is fixed by the rows).

        Returns
        -------
        numpy.ndarray
            A of shape (C, n), read-only.
        """
        return _frozen(self.rows)

    def check(self, domains: Sequence[Domain]) -> None:
        """Refuse rows that have not one weight per tuple.

        Parameters
        ----------
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Raises
        ------
        InputError
            When the rows' length is not the number of tuples.
        """
        if len(self.rows[0]) != len(domains):
            raise InputError(f"linear query has {len(self.rows[0])} weights per row but the model has "
                             f"{len(domains)} tuples")


@dataclass(frozen=True)
class Identity(Query):
    """The tuples themselves (a local mechanism such as randomized response perturbs each).

    Parameters
    ----------
    name : str, default "identity"
        The kind.
    """

    name: str = "identity"

    def values(self, x: np.ndarray) -> np.ndarray:
        """The tuple values as floats.

        Parameters
        ----------
        x : numpy.ndarray
            S states of the n tuples, shape (S, n).

        Returns
        -------
        numpy.ndarray
            Shape (S, n).
        """
        return np.asarray(x, dtype=float)

    def matrix(self, n: int) -> np.ndarray:
        """A = I: identity is linear, one output per tuple (the Gaussian engine's multi-row
        formula with A = I; DESIGN §2.2).

        Parameters
        ----------
        n : int
            The number of tuples.

        Returns
        -------
        numpy.ndarray
            The (n, n) identity, read-only.
        """
        return _eye(n)

    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
        """The width of tuple k's domain.

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
        return domains[k].width


def parse_linear(kind: str, arg: str, spec: str) -> Query:
    """`sum`, `count`, `mean` (no argument) or `linear:w0,w1,...` (rows separated by `;`)."""
    if kind != "linear":
        no_argument(kind, arg, spec)
        return Linear(kind, scale_by_n=kind == "mean")
    rows = tuple(read_numbers(row, spec) for row in arg.split(";"))
    if len({len(r) for r in rows}) > 1:
        raise InputError(f"query '{spec}' has rows of different lengths {[len(r) for r in rows]}")
    return Linear("linear", coefficients=rows[0]) if len(rows) == 1 else LinearRows(rows)


def parse_identity(kind: str, arg: str, spec: str) -> Query:
    """`identity` (no argument)."""
    no_argument(kind, arg, spec)
    return Identity()


@functools.lru_cache(maxsize=16)
def weight_vector(coefficients: tuple[float, ...] | None, scale_by_n: bool, n: int) -> np.ndarray:
    """The n weights (read-only, cached): `coefficients`, or every weight 1 (1/n with `scale_by_n`)."""
    w = np.asarray(coefficients, dtype=float) if coefficients is not None else np.full(n, 1.0 / n if scale_by_n else 1.0)
    w.setflags(write=False)
    return w


@functools.lru_cache(maxsize=16)
def _frozen(rows: tuple[tuple[float, ...], ...]) -> np.ndarray:
    a = np.asarray(rows, dtype=float)
    a.setflags(write=False)
    return a


@functools.lru_cache(maxsize=4)
def _eye(n: int) -> np.ndarray:
    a = np.eye(n)
    a.setflags(write=False)
    return a
