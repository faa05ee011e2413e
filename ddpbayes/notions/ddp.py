"""ddp, dependent DP (000 Def. 3–4): the adversary knows the tuples outside the target's
dependence set N(i), which the engine finds (DESIGN §3.1)."""

from __future__ import annotations

from ddpbayes.notions.base import Notion, register
from ddpbayes.problem import Adversary


class DependentDP(Notion):
    name, source, needs_dependence_sets = "ddp", "Liu et al. 2016, Def. 3-4", True

    def adversaries(self, n, targets, known=None, dependence_sets=None):
        """A(i, everything outside N(i) and i). Targets with the same N(i) ∪ {i} (a connected
        component) share one known set: on thousands of tuples each is a table of thousands of
        entries, and the result keeps every target's worst adversary (issue #29: Gowalla)."""
        everyone, shared = frozenset(range(n)), {}
        for i in targets:
            closed = dependence_sets[i] | {i}
            if closed not in shared:  # rebuilt from an iterator: a set copy would keep the table of `everyone`
                shared[closed] = frozenset(iter(everyone - closed))
            yield Adversary(i, shared[closed])

    def dependence_sets(self, engine, problem):
        return engine.dependence_sets(problem)


DDP = register(DependentDP())
