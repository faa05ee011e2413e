"""A privacy notion is a set of adversaries A(i, K) over the one quantity leak(i, K) (DESIGN §1).

| notion | adversaries                                            | source           |
| dp     | K = all others, x_{-i} over the product of the domains  | model-free       |
| idp    | K = {} for every target                                | 004 Def. 3       |
| pdp    | every K for every target (the WHG lattice)             | 003 Def. 2       |
| ddp    | K = the tuples outside the target's dependence set     | 000 Def. 3–4     |

Callers ask a `Notion` what it needs (`model_free`, `needs_dependence_sets`, `lattice`) and
for its adversaries; no notion's name is compared outside this package.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

from ddpbayes.errors import InputError
from ddpbayes.problem import Adversary
from ddpbayes.vocabulary import NOTIONS


class Notion:
    """One notion: its adversaries, how many they are, and what computing them needs."""

    name: str
    source: str
    model_free: bool = False  # dp: the mechanism's leakage at the query's sensitivity, no engine, no model
    needs_dependence_sets: bool = False  # ddp: K is the complement of the target's dependence set
    lattice: bool = False  # pdp: every K (the WHG lattice; never listed), searched greedily on request
    weakest: bool = False  # idp: the one adversary knowing nothing (004 Thm. 1: posterior odds / prior odds)

    def adversaries(self, n: int, targets: Sequence[int], known: Sequence[int] | None = None,
                    dependence_sets: Sequence[frozenset[int]] | None = None) -> Iterator[Adversary]:
        """The adversaries the notion takes the supremum over, one at a time."""
        raise InputError(f"notion '{self.name}' has no adversary set")

    def adversary_count(self, n: int, targets: Sequence[int], known: Sequence[int] | None = None) -> int:
        """How many adversaries `adversaries` yields."""
        return len(targets)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"notion({self.name!r})"


class DP(Notion):
    name, source, model_free = "dp", "the classic guarantee", True

    def adversaries(self, n, targets, known=None, dependence_sets=None):
        everyone = frozenset(range(n))
        return (Adversary(i, everyone - {i}) for i in targets)


class IDP(Notion):
    name, source, weakest = "idp", "004 Def. 3", True

    def adversaries(self, n, targets, known=None, dependence_sets=None):
        return (Adversary(i) for i in targets)


class PDP(Notion):
    name, source, lattice = "pdp", "003 Def. 2", True

    def adversaries(self, n, targets, known=None, dependence_sets=None):
        if known is not None:
            return (Adversary(i, frozenset(known)) for i in targets)
        return (Adversary(i, frozenset(k)) for i in targets for size in range(n)
                for k in itertools.combinations([j for j in range(n) if j != i], size))

    def adversary_count(self, n, targets, known=None):
        return len(targets) * 2 ** (n - 1) if known is None else len(targets)


class DDP(Notion):
    name, source, needs_dependence_sets = "ddp", "000 Def. 3-4", True

    def adversaries(self, n, targets, known=None, dependence_sets=None):
        everyone = frozenset(range(n))
        return (Adversary(i, everyone - dependence_sets[i] - {i}) for i in targets)


REGISTRY: dict[str, Notion] = {cls.name: cls() for cls in (DP, IDP, PDP, DDP)}
assert tuple(REGISTRY) == NOTIONS, "vocabulary.NOTIONS lists the notions a user types, in this order"


def notion(which: str | Notion) -> Notion:
    """The notion named `which` (a `Notion` is returned as it is); an unknown name is refused."""
    if isinstance(which, Notion):
        return which
    if which not in REGISTRY:
        raise InputError(f"unknown notion '{which}' (use {', '.join(NOTIONS)})")
    return REGISTRY[which]
