"""ddp, dependent DP (000 Def. 3–4): the adversary knows the tuples outside the target's
dependence set N(i), which the engine finds (DESIGN §3.1)."""

from __future__ import annotations

from ddpbayes.notions.base import Notion, register
from ddpbayes.problem import Adversary


class DependentDP(Notion):
    name, source, needs_dependence_sets = "ddp", "000 Def. 3-4", True

    def adversaries(self, n, targets, known=None, dependence_sets=None):
        everyone = frozenset(range(n))
        return (Adversary(i, everyone - dependence_sets[i] - {i}) for i in targets)

    def dependence_sets(self, engine, problem):
        return engine.dependence_sets(problem)


DDP = register(DependentDP())
