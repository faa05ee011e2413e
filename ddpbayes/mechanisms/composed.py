"""Several releases' noise composed into one mechanism, one release per range of output
coordinates (seed 000 §V-A; DESIGN §3.1b): `ComposedMechanism.coordinate` gives each
coordinate's own noise; the query it releases is `queries.composed.ComposedQuery`."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.mechanisms.base import Mechanism
from ddpbayes.model.domains import Domain, Finite
from ddpbayes.queries import Histogram, Identity, Query
from ddpbayes.queries.composed import ComposedQuery


@dataclass(frozen=True)
class ComposedMechanism(Mechanism):
    """Independent noise per release: output coordinate c gets the noise of the release it
    belongs to (`widths`: each release's number of coordinates)."""

    mechanisms: tuple[Mechanism, ...]
    widths: tuple[int, ...]
    specs: tuple[str, ...]
    kind: str = "composition"
    composed = True

    def coordinate(self, c: int) -> Mechanism:
        bounds = np.cumsum(self.widths)
        if not 0 <= c < bounds[-1]:
            raise IndexError(f"output coordinate {c} outside the composition's {bounds[-1]}")
        return self.mechanisms[int(np.searchsorted(bounds, c, side="right"))]

    @property
    def releases(self) -> tuple[Mechanism, ...]:
        return self.mechanisms

    def laplace_scales(self, rows: int) -> np.ndarray | None:
        """Every output coordinate's Laplace scale b_c (each release's own), or None unless every
        release is Laplace noise."""
        scales = [m.laplace_scales(w) for m, w in zip(self.mechanisms, self.widths)]
        return None if any(s is None for s in scales) else np.concatenate(scales).astype(float)

    def log_kernel(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise InputError("a composition's noise differs by output coordinate: ask coordinate(c) for its kernel")

    def grid_size(self, levels: int) -> int:
        raise InputError("a composition's noise differs by output coordinate: ask coordinate(c) for its grid")

    def dp_leakage(self, sensitivity: float) -> float:
        raise InputError("a composition's classic DP level depends on each release's sensitivity: use tuple_dp_leakage")

    def tuple_dp_leakage(self, query: Query, k: int, domains: Sequence[Domain]) -> tuple[float, str | None]:
        """Classic DP of the joint output for tuple k: sup over t, t' of Σ_r ε_r(t, t'), the r-th
        release's leakage for the change t -> t' (free of x_{-k} for linear, identity and histogram
        queries). Exact over a finite domain's pairs, and over the domain's ends when every release
        is linear or identity; otherwise Σ_r of the releases' own levels, an upper bound (the reason
        says so)."""
        assert isinstance(query, ComposedQuery)
        own = [m.dp_leakage(q.sensitivity(k, domains)) for q, m in zip(query.queries, self.mechanisms)]
        if sum(v > 0 for v in own) < 2 or all(_linear(q, len(domains)) for q in query.queries):
            return float(sum(own)), None  # one release moves, or all move most at the domain's ends
        known = all(_linear(q, len(domains)) or isinstance(q, Histogram) for q in query.queries)
        if known and isinstance(domains[k], Finite):
            pairs = itertools.combinations(domains[k].values, 2)
            return max(self._pair_leakage(query, k, domains, t, u) for t, u in pairs), None
        return float(sum(own)), (f"tuple {k}: the sum of the releases' classic levels, an upper bound (one change of "
                                 "the tuple may not reach every release's sensitivity)")

    def _pair_leakage(self, query: ComposedQuery, k: int, domains: Sequence[Domain], t: float, u: float) -> float:
        total = 0.0
        for q, m in zip(query.queries, self.mechanisms):
            total += m.dp_leakage(_change(q, k, domains, t, u))
        return total

    def check(self, query: Query, domains: Sequence[Domain]) -> None:
        if not isinstance(query, ComposedQuery) or len(query.queries) != len(self.mechanisms):
            raise InputError("a composed mechanism releases the composed query of the same releases")
        for q, m in zip(query.queries, self.mechanisms):
            m.check(q, domains)

    def describe(self) -> dict:
        releases = [{"release": s, **m.describe()} for s, m in zip(self.specs, self.mechanisms)]
        return {"kind": self.kind, "releases": releases,
                "noise": "independent noise per release: " + "; ".join(r["noise"] for r in releases)}


def _linear(query: Query, n: int) -> bool:
    """A query whose change of one tuple moves it by its sensitivity times |t - u| / width."""
    return isinstance(query, Identity) or query.matrix(n) is not None


def _change(query: Query, k: int, domains: Sequence[Domain], t: float, u: float) -> float:
    """||q(t, x_{-k}) - q(u, x_{-k})||_1 for the queries of ddpbayes (free of x_{-k}): bins that
    differ count twice when both are inside the histogram; linear and identity queries move by
    their sensitivity times |t - u| / the domain's width."""
    if isinstance(query, Histogram):
        a, b = query.bins(np.asarray([t, u], dtype=float))
        return 0.0 if a == b else float((a >= 0) + (b >= 0))
    width = domains[k].width
    return 0.0 if width == 0 else query.sensitivity(k, domains) * abs(t - u) / width
