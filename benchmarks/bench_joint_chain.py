"""Joint laws over every day of a chain on the structured engine (issue #43 item 4, DESIGN §5.2).

Report-noisy-max (Laplace, b = 2: ε = 1 at Δ = 1) and the sparse vector technique (Lyu et al. Alg. 1, c = 1,
threshold 0.5, ε = 1) over the identity of `models/markov_chain.py` (p_stay = 0.8), idp (or `--notion ddp`: the
known days by their counts, `joint_counts.py`; or `--notion pdp`: every known set, the run adversaries pruned by a
certified bound, `joint_runs.py`) of every day. At n = 6 the exact engine is timed in the same process
and the values compared; at larger n the structured engine alone.
CPU seconds (time.process_time) of the audit, the model built before the clock starts; the load average beside.

    python benchmarks/bench_joint_chain.py                  # n = 6, 100, 365
    python benchmarks/bench_joint_chain.py --days 365
    python benchmarks/bench_joint_chain.py --days 365 --notion ddp
    python benchmarks/bench_joint_chain.py --days 365 --notion pdp
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from pathlib import Path

import numpy as np

from ddpbayes.auditing import audit
from ddpbayes.mechanisms.selection import ReportNoisyMax
from ddpbayes.mechanisms.sparse_vector import SparseVector

ROOT = Path(__file__).resolve().parents[1]
MECHANISMS = {"rnm": ReportNoisyMax(2.0), "svt1": SparseVector(1.0, 1, 0.5, 1)}


def chain(n: int):
    spec = importlib.util.spec_from_file_location("markov_chain", ROOT / "models" / "markov_chain.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build(n=n, p_stay=0.8)


def timed(model, mech, engine: str, notion: str):
    start = time.process_time()
    result = audit(model, "identity", mech, notion, engine=engine, information=None)
    return result, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, nargs="*", default=[6, 100, 365])
    parser.add_argument("--notion", choices=["idp", "ddp", "pdp"], default="idp")
    args = parser.parse_args()
    for n in args.days:
        model = chain(n)
        for name, mech in MECHANISMS.items():
            found, cpu = timed(model, mech, "structured", args.notion)
            note = "\n    ".join(x for x in found.notes if "forward pass" in x or "runs solved" in x)
            line = (f"n={n:4d} {name:5s} structured {args.notion} {found.leakage:.10f} "
                    f"(day {found.witness.adversary.target}) {cpu:6.2f} CPU s")
            if n <= 6:
                exact, exact_cpu = timed(model, mech, "exact", args.notion)
                diff = float(np.max(np.abs(np.array(found.per_target) - np.array(exact.per_target))))
                line += f" | exact {exact.leakage:.10f} {exact_cpu:6.2f} CPU s, largest difference {diff:.1e}"
            print(f"{line} | load {os.getloadavg()[0]:.1f}\n    {note}", flush=True)


if __name__ == "__main__":
    main()
