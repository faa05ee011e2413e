"""Queries q(x): a scalar or vector statistic of the tuples (DESIGN §1).

Every query maps tuple values `x` (shape (S, n)) to outputs (shape (S, C)) and knows its
per-tuple L1 sensitivity over the tuples' domains, which fixes classic DP's noise scale.
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ddpbayes.errors import InputError
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

    def weights(self, n: int) -> np.ndarray | None:
        """w for a linear query w·x, else None."""
        return None

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

    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
        return domains[k].width


@functools.lru_cache(maxsize=16)
def _linear_weights(coefficients: tuple[float, ...] | None, scale_by_n: bool, n: int) -> np.ndarray:
    w = np.asarray(coefficients, dtype=float) if coefficients is not None else np.full(n, 1.0 / n if scale_by_n else 1.0)
    w.setflags(write=False)
    return w


def parse_query(spec: str) -> Query:
    """`sum`, `count`, `mean`, `linear:w0,w1,...`, `histogram:e0,e1,...` or `identity`."""
    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    if kind in ("sum", "count", "mean", "identity") and arg:
        raise InputError(f"query '{kind}' takes no argument, got '{spec}'")
    if kind in ("sum", "count"):
        return Linear(kind)
    if kind == "mean":
        return Linear("mean", scale_by_n=True)
    if kind == "identity":
        return Identity()
    if kind == "linear":
        return Linear("linear", coefficients=_numbers(arg, spec))
    if kind == "histogram":
        edges = _numbers(arg, spec)
        if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
            raise InputError(f"histogram edges must be at least two increasing numbers, got '{arg}'")
        return Histogram(edges)
    raise InputError(f"unknown query '{spec}' (use sum, count, mean, linear:w0,w1,..., histogram:e0,e1,... or identity)")


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
