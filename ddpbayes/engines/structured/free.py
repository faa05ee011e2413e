"""Parts of the model free of the known tuples, summed out once per known set (DESIGN §2.1b; issue #41).

Given x_K (and the values of a few unknown "hub" slots H, when that is what cuts them off), the
factorised law splits over the connected components of the factor graph on the other unknown slots.
A component F that holds no target and no slot sharing a factor with a known one has factors Φ_F over
F ∪ H alone, and the rest Φ_A does not touch F, so

    P(X_i = t, q = s, x_K) ∝ Σ_{x_H} Σ_{s'} P_A(X_i = t, q_A = s', x_K, x_H) · G(x_H, s − s'),
    G(x_H, s'') = Σ_{x_F : q_F = s''} Φ_F(x_F, x_H),

where q_A and q_F are the partial sums of A's and F's tuples. G does not depend on x_K: it is computed
once, by variable elimination, and joins A's factors as one factor over H with a sum axis; each
configuration of the known tuples then calibrates A alone (pdp of a child knowing its village under
the count of 65 villages: one village per configuration, the other 64 convolved once). With fixed
parameters a fitted model's villages are free without hubs; the Bayesian adversary's model
(`fitting.posterior.integrated_model`) joins them through the draw index J, a discrete latent next
to the known children: the hubs are such slots (finite, unknown, not a target, sharing a factor with a
known slot), tried when no part is free without them and their configurations fit HUB_STATES.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ddpbayes.engines.structured.eliminate import kept_law
from ddpbayes.engines.structured.graph import FactorGraph
from ddpbayes.engines.structured.rows import components, incidence

HUB_STATES = 4096  # configurations of the hub slots at most (G's table: these times F's range of sums)


def fold_free_parts(graph: FactorGraph, known: frozenset[int], targets: set[int], contribution: list[np.ndarray],
                    limit: int) -> FactorGraph:
    """`graph` with the parts free of the known slots (given them, or given them and the hubs) replaced by
    their law of the partial sum G, one factor over the hubs; the graph itself when no part is free."""
    hubs, free = frozenset(), _free_slots(graph, known, known, targets)
    if not free and known:
        hubs = _hubs(graph, known, targets)
        free = _free_slots(graph, known | hubs, known, targets) if hubs else set()
        if free and not _fits(graph, hubs, free, contribution, limit):
            free = set()
    if not free:
        return graph
    inside = [p for p in graph.factors if free.intersection(p.scope)]
    law = kept_law(replace(graph, factors=inside, trees={}), contribution, sorted(hubs), limit)
    rest = [p for p in graph.factors if not free.intersection(p.scope)]
    return replace(graph, factors=[*rest, law], trees={})


def _free_slots(graph: FactorGraph, cut: frozenset[int], known: frozenset[int], targets: set[int]) -> set[int]:
    """The unknown slots outside `cut` whose component (given `cut`) holds no target and no slot sharing a
    factor with a known slot (`rows.Incidence`: a few NumPy calls, not a scan of every factor per known set)."""
    label = components(graph, cut)
    where = incidence(graph)
    near = where.sharing(where.touching(where.mask(known)))
    bound = np.zeros(label.max() + 2, dtype=bool)  # by label + 1 (known slots: -1)
    bound[label[where.mask(targets) | near] + 1] = True
    bound[0] = True
    return set(where.present[~bound[label[where.present] + 1]].tolist())


def _hubs(graph: FactorGraph, known: frozenset[int], targets: set[int]) -> frozenset[int]:
    """The unknown finite slots (no quadrature rule) that share a factor with a known slot, targets excepted."""
    where = incidence(graph)
    near = where.sharing(where.touching(where.mask(known))) & ~where.mask(known) & ~where.mask(targets)
    return frozenset(v for v in np.flatnonzero(near).tolist() if v not in graph.rules)


def _fits(graph: FactorGraph, hubs: frozenset[int], free: set[int], contribution: list[np.ndarray],
          limit: int) -> bool:
    """Whether G over `hubs` has at most HUB_STATES configurations and its table fits `limit` cells."""
    states = math.prod(graph.sizes[v] for v in hubs)
    span = 1 + sum(int(contribution[v].max() - contribution[v].min()) for v in free)
    return states <= HUB_STATES and states * span <= limit
