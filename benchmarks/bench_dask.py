"""Benchmark: units of work on Dask (issue 17), serial against an embedded LocalCluster (not a test).

Three cases, each run in a fresh Python process per worker count (cold caches, a cluster
started from nothing; `import ddpbayes` is not timed):

- noop: Dask's cost per unit. `map_units` over N units that do nothing, on a cluster already
  started and warmed by one map; the wall time per unit is the scheduling, pickling and
  bookkeeping overhead. The cluster's start is timed on its own.
- lattice: the sampling engine's pdp lattice of 32 adversaries (household, n = 4: 4 targets x
  2^3 known sets; 216 planned MCMC runs, 80 distinct, at the default 2 chains of 1000 tuning +
  1000 draws), `audit(..., "pdp", lattice=True, engine="sampling")`: cold (a new model, a new
  cluster) and warm (again with seed 1: new draws, but the compiled steps, the workers' imports
  and models kept, as on a cluster that keeps running).
- sweep: a 12-point report sweep (`reports.sweep`: one audit per noise scale, a unit each) of
  pdp on the household model with n = 10 (the exact engine; about 3 s per point), the spec's
  first audit excluded.

For each case the JSON (timings aside) must be the same whatever the workers; the script
checks it. The cost model: T(w) = S + ceil(U / w) * c + U * o, with U units of mean cost c
(serial wall / U), o the per-unit overhead and S the cluster's start plus its workers' warm-up
(importing PyMC), both from noop; it compares T(2) by that model with the measured one and
prints T(64).

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


def _import_engines(unit: int) -> int:
    import ddpbayes.engines.sampling  # noqa: F401  (PyMC, PyTensor: a worker's warm-up)

    return os.getpid()


def case_noop(workers: int) -> dict:
    from ddpbayes.parallel import client_for, map_units
    from ddpbayes.settings import RunSettings

    settings = RunSettings(workers=workers)
    start = time.perf_counter()
    if workers > 1:
        client_for(workers)
    started = time.perf_counter() - start
    start = time.perf_counter()
    pids = map_units(_import_engines, range(2 * workers), settings, "warm-up", "units")
    warm = time.perf_counter() - start  # every worker imports PyMC (on 1 worker: already imported)
    start = time.perf_counter()
    out = map_units(_noop, range(NOOP_UNITS), settings, "noop", "units")
    wall = time.perf_counter() - start
    assert out == list(range(NOOP_UNITS))
    return {"start": started, "warm": warm, "processes": len(set(pids)), "wall": wall, "units": NOOP_UNITS,
            "per_unit": wall / NOOP_UNITS, "json": ""}


def case_lattice(workers: int) -> dict:
    """Cold: a new model on a new cluster. Warm: the same model again with another seed (new
    draws; compiled steps, and the workers' imports and models, kept)."""
    import ddpbayes

    model = ddpbayes.load_model(HOUSEHOLD, {"n": 4})
    walls, texts = [], []
    for seed in (0, 1):
        start = time.perf_counter()
        result = ddpbayes.audit(model, "count", "laplace", "pdp", epsilon=1.0, lattice=True, engine="sampling",
                                seed=seed, max_runs=300, workers=workers, information=None)
        walls.append(time.perf_counter() - start)
        assert len(result.lattice) == 32
        data = result.to_dict()
        data.pop("seconds")
        texts.append(json.dumps(data, sort_keys=True))
    return {"wall": walls[0], "warm": walls[1], "units": 80, "json": "".join(texts)}


def case_sweep(workers: int) -> dict:
    from ddpbayes.model.loading import load_model
    from ddpbayes.reports.input import load_spec
    from ddpbayes.reports.views.auditor import Auditor
    from ddpbayes.reports.views.sweep import sweep
    from ddpbayes.settings import RunSettings

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sweep.toml"
        path.write_text(SPEC)
        spec = load_spec(path)
        run = Auditor(spec, load_model(spec.model, spec.params), RunSettings(workers=workers))
        results = {"pdp": run("pdp")}
        start = time.perf_counter()
        swept = sweep(run, results, tuple(SWEEP), {}, lambda message: None)
        wall = time.perf_counter() - start
    return {"wall": wall, "units": len(SWEEP), "json": json.dumps(swept.to_dict(), sort_keys=True)}


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
        speed = f", speedup {base['wall'] / r['wall']:.2f}x" if base and w != 1 and case != "noop" else ""
        extra = (f", cluster start {r['start']:.2f} s, warm-up (imports) {r['warm']:.2f} s on {r['processes']} "
                 f"process(es), {r['per_unit'] * 1e3:.2f} ms per unit" if case == "noop" else "")
        print(f"  {w} worker(s): {r['wall']:.2f} s for {r['units']} units{speed}{extra}")
        if "warm" in r and case != "noop":
            warm = f", speedup {base['warm'] / r['warm']:.2f}x" if base and w != 1 else ""
            print(f"    warm: {r['warm']:.2f} s{warm}")
    if len({r["json"] for r in runs.values()}) != 1:
        raise SystemExit(f"{case}: the results differ between worker counts")
    if case != "noop" and base and overhead is not None:
        units, cost = base["units"], base["wall"] / base["units"]
        setup, o = overhead
        print(f"  model T(w) = S + ceil(U/w) c + U o: U = {units}, c = {cost:.3f} s (serial wall / U), "
              f"o = {o * 1e3:.2f} ms, S = {setup:.2f} s (cluster start + warm-up, from noop)")
        for w in (1, 2, 64):
            predicted = (0.0 if w == 1 else setup) + math.ceil(units / w) * cost + (0.0 if w == 1 else units * o)
            measured = f" (measured {runs[w]['wall']:.2f} s)" if w in runs else ""
            print(f"    T({w}) = {predicted:.2f} s{measured}")
    if case != "noop":
        print("  same JSON for every worker count: yes")


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
            overhead = (runs[2]["start"] + runs[2]["warm"], runs[2]["per_unit"])
        report(case, runs, overhead)
    print(f"load average after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
