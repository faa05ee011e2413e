"""A chain written as one vector variable against the same chain as a loop of scalars (issue #29).

Prints, in one process: building models/vector_chain.py (pymc-extras' DiscreteMarkovChain) and
the same chain as a scan CustomDist at n days; models/categorical_chain.py (n Categoricals) at
`--loop-n` days for comparison; the structured engine's factor graph of the vector chain (its
per-step tables) and an idp audit of its middle day with the sum released with Laplace(1).
Needs pymc-extras. Not a test: figures, with the load average.

    python benchmarks/bench_vector_chain.py                  # n = 10,000; loop at 1,000
    python benchmarks/bench_vector_chain.py --n 1000 --loop-n 1000
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import warnings

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _timed(label: str, fn):
    start = time.perf_counter()
    out = fn()
    print(f"{label:<58} {time.perf_counter() - start:8.3f} s", flush=True)
    return out


def _scan_chain(n: int, k: int, p_stay: float):
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt
    from pymc.pytensorf import collect_default_updates

    from ddpbayes import DependenceModel

    move = (1.0 - p_stay) / (k - 1)
    P = np.full((k, k), move) + np.eye(k) * (p_stay - move)

    def dist(P, size):
        def step(prev, P):
            draw = pm.Categorical.dist(p=P[prev])
            return draw, collect_default_updates([draw])

        xs, _ = pytensor.scan(step, outputs_info=[pt.constant(0, dtype="int64")], non_sequences=[P], n_steps=n,
                              strict=True, return_updates=True)
        return xs

    with pm.Model() as m:
        pm.CustomDist("x", P, dist=dist, dtype="int64", shape=(n,))
    return DependenceModel(m, "x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--loop-n", type=int, default=1_000)
    parser.add_argument("--max-states", type=int, default=10**8, help="the audit's --max-states (n = 10,000 needs "
                        "more than the default: its widest pass touches n x 3 x 2n cells)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # scan's return signature, in PyTensor 2.38
    print(f"load average before: {os.getloadavg()}")
    _timed("import ddpbayes, pymc, pymc_extras", lambda: __import__("pymc_extras.distributions") and
           __import__("ddpbayes"))
    import ddpbayes
    from ddpbayes.engines.structured import StructuredEngine
    from ddpbayes.engines.structured.graph import factor_graph
    from ddpbayes.mechanisms import Laplace
    from ddpbayes.problem import Adversary, Problem
    from ddpbayes.queries import parse_query
    from ddpbayes.settings import RunSettings

    vector = _timed(f"load_model vector_chain.py, n = {args.n:,} (DiscreteMarkovChain)",
                    lambda: ddpbayes.load_model(ROOT / "models" / "vector_chain.py", {"n": args.n}))
    _timed(f"build the scan CustomDist chain, n = {args.n:,}", lambda: _scan_chain(args.n, 3, 0.7))
    _timed(f"load_model categorical_chain.py, n = {args.loop_n:,} (a loop)",
           lambda: ddpbayes.load_model(ROOT / "models" / "categorical_chain.py", {"n": args.loop_n}))
    _timed(f"factor graph of the vector chain, n = {args.n:,}", lambda: factor_graph(vector, args.max_states))
    problem = Problem(vector, parse_query("sum"), Laplace(1.0), (Adversary(args.n // 2),),
                      RunSettings(max_states=args.max_states))
    result = _timed(f"structured idp audit of day {args.n // 2:,} (sum, Laplace(1))",
                    lambda: StructuredEngine().leakage(problem))
    print(f"leakage {result[0].value:.10f}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
