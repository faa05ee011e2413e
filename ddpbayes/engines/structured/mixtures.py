"""The structured engine's mixture weights for the information measures (DESIGN §3.4).

As for its leakage (`engine._leakage_for_known_set`): only the known tuples sharing a factor
with an unknown slot (x_R) change the law of (X_i, q) given x_K; the rest of K only shifts q,
which leaves Laplace and geometric measures unchanged. So one calibration per x_R gives
log P(X_i = t, q = s, x_R) (with nothing of R on a chain, the forward–backward of `pathsum`: a 15,000-day
chain's junction tree held 1 GB of tables); groups with the same law up to a shift of the levels are merged.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from ddpbayes.engines.base import MixtureGroup, Mixtures, NoMixtures
from ddpbayes.engines.structured.exchangeable import Orbits, many
from ddpbayes.engines.structured.graph import FactorGraph, calibrate
from ddpbayes.engines.structured.pathsum import path_laws, path_of
from ddpbayes.engines.structured.scope import WORK_PER_STATE, pass_cells, query_span
from ddpbayes.problem import Adversary, Problem

DIGITS = 12  # merged groups agree in log-weights to this many decimals


def structured_mixtures(problem: Problem, graph: FactorGraph, adv: Adversary, contribution: list[np.ndarray],
                        relevant: set[int], mixture) -> Mixtures:
    """`Engine.mixtures` by one calibration per configuration of the `relevant` known tuples, up to
    permutations of exchangeable ones (`Orbits`) (`mixture`: the engine's log P(q = s, X_i = t, x_K) from a marginal)."""
    limit = problem.settings.max_states
    shifts = problem.mechanism.shift_invariant  # then a known tuple's weight only shifts q (merged below)
    orbits = Orbits(graph.factors, graph.sizes, None if shifts else contribution, sorted(relevant))
    count = orbits.count()
    if count > limit:
        raise NoMixtures(f"A({adv.target}, {len(adv.known)} known) has {many(count)} configurations of the known "
                         f"tuples that bear on the target (up to exchangeable tuples), over the limit of {limit:,}")
    work = count * pass_cells(graph, query_span(problem))
    if work > WORK_PER_STATE * limit:  # all 19 others of 4 clusters of 5 known: 2^19 calibrations, hours
        raise NoMixtures(f"A({adv.target}, {len(adv.known)} known) has {count:.3g} configurations of the known tuples "
                         f"that bear on the target (up to exchangeable tuples), one calibration each: about "
                         f"{work:.2g} table cells, over {WORK_PER_STATE} x --max-states = {WORK_PER_STATE * limit:.2g}")
    moving = [np.zeros_like(c) if k in adv.known and k not in relevant else c for k, c in enumerate(contribution)]
    merged: dict[bytes, list] = {}
    path = path_of(graph) if not orbits.order else None  # nothing known bears on it: a chain's forward–backward
    on_path = path_laws(path, moving, [adv.target]) if path is not None else None
    for codes in orbits:  # one assignment per orbit, weighted by the orbit's size (all have its probability)
        if on_path is not None:  # one message a side at a time, not the junction tree's tables over every day
            marginal = on_path[0][1]
        else:
            marginal = calibrate(graph, moving, dict(zip(orbits.order, codes)), limit, adv.target).marginal(adv.target)
        weights = mixture(marginal, contribution[adv.target], 0)
        if weights is None:  # P(x_R) = 0
            continue
        log_w, levels = weights
        log_mass = float(logsumexp(log_w))
        log_w, levels = log_w - log_mass, levels - levels.min()
        log_prob = log_mass + orbits.log_size(codes)
        key = np.round(log_w, DIGITS).tobytes() + levels.tobytes()
        if key in merged:
            merged[key][0] = np.logaddexp(merged[key][0], log_prob)
        else:
            merged[key] = [log_prob, levels, log_w]
    total = logsumexp([m[0] for m in merged.values()])
    groups = [MixtureGroup(float(lp - total), levels[:, None], log_w) for lp, levels, log_w in merged.values()]
    return Mixtures([0], groups)

