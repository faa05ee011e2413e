"""A verification problem: model, query, mechanism and the adversaries to evaluate (DESIGN §1)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ddpbayes.mechanisms import Mechanism
from ddpbayes.model import DependenceModel
from ddpbayes.queries import Query
from ddpbayes.settings import RunSettings


@dataclass(frozen=True, order=True)
class Adversary:
    """A(i, K): targets tuple `target` and knows the exact values of the tuples in `known`."""

    target: int
    known: frozenset[int] = frozenset()

    def __str__(self) -> str:
        return f"A({self.target}, {{{', '.join(map(str, sorted(self.known)))}}})"


@dataclass(frozen=True)
class Problem:
    model: DependenceModel
    query: Query
    mechanism: Mechanism
    adversaries: tuple[Adversary, ...] = ()
    settings: RunSettings = field(default_factory=RunSettings, compare=False)

    def with_adversaries(self, adversaries) -> Problem:
        return Problem(self.model, self.query, self.mechanism, tuple(adversaries), self.settings)
