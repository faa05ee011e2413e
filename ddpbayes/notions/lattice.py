"""The pdp lattice: seed 003's greedy search of it, for any engine (DESIGN §3.2), and its summary
by layer (`lattice_summary`, the --lattice JSON).

Li et al. order the adversaries A(i, K) of target i in a weighted hierarchical graph by the
size of K and search it greedily: layer 0 is K = {}; layer L + 1 extends each of the `top_k`
best known sets of layer L by one more tuple (not the target, not already known), each
extension once. A layer's candidates go to the engine like any other adversaries
(`engine.leakage`), so the search needs nothing from the engine but leak(i, K). It ends at
layer n - 1 (K = every other tuple). What it finds is the largest leakage among the known sets
it visited: a lower bound on pdp, exact when `top_k` keeps every set of every layer.

Ties, within a relative `notions.TIE` (rounding noise), go to the lexicographically first
known set within a layer and to the smaller known set across layers (`aggregate`).

Li et al. walk their graph the other way, from the strongest adversary (K = every other tuple)
removing one tuple per layer; the layer sizes are the same (`layer_bounds`), and this search's
misses are measured in `benchmarks/bench_greedy.py`. The paper's extracted text gives no value
of k: `settings.DEFAULT_TOP_K` is chosen from that benchmark.

The command line asks for it as `--search greedy --top-k K` (or `--pdp-greedy K`, the same);
`settings.search_width` turns either spelling into `RunSettings.pdp_greedy` (0: the full lattice).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ddpbayes.engines import AdversaryLeakage, Engine
from ddpbayes.notions.worst import TIE, aggregate
from ddpbayes.problem import Adversary, Problem
from ddpbayes.progress import Progress


def greedy_reason(top_k: int) -> str:
    """What a greedy result is, in the words every output uses."""
    return (f"greedy pdp search (top-k = {top_k} per layer, Li et al.): a lower bound on the pdp leakage, "
            "not a verification")


def layer_bounds(n: int, top_k: int) -> list[int]:
    """The most known sets the search evaluates in each layer 0..n-1 for one target: the kept
    sets of the layer before times the tuples left to add, and never more than the layer has."""
    bounds, kept = [1], 1
    for size in range(1, n):
        bounds.append(min(kept * (n - size), math.comb(n - 1, size)))
        kept = min(top_k, bounds[-1])
    return bounds


def greedy_pdp(engine: Engine, problem: Problem, targets: Sequence[int], top_k: int, chunk: int,
               bar: Progress) -> list[AdversaryLeakage]:
    """Each target's worst adversary among the known sets the greedy search visits, layer by
    layer for every target at once, `chunk` adversaries per engine call; `bar` counts toward
    `layer_bounds` (the extensions a layer does not need, being duplicates, count as done)."""
    n = problem.model.n
    bounds = layer_bounds(n, top_k)
    frontier = {i: [frozenset()] for i in targets}
    best: dict[int, AdversaryLeakage] = {}
    for size in range(n):
        candidates = [Adversary(i, known) for i in targets for known in frontier[i]]
        by_target: dict[int, list[AdversaryLeakage]] = {i: [] for i in targets}
        for r in _leakages(engine, problem, candidates, chunk, bar):
            by_target[r.adversary.target].append(r)
        if len(targets) * bounds[size] > len(candidates):
            bar.advance(len(targets) * bounds[size] - len(candidates))
        for i, layer in by_target.items():
            best[i] = aggregate(([best[i]] if i in best else []) + layer, n)[0]
            frontier[i] = _extend(_top(layer, top_k), n, i)
    return [best[i] for i in targets]


def _leakages(engine: Engine, problem: Problem, adversaries: list[Adversary], chunk: int,
              bar: Progress) -> list[AdversaryLeakage]:
    results = []
    for start in range(0, len(adversaries), chunk):
        batch = adversaries[start : start + chunk]
        results += engine.leakage(problem.with_adversaries(batch))
        bar.advance(len(batch))
    return results


def _rank(r: AdversaryLeakage) -> float:
    """What the search ranks by: the value, or for an estimate its choosing-run score (as
    `aggregate` picks the worst, so that the held-out lower bound stays valid)."""
    return r.value if r.score is None else r.score


def _top(layer: list[AdversaryLeakage], top_k: int) -> list[AdversaryLeakage]:
    """The `top_k` best of one target's layer (given in lexicographic order of the known sets):
    by rank, values within a relative TIE of the best left counting as equal (first set first)."""
    ranked = sorted(layer, key=lambda r: -_rank(r))  # stable: equal ranks stay in lexicographic order
    kept: list[AdversaryLeakage] = []
    while ranked and len(kept) < top_k:
        top = _rank(ranked[0])
        slack = TIE * max(1.0, abs(top)) if math.isfinite(top) else 0.0
        tied = [r for r in ranked if _rank(r) >= top - slack]
        kept += sorted(tied, key=lambda r: sorted(r.adversary.known))[: top_k - len(kept)]
        ranked = ranked[len(tied) :]
    return kept


def _extend(kept: list[AdversaryLeakage], n: int, target: int) -> list[frozenset[int]]:
    """The next layer's known sets: every kept set with one more tuple, once, in lexicographic order."""
    children = {r.adversary.known | {j} for r in kept for j in range(n) if j != target and j not in r.adversary.known}
    return sorted(children, key=sorted)


def lattice_summary(results: list[AdversaryLeakage]) -> dict:
    """PDP lattice by layer |K|: the max per layer, and whether the weakest adversary leaks most."""
    layers: dict[int, float] = {}
    for r in results:
        size = len(r.adversary.known)
        layers[size] = max(layers.get(size, -np.inf), r.value)
    return {"max_by_known_size": {str(k): layers[k] for k in sorted(layers)}}
