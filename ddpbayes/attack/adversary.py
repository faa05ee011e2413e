"""What the adversary knows about a target's neighbours, for a block of targets (seed 002 §IV-C).

The adversary knows the partition (every user's cluster label, hence the sizes n_c), the noisy
centroids, the friendship graph and the fitted CAR model, and the positions of a set of known
others: all others, or a seeded random `n_prior` of them per target (seed 002's partial
knowledge, N_prior).

Unknown others are integrated out, not ignored:
- in the likelihood, the sum of the u_c unknown members of the target's cluster is taken as
  u_c i.i.d. draws from the known members of that cluster (all known others if none of them is in
  it): Normal(u_c m, u_c V) by the central limit theorem, m and V the known members' mean and
  per-coordinate variance. The residual μ̃_c − (S_known + u_c m + d̂)/n_c is then Laplace(b) plus
  Normal(0, u_c V / n_c²) per coordinate (`posterior.laplace_normal_logpdf`; x and y treated as
  independent). With every other known, u_c = 0 and this is seed 002's exp(−‖μ̃ − μ̂‖₁/b) exactly;
- in the dependent prior, the CAR conditional of the target given the known others only: the
  unknown users are marginalised exactly (a Gaussian conditional on a subset, `subset_conditional`);
- the independent prior is the histogram of the known others alone (Eq. 8);
- the dependent prior is that histogram reweighted near the known friends (Eq. 9, `weighted_counts`,
  with the near-friend model's weight, geo/near.py): unknown friends carry no weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order
from scipy.sparse.linalg import spsolve

from ddpbayes.attack.release import Partition
from ddpbayes.geo.near import NearFit, log_weights


@dataclass(frozen=True)
class ClusterView:
    """Per target of a block: its cluster's size, the expected sum of the other members and the
    standard deviation of the centroid's unknown part (per coordinate)."""

    size: np.ndarray  # (T,) n_c
    expected_others: np.ndarray  # (T, 2) S_known + u_c m
    sigma: np.ndarray  # (T, 2) sqrt(u_c V) / n_c


def known_row(n: int, target: int, n_prior: int, rng: np.random.Generator) -> np.ndarray:
    """(n,) bool: the others the target's adversary knows: all of them when n_prior = n − 1, else
    `n_prior` drawn uniformly without replacement; never the target itself."""
    mask = np.ones(n, dtype=bool)
    if n_prior < n - 1:
        mask[:] = False
        others = rng.choice(n - 1, size=n_prior, replace=False)
        mask[others + (others >= target)] = True
    mask[target] = False
    return mask


def cluster_view(points: np.ndarray, part: Partition, targets: np.ndarray, mask: np.ndarray) -> ClusterView:
    """The likelihood's knowledge of each target's cluster (module docstring)."""
    cluster = part.labels[targets]
    same = mask & (part.labels[None, :] == cluster[:, None])
    known, k = _moments(points, same)
    anyone, _ = _moments(points, mask)
    empty = k == 0
    mean = np.where(empty[:, None], anyone[0], known[0])
    var = np.where(empty[:, None], anyone[1], known[1])
    size = part.sizes[cluster].astype(float)
    unknown = size - 1 - k
    return ClusterView(size, known[2] + unknown[:, None] * mean, np.sqrt(unknown[:, None] * var) / size[:, None])


def _moments(points: np.ndarray, mask: np.ndarray) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """Mean, variance and sum (T, 2) of the masked points per row, and the counts (T,); mean and
    variance are 0 for empty rows."""
    w = mask.astype(float)
    count = w.sum(axis=1)
    total = w @ points
    safe = np.maximum(count, 1)[:, None]
    mean = total / safe
    var = np.maximum(w @ points**2 / safe - mean**2, 0.0)
    return (mean, var, total), count


def histogram_counts(cells: np.ndarray, mask: np.ndarray, n_cells: int) -> np.ndarray:
    """(T, G²): how many of each target's known others fall in each cell (Eq. 8's counts), row by row: no
    (users, cells) table (8.9 GiB at --grid 1000)."""
    out = np.zeros((len(mask), n_cells))
    for r, row in enumerate(mask):
        out[r] = np.bincount(cells[np.flatnonzero(row)], minlength=n_cells)
    return out


def weighted_counts(cells: np.ndarray, mask: np.ndarray, km: np.ndarray, friends: sp.csr_matrix,
                    targets: np.ndarray, near: NearFit, n_cells: int) -> np.ndarray:
    """(T, cells): Eq. 9's weighted counts Σ_{known k in the cell} weight(x_k), weight from the target's
    known friends (`near.log_weights`; `friends` the adjacency, `km` every user's plane position);
    each row is scaled by its largest weight (the prior normalises it)."""
    out = np.zeros((len(targets), n_cells))
    for r, t in enumerate(targets):
        known = np.flatnonzero(mask[r])
        mine = friends.indices[friends.indptr[t]:friends.indptr[t + 1]]
        log_w = log_weights(km[known], km[mine[mask[r, mine]]], near)
        out[r] = np.bincount(cells[known], weights=np.exp(log_w - log_w.max()), minlength=n_cells)
    return out


def subset_conditional(Qs: list[sp.csr_matrix], centred: np.ndarray, target: int,
                       known: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Means (centred) and variances of the target's coordinates given the known others, the other
    unknowns marginalised, for independent fields with precisions `Qs` (one per column of `centred`,
    same sparsity). Only A = the target and the unknown users reachable from it through unknown
    users matter (known users or missing edges separate the rest): with z = Q_AA⁻¹ e_target,
    Var = z_target and E = −z · Q_{A,K} x_K."""
    region = _reachable(Qs[0], target, known)
    unit = np.zeros(len(region))
    unit[0] = 1.0
    mean, var = np.empty(len(Qs)), np.empty(len(Qs))
    for a, Q in enumerate(Qs):
        block = Q[region]
        shift = block @ np.where(known, centred[:, a], 0.0)
        z = np.atleast_1d(spsolve(block[:, region].tocsc(), unit)) if len(region) > 1 else unit / block[0, target]
        mean[a], var[a] = -z @ shift, z[0]
    return mean, var


def _reachable(Q: sp.csr_matrix, target: int, known: np.ndarray) -> np.ndarray:
    """The target, then the unknown users connected to it through unknown users (breadth first on
    Q's off-diagonal pattern with the known users' rows and columns removed)."""
    if Q.indptr[target + 1] - Q.indptr[target] <= 1:  # no friends: nothing to reach
        return np.array([target])
    keep = sp.diags((~known | (np.arange(len(known)) == target)).astype(float))
    graph = (keep @ Q @ keep).tocsr()
    graph.eliminate_zeros()
    return breadth_first_order(graph, target, directed=False, return_predecessors=False)
