"""pdp, prior DP (003 Def. 2): every known set K of every target, the WHG lattice of
|targets| 2^(n-1) adversaries (never listed): one fixed K (--known), every K listed (--lattice),
the engine's own lattice search, or seed 003's greedy search (`lattice`)."""

from __future__ import annotations

import itertools

from ddpbayes.errors import InputError
from ddpbayes.notions.base import Notion, register
from ddpbayes.problem import Adversary


class PriorDP(Notion):
    name, source, lattice = "pdp", "Li et al. 2019, Def. 2", True

    def adversaries(self, n, targets, known=None, dependence_sets=None):
        if known is not None:
            return (Adversary(i, frozenset(known)) for i in targets)
        return (Adversary(i, frozenset(k)) for i in targets for size in range(n)
                for k in itertools.combinations([j for j in range(n) if j != i], size))

    def adversary_count(self, n, targets, known=None):
        return len(targets) * 2 ** (n - 1) if known is None else len(targets)

    def known_set_count(self, n, targets, known=None):
        return self.adversary_count(n, targets, known) if known is None else 1

    def searched(self, engine, problem, targets, known, keep):
        return engine.pdp_worst(problem, targets) if known is None and not keep else None

    def check_known(self, known):
        pass

    def check_lattice(self, lattice):
        pass

    def check_search(self, top_k, known, lattice):
        """--search greedy visits some known sets: not with one fixed (--known) nor all listed (--lattice)."""
        if top_k and known is not None:
            raise InputError("--search greedy searches the known sets and --known fixes one: use one of them")
        if top_k and lattice:
            raise InputError("--lattice lists every pdp adversary and --search greedy visits only some: use one of them")


PDP = register(PriorDP())
