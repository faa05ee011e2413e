"""Exchangeable known tuples: the sup over x_R by value counts, not assignments (DESIGN §2.1b; issue #41).

Known slots a, b are exchangeable when swapping them maps the factor graph onto itself: no factor holds
both, and the factors holding a are those holding b with a put for b (same tables, same other slots);
unless the noise is shift-invariant, their query contributions (w_k · value) must be equal too. The
joint law is then invariant under every permutation of a class (transpositions generate them), and so
is the partial sum, or it moves by a constant that a shift-invariant noise's sup does not see; so the
sup for x_K depends on a class's values only through how many take each value: one representative per
orbit (the orbit's first assignment in mixed-radix order: each class's values non-decreasing along its
slots) gives the same sup, with
C(m + k - 1, k - 1) configurations for a class of m slots of k values instead of k^m (a village's 32
known children: 33, not 2^32).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ddpbayes.engines.structured.potential import Potential


class Orbits:
    """The configurations of the known slots `order` up to permutations within exchangeable classes."""

    def __init__(self, factors: list[Potential], sizes: list[int], contribution: list[np.ndarray] | None,
                 order: list[int]) -> None:
        """`contribution`: w_k · value per slot, when the noise is not shift-invariant (else None)."""
        self.order = order
        self.sizes = [sizes[k] for k in order]
        self.label = _classes(factors, contribution, order)

    def count(self) -> int:
        """How many orbits: the product over classes of C(m + k - 1, k - 1)."""
        members: dict[int, list[int]] = {}
        for k, c in enumerate(self.label):
            members.setdefault(c, []).append(k)
        return math.prod(math.comb(len(m) + self.sizes[m[0]] - 1, len(m)) for m in members.values())

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        """Each orbit's first assignment, in mixed-radix order (so the first maximiser is the one plain
        enumeration finds): the next is found by raising the last position that can rise and setting
        each later one to the least its class allows (its class's value before it, else 0)."""
        n = len(self.order)
        codes = self._least([0] * n, 0)
        while True:
            yield tuple(codes)
            j = n - 1
            while j >= 0 and codes[j] == self.sizes[j] - 1:
                j -= 1
            if j < 0:
                return
            codes[j] += 1
            codes = self._least(codes, j + 1)

    def log_size(self, codes: tuple[int, ...]) -> float:
        """log of the orbit's number of assignments: Π over classes m! / Π_v (count of v)!."""
        counts: dict[tuple[int, int], int] = {}
        sizes: dict[int, int] = {}
        for c, v in zip(self.label, codes):
            counts[c, v] = counts.get((c, v), 0) + 1
            sizes[c] = sizes.get(c, 0) + 1
        return (sum(math.lgamma(m + 1) for m in sizes.values())
                - sum(math.lgamma(m + 1) for m in counts.values()))

    def _least(self, codes: list[int], start: int) -> list[int]:
        last: dict[int, int] = {}
        for k in range(start):
            last[self.label[k]] = codes[k]
        for k in range(start, len(codes)):
            codes[k] = last.get(self.label[k], 0)
            last[self.label[k]] = codes[k]
        return codes


def _classes(factors: list[Potential], contribution: list[np.ndarray] | None, order: list[int]) -> list[int]:
    """A class label per position of `order`: slots with equal signatures (their factors with the slot
    itself blanked out, tables compared byte for byte, and their contributions if given) share one, unless two of
    them share a factor: then that signature's slots each keep their own (not checked further: sound)."""
    position = {k: j for j, k in enumerate(order)}
    held: list[list[tuple]] = [[] for _ in order]
    for p in factors:
        inside = [position[v] for v in p.scope if v in position]
        for j in inside:
            blank = tuple(-1 if v == order[j] else v for v in p.scope)
            held[j].append((blank, p.table.shape, p.table.tobytes(), p.offset))
    groups: dict[tuple, list[int]] = {}
    for j, k in enumerate(order):
        weight = b"" if contribution is None else contribution[k].tobytes()
        groups.setdefault((tuple(sorted(held[j])), weight), []).append(j)
    label = list(range(len(order)))
    for members in groups.values():
        if len(members) > 1 and not _share_a_factor(factors, {order[j] for j in members}):
            for j in members:
                label[j] = members[0]
    return label


def _share_a_factor(factors: list[Potential], slots: set[int]) -> bool:
    return any(len(slots.intersection(p.scope)) > 1 for p in factors)


def many(count: int) -> str:
    """A count of configurations, as a power of ten when too large for a float."""
    return f"{count:.3g}" if count < 10 ** 300 else f"about 10^{len(str(count)) - 1}"
