"""Benchmark: the Gowalla audit and attack, serial against 2 Dask workers (issue 17; not a test).

The commands a user runs, timed end to end as processes (Python's start and `import ddpbayes`
included, about 3 s), each on 1 and 2 workers, with the JSON compared (timings aside):

- audit: seed 002 §IV-B's release (the seed-0 K-means partition, K = 8, `centroids:FILE`, Laplace
  with b = 2 / min cluster size / ε at ε = 1) on `models/gowalla_friends.py` (2,392 users, 4,784
  tuples), idp and ddp, on the gaussian engine: 5 batches of up to 1,024 adversaries.
- attack: `ddpbayes attack` with its defaults (every one of the 2,392 users, every other user
  known, ε in 0.1, 0.5, 1, 2, 3, a 20 x 20 grid): 10 target blocks.

Usage (from the repository root):
    python benchmarks/bench_dask_gowalla.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))
sys.path.insert(0, str(ROOT / "benchmarks"))
DDPBAYES = Path(sys.executable).with_name("ddpbayes")


def partition(folder: str) -> tuple[str, float]:
    """The seed-0 partition file and the Laplace scale at ε = 1 (`bench_gowalla_audit`'s)."""
    import gowalla_friends
    from bench_gowalla_audit import partition_file

    from ddpbayes.geo import US_BOX

    locations, _ = gowalla_friends.users()
    x, y = US_BOX.normalise(locations.lat, locations.lon)
    path, labels = partition_file(np.column_stack([x, y]), 8, folder)
    return path, float(2.0 / np.bincount(labels, minlength=8).min())


def timed(argv: list[str]) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("DDPBAYES_WORKERS", "DDPBAYES_SCHEDULER")}
    start = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{out.stderr}")
    doc = json.loads(out.stdout)
    doc.pop("seconds", None)
    return wall, doc


def main() -> int:
    print(f"{os.cpu_count()} cores; load average before {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as folder:
        path, scale = partition(folder)
        cases = {
            f"audit {notion}": [str(DDPBAYES), "audit", str(ROOT / "models" / "gowalla_friends.py"), "--query",
                                f"centroids:{path}", "--mechanism", "laplace", "--scale", repr(scale), "--notion",
                                notion, "--format", "json"]
            for notion in ("idp", "ddp")
        }
        cases["attack"] = [str(DDPBAYES), "attack", "--format", "json"]
        for name, argv in cases.items():
            runs = {w: timed([*argv, "--workers", str(w)]) for w in (1, 2)}
            same = runs[1][1] == runs[2][1]
            print(f"{name}: 1 worker {runs[1][0]:.2f} s, 2 workers {runs[2][0]:.2f} s "
                  f"(speedup {runs[1][0] / runs[2][0]:.2f}x); same JSON: {'yes' if same else 'NO'}")
            if not same:
                return 1
    print(f"load average after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
