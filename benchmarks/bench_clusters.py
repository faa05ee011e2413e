"""A fitted clustered model's shape at the Gambia survey's size, audited by the structured engine (issue #41).

65 clusters (64 of 31 records and one of 16: 2,000 records), simulated, not fitted: the records are
one Bernoulli vector y with logit intercept + X beta + u[cluster], u ~ Normal(0, sigma) one effect per
cluster (the shape `ddpbayes fit --template clustered` writes for --parameters mean). The release is
each cluster's positive count with Laplace noise (`linear:` with one row per cluster), and the count
of all records. Each case runs in its own process and prints wall-clock seconds, peak memory, the
leakage and the quadrature note.

    python benchmarks/bench_clusters.py                    # every case
    python benchmarks/bench_clusters.py --only idp-one     # one case
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

SIZES = [31] * 64 + [16]
SIGMA, INTERCEPT, BETA = 1.05, -0.61, (0.3, -0.2)  # the village SD and intercept of a plain GLMM of the Gambia data
PDP_KNOWN = 8  # pdp knows this many of the target's village mates: 2^8 configurations, each calibrated
CASES = {  # name: (query, notion, targets: "one" or "all")
    "idp-one": ("villages", "idp", "one"),
    "pdp-one": ("villages", "pdp", "one"),
    "ddp-one": ("villages", "ddp", "one"),
    "idp-all": ("villages", "idp", "all"),
    "ddp-all": ("villages", "ddp", "all"),
    "count-idp-one": ("count", "idp", "one"),
}


def build():
    import numpy as np
    import pymc as pm

    from ddpbayes import DependenceModel

    rng = np.random.default_rng(41)
    cluster = np.repeat(np.arange(len(SIZES)), SIZES)
    X = rng.normal(size=(len(cluster), len(BETA)))
    with pm.Model() as m:
        u = pm.Normal("u", 0.0, SIGMA, shape=len(SIZES))
        pm.Bernoulli("y", logit_p=INTERCEPT + X @ np.asarray(BETA) + u[cluster], shape=len(cluster))
    return DependenceModel(m, tuples="y"), cluster


def run(name: str) -> dict:
    import ddpbayes

    query, notion, which = CASES[name]
    start = time.perf_counter()
    model, cluster = build()
    built = time.perf_counter() - start
    if query == "villages":
        query = "linear:" + ";".join(",".join("1" if c == v else "0" for c in cluster) for v in range(len(SIZES)))
    known = list(range(1, 1 + PDP_KNOWN)) if notion == "pdp" else None  # records of the target's village
    targets = [0] if which == "one" else None
    start = time.perf_counter()
    got = ddpbayes.audit(model, query, "laplace", notion, scale=1.0, targets=targets, known=known,
                         engine="structured")
    return {"case": name, "build_s": round(built, 2), "audit_s": round(time.perf_counter() - start, 2),
            "peak_MB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024), "leakage": got.leakage,
            "worst": str(got.witness.adversary), "note": got.notes[0] if got.notes else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CASES))
    parser.add_argument("--case", help=argparse.SUPPRESS)  # the child process's case
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run(args.case)))
        return
    print(f"load average {os.getloadavg()[0]:.1f}")
    for name in [args.only] if args.only else CASES:
        out = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True, text=True, check=True)
        print(out.stdout.strip().splitlines()[-1], flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
