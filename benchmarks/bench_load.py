"""How fast ddpbayes starts: the command line's answer to --help and to bad arguments, and
loading a model of 1,000 variables (issue 11's targets: <= 1 s and <= 5 s).

    (a) `ddpbayes --help` and `ddpbayes audit MODEL --query count` (missing flags: exit 2),
        wall time of the whole process; parsing imports no PyMC.
    (b) `load_model` of four shipped models at n = 1,000 tuples, in a fresh process after
        `import pymc` (timed apart): a Categorical chain (supports inferred from the graph),
        a Bernoulli chain, a household with one latent cause, and one vector tuple.

Run from the repository root, after `pip install .`:

    python benchmarks/bench_load.py            # both, a table; exit 1 if a target is missed
    python benchmarks/bench_load.py --n 300    # other chain lengths
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI_TARGET_S = 1.0
LOAD_TARGET_S = 5.0
MODELS = ("categorical_chain.py", "markov_chain.py", "household.py", "beta_bernoulli.py")


def time_cli(args: list[str], repeats: int = 3) -> tuple[float, int]:
    """Best wall time of `python -m ddpbayes ARGS` over `repeats`, and its exit code."""
    best, code = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "ddpbayes", *args], capture_output=True, cwd=ROOT)
        best, code = min(best, time.perf_counter() - start), proc.returncode
    return best, code


def time_load(n: int) -> dict:
    """In a fresh process: import PyMC, then load each model with n tuples."""
    code = f"""
import json, time
start = time.perf_counter()
import pymc
import ddpbayes.model.loading as loading
out = {{"import_s": time.perf_counter() - start}}
for name in {list(MODELS)!r}:
    start = time.perf_counter()
    model = loading.load_model("models/" + name, {{"n": {n}}})
    out[name] = {{"s": time.perf_counter() - start, "tuples": model.n, "domain": str(model.domains[-1])}}
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(proc.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="tuples per model (default 1000)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    met = True
    for label, cli in (("--help", ["--help"]), ("argument error", ["audit", "models/household.py", "--query", "count"])):
        seconds, code = time_cli(cli)
        ok = seconds <= CLI_TARGET_S
        met &= ok
        print(f"(a) ddpbayes {label:<15} {seconds:6.3f} s  exit {code}  target {CLI_TARGET_S} s  {'met' if ok else 'MISSED'}")
    loads = time_load(args.n)
    print(f"(b) import pymc {loads.pop('import_s'):.2f} s (not part of the target)")
    for name, row in loads.items():
        ok = row["s"] <= LOAD_TARGET_S
        met &= ok
        print(f"(b) load {name:<22} n={row['tuples']:<5} {row['s']:6.3f} s  domain {row['domain']:<12} "
              f"target {LOAD_TARGET_S} s  {'met' if ok else 'MISSED'}")
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
