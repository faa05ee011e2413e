"""How often, and by how much, seed 003's greedy pdp search misses the full lattice's maximum.

Random models of two families, every target's pdp found by the full search (every known set)
and by the greedy search (`audit --search greedy --top-k K`, the one code path every engine
uses, `ddpbayes/notions/lattice.py`), Laplace(1) noise:

- discrete: random Bayesian networks of n binary tuples (n drawn from 5..7), each tuple with up
  to two parents among the earlier ones and P(x_k = 1 | parents) uniform on [0.05, 0.95] per
  parent configuration; the exact engine; queries `count` and a random `linear:` with weights
  drawn from {-2, -1, 1, 2};
- gaussian: n jointly Gaussian tuples (n drawn from 6..10), covariance A A^T / n + 0.3 I with A
  standard normal (mixed-sign correlations), domains [0, 1]; the gaussian engine (its full
  search is the exhaustive lattice search of DESIGN §2.2); queries `sum` and a random `linear:`
  with standard normal weights.

For each family and K it prints the targets whose maximum the greedy search misses (relative
shortfall 1 - greedy / full above 1e-9), the distribution of the relative shortfall over the
missed targets (median, 90th percentile, max), its mean over all targets, the (model, query)
runs whose overall maximum (the largest target's) is missed, and the seconds the greedy
searches took (and the full ones, in brackets).

From the repository root, after `pip install .`:

    python benchmarks/bench_greedy.py [--models 30] [--top-k 1,2,3,5] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from ddpbayes import DependenceModel, Interval, audit

MISS = 1e-9  # a relative shortfall above this is a miss (rounding below it)


def discrete_model(rng: np.random.Generator) -> tuple[DependenceModel, list[str]]:
    n = int(rng.integers(5, 8))
    with pm.Model() as m:
        xs = []
        for k in range(n):
            parents = sorted(rng.choice(k, size=min(k, int(rng.integers(0, 3))), replace=False).tolist())
            table = pt.as_tensor(rng.uniform(0.05, 0.95, size=2 ** len(parents)))
            index = sum((xs[p] * 2**b for b, p in enumerate(parents)), pt.constant(0))
            xs.append(pm.Bernoulli(f"x{k}", table[index]))
    weights = rng.choice([-2, -1, 1, 2], size=n)
    return DependenceModel(m, tuples=[f"x{k}" for k in range(n)]), ["count", _linear(weights)]


def gaussian_model(rng: np.random.Generator) -> tuple[DependenceModel, list[str]]:
    n = int(rng.integers(6, 11))
    a = rng.normal(size=(n, n))
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(n), cov=a @ a.T / n + 0.3 * np.eye(n))
    model = DependenceModel(m, tuples="x", domains=Interval(0, 1))
    return model, ["sum", _linear(np.round(rng.normal(size=n), 3))]


def _linear(weights: np.ndarray) -> str:
    return "linear:" + ",".join(f"{w:g}" for w in weights)


def searched(model: DependenceModel, query: str, top_ks: list[int], engine: str) -> tuple[np.ndarray, dict, dict]:
    """Every target's full pdp; per K, every target's greedy pdp; the seconds each search took
    (the full one under the key 0), after an idp audit has built what the engine caches on the model."""
    audit(model, query, "laplace", "idp", scale=1.0, engine=engine, information=None)
    start = time.perf_counter()
    full = np.array(audit(model, query, "laplace", "pdp", scale=1.0, engine=engine, information=None).per_target)
    greedy, seconds = {}, {0: time.perf_counter() - start}
    for k in top_ks:
        start = time.perf_counter()
        greedy[k] = np.array(audit(model, query, "laplace", "pdp", scale=1.0, engine=engine, pdp_greedy=k,
                                   information=None).per_target)
        seconds[k] = time.perf_counter() - start
        assert np.all(greedy[k] <= full * (1 + 1e-9) + 1e-12), "the greedy search visits a subset of the lattice"
    return full, greedy, seconds


def shortfall(found: np.ndarray, full: np.ndarray) -> np.ndarray:
    """1 - found / full, target by target (0 where the full maximum is 0, and for rounding above it)."""
    return np.maximum(0.0, np.where(full > 0, 1 - found / np.where(full > 0, full, 1.0), 0.0))


def run(family: str, build, engine: str, models: int, top_ks: list[int], rng: np.random.Generator) -> list[str]:
    """The family's table rows, one per K."""
    short: dict[int, list[np.ndarray]] = {k: [] for k in top_ks}
    overall = dict.fromkeys(top_ks, 0)
    seconds = dict.fromkeys([0, *top_ks], 0.0)
    runs = 0
    for _ in range(models):
        model, queries = build(rng)
        for query in queries:
            full, greedy, took = searched(model, query, top_ks, engine)
            runs += 1
            for k in top_ks:
                short[k].append(shortfall(greedy[k], full))
                overall[k] += int(shortfall(greedy[k].max(), full.max()) > MISS)
            for k in took:
                seconds[k] += took[k]
    rows = []
    for k in top_ks:
        v = np.concatenate(short[k])
        missed = v[v > MISS]
        spread = [np.median(missed), np.quantile(missed, 0.9), missed.max()] if len(missed) else [0.0] * 3
        rows.append(f"| {family} | {k} | {len(missed)} / {len(v)} ({len(missed) / len(v):.1%}) | "
                    + " | ".join(f"{x:.1%}" for x in spread) + f" | {v.mean():.2%} | {overall[k]} / {runs} | "
                    f"{seconds[k]:.1f} s (full {seconds[0]:.1f} s) |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=30, help="random models per family (two queries each)")
    ap.add_argument("--top-k", default="1,2,3,5")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    top_ks = [int(k) for k in args.top_k.split(",")]
    rng = np.random.default_rng(args.seed)
    print("| family | top-k | targets missed | shortfall when missed: median | 90th pct | max "
          "| mean shortfall, all targets | runs' maximum missed | time, all runs |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for family, build, engine in (("discrete", discrete_model, "exact"), ("gaussian", gaussian_model, "gaussian")):
        for row in run(family, build, engine, args.models, top_ks, rng):
            print(row, flush=True)


if __name__ == "__main__":
    main()
