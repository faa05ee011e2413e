"""Which slots can depend on a slot: d-separation on the model's directed graph (issue 13).

Koller & Friedman's reachability ("Bayes ball", Probabilistic Graphical Models, Alg. 3.1) from
the source over the terms' parent -> own edges: an unobserved slot entered from a child passes
the ball to its parents and children, entered from a parent only to its children; an observed
variable or a potential (evidence on the slots it reads, with no children) entered from a
parent bounces it to all its parents, which makes colliders above evidence active. Slots not
reached are independent of the source for every parameter value; the engine then checks the
reached ones numerically (a d-connected pair can still be independent for particular numbers).
"""

from __future__ import annotations

from collections.abc import Sequence


class Directed:
    """Parents and children of every slot, and the evidence nodes (after the slots)."""

    def __init__(self, slots: int, terms: Sequence[tuple[list[int], list[int]]]):
        size = slots + sum(1 for own, _ in terms if not own)
        self.slots = slots
        self.parents: list[list[int]] = [[] for _ in range(size)]
        self.children: list[list[int]] = [[] for _ in range(size)]
        evidence = slots
        for own, parents in terms:
            if not own:  # an observed variable or a potential: an observed child of what it reads
                own, evidence = [evidence], evidence + 1
            for k, v in enumerate(own):
                for p in [*parents, *own[:k]]:  # a joint term's own slots: a chain among them
                    self.parents[v].append(p)
                    self.children[p].append(v)

    def reachable(self, source: int) -> set[int]:
        """Slots d-connected to `source` (source excluded)."""
        seen: set[tuple[int, bool]] = set()
        stack = [(source, True)]  # (node, entered from a child)
        reached: set[int] = set()
        while stack:
            v, from_child = stack.pop()
            if (v, from_child) in seen:
                continue
            seen.add((v, from_child))
            if v >= self.slots:  # evidence, entered from a parent: bounce up
                stack += [(p, True) for p in self.parents[v]]
                continue
            reached.add(v)
            if from_child:
                stack += [(p, True) for p in self.parents[v]]
            stack += [(c, False) for c in self.children[v]]
        reached.discard(source)
        return reached
