"""One target's law with the boundary slots kept: variable elimination in one pass (DESIGN §2.1b).

For a known set with one target, the engine needs log P(X_i = t, q_rest = s, x_R) for every x_R of the
known slots R that bear on the unknown ones. Instead of one calibration per x_R (each an upward pass and
a downward path), every other slot is eliminated once, in a min-fill order that leaves X_i and R to the
end, and the last table is read at each x_R: R's values ride along as axes of the messages (the
configurations of R are at most `KEPT`), and no downward pass is needed for a single target.
"""

from __future__ import annotations

import numpy as np

from ddpbayes.engines.structured.graph import FactorGraph, elimination_order
from ddpbayes.engines.structured.potential import Potential, eliminate, product

KEPT = 64  # at most this many configurations of R ride along as axes; more are clamped one by one


def target_table(graph: FactorGraph, contribution: list[np.ndarray], target: int, kept: list[int],
                 limit: int) -> tuple[np.ndarray, int]:
    """log P(X_target, X_kept..., Σ w_k X_k = offset + s) over the slots summed out (not the target, not the
    kept ones), up to a constant: a table with axes (target, *kept, s), and the offset."""
    final = kept_law(graph, contribution, [target, *kept], limit)
    scope = (target, *kept)
    present = [u for u in scope if u in final.scope]
    table = np.transpose(final.table, [final.scope.index(u) for u in present] + [len(final.scope)])
    table = table.reshape(*[graph.sizes[u] if u in final.scope else 1 for u in scope], final.length)
    return np.broadcast_to(table, (*[graph.sizes[u] for u in scope], final.length)), final.offset


def kept_law(graph: FactorGraph, contribution: list[np.ndarray], kept: list[int], limit: int) -> Potential:
    """Σ over every slot of the factors but `kept` of their product, the partial sum of the slots summed out
    as the sum axis (the kept slots' contributions not added): a potential over the kept slots that hold a
    factor, by variable elimination in a min-fill order that leaves them to the end."""
    last = set(kept)
    drop = sorted({v for p in graph.factors for v in p.scope} - last)
    order, _ = elimination_order([tuple(v for v in p.scope if v not in last) for p in graph.factors], drop)
    position = {v: k for k, v in enumerate(order)}
    buckets: dict[int | None, list[Potential]] = {v: [] for v in order}
    buckets[None] = []

    def place(p: Potential) -> None:
        inside = [v for v in p.scope if v in position]
        buckets[min(inside, key=position.__getitem__) if inside else None].append(p)

    for p in graph.factors:
        place(p)
    for v in order:
        place(eliminate(buckets.pop(v), v, contribution[v], graph.sizes, limit))
    return product(buckets[None], graph.sizes, limit)
