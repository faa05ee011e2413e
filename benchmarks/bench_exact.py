"""Speed of the exact engine (DESIGN §2.1) on the household model (models/household.py).

    (a) idp, n = 16 members: 2^16 tuple configurations x 2 values of the latent h = 2^17
        joint states enumerated; count query, Laplace with epsilon = 1 (b = 1).
    (b) pdp over every adversary (no --known), n = 10 members: 10 targets x 2^9 known sets
        = 5,120 adversaries on 2^11 joint states; same query and mechanism.

Each benchmark runs in its own fresh Python process, so "cold" is what one CLI call costs
after the import: `load_model` (PyMC model building) + `audit` (compiling the model's
log-probability with PyTensor, enumerating the joint, every adversary). "warm" repeats
load_model + audit in the same process (a new model object: nothing cached on it, but
PyTensor's in-process and on-disk compilation caches are warm). The import of ddpbayes
(which imports PyMC) is timed separately.

Run from the repository root:

    python benchmarks/bench_exact.py                      # both benchmarks, a table
    python benchmarks/bench_exact.py --fresh-compiledir   # empty PyTensor compile cache (first run ever)
    python benchmarks/bench_exact.py --profile            # cProfile of each cold run as well
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "household.py"

BENCHMARKS = {
    "a": {"label": "(a) idp, n=16", "n": 16, "notion": "idp", "target_s": 10.0},
    "b": {"label": "(b) pdp all K, n=10", "n": 10, "notion": "pdp", "target_s": 30.0},
}


def _cpu() -> float:
    """CPU seconds of this process and its finished children (PyTensor runs g++ as a child)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_one(key: str, profile: bool) -> dict:
    """Time benchmark `key` in this process; returns a JSON-able record."""
    spec = BENCHMARKS[key]
    t0 = time.perf_counter()
    import ddpbayes  # noqa: PLC0415 — the import is part of what is measured
    import ddpbayes.auditing  # noqa: F401, PLC0415 — `import ddpbayes` is lazy: this loads PyMC and PyTensor

    import_s = time.perf_counter() - t0

    def once():
        start, cpu0 = time.perf_counter(), _cpu()
        model = ddpbayes.load_model(MODEL, {"n": spec["n"]})
        result = ddpbayes.audit(model, "count", "laplace", spec["notion"], epsilon=1.0, lattice=spec["notion"] == "pdp",
                                information=None)
        return time.perf_counter() - start, _cpu() - cpu0, result

    profiler = None
    if profile:
        import cProfile  # noqa: PLC0415

        profiler = cProfile.Profile()
        profiler.enable()
    cold_s, cold_cpu, result = once()
    if profiler is not None:
        profiler.disable()
    warm_s, warm_cpu, warm = once()
    assert warm.leakage == result.leakage

    w = result.witness
    record = {
        "key": key,
        "import_s": import_s,
        "cold_s": cold_s,
        "warm_s": warm_s,
        "cold_cpu": cold_cpu,
        "warm_cpu": warm_cpu,
        "leakage": result.leakage,
        "engine": result.engine,
        "adversaries": (
            len(result.lattice) if result.lattice is not None else sum(v is not None for v in result.per_target)
        ),
        "witness": {
            "target": w.adversary.target,
            "known": sorted(w.adversary.known),
            "known_values": {str(k): v for k, v in (w.known_values or {}).items()},
            "t": w.t,
            "t_prime": w.t_prime,
            "y": list(w.y) if w.y is not None else None,
        },
        "max_by_known_size": None,
    }
    if result.lattice is not None:
        layers: dict[int, float] = {}
        for r in result.lattice:
            layers[len(r.adversary.known)] = max(layers.get(len(r.adversary.known), 0.0), r.value)
        record["max_by_known_size"] = {str(k): layers[k] for k in sorted(layers)}
    if profiler is not None:
        import io  # noqa: PLC0415
        import pstats  # noqa: PLC0415

        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("cumulative").print_stats(r"ddpbayes|pytensor/compile/function/__init__|logsumexp", 25)
        stats.sort_stats("tottime").print_stats(12)
        record["profile"] = out.getvalue()
    return record


def child(key: str, fresh_compiledir: str | None, profile: bool) -> dict:
    env = dict(os.environ)
    if fresh_compiledir:
        flags = env.get("PYTENSOR_FLAGS", "")
        env["PYTENSOR_FLAGS"] = ",".join(f for f in (flags, f"compiledir={fresh_compiledir}") if f)
    cmd = [sys.executable, __file__, "--child", key] + (["--profile"] if profile else [])
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"benchmark {key} failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(BENCHMARKS), help="run one benchmark")
    parser.add_argument("--fresh-compiledir", action="store_true",
                        help="give each run an empty PyTensor compile cache (measures a first-ever run)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile summary of each cold run")
    parser.add_argument("--child", choices=sorted(BENCHMARKS), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        print(json.dumps(run_one(args.child, args.profile)))
        return 0

    keys = [args.only] if args.only else sorted(BENCHMARKS)
    load = os.getloadavg()
    records = []
    for key in keys:
        if args.fresh_compiledir:
            with tempfile.TemporaryDirectory(prefix="pytensor-bench-") as d:
                records.append(child(key, d, args.profile))
        else:
            records.append(child(key, None, args.profile))

    cache = "empty (fresh compiledir)" if args.fresh_compiledir else "as found (warm after any earlier run)"
    print(f"exact engine, household model, count + Laplace(epsilon=1); {os.cpu_count()} cores; "
          f"PyTensor compile cache: {cache}")
    print("cold = load_model + audit, first in a fresh process (after the import); "
          "warm = the same again in that process")
    print("s = wall-clock seconds (what the targets are about), cpu = CPU seconds (less sensitive to other load)")
    print(f"load average before: {load[0]:.2f}, after: {os.getloadavg()[0]:.2f} "
          "(above ~0.5 other processes share the cores)")
    print()
    header = (f"{'benchmark':<22} {'adversaries':>11} {'import s':>9} {'cold s':>8} {'cold cpu':>9} "
              f"{'warm s':>8} {'warm cpu':>9} {'target s':>9}  {'met':<4} leakage")
    print(header)
    print("-" * len(header))
    missed = False
    for r in records:
        spec = BENCHMARKS[r["key"]]
        met = r["cold_s"] <= spec["target_s"]
        missed |= not met
        print(f"{spec['label']:<22} {r['adversaries']:>11,} {r['import_s']:>9.2f} {r['cold_s']:>8.2f} "
              f"{r['cold_cpu']:>9.2f} "
              f"{r['warm_s']:>8.2f} {r['warm_cpu']:>9.2f} "
              f"{spec['target_s']:>9.0f}  {'yes' if met else 'NO':<4} {r['leakage']:.12g}")
    print()
    for r in records:
        w = r["witness"]
        known = ", ".join(f"x{k}={v:g}" for k, v in w["known_values"].items()) or "nothing"
        print(f"{BENCHMARKS[r['key']]['label']}: engine {r['engine']}; witness target x{w['target']}, knows {known}, "
              f"t={w['t']:g} vs t'={w['t_prime']:g}, y={w['y']}")
        if r["max_by_known_size"]:
            print("  max leakage by |K|: " + ", ".join(f"{k}: {v:.6f}" for k, v in r["max_by_known_size"].items()))
    if args.profile:
        for r in records:
            print(f"\n===== profile of the cold run of {BENCHMARKS[r['key']]['label']} =====")
            print(r["profile"])
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
