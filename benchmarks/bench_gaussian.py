"""pdp over every adversary of a Gaussian model: n tuples, n 2^(n-1) (target, known set) pairs.

Random SPD covariance with mixed-sign correlations (A A^T / n + 0.5 I, A standard normal),
Laplace on `sum` and on a random linear query. Reports the time of `audit(..., "pdp")`
(the engine's exhaustive lattice search, DESIGN §2.2; wall and CPU seconds), a spot check of its answer against
the per-adversary Schur-complement formula, and seed 003's greedy search (top-k known sets
per layer): its time and how often and by how much it misses the exact maximum.

From the repository root, after `pip install .`:

    python benchmarks/bench_gaussian.py [--n 20] [--seeds 3] [--top-k 1,3,10]
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np
import pymc as pm

from ddpbayes import Adversary, DependenceModel, Interval, Laplace, Problem, audit, parse_query
from ddpbayes.engines import ENGINES


def model(n: int, seed: int) -> DependenceModel:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, n))
    cov = a @ a.T / n + 0.5 * np.eye(n)
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(n), cov=cov)
    return DependenceModel(m, tuples="x", domains=Interval(0, 1))


def spot_check(problem: Problem, best: float, samples: int, rng) -> float:
    """Largest relative excess of a random adversary over the reported maximum (<= 0 if right)."""
    n = problem.model.n
    advs = []
    for _ in range(samples):
        i = int(rng.integers(n))
        others = np.array([j for j in range(n) if j != i])
        advs.append(Adversary(i, frozenset(others[rng.random(n - 1) < 0.5].tolist())))
    values = [r.value for r in ENGINES["gaussian"].leakage(problem.with_adversaries(advs))]
    return max(values) / best - 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--top-k", default="1,3,10")
    args = ap.parse_args()
    top_ks = [int(k) for k in args.top_k.split(",")]
    engine = ENGINES["gaussian"]
    print(f"n = {args.n}: {args.n * 2 ** (args.n - 1):,} adversaries; {os.cpu_count()} CPUs")
    misses = {k: [] for k in top_ks}
    for seed in range(args.seeds):
        rng = np.random.default_rng(1000 + seed)
        m = model(args.n, seed)
        for query in ("sum", "linear:" + ",".join(f"{v:.3f}" for v in rng.normal(size=args.n))):
            start, cpu = time.perf_counter(), time.process_time()
            result = audit(m, query, "laplace", "pdp", scale=1.0, information=None)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            problem = Problem(m, parse_query(query), Laplace(1.0))
            excess = spot_check(problem, result.leakage, 2000, rng)
            adv = result.witness.adversary
            print(
                f"seed {seed} {query[:6]:6}  pdp {result.leakage:.6g} at {adv} in {seconds:.2f} s wall, {cpu:.2f} s CPU "
                f"(engine {result.engine}); 2000 random adversaries exceed it by {max(excess, 0):.1e}"
            )
            exact = [r.value for r in engine.pdp_worst(problem, range(args.n))]
            for k in top_ks:
                start = time.perf_counter()
                greedy = [r.value for r in engine.pdp_worst(problem, range(args.n), top_k=k)]
                seconds = time.perf_counter() - start
                short = [1 - g / e for g, e in zip(greedy, exact) if e > 0]
                misses[k] += short
                print(
                    f"    greedy top-{k:<3} {seconds:6.2f} s  missed {sum(s > 1e-9 for s in short)}/{len(short)} targets, "
                    f"worst shortfall {max(short):.2%}, overall max {'missed' if max(greedy) < max(exact) * (1 - 1e-9) else 'found'}"
                )
    for k, short in misses.items():
        print(f"greedy top-{k}: {sum(s > 1e-9 for s in short)}/{len(short)} target maxima missed, mean shortfall "
              f"{np.mean(short):.3%}, worst {max(short):.2%}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
