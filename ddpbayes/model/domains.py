"""Tuple domains: the values a tuple can take, hence the targets t, t' an adversary compares."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ddpbayes.errors import InputError


@dataclass(frozen=True)
class Finite:
    """A finite set of values (sorted, without repeats).

    Parameters
    ----------
    values : iterable of float
        The values; sorted and deduplicated.

    Raises
    ------
    InputError
        If there is no value, or a value is not a finite number.
    """

    values: tuple[float, ...]

    def __init__(self, values):
        vals = np.unique(np.asarray(list(values), dtype=float))
        if vals.size == 0:
            raise InputError("a Finite domain needs at least one value")
        if not np.all(np.isfinite(vals)):
            raise InputError(f"a Finite domain holds only finite numbers, got {list(values)}")
        object.__setattr__(self, "values", tuple(float(v) for v in vals))

    @property
    def lo(self) -> float:
        return self.values[0]

    @property
    def hi(self) -> float:
        return self.values[-1]

    @property
    def width(self) -> float:
        return self.hi - self.lo

    def __str__(self) -> str:
        return "{" + ", ".join(f"{v:g}" for v in self.values) + "}"


@dataclass(frozen=True)
class Interval:
    """A closed interval [lo, hi]; either end may be infinite (an unbounded domain).

    Parameters
    ----------
    lo, hi : float
        The ends, lo < hi.

    Raises
    ------
    InputError
        If an end is NaN or lo >= hi.
    """

    lo: float
    hi: float

    def __post_init__(self):
        lo, hi = float(self.lo), float(self.hi)
        if math.isnan(lo) or math.isnan(hi) or not lo < hi:
            raise InputError(f"an Interval needs lo < hi, got [{self.lo}, {self.hi}]")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    @property
    def width(self) -> float:
        return self.hi - self.lo

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.width)

    def __str__(self) -> str:
        return f"[{self.lo:g}, {self.hi:g}]"


Domain = Finite | Interval


def distinct(items: Sequence) -> tuple[list, np.ndarray]:
    """Each distinct object of `items` by identity, in first-seen order, and each item's index into them: what a
    chain's days share (one inferred domain, `supports._integers`; one contribution array) is read once."""
    first: dict[int, int] = {}
    which = np.fromiter((first.setdefault(id(x), len(first)) for x in items), dtype=np.intp, count=len(items))
    return list({id(x): x for x in items}.values()), which
