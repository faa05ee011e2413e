"""The provider's release in seed 002 §IV-B: K-means on the users' normalised positions, then the
Laplace perturbation mechanism (LPM) on the K centroids.

The clustering is held fixed, as in seed 002: the provider runs K-means once, and the released
statistic is the vector of the 2K member means of that partition. Two databases are neighbours
when one user's position differs and the partition (who belongs with whom, hence the cluster
sizes n_c) is the same. Moving a user of cluster c from d to d' changes only μ_c, by
(d' − d)/n_c, whose L1 norm is at most 2/n_c in the unit box (at most 1 per coordinate; equality
from corner to opposite corner), so the L1 sensitivity of the centroid vector is Δ = 2 / min_c n_c
and Laplace noise of scale b = Δ/ε on each of the 2K coordinates is ε-DP for these neighbours
(DESIGN §7).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.cluster.vq import ClusterError, kmeans2

from ddpbayes.errors import InputError

RESTARTS = 10  # k-means++ starts; the partition with the smallest within-cluster sum of squares is kept
ITERATIONS = 100  # Lloyd iterations per start


@dataclass(frozen=True)
class Partition:
    """The provider's K-means partition of the users' normalised positions (n, 2)."""

    labels: np.ndarray  # (n,) cluster of each user
    sizes: np.ndarray  # (K,) n_c
    sums: np.ndarray  # (K, 2) sum of the members' positions
    centroids: np.ndarray  # (K, 2) μ_c = sums / sizes: the statistic the LPM perturbs

    @property
    def k(self) -> int:
        return len(self.sizes)


def partition(points: np.ndarray, labels: np.ndarray, k: int) -> Partition:
    """The member counts, sums and means of the partition `labels` of `points`."""
    sizes = np.bincount(labels, minlength=k)
    sums = np.stack([np.bincount(labels, weights=points[:, a], minlength=k) for a in range(2)], axis=1)
    return Partition(labels, sizes, sums, sums / sizes[:, None])


def kmeans(points: np.ndarray, k: int, rng: np.random.Generator) -> Partition:
    """SciPy's k-means (`kmeans2`, k-means++ starts, seeded by `rng`), the best of `RESTARTS` starts
    by within-cluster sum of squares; starts that leave a cluster empty are skipped."""
    if k < 1:
        raise InputError(f"--k must be at least 1, got {k}")
    distinct = len(np.unique(points, axis=0))
    if k > distinct:
        raise InputError(f"--k {k} is larger than the number of users with distinct positions ({distinct})")
    best: tuple[float, np.ndarray] | None = None
    for _ in range(RESTARTS):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                centres, labels = kmeans2(points, k, iter=ITERATIONS, minit="++", missing="raise", rng=rng)
        except ClusterError:
            continue
        inertia = float(((points - centres[labels]) ** 2).sum())
        if best is None or inertia < best[0]:
            best = (inertia, labels)
    if best is None:
        raise InputError(f"k-means left a cluster empty in all {RESTARTS} starts; try a smaller --k")
    return partition(points, best[1], k)


def sensitivity(sizes: np.ndarray) -> float:
    """Δ = 2 / min_c n_c: the L1 sensitivity of the centroid vector for a fixed partition of users in
    the unit box (module docstring)."""
    return 2.0 / float(np.min(sizes))


def lpm(centroids: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
    """μ̃ = μ + Laplace(0, b) noise on each of the 2K coordinates (seed 002 §IV-B)."""
    return centroids + rng.laplace(0.0, scale, size=centroids.shape)
