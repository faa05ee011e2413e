"""The releases of a composition: parsing `QUERY:MECHANISM:PARAM`, the stacked query and the
per-coordinate noise (DESIGN §3.1b)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Mechanism, make_mechanism
from ddpbayes.model import DependenceModel
from ddpbayes.model.domains import Domain, Finite
from ddpbayes.queries import ComposedQuery, Histogram, Identity, Query, output_count, parse_query


@dataclass(frozen=True)
class Release:
    """One release: a query, its noise, and the text it was read from."""

    query: Query
    mechanism: Mechanism
    spec: str


def parse_release(spec: str, model: DependenceModel) -> Release:
    """`QUERY:MECHANISM:PARAM`, the query possibly containing ':' (split from the right). PARAM
    is the noise scale b for laplace/geometric and ε for randomized_response; `eps=E` sets a
    Laplace/geometric scale as classic DP would (the release's global sensitivity / E)."""
    parts = spec.rsplit(":", 2)
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise InputError(f"--release '{spec}' must be QUERY:MECHANISM:PARAM, e.g. sum:laplace:1 or "
                         "identity:randomized_response:0.5")
    try:
        return Release(*_release(*(p.strip() for p in parts), model), spec)
    except InputError as e:
        raise InputError(f"--release '{spec}': {e}") from None


def _release(query_text: str, kind: str, param: str, model: DependenceModel) -> tuple[Query, Mechanism]:
    domains = model.domains
    query = parse_query(query_text).bind(model)
    query.check(domains)
    by_epsilon = param.lower().startswith("eps=")
    value = _number(param[4:] if by_epsilon else param)
    kind = kind.lower()
    if kind in ("gaussian", "discrete_gaussian", "discrete-gaussian"):
        raise InputError("Gaussian releases are not composed: their leakage is a privacy profile, computed for one "
                         "release at a time (--query/--mechanism gaussian)")
    if kind in ("randomized_response", "rr", "randomized-response"):
        if by_epsilon:
            raise InputError("randomized response's PARAM is already its epsilon (drop 'eps=')")
        mechanism = make_mechanism(kind, query, domains, epsilon=value)
    else:
        mechanism = make_mechanism(kind, query, domains, **({"epsilon": value} if by_epsilon else {"scale": value}))
    return query, mechanism


def compose(specs: Sequence[str], model: DependenceModel) -> tuple[ComposedQuery, ComposedMechanism]:
    """The joint query and mechanism of the releases `specs` (at least two) on `model`'s tuples."""
    if len(specs) < 2:
        raise InputError(f"a composition needs at least two --release, got {len(specs)} (audit one release with "
                         "--query/--mechanism/--scale)")
    releases = [parse_release(s, model) for s in specs]
    query = ComposedQuery(tuple(r.query for r in releases))
    widths = tuple(output_count(r.query, model.domains) for r in releases)
    return query, ComposedMechanism(tuple(r.mechanism for r in releases), widths, tuple(specs))


@dataclass(frozen=True)
class ComposedMechanism(Mechanism):
    """Independent noise per release: output coordinate c gets the noise of the release it
    belongs to (`widths`: each release's number of coordinates)."""

    mechanisms: tuple[Mechanism, ...]
    widths: tuple[int, ...]
    specs: tuple[str, ...]
    kind: str = "composition"

    def coordinate(self, c: int) -> Mechanism:
        bounds = np.cumsum(self.widths)
        if not 0 <= c < bounds[-1]:
            raise IndexError(f"output coordinate {c} outside the composition's {bounds[-1]}")
        return self.mechanisms[int(np.searchsorted(bounds, c, side="right"))]

    def scales(self) -> np.ndarray | None:
        """Every output coordinate's Laplace scale b_c, or None unless every release is Laplace noise."""
        if any(m.kind != "laplace" for m in self.mechanisms):
            return None
        return np.repeat([m.scale for m in self.mechanisms], self.widths).astype(float)

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


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"PARAM '{text}' is not a number") from None
