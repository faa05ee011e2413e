"""A verification problem: model, query, mechanism and the adversaries to evaluate (DESIGN §1)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ddpbayes.mechanisms import Mechanism
from ddpbayes.model import DependenceModel
from ddpbayes.queries import Query
from ddpbayes.settings import RunSettings

__all__ = ["Problem", "Adversary", "DependenceSets", "dependence_size"]


@dataclass(frozen=True, order=True)
class Adversary:
    """A(i, K): targets tuple `target` and knows the exact values of the tuples in `known`.

    Parameters
    ----------
    target : int
        The tuple i whose value the adversary infers.
    known : frozenset of int, default frozenset()
        The tuples K whose values the adversary knows.
    """

    target: int
    known: frozenset[int] = frozenset()

    def __str__(self) -> str:
        return f"A({self.target}, {{{', '.join(map(str, sorted(self.known)))}}})"

    def __reduce__(self):
        """Pickled with its known set as a bit mask: a ddp adversary on thousands of tuples knows
        nearly all of them, and batches of them are sent to Dask workers (`parallel`)."""
        mask = np.zeros(max(self.known, default=-1) + 1, dtype=bool)
        mask[list(self.known)] = True
        return _adversary, (self.target, np.packbits(mask).tobytes())


def _adversary(target: int, mask: bytes) -> Adversary:
    return Adversary(target, frozenset(np.flatnonzero(np.unpackbits(np.frombuffer(mask, np.uint8))).tolist()))


class DependenceSets(Sequence):
    """N(i) for every tuple i, each computed when first read and kept (DESIGN §3.1): ddp's adversaries read
    only their targets' sets, so auditing a few targets of thousands of tuples costs those few; the JSON,
    a composition or a report that reads every set computes every set. Equal to a list of the same sets.

    Parameters
    ----------
    n : int
        The number of tuples.
    compute : callable
        i -> N(i).
    """

    def __init__(self, n: int, compute: Callable[[int], frozenset[int] | list[int]]):
        self._n, self._compute = n, compute
        self._found: dict[int, frozenset[int] | list[int]] = {}

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        k = i + self._n if -self._n <= i < 0 else i
        if not 0 <= k < self._n:
            raise IndexError(f"tuple {i} out of range: {self._n} tuples")
        if k not in self._found:
            self._found[k] = self._compute(k)
        return self._found[k]

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"DependenceSets({self._n} tuples, {len(self._found)} computed)"

    def map(self, f: Callable) -> DependenceSets:
        """The same sets through `f` (each still computed when first read).

        Parameters
        ----------
        f : callable
            Applied to each set when it is first read.

        Returns
        -------
        DependenceSets
            The mapped sets, as lazy as these.
        """
        return DependenceSets(self._n, lambda i: f(self[i]))

    def __reduce__(self):
        """Pickled as the list of every set (computed now): the computation holds the engine's tables."""
        return list, (list(self),)


def dependence_size(dependence_sets) -> int:
    """L = ``max_i |N(i)| + 1``: the most tuples one tuple's value moves (000 §IV; group privacy's k).

    Parameters
    ----------
    dependence_sets : sequence of set of int
        N(i) for each tuple i: the tuples whose conditional law changes with X_i.

    Returns
    -------
    int
        L.
    """
    return max(len(s) for s in dependence_sets) + 1


@dataclass(frozen=True)
class Problem:
    """What to verify (DESIGN §1): tuples and their dependence (`model`), the statistic released
    (`query`) through `mechanism`, the adversaries A(i, K) to evaluate, and how (`settings`).

    Parameters
    ----------
    model : DependenceModel
        The tuples and their dependence.
    query : Query
        The statistic released, bound to `model`.
    mechanism : Mechanism
        The noise mechanism releasing it.
    adversaries : tuple of Adversary, default ()
        The adversaries A(i, K) to evaluate.
    settings : RunSettings, default RunSettings()
        How to run; not compared.
    """

    model: DependenceModel
    query: Query
    mechanism: Mechanism
    adversaries: tuple[Adversary, ...] = ()
    settings: RunSettings = field(default_factory=RunSettings, compare=False)

    def with_adversaries(self, adversaries) -> Problem:
        return Problem(self.model, self.query, self.mechanism, tuple(adversaries), self.settings)
