"""The enumerated states of an adversary A(i, K) grouped by known values x_K and query output.

Shared by the leakage (`engine._adversary_leakage`) and the information measures
(`engine.ExactEngine.mixtures`): both read the mixture weights P(x_K, X_i = t, q = q_r).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddpbayes.engines.exact.joint import JointTable
from ddpbayes.problem import Adversary


@dataclass(frozen=True)
class Grouping:
    """Per state: its x_K group and its row (distinct values of the active output coordinates,
    those that vary within some group; the others scale every likelihood of a group alike)."""

    group: np.ndarray  # (states,) dense id of x_K
    n_groups: int
    active: list[int]  # output coordinates that vary within a group
    row: np.ndarray  # (states,) dense id of the active coordinates' levels
    row_levels: np.ndarray  # (rows, len(active)) each row's level index per active coordinate

    @property
    def n_rows(self) -> int:
        return len(self.row_levels)


def grouping(adv: Adversary, table: JointTable, levels: list[np.ndarray], level_of: list[np.ndarray],
             every: bool = False) -> Grouping:
    """Group the states of `table` for `adv`, given each output coordinate's distinct `levels`
    and every state's level index `level_of`. With `every` (a joint output law: a coordinate fixed by
    x_K still shapes the output's law) every coordinate is active."""
    group = table.ids(sorted(adv.known))
    n_groups = int(group.max()) + 1
    active = [c for c in range(len(levels))
              if every or np.unique(group * len(levels[c]) + level_of[c]).size > n_groups]
    row_key = np.zeros(len(table.logp), dtype=np.int64)
    for c in active:
        row_key = row_key * len(levels[c]) + level_of[c]
    row = np.unique(row_key, return_inverse=True)[1].reshape(-1)
    row_levels = np.zeros((int(row.max()) + 1, len(active)), dtype=np.int64)
    for a, c in enumerate(active):
        row_levels[row, a] = level_of[c]
    return Grouping(group, n_groups, active, row, row_levels)


def cell_weights(g: Grouping, table: JointTable, target: int) -> tuple[np.ndarray, np.ndarray]:
    """The occupied cells (group, t, row) as flat ids (group · T + t) · rows + row, sorted, and
    log P(x_K, X_i = t, row) of each."""
    n_t = len(table.values[target])
    cell = (g.group * n_t + table.codes[:, target]) * g.n_rows + g.row
    order = np.argsort(cell, kind="stable")
    cells, starts = np.unique(cell[order], return_index=True)
    return cells, np.logaddexp.reduceat(table.logp[order], starts)


def weight_table(g: Grouping, table: JointTable, target: int) -> np.ndarray:
    """log P(x_K, X_i = t, row) as a dense (groups, t, rows) array, −inf for the empty cells (the caller has
    checked its size against the state limit)."""
    log_w = np.full((g.n_groups, len(table.values[target]), g.n_rows), -np.inf)
    cells, weights = cell_weights(g, table, target)
    log_w.reshape(-1)[cells] = weights
    return log_w


def answer_rows(g: Grouping, levels: list[np.ndarray]) -> np.ndarray:
    """Each row's values of the active output coordinates, (rows, len(active)): the answer vectors a joint
    output law is given (DESIGN §5.2)."""
    return np.stack([levels[c][g.row_levels[:, a]] for a, c in enumerate(g.active)], axis=1)

