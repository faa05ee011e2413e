"""Queries q(x): a scalar or vector statistic of the tuples (DESIGN §1).

Every query maps tuple values `x` (shape (S, n)) to outputs (shape (S, C)) and knows its
per-tuple L1 sensitivity over the tuples' domains, which fixes classic DP's noise scale.
Linear queries also give their matrix A (C, n), q(x) = A x: one row for `sum`, `count`, `mean`
and `linear:w0,...`; several for `linear:` with rows separated by `;` and for `centroids:FILE`,
the means of a fixed partition of users (seed 002 §IV-B; DESIGN §2.2).
"""

from __future__ import annotations

import csv
import functools
import itertools
import math
import os
import stat
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.limits import check_states
from ddpbayes.model.domains import Domain, Finite


class Query(ABC):
    """A statistic q(x) of the tuples: its values, its per-tuple L1 sensitivity over the domains,
    and `spec`, the text `parse_query` reads it back from."""

    name: str

    @property
    def spec(self) -> str:
        return self.name

    @abstractmethod
    def values(self, x: np.ndarray) -> np.ndarray:
        """Outputs for tuple values `x` of shape (S, n): an array of shape (S, C)."""

    @abstractmethod
    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
        """sup over x_{-k} and t, t' in the domain of tuple k of ||q(t, x_{-k}) - q(t', x_{-k})||_1."""

    def check(self, domains: Sequence[Domain]) -> None:
        """Raise InputError if the query does not apply to tuples with these domains."""

    def bind(self, model) -> Query:
        """This query on `model`'s tuples: `expr:`/`fn:` queries resolve the names they use here."""
        return self

    def weights(self, n: int) -> np.ndarray | None:
        """w for a scalar linear query w·x, else None."""
        return None

    def matrix(self, n: int) -> np.ndarray | None:
        """A (C, n) for a linear query A x (the row w of w·x for a scalar one), else None."""
        w = self.weights(n)
        return None if w is None else w[None, :]

    def global_sensitivity(self, domains: Sequence[Domain]) -> float:
        return max(self.sensitivity(k, domains) for k in range(len(domains)))


@dataclass(frozen=True)
class Linear(Query):
    """w·x: `sum` (w = 1), `count` (w = 1 on 0/1 tuples), `mean` (w = 1/n) and `linear:w0,...`."""

    name: str
    coefficients: tuple[float, ...] | None = None  # None: every weight is `scale`
    scale_by_n: bool = False

    @property
    def spec(self) -> str:
        return self.name if self.coefficients is None else f"linear:{_join(self.coefficients)}"

    def weights(self, n: int) -> np.ndarray:
        """w (read-only, computed once per n: sensitivities ask for it once per tuple)."""
        return _linear_weights(self.coefficients, self.scale_by_n, n)

    def values(self, x: np.ndarray) -> np.ndarray:
        return (x @ self.weights(x.shape[1]))[:, None]

    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
        w = self.weights(len(domains))[k]
        return 0.0 if w == 0 else abs(w) * domains[k].width

    def check(self, domains: Sequence[Domain]) -> None:
        if self.coefficients is not None and len(self.coefficients) != len(domains):
            raise InputError(f"linear query has {len(self.coefficients)} weights but the model has {len(domains)} tuples")
        if self.name == "count":
            bad = [k for k, d in enumerate(domains) if not (isinstance(d, Finite) and set(d.values) <= {0.0, 1.0})]
            if bad:
                raise InputError(f"count needs 0/1 tuples, but tuple {bad[0]} has domain {domains[bad[0]]}")


class _MatrixQuery(Query):
    """A x for a matrix A (C, n) fixed by the query: C linear statistics released together, each
    with its own noise (DESIGN §2.2). A tuple's sensitivity is the L1 norm of its column of A
    times its domain's width."""

    def values(self, x: np.ndarray) -> np.ndarray:
        return x @ self.matrix(x.shape[1]).T

    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
        column = float(np.abs(self.matrix(len(domains))[:, k]).sum())
        return 0.0 if column == 0 else column * domains[k].width


@dataclass(frozen=True)
class LinearRows(_MatrixQuery):
    """`linear:a00,a01,...;a10,a11,...`: the rows of A, one output coordinate each."""

    rows: tuple[tuple[float, ...], ...]
    name: str = "linear"

    @property
    def spec(self) -> str:
        return "linear:" + ";".join(_join(r) for r in self.rows)

    def matrix(self, n: int) -> np.ndarray:
        return _frozen(self.rows)

    def check(self, domains: Sequence[Domain]) -> None:
        if len(self.rows[0]) != len(domains):
            raise InputError(f"linear query has {len(self.rows[0])} weights per row but the model has "
                             f"{len(domains)} tuples")


@dataclass(frozen=True)
class Centroids(_MatrixQuery):
    """`centroids:FILE`: the means of the members of every cluster of a fixed partition of users,
    coordinate by coordinate — the centroids K-means publishes in seed 002 §IV-B, with the
    assignment held fixed (two databases are neighbours when one user's value differs and the
    partition is the same).

    FILE is a CSV with a header and a `cluster` column of integer labels, one row per user in the
    model's user order (other columns are ignored). With u users and n = d·u tuples, tuple a·u + k
    is coordinate a of user k (the model lists every user's first coordinate, then every user's
    second, ...). Output k·d + a is coordinate a of the centroid of the k-th cluster in increasing
    label order: 1/|c| on coordinate a of each member of cluster c."""

    path: str
    labels: tuple[int, ...]
    name: str = "centroids"

    @property
    def spec(self) -> str:
        return f"centroids:{self.path}"

    def matrix(self, n: int) -> np.ndarray:
        self._coordinates(n)
        return _centroid_matrix(self.labels, n)

    def check(self, domains: Sequence[Domain]) -> None:
        self._coordinates(len(domains))

    def _coordinates(self, n: int) -> int:
        users = len(self.labels)
        if not users or n % users:
            raise InputError(f"the assignment {self.path} has {users} users but the model has {n} tuples, "
                             "not a whole number of coordinates per user")
        return n // users


@dataclass(frozen=True)
class Histogram(Query):
    """Counts of tuples in bins [e0,e1), ..., [e_{m-1}, e_m] (numpy's convention); noise on every bin."""

    edges: tuple[float, ...]
    name: str = "histogram"

    @property
    def spec(self) -> str:
        return f"histogram:{_join(self.edges)}"

    def bins(self, v: np.ndarray) -> np.ndarray:
        """Bin index of each value, -1 outside every bin."""
        e = np.asarray(self.edges)
        idx = np.searchsorted(e, v, side="right") - 1
        idx = np.where(v == e[-1], len(e) - 2, idx)
        return np.where((v < e[0]) | (v > e[-1]), -1, idx)

    def values(self, x: np.ndarray) -> np.ndarray:
        b = self.bins(x)
        nbins = len(self.edges) - 1
        return np.stack([(b == j).sum(axis=1) for j in range(nbins)], axis=1).astype(float)

    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
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


@dataclass(frozen=True)
class Identity(Query):
    """The tuples themselves (a local mechanism such as randomized response perturbs each)."""

    name: str = "identity"

    def values(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=float)

    def matrix(self, n: int) -> np.ndarray:
        """A = I: identity is linear, one output per tuple (the Gaussian engine's multi-row
        formula with A = I; DESIGN §2.2)."""
        return _eye(n)

    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
        return domains[k].width


@functools.lru_cache(maxsize=16)
def _linear_weights(coefficients: tuple[float, ...] | None, scale_by_n: bool, n: int) -> np.ndarray:
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


def parse_query(spec: str) -> Query:
    """`sum`, `count`, `mean`, `linear:w0,w1,...` (rows separated by `;` for several outputs),
    `centroids:FILE`, `histogram:e0,e1,...`, `identity`, `expr:EXPR[;EXPR...]` or `fn:NAME`
    (`general_queries`)."""
    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    if kind in ("expr", "fn"):
        from ddpbayes.queries.general import parse_general  # it builds on this module

        return parse_general(kind, arg)
    if kind in ("sum", "count", "mean", "identity") and arg:
        raise InputError(f"query '{kind}' takes no argument, got '{spec}'")
    if kind in ("sum", "count"):
        return Linear(kind)
    if kind == "mean":
        return Linear("mean", scale_by_n=True)
    if kind == "identity":
        return Identity()
    if kind == "linear":
        rows = tuple(_numbers(row, spec) for row in arg.split(";"))
        if len({len(r) for r in rows}) > 1:
            raise InputError(f"query '{spec}' has rows of different lengths {[len(r) for r in rows]}")
        return Linear("linear", coefficients=rows[0]) if len(rows) == 1 else LinearRows(rows)
    if kind == "centroids":
        return Centroids(arg, read_assignment(arg))
    if kind == "histogram":
        edges = _numbers(arg, spec)
        if len(edges) < 2 or any(b <= a for a, b in itertools.pairwise(edges)):
            raise InputError(f"histogram edges must be at least two increasing numbers, got '{arg}'")
        return Histogram(edges)
    raise InputError(f"unknown query '{spec}' (use sum, count, mean, linear:w0,w1,...[;...], centroids:FILE, "
                     "histogram:e0,e1,..., identity, expr:EXPR or fn:NAME)")


MAX_ASSIGNMENT_BYTES = 64 << 20  # an assignment file is read only up to this size (about 30 million users)


def read_assignment(path: str) -> tuple[int, ...]:
    """The `cluster` column of the CSV at `path`: one integer label per user (`Centroids`). Only
    a regular file of at most MAX_ASSIGNMENT_BYTES is read (not /dev/zero, a pipe or a directory),
    row by row, keeping the labels only."""
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


def _join(values: tuple[float, ...]) -> str:
    """Numbers as `parse_query` reads them back exactly (integers without a decimal point)."""
    return ",".join(str(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v)) for v in values)


def _numbers(text: str, spec: str) -> tuple[float, ...]:
    try:
        vals = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise InputError(f"query '{spec}' needs comma-separated numbers after ':'") from None
    if not vals or not all(math.isfinite(v) for v in vals):
        raise InputError(f"query '{spec}' needs finite numbers after ':'")
    return vals


def output_count(query: Query, domains: Sequence[Domain]) -> int:
    """How many output coordinates `query` has: its value at one point of every domain."""
    point = [float(d.values[0]) if isinstance(d, Finite) else _inside(d.lo, d.hi) for d in domains]
    return int(query.values(np.array([point])).shape[1])


def _inside(lo: float, hi: float) -> float:
    ends = [v for v in (lo, hi) if math.isfinite(v)]
    return float(np.mean(ends)) if ends else 0.0

