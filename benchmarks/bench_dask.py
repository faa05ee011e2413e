"""Benchmark: units of work on Dask (issue 17), serial against an embedded LocalCluster (not a test).

Three cases, each run in a fresh Python process per worker count (cold caches, a cluster
started from nothing; `import ddpbayes` is not timed):

- noop: Dask's cost per unit. `map_units` over N units that do nothing, on a cluster already
  started and warmed by one map; the wall time per unit is the scheduling, pickling and
  bookkeeping overhead. The cluster's start is timed on its own.
- lattice: the sampling engine's pdp lattice of 32 adversaries (household, n = 4: 4 targets x
  2^3 known sets; 80 distinct MCMC runs, 2 chains of 500 tuning + 500 draws each), `audit(...,
  "pdp", lattice=True, engine="sampling")`, load_model included.
- sweep: a 12-point report sweep (`reports.sweep`: one audit per noise scale, a unit each) of
  pdp on the household model with n = 10 (the exact engine; about 3 s per point), the spec's
  first audit excluded.

For each case the JSON (timings aside) must be the same whatever the workers; the script
checks it. The cost model: T(w) = S + ceil(U / w) * c + U * o, with U units of mean cost c
(serial wall / U), the cluster's start and warm-up S (measured: T(2) - U*c/2 - U*o), and o
the per-unit overhead from noop; it prints T(64) by that model.

Usage (from the repository root):
    python benchmarks/bench_dask.py                       # every case, 1 and 2 workers
    python benchmarks/bench_dask.py --case sweep --workers 1 2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOUSEHOLD = ROOT / "models" / "household.py"
NOOP_UNITS = 400
SWEEP = [0.5 * 1.2**k for k in range(12)]
SPEC = f"""
model = "{HOUSEHOLD}"
params = {{ n = 10 }}
query = "count"
notions = ["pdp"]
engine = "exact"
calibrate = false

[mechanism]
kind = "laplace"
epsilon = 1.0
"""


def _noop(unit: int) -> int:
    return unit


def case_noop(workers: int) -> dict:
    from ddpbayes.parallel import client_for, map_units
    from ddpbayes.settings import RunSettings

    settings = RunSettings(workers=workers)
    start = time.perf_counter()
    if workers > 1:
        client_for(workers)
    started = time.perf_counter() - start
    map_units(_noop, range(20), settings, "noop", "units")  # warm: workers import ddpbayes
    start = time.perf_counter()
    out = map_units(_noop, range(NOOP_UNITS), settings, "noop", "units")
    wall = time.perf_counter() - start
    assert out == list(range(NOOP_UNITS))
    return {"start": started, "wall": wall, "units": NOOP_UNITS, "per_unit": wall / NOOP_UNITS, "json": ""}


def case_lattice(workers: int) -> dict:
    import ddpbayes

    start = time.perf_counter()
    result = ddpbayes.audit(ddpbayes.load_model(HOUSEHOLD, {"n": 4}), "count", "laplace", "pdp", epsilon=1.0,
                            lattice=True, engine="sampling", draws=500, tune=500, chains=2, seed=0, workers=workers)
    wall = time.perf_counter() - start
    data = result.to_json()
    data.pop("seconds")
    assert len(result.lattice) == 32
    return {"wall": wall, "units": 80, "json": json.dumps(data, sort_keys=True)}


def case_sweep(workers: int) -> dict:
    from ddpbayes.model.loading import load_model
    from ddpbayes.reports.collect import Auditor
    from ddpbayes.reports.spec import load_spec
    from ddpbayes.reports.sweep import sweep

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sweep.toml"
        path.write_text(SPEC)
        spec = load_spec(path)
        run = Auditor(spec, load_model(spec.model, spec.params), workers=workers)
        results = {"pdp": run("pdp")}
        start = time.perf_counter()
        swept = sweep(run, results, tuple(SWEEP), {}, lambda message: None)
        wall = time.perf_counter() - start
    return {"wall": wall, "units": len(SWEEP), "json": json.dumps(swept.to_json(), sort_keys=True)}


CASES = {"noop": case_noop, "lattice": case_lattice, "sweep": case_sweep}


def measure(case: str, workers: int) -> dict:
    """One case in a fresh process (DDPBAYES_WORKERS unset: `workers` decides)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DDPBAYES_WORKERS", "DDPBAYES_SCHEDULER")}
    out = subprocess.run([sys.executable, __file__, "--inner", case, str(workers)], capture_output=True, text=True,
                         env=env, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{case} on {workers} workers failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def report(case: str, runs: dict[int, dict], overhead: float | None) -> None:
    print(f"\n{case}:")
    base = runs.get(1)
    for w, r in sorted(runs.items()):
        speed = f", speedup {base['wall'] / r['wall']:.2f}x" if base and w != 1 else ""
        extra = f", cluster start {r['start']:.2f} s, {r['per_unit'] * 1e3:.2f} ms per unit" if case == "noop" else ""
        print(f"  {w} worker(s): {r['wall']:.2f} s for {r['units']} units{speed}{extra}")
    if len({r["json"] for r in runs.values()}) != 1:
        raise SystemExit(f"{case}: the results differ between worker counts")
    if case != "noop" and base and 2 in runs and overhead is not None:
        units, cost = base["units"], base["wall"] / base["units"]
        setup = runs[2]["wall"] - math.ceil(units / 2) * cost - units * overhead
        print(f"  model T(w) = S + ceil(U/w) c + U o: U = {units}, c = {cost:.3f} s, o = {overhead * 1e3:.2f} ms, "
              f"S = {setup:.2f} s (from T(2))")
        for w in (1, 2, 64):
            predicted = (0.0 if w == 1 else setup) + math.ceil(units / w) * cost + units * overhead
            print(f"    T({w}) = {predicted:.2f} s" + (f" (measured {runs[w]['wall']:.2f} s)" if w in runs else ""))
    print("  same JSON for every worker count: yes" if case != "noop" else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=list(CASES), nargs="*", default=list(CASES))
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--inner", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        import ddpbayes  # noqa: F401  (imported before timing)

        result = CASES[args.inner[0]](int(args.inner[1]))
        from ddpbayes.parallel import close_clusters

        close_clusters()
        print(json.dumps(result))
        return 0
    print(f"{os.cpu_count()} cores; load average before {os.getloadavg()[0]:.2f}")
    overhead = None
    for case in ["noop", *[c for c in args.case if c != "noop"]] if "noop" in args.case else args.case:
        runs = {w: measure(case, w) for w in args.workers}
        if case == "noop" and 2 in runs:
            overhead = runs[2]["per_unit"]
        report(case, runs, overhead)
    print(f"load average after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
