"""The exact audit of seed 002's noisy K-means centroids on the Gowalla friendship data (issue 14).

The release (seed 002 §IV-B): K-means (K = 8) on the users' normalised positions, then the 2K
centroid coordinates with Laplace noise of scale b = Δ/ε, Δ = 2 / (smallest cluster) the L1
sensitivity of the centroids for one user's record (both coordinates) with the partition held
fixed. The partition is the one `ddpbayes attack --seed 0` releases (`ddpbayes.attack.release.kmeans`,
SciPy's kmeans2, best of its k-means++ starts, on the seed-0 k-means stream).

The model: `models/gowalla_friends.py` (the fitted proper CAR per coordinate on the friendship
graph, 2 × 2,392 Gaussian tuples: every user's x, then every y). The query: `centroids:FILE` with
the partition written to a temporary CSV. `audit` computes idp and ddp for every tuple with the
gaussian engine's sparse path (DESIGN §2.2); a user's leakage when her whole record changes is
the sum of her two coordinates' leakages (the x and y fields are independent and every centroid
row reads one of them: DESIGN §2.2, "A record of several tuples"; both conditions are checked
here). Its classic DP value is 2 / (|c| b) = (smallest cluster) / |c| <= ε.

Prints the runtimes, the distribution of the user-level leakage at ε = 1, and what drives it
(degree, connected component, cluster size). From the repository root, after `pip install .`:

    python benchmarks/bench_gowalla_audit.py [--epsilon 1] [--k 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pymc as pm
from scipy import sparse, stats
from scipy.sparse.csgraph import connected_components

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))

import gowalla_friends

from ddpbayes import DependenceModel, Interval, audit
from ddpbayes.attack.release import kmeans
from ddpbayes.geo import US_BOX, adjacency, car_precision, load_fit
from ddpbayes.geo.car import car_vector_weights

DEGREE_BUCKETS = [(0, 0), (1, 1), (2, 2), (3, 4), (5, 9), (10, 49), (50, 10**9)]
QUANTILES = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0]


def partition_file(points: np.ndarray, k: int, folder: str) -> tuple[str, np.ndarray]:
    """The seed-0 K-means partition written as an assignment CSV (`centroids:FILE`)."""
    labels = kmeans(points, k, np.random.default_rng([0, 0])).labels  # `ddpbayes attack --seed 0`'s stream
    path = os.path.join(folder, "gowalla_kmeans.csv")
    with open(path, "w") as f:
        f.write("row,cluster\n" + "".join(f"{r},{c}\n" for r, c in enumerate(labels)))
    return path, labels


def timed(what: str, fn, log: list):
    start, cpu = time.perf_counter(), time.process_time()
    out = fn()
    log.append((what, time.perf_counter() - start, time.process_time() - cpu))
    return out


def check_separate_fields(result, n: int, matrix: np.ndarray) -> None:
    """The two conditions under which a record's leakage is the sum of its coordinates' (DESIGN §2.2)."""
    crossing = sum(1 for i, dep in enumerate(result.dependence_sets) if any((j >= n) != (i >= n) for j in dep))
    mixed = int(np.sum((np.abs(matrix[:, :n]).sum(axis=1) > 0) & (np.abs(matrix[:, n:]).sum(axis=1) > 0)))
    assert crossing == 0 and mixed == 0, (crossing, mixed)


def dense_check(w: sparse.csr_matrix, alpha: float, tau: float, matrix: np.ndarray, per_tuple: np.ndarray,
                scale: float, users: int = 200) -> tuple[int, float, float]:
    """The x field's giant component with a dense numpy inverse: its size, its smallest relative
    entry |Sigma_ij| / sqrt(Sigma_ii Sigma_jj) (the dense path's dependence rule drops entries below
    1e-12), and the largest relative difference between the engine's idp and the formula
    ||A Sigma e_i||_1 / (Sigma_ii b) for `users` random users of it (width 1)."""
    q = car_precision(w, alpha, tau)
    _, labels = connected_components(q, directed=False)
    giant = np.flatnonzero(labels == np.bincount(labels).argmax())
    sigma = np.linalg.inv(q[giant][:, giant].toarray())
    root = np.sqrt(np.diag(sigma))
    picked = np.random.default_rng(0).choice(len(giant), size=min(users, len(giant)), replace=False)
    a = matrix[:, giant]  # the x tuples are 0..n-1
    expected = np.abs(a @ sigma[:, picked] / np.diag(sigma)[picked]).sum(axis=0) / scale
    gap = float(np.max(np.abs(per_tuple[giant[picked]] / expected - 1)))
    return len(giant), float(np.min(np.abs(sigma) / np.outer(root, root))), gap


def model_at(alpha: float) -> DependenceModel:
    """`gowalla_friends.build()` with alpha replaced (tau and mu kept at the fit)."""
    fit = load_fit(gowalla_friends.FIT)
    locations, pairs = gowalla_friends.users()
    w = adjacency(len(locations), pairs)
    with pm.Model() as m:
        pm.CAR("pos", mu=np.repeat(fit.mu, len(locations)), W=car_vector_weights(w, alpha, fit.tau), alpha=alpha,
               tau=1.0)
    return DependenceModel(m, tuples="pos", domains=Interval(0.0, 1.0))


def user_level(model: DependenceModel, query: str, scale: float, n: int) -> np.ndarray:
    """Every user's idp when her whole record changes: the sum of her two coordinates' (DESIGN §2.2)."""
    per_tuple = np.array(audit(model, query, "laplace", "idp", scale=scale, information=None).per_target,
                         dtype=float)
    return per_tuple[:n] + per_tuple[n:]


def describe(values: np.ndarray, epsilon: float) -> list[str]:
    over = values > epsilon
    q = np.quantile(values, QUANTILES)
    lines = [f"  users {len(values)}, above eps = {epsilon:g}: {over.sum()} ({over.mean():.1%}); mean {values.mean():.4g}",
             "  quantiles " + ", ".join(f"q{int(p * 100)} {v:.4g}" for p, v in zip(QUANTILES, q))]
    if over.any():
        ratio = values[over] / epsilon
        lines.append(f"  above eps: median {np.median(ratio):.3g} x eps, 90th percentile {np.quantile(ratio, 0.9):.3g} x, "
                     f"max {ratio.max():.3g} x")
    return lines


def table(rows: list[tuple[str, np.ndarray]], leak: np.ndarray, epsilon: float) -> list[str]:
    out = ["  | group | users | mean leakage | median | max | share > eps |", "  | --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, mask in rows:
        if mask.any():
            v = leak[mask]
            out.append(f"  | {name} | {mask.sum()} | {v.mean():.4g} | {np.median(v):.4g} | {v.max():.4g} | "
                       f"{np.mean(v > epsilon):.1%} |")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--k", type=int, default=8)
    args = parser.parse_args()
    log: list = []
    fit = load_fit(gowalla_friends.FIT)
    locations, pairs = gowalla_friends.users()
    n = len(locations)
    x, y = US_BOX.normalise(locations.lat, locations.lon)
    w = adjacency(n, pairs)
    degree = np.asarray(w.sum(axis=1)).ravel().astype(int)
    with tempfile.TemporaryDirectory() as folder:
        path, labels = partition_file(np.column_stack([x, y]), args.k, folder)
        sizes = np.bincount(labels, minlength=args.k)
        scale = 2.0 / sizes.min() / args.epsilon
        model = timed("load the model (PyMC graph)", gowalla_friends.build, log)
        query = f"centroids:{path}"
        idp = timed("idp, every tuple (first audit: reads the graph, factorises)", lambda: audit(
            model, query, "laplace", "idp", scale=scale, information=None), log)
        ddp = timed("ddp, every tuple", lambda: audit(model, query, "laplace", "ddp", scale=scale, information=None),
                    log)
        by_alpha = {a: user_level(model_at(a), query, scale, n) for a in fit.alpha_interval}
    assert idp.engine == ddp.engine == "gaussian"
    check_separate_fields(ddp, n, idp.problem.query.matrix(2 * n))
    per_tuple = np.array(idp.per_target, dtype=float)
    same = np.array_equal(per_tuple, np.array(ddp.per_target, dtype=float))
    user = per_tuple[:n] + per_tuple[n:]
    baseline = sizes.min() / sizes[labels]  # classic DP: 2 / (|c| b)
    _, comp = connected_components(w, directed=False)
    comp_size = np.bincount(comp)[comp]

    print(f"Gowalla centroid release: {n} users, {len(pairs)} friendships, K = {args.k}, cluster sizes "
          f"{sorted(sizes.tolist())}, b = 2 / {sizes.min()} / eps = {scale:.5g} (eps = {args.epsilon:g})")
    print(f"model: alpha = {fit.alpha:.4f}, tau = {fit.tau[0]:.3f} (x), {fit.tau[1]:.3f} (y), mu = {fit.mu[0]:.3f}, "
          f"{fit.mu[1]:.3f}")
    print("runtime (wall s, cpu s):")
    for what, wall, cpu in log:
        print(f"  {what}: {wall:.2f}, {cpu:.2f}")
    print(f"  load average now: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"ddp = idp for every tuple: {same} (the ddp adversary knows every tuple outside the target's component)")
    size, smallest, gap = dense_check(w, fit.alpha, fit.tau[0], idp.problem.query.matrix(2 * n), per_tuple, scale)
    print(f"dense dependence rule vs components: giant component {size} users, smallest |Sigma_ij| / sqrt(Sigma_ii "
          f"Sigma_jj) = {smallest:.3g} ({'above' if smallest > 1e-12 else 'below'} 1e-12: the rules "
          f"{'agree' if smallest > 1e-12 else 'differ'})")
    print(f"engine vs a dense numpy inverse (x field, 200 users of the giant component): largest relative "
          f"difference {gap:.2g}")
    print(f"per coordinate (idp = ddp): x max {per_tuple[:n].max():.4g}, y max {per_tuple[n:].max():.4g}; "
          f"classic DP per coordinate <= 0.5")
    print(f"user level (x and y together), against eps = {args.epsilon:g} (classic DP gives at most eps):")
    print("\n".join(describe(user, args.epsilon)))
    print(f"  ratio to the classic DP value of the same user: median {np.median(user / baseline):.4g}, "
          f"max {np.max(user / baseline):.4g}")
    for a, values in by_alpha.items():
        print(f"  at alpha = {a:.4f} (an end of its 95% interval): median {np.median(values):.4g}, above eps "
              f"{np.mean(values > args.epsilon):.1%}, max {values.max():.4g}")
    print("by degree (located friends):")
    print("\n".join(table([(f"{lo}" if lo == hi else f"{lo}+" if hi > 10**6 else f"{lo}-{hi}",
                            (degree >= lo) & (degree <= hi)) for lo, hi in DEGREE_BUCKETS], user, args.epsilon)))
    print("by connected component:")
    print("\n".join(table([(f"size {s}", comp_size == s) for s in sorted(set(comp_size.tolist()))], user, args.epsilon)))
    print("by cluster:")
    print("\n".join(table([(f"cluster {c} ({sizes[c]} users)", labels == c) for c in np.argsort(sizes)], user,
                          args.epsilon)))
    linked = degree > 0
    for name, feature in [("degree", degree), ("log(1 + degree)", np.log1p(degree)), ("1 / cluster size", 1 / sizes[labels])]:
        r = stats.pearsonr(feature, user)[0]
        rho = stats.spearmanr(feature, user)[0]
        inside = stats.spearmanr(feature[linked], user[linked])[0]
        print(f"correlation with {name}: Pearson {r:.3f}, Spearman {rho:.3f} (Spearman among users with friends "
              f"{inside:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
