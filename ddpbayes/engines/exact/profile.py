"""What seed 004's IDP bounds need from an enumerated joint (Prop. 3, Thm. 4; DESIGN §3.3).

Prop. 3's k counts the tuples each one depends on; pairwise independence (N(i), read from
pairwise conditional laws) does not make a tuple jointly independent of the rest (X_2 = X_0 xor
X_1 is pairwise independent of each), so k becomes n when some tuple is pairwise but not
jointly independent of the tuples outside N(i). Thm. 4's eta is the largest total variation
distance between the conditional laws of the other tuples given two values of one
(004 Eq. 40: eta >= 1 - sum_x a_x, a_x = min(P(x_(i) | t), P(x_(i) | t'))).
"""

from __future__ import annotations

import numpy as np

from ddpbayes.engines.base import DependenceProfile
from ddpbayes.engines.exact.joint import JointTable
from ddpbayes.problem import dependence_size

INDEPENDENT = 1e-10  # probabilities this close count as equal (rounding)


def dependence_profile(table: JointTable, names: list[str], dependence_sets: list[frozenset[int]]) -> DependenceProfile:
    """k (with the joint-independence check) and eta from the enumerated joint."""
    n = len(names)
    k = dependence_size(dependence_sets)
    notes = []
    for i in range(n):
        rest = [j for j in range(n) if j != i and j not in dependence_sets[i]]
        if rest and not _jointly_independent(table, i, rest):
            others = ", ".join(names[j] for j in rest)
            notes.append(f"tuple {names[i]} is pairwise but not jointly independent of {{{others}}}: k = n = {n}")
            k = n
            break
    return DependenceProfile(k, max(_largest_tv(table, i) for i in range(n)), tuple(notes))


def _pair_table(table: JointTable, i: int, cols: list[int]) -> np.ndarray:
    """P(X_i = t, X_cols = u) as a dense (values of X_i, configurations u) array."""
    u = table.ids(cols)
    n_u, n_t = int(u.max()) + 1, len(table.values[i])
    return np.bincount(table.codes[:, i] * n_u + u, np.exp(table.logp), n_t * n_u).reshape(n_t, n_u)


def _jointly_independent(table: JointTable, i: int, cols: list[int]) -> bool:
    p = _pair_table(table, i, cols)
    return bool(np.abs(p - np.outer(p.sum(axis=1), p.sum(axis=0))).max() <= INDEPENDENT)


def _largest_tv(table: JointTable, i: int) -> float:
    """max over t, t' in supp(X_i) of TV(P(X_(i) | t), P(X_(i) | t')) = 1 - sum_x a_x (004 Eq. 40)."""
    p = _pair_table(table, i, [j for j in range(table.codes.shape[1]) if j != i])
    pt = p.sum(axis=1)
    cond = p[pt > 0] / pt[pt > 0, None]
    if len(cond) < 2:
        return 0.0
    return float(max(0.5 * np.abs(cond[a] - cond[b]).sum() for a in range(len(cond)) for b in range(a + 1, len(cond))))
