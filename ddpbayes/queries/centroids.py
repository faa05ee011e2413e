"""`centroids:FILE`: the means of a fixed partition of users (seed 002 §IV-B; DESIGN §2.2)."""

from __future__ import annotations

import csv
import functools
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.limits import check_states
from ddpbayes.model.domains import Domain
from ddpbayes.queries.base import Query
from ddpbayes.queries.linear import MatrixQuery

MAX_ASSIGNMENT_BYTES = 64 << 20  # an assignment file is read only up to this size (about 30 million users)


@dataclass(frozen=True)
class Centroids(MatrixQuery):
    """`centroids:FILE`: the means of the members of every cluster of a fixed partition of users,
    coordinate by coordinate — the centroids K-means publishes in seed 002 §IV-B, with the
    assignment held fixed (two databases are neighbours when one user's value differs and the
    partition is the same).

    FILE is a CSV with a header and a `cluster` column of integer labels, one row per user in the
    model's user order (other columns are ignored). With u users and n = d·u tuples, tuple a·u + k
    is coordinate a of user k (the model lists every user's first coordinate, then every user's
    second, ...). Output k·d + a is coordinate a of the centroid of the k-th cluster in increasing
    label order: 1/``|c|`` on coordinate a of each member of cluster c.

    Parameters
    ----------
    path : str
        The assignment file, as the query's text names it.
    labels : tuple of int
        The cluster label of each user (`read_assignment`).
    name : str, default "centroids"
        The kind.
    """

    path: str
    labels: tuple[int, ...]
    name: str = "centroids"

    @property
    def spec(self) -> str:
        """The text `parse_query` reads this query back from (`centroids:` and the file)."""
        return f"centroids:{self.path}"

    def matrix(self, n: int) -> np.ndarray:
        """The centroid matrix: row k·d + a holds 1/``|c_k|`` on coordinate a of each member of the k-th cluster.

        Parameters
        ----------
        n : int
            The number of tuples, d per user.

        Returns
        -------
        numpy.ndarray
            A of shape (clusters·d, n), read-only.

        Raises
        ------
        InputError
            When n is not a whole multiple of the number of users, or the matrix is over the state limit
            (``--max-states``) or the memory available.
        """
        self._coordinates(n)
        return _centroid_matrix(self.labels, n)

    def check(self, domains: Sequence[Domain]) -> None:
        """Refuse a model whose tuple count is not a whole number of coordinates per user.

        Parameters
        ----------
        domains : sequence of Domain
            The domains of the model's tuples, in tuple order.

        Raises
        ------
        InputError
            When the number of tuples is not a multiple of the number of users.
        """
        self._coordinates(len(domains))

    def _coordinates(self, n: int) -> int:
        users = len(self.labels)
        if not users or n % users:
            raise InputError(f"the assignment {self.path} has {users} users but the model has {n} tuples, "
                             "not a whole number of coordinates per user")
        return n // users


def parse_centroids(kind: str, arg: str, spec: str) -> Query:
    """`centroids:FILE`, FILE read at once (`read_assignment`)."""
    return Centroids(arg, read_assignment(arg))


def read_assignment(path: str) -> tuple[int, ...]:
    """The `cluster` column of the CSV at `path`: one integer label per user (`Centroids`). Only
    a regular file of at most MAX_ASSIGNMENT_BYTES is read (not /dev/zero, a pipe or a directory),
    row by row, keeping the labels only.

    Parameters
    ----------
    path : str
        The CSV file, with a header holding a `cluster` column.

    Returns
    -------
    tuple of int
        The labels, in row order.

    Raises
    ------
    InputError
        When the file cannot be read, is not a regular file, is too large, has no `cluster` column
        or no rows, or a label is not an integer.
    """
    try:
        info = os.stat(path)
    except OSError as exc:
        raise InputError(f"cannot read the assignment '{path}': {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"the assignment '{path}' is not a regular file (a CSV with a 'cluster' column)")
    if info.st_size > MAX_ASSIGNMENT_BYTES:
        raise InputError(f"the assignment '{path}' has {info.st_size:,} bytes, over the limit of "
                         f"{MAX_ASSIGNMENT_BYTES:,} for an assignment file (one short line per user)")
    labels = []
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is None or "cluster" not in reader.fieldnames:
                raise InputError(f"the assignment '{path}' needs a header with a 'cluster' column and one row per user")
            for row in reader:
                text = (row["cluster"] or "").strip()
                try:
                    labels.append(int(text))
                except ValueError:
                    raise InputError(f"the assignment '{path}' line {reader.line_num}: cluster '{text}' is not an "
                                     "integer") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read the assignment '{path}': {exc}") from None
    if not labels:
        raise InputError(f"the assignment '{path}' needs a header with a 'cluster' column and one row per user")
    return tuple(labels)


@functools.lru_cache(maxsize=4)
def _centroid_matrix(labels: tuple[int, ...], n: int) -> np.ndarray:
    """Row k·d + a: 1/|c_k| on tuple a·u + j for every member j of the k-th cluster c_k."""
    lab = np.asarray(labels)
    users, d = len(lab), n // len(lab)
    clusters, members = np.unique(lab, return_inverse=True)
    check_states(len(clusters) * d * n, f"the centroid matrix ({len(clusters):,} clusters x {d} coordinates x {n:,} "
                 "tuples)", "cells")
    a = np.zeros((len(clusters) * d, n))
    size = np.bincount(members)
    for coord in range(d):
        a[members * d + coord, coord * users + np.arange(users)] = 1.0 / size[members]
    a.setflags(write=False)
    return a
