"""The pdp lattice for the report's picture: every adversary A(i, K), or what is feasible.

The whole lattice has (number of targets) x 2^(n-1) adversaries. Up to `FULL_LIMIT` of them
(ESTIMATED_FULL_LIMIT for an estimating engine: each adversary costs MCMC runs) it is computed in full with
`audit(..., lattice=True)`; beyond, the report draws a subset and says so: every target's
weakest (K = {}) and strongest (K = all others) adversary, pdp's worst one, and up to
`PER_LAYER` known sets per layer |K| drawn at random with the spec's seed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ddpbayes.auditing import AuditResult
from ddpbayes.encoding import number
from ddpbayes.engines import Engine

FULL_LIMIT, ESTIMATED_FULL_LIMIT = 2048, 8
PER_LAYER, ESTIMATED_PER_LAYER = 24, 0


@dataclass(frozen=True)
class Point:
    target: int
    known: frozenset[int]
    leakage: float

    def to_dict(self) -> dict:
        return {"target": self.target, "known": sorted(self.known), "leakage": number(self.leakage)}


@dataclass(frozen=True)
class LatticeView:
    points: list[Point]
    total: int  # adversaries in the whole lattice
    n: int
    note: str | None  # what was left out, when something was

    @property
    def complete(self) -> bool:
        return len(self.points) == self.total

    def to_dict(self) -> dict:
        return {"total": self.total, "shown": len(self.points), "complete": self.complete, "note": self.note,
                "points": [p.to_dict() for p in self.points]}


def pdp_lattice(
    run: Callable[..., AuditResult], name: str, pdp: AuditResult, engine: Engine, n: int, targets: list[int],
    seed: int, say: Callable[[str], None],
) -> LatticeView:
    """The lattice over `targets`; `run(notion, **overrides)` audits with the spec's settings,
    `name` is the lattice's notion (pdp), `pdp` its result and `engine` the one that audited it."""
    total = len(targets) * 2 ** (n - 1)
    if total <= (ESTIMATED_FULL_LIMIT if engine.estimates else FULL_LIMIT):
        say(f"pdp lattice: all {total} adversaries")
        full = run(name, lattice=True, known=None, pdp_greedy=0)  # every node, whatever the spec's search
        points = [Point(r.adversary.target, r.adversary.known, r.value) for r in full.lattice]
        return LatticeView(points, total, n, None)
    per_layer = ESTIMATED_PER_LAYER if engine.estimates else PER_LAYER
    chosen = _subset(n, targets, per_layer, seed, pdp)
    say(f"pdp lattice: {total:,} adversaries, too many; computing {len(chosen)} of them")
    points = [Point(i, k, run(name, targets=[i], known=sorted(k), pdp_greedy=0).leakage) for i, k in chosen]
    note = (
        f"The lattice has {total:,} adversaries, too many to compute one by one; shown are {len(points)}: every "
        "target's weakest (K = {}) and strongest (K = all others) adversary, pdp's worst adversary"
    )
    note += f", and up to {per_layer} known sets per layer |K| drawn at random (seed {seed})." if per_layer else "."
    if pdp.bound_kind == "greedy search":
        note += " The pdp value is the greedy search's, a lower bound on the maximum."
    elif pdp.lower_bound:
        note += " The pdp value is a program's certified lower bound."
    elif engine.searches_lattice:
        note += " The pdp maximum itself is exact: the engine searches the whole lattice without listing it."
    return LatticeView(points, total, n, note)


def _subset(
    n: int, targets: list[int], per_layer: int, seed: int, pdp: AuditResult
) -> list[tuple[int, frozenset[int]]]:
    chosen: dict[tuple[int, frozenset[int]], None] = {}
    for i in targets:
        others = frozenset(range(n)) - {i}
        chosen[(i, frozenset())] = None
        chosen[(i, others)] = None
    if pdp.witness is not None:
        chosen[(pdp.witness.adversary.target, pdp.witness.adversary.known)] = None
    rng = np.random.default_rng(seed)
    for size in range(1, n - 1):
        for _ in range(per_layer):
            i = int(rng.choice(targets))
            others = [j for j in range(n) if j != i]
            chosen[(i, frozenset(int(j) for j in rng.choice(others, size, replace=False)))] = None
    return list(chosen)
