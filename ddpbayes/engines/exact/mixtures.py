"""The exact engine's mixture weights for the information measures (DESIGN §3.4).

Groups of known values x_K whose (X_i, q) laws coincide give the same measures: they are merged
(vectorised, by a signature of each group's cells), so A(i, all others) costs one integral per
distinct law, not one per configuration of the other tuples.
"""

from __future__ import annotations

import numpy as np

from ddpbayes.engines.base import MixtureGroup, Mixtures
from ddpbayes.engines.exact.grouping import cell_weights, grouping
from ddpbayes.engines.exact.joint import JointTable
from ddpbayes.problem import Adversary

DIGITS = 12  # signatures compare log-weights and levels rounded to this many decimals


def exact_mixtures(adv: Adversary, table: JointTable, levels: list[np.ndarray], level_of: list[np.ndarray],
                   shift_invariant: bool) -> Mixtures:
    """`Engine.mixtures` from the enumerated joint `table`."""
    g = grouping(adv, table, levels, level_of)
    cells, log_w = cell_weights(g, table, adv.target)
    n_t = len(table.values[adv.target])
    grp, t, row = cells // (n_t * g.n_rows), (cells // g.n_rows) % n_t, cells % g.n_rows
    starts = np.flatnonzero(np.r_[True, grp[1:] != grp[:-1]])
    log_pg = np.logaddexp.reduceat(log_w, starts)
    owner = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(cells)]))
    rel = log_w - log_pg[owner]
    lv = np.stack([levels[c][g.row_levels[row, a]] for a, c in enumerate(g.active)], axis=1) if g.active \
        else np.zeros((len(cells), 0))
    if shift_invariant and g.active:
        lv = lv - np.minimum.reduceat(lv, starts, axis=0)[owner]
    first, inverse = _distinct_groups(owner, starts, t, rel, lv)
    groups = []
    for u, s in enumerate(first):
        sl = slice(starts[s], starts[s + 1] if s + 1 < len(starts) else len(cells))
        groups.append(_group(np.logaddexp.reduce(log_pg[inverse == u]), t[sl], row[sl], rel[sl], lv[sl], n_t))
    return Mixtures(list(g.active), groups)


def _distinct_groups(owner, starts, t, rel, lv) -> tuple[np.ndarray, np.ndarray]:
    """The first group of each distinct signature (its cells' t, log-weight and levels, in
    order), and every group's signature index."""
    counts = np.diff(np.r_[starts, len(owner)])
    width = 2 + lv.shape[1]
    sig = np.zeros((len(starts), 1 + int(counts.max()) * width))
    sig[:, 0] = counts
    pos = np.arange(len(owner)) - starts[owner]
    cols = np.column_stack([t, _rounded(rel), _rounded(lv)])
    for k in range(width):
        sig[owner, 1 + pos * width + k] = cols[:, k]
    _, first, inverse = np.unique(sig, axis=0, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def _rounded(x: np.ndarray) -> np.ndarray:
    """`x` to DIGITS decimals; beyond 1e280, where x·10^DIGITS would overflow (to inf, merging
    distinct levels, with a RuntimeWarning), `x` as it is: a double there has no decimals."""
    x = np.asarray(x, dtype=float)
    big = ~(np.abs(x) <= 1e280)  # and ±inf, nan
    return np.where(big, x, np.round(np.where(big, 0.0, x), DIGITS))


def _group(log_prob: float, t, row, rel, lv, n_t: int) -> MixtureGroup:
    rows, s = np.unique(row, return_inverse=True)
    log_w = np.full((n_t, len(rows)), -np.inf)
    log_w[t, s] = rel
    level = np.zeros((len(rows), lv.shape[1]))
    level[s] = lv
    return MixtureGroup(float(log_prob), level, log_w)
