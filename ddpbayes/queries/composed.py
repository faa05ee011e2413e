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
    """The releases' queries, their outputs stacked into one vector (release by release)."""

    queries: tuple[Query, ...]
    name: str = "composition"

    @property
    def spec(self) -> str:
        return " + ".join(q.spec for q in self.queries)

    def values(self, x: np.ndarray) -> np.ndarray:
        return np.concatenate([q.values(x) for q in self.queries], axis=1)

    def sensitivity(self, k: int, domains: Sequence[Domain]) -> float:
        """The L1 sensitivity of the stacked output: the sum of the releases' (a bound when
        they are attained by different changes of tuple k)."""
        return float(sum(q.sensitivity(k, domains) for q in self.queries))

    def check(self, domains: Sequence[Domain]) -> None:
        for q in self.queries:
            q.check(domains)

    def bind(self, model: DependenceModel) -> ComposedQuery:
        return ComposedQuery(tuple(q.bind(model) for q in self.queries))

    def matrix(self, n: int) -> np.ndarray | None:
        rows = [q.matrix(n) for q in self.queries]
        return None if any(r is None for r in rows) else np.vstack(rows)
