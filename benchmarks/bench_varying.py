"""Chains whose transitions change every day against the same chain with one fixed transition (issue #29).

    count400   binary chain n = 400, count, Laplace eps = 1, idp of every target (structured engine)
    tpl1000    binary chain T = 1000, identity, randomized response eps = 1, idp of every target (continual release)
    cat400     three-state chain n = 400, sum, Laplace eps = 1, idp of target 200 (Categorical, one matrix per day)

For each case the model is built in this process and timed (building + audit, which includes the
term tables, DESIGN §2.1b), the fixed chain and the varying one back to back, best of `--repeat`.
The varying chain's probabilities differ every day (a weekly and a seasonal wave). The target of
issue #29: varying / fixed <= 2.

    python benchmarks/bench_varying.py                 # every case
    python benchmarks/bench_varying.py --only count400 --repeat 1
"""

from __future__ import annotations

import argparse
import importlib
import os
import time

import numpy as np


def _stays(n: int, varying: bool) -> np.ndarray:
    days = np.arange(n)
    if not varying:
        return np.full(n, 0.8)
    return 0.75 + 0.1 * np.sin(2 * np.pi * days / 7) + 0.05 * np.cos(2 * np.pi * days / 365)


def binary_chain(n: int, varying: bool):
    import pymc as pm  # noqa: PLC0415

    from ddpbayes import DependenceModel  # noqa: PLC0415

    stay = _stays(n, varying)
    with pm.Model() as m:
        prev = pm.Bernoulli("x0", 0.5)
        for k in range(1, n):
            prev = pm.Bernoulli(f"x{k}", pm.math.switch(prev, float(stay[k]), float(1 - stay[k])))
    return DependenceModel(m, tuples=[f"x{k}" for k in range(n)])


def categorical_chain(n: int, varying: bool):
    import pymc as pm  # noqa: PLC0415
    import pytensor.tensor as pt  # noqa: PLC0415

    from ddpbayes import DependenceModel  # noqa: PLC0415

    stay = _stays(n, varying)
    with pm.Model() as m:
        prev = pm.Categorical("x0", p=np.full(3, 1 / 3))
        for k in range(1, n):
            move = (1 - stay[k]) / 2
            matrix = np.full((3, 3), move) + np.eye(3) * (stay[k] - move)
            prev = pm.Categorical(f"x{k}", p=pt.constant(matrix)[prev])
    return DependenceModel(m, tuples=[f"x{k}" for k in range(n)])


CASES = {
    "count400": (binary_chain, 400, "count", "laplace", None),
    "tpl1000": (binary_chain, 1000, "identity", "randomized_response", None),
    "cat400": (categorical_chain, 400, "sum", "laplace", [200]),
}


def run(key: str, varying: bool) -> tuple[float, float]:
    from ddpbayes import audit  # noqa: PLC0415

    build, n, query, mechanism, targets = CASES[key]
    start = time.perf_counter()
    model = build(n, varying)
    result = audit(model, query, mechanism, "idp", epsilon=1.0, targets=targets, information=None)
    return time.perf_counter() - start, result.leakage


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=list(CASES))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    importlib.import_module("ddpbayes.auditing")  # PyMC's import is not timed

    run("count400", False)  # warm-up: first compilations of shared pieces
    print(f"{os.cpu_count()} cores; load average before {os.getloadavg()[0]:.2f}")
    print("s = best of %d, building the model + audit, in this process\n" % args.repeat)
    print(f"{'case':<10} {'fixed s':>8} {'varying s':>10} {'ratio':>6}  leakage fixed / varying")
    for key in args.only or CASES:
        best = {}
        for varying in (False, True):
            runs = [run(key, varying) for _ in range(args.repeat)]
            best[varying] = (min(s for s, _ in runs), runs[0][1])
        (fs, fl), (vs, vl) = best[False], best[True]
        print(f"{key:<10} {fs:>8.2f} {vs:>10.2f} {vs / fs:>6.2f}  {fl:.15g} / {vl:.15g}")
    print(f"\nload average after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
