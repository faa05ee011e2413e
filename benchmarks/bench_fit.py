"""`ddpbayes fit` on the Gambia malaria survey (issue #41's targets; DESIGN §9):

    (a) the clustered template with village effects, 4 chains x 1,000 draws (1,000 tuning steps)
        on 2 cores: the NUTS run of the clustered model alone (target <= 30 s), and the whole
        `ddpbayes fit` command (both templates, the checks, the files written), wall time of the
        process; the posterior against a plain non-centred PyMC GLMM of the same data
        (intercept -0.61 +- 0.14, village SD 1.05 +- 0.13);
    (b) loading the written model file with `load_model`, in a fresh process after `import pymc`
        (target <= 1 s);
    (c) with --spatial, instead: the whole command with the spatial Gaussian process between the
        villages (`--coords x,y`, exact GP over the 65 villages, DESIGN §9.8; target <= 5 min), its
        intercept, sigma, GP length scale and amplitude, and the LOO difference against the fit
        without the field.

Wall seconds are what the targets are about; CPU seconds (the sampling workers included) are printed
too, being less affected by other load on the machine: on an idle machine with 2 cores the wall time
of the 4 chains is about half their CPU time.

Run from the repository root:

    python benchmarks/bench_fit.py              # exit 1 if a target is missed
    python benchmarks/bench_fit.py --seed 1
    python benchmarks/bench_fit.py --spatial    # (c) only
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "models" / "data" / "gambia_malaria.csv"
FIT_TARGET_S = 30.0
SPATIAL_TARGET_S = 300.0
LOAD_TARGET_S = 1.0
REFERENCE = {"intercept": (-0.61, 0.14), "sigma": (1.05, 0.13)}


def time_nuts(seed: int) -> dict:
    """In a fresh process: the clustered model's NUTS run alone (compilation included), as `fit` runs it."""
    code = f"""
import json, resource, time
from ddpbayes.fitting.clustered import prepare, pymc_model
from ddpbayes.fitting.run import Sampler, _sample
from ddpbayes.fitting.table import read_table
data = prepare(read_table({str(DATA)!r}, ["x", "y"], ["pos"]), ["x", "y"], "pos", [], "gambia")
def cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
start, start_cpu = time.perf_counter(), cpu()
idata = _sample(pymc_model(data), Sampler(seed={seed}), {seed}, "", False)
print(json.dumps({{"s": time.perf_counter() - start, "cpu": cpu() - start_cpu}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(proc.stdout.splitlines()[-1])


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def time_command(out: Path, seed: int, *extra: str) -> tuple[float, float, dict]:
    """The whole command: wall and CPU time of the process (its sampling workers included), and its document."""
    start, start_cpu = time.perf_counter(), children_cpu()
    proc = subprocess.run([sys.executable, "-m", "ddpbayes", "fit", str(DATA), "--template", "clustered", "--cluster",
                           "x,y", "--outcome", "pos", "--seed", str(seed), "--out", str(out), "--format", "json",
                           "--quiet", *extra], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"ddpbayes fit exited {proc.returncode}: {proc.stderr}")
    return time.perf_counter() - start, children_cpu() - start_cpu, json.loads(proc.stdout)


def time_load(model: Path) -> dict:
    code = f"""
import json, time
start = time.perf_counter()
import pymc
from ddpbayes.model.loading import load_model
imported = time.perf_counter() - start
start = time.perf_counter()
model = load_model({str(model)!r})
print(json.dumps({{"import_s": imported, "s": time.perf_counter() - start, "tuples": model.n}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(proc.stdout)


def spatial(seed: int) -> int:
    """(c): the command with the spatial field, and what it finds."""
    with tempfile.TemporaryDirectory() as folder:
        command_s, command_cpu, doc = time_command(Path(folder) / "gambia.py", seed, "--coords", "x,y")
    print(f"(c) clustered with the spatial GP, the whole command (three NUTS runs of 4 x (1,000 + 1,000), the "
          f"checks, the files): {command_s:.1f} s, {command_cpu:.1f} cpu s (target {SPATIAL_TARGET_S:.0f} s)")
    for name in ("intercept", "sigma", "phi", "gp_length_scale", "sigma_iid"):
        p = doc["parameters"][name]
        print(f"    {name}: {p['mean']:.4g} +- {p['sd']:.3g}, 94% HDI [{p['hdi'][0]:.4g}, {p['hdi'][1]:.4g}]")
    d, c = doc["diagnostics"], doc["checks"]
    print(f"    worst R-hat {d['worst_rhat']['value']:.4f} ({d['worst_rhat']['parameter']}), lowest bulk ESS "
          f"{d['worst_ess_bulk']['value']:.0f} ({d['worst_ess_bulk']['parameter']}), {d['divergences']} divergences")
    m = c["morans_i"]
    print(f"    Moran's I data {m['data']:.3f}: with the field p = {m['p_value']:.3f}, without it p = "
          f"{m['without_field']['p_value']:.3f}; LOO against the fit without the field "
          f"{c['loo_spatial']['elpd_diff']:.1f} (se {c['loo_spatial']['se_diff']:.1f}); spatial field supported: "
          f"{c['spatial_supported']}")
    v = c["loo_cluster"]
    print(f"    leave-one-village-out LOO against the fit without the field {v['elpd_diff']:.1f} (se "
          f"{v['se_diff']:.1f}); Pareto k max {v['pareto_k_max']:.2f} ({v['pareto_k_over_0_7']} villages over 0.7; "
          f"without the field {v['pareto_k_max_without_field']:.2f}, {v['pareto_k_over_0_7_without_field']}); "
          f"reliable: {v['reliable']}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0 if command_s <= SPATIAL_TARGET_S else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spatial", action="store_true", help="(c) only: the fit with the spatial GP")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}, cores: {os.cpu_count()}")
    if args.spatial:
        return spatial(args.seed)
    nuts = time_nuts(args.seed)
    with tempfile.TemporaryDirectory() as folder:
        model = Path(folder) / "gambia.py"
        command_s, command_cpu, doc = time_command(model, args.seed)
        load = time_load(model)
    print(f"(a) clustered NUTS, 4 x (1,000 + 1,000): {nuts['s']:.1f} s, {nuts['cpu']:.1f} cpu s (target "
          f"{FIT_TARGET_S:.0f} s); the whole command: {command_s:.1f} s, {command_cpu:.1f} cpu s")
    for name, (mean, sd) in REFERENCE.items():
        p = doc["parameters"][name]
        print(f"    {name}: {p['mean']:.3f} +- {p['sd']:.3f} (reference GLMM {mean} +- {sd})")
    d = doc["diagnostics"]
    print(f"    worst R-hat {d['worst_rhat']['value']:.4f} ({d['worst_rhat']['parameter']}), lowest bulk ESS "
          f"{d['worst_ess_bulk']['value']:.0f} ({d['worst_ess_bulk']['parameter']}), {d['divergences']} divergences")
    print(f"    ICC data {doc['checks']['icc']['data']:.3f}; LOO elpd_diff {doc['checks']['loo']['elpd_diff']:.1f} "
          f"(se {doc['checks']['loo']['se_diff']:.1f})")
    print(f"(b) load_model of the written file: {load['s']:.2f} s (target {LOAD_TARGET_S:.0f} s; import pymc "
          f"{load['import_s']:.1f} s apart), {load['tuples']:,} tuples")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0 if nuts["s"] <= FIT_TARGET_S and load["s"] <= LOAD_TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
