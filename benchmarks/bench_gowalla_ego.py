"""The near-friend model's sampled audit (DESIGN §7.1, issue #42.1) for the report's user and six
more: per user and coordinate, the sampler that ran (NUTS, or SMC when its chains disagreed), the
worst R-hat and smallest bulk ESS, the interval (widened by the truncated and tabulated kernel sums'
error) and the verdict at ε = 1, the CPU seconds of the user's two audits (both samplers; the CAR's exact
audit too; this process's and its forked SMC runs', the latter also alone), her wall seconds, the wall
seconds two idle cores would take (this process's CPU plus half the forked runs': the runs of an event
are 8 or 16, one at a time to each of the two processes) and the 5-minute load average when she finished.

The users: the report's user (row 1352) and the seed-0 sample of six as `geo.ego.sample_users` drew
it until issue #42.1's end (a fresh draw of six: rows 332, 824, 886, 1236, 1349, 1471; degrees 2, 4, 2, 1,
1, 2), kept for comparison across rounds; the report's seven now (`reports/specs/gowalla_attack.toml`,
audit_users = 7 at seed 0) are `--users 1352,214,332,715,743,1279,1341`. The partition is the attack's at
seed 0 (k = 8). From the repository root:

    python benchmarks/bench_gowalla_ego.py [--users 1352,332,...] [--draws 200] [--per-event]
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import sys
import time

import numpy as np

from ddpbayes.attack.audit_near import audit_sample
from ddpbayes.attack.release import kmeans
from ddpbayes.attack.run import load_data

USERS = (1352, 332, 824, 886, 1236, 1349, 1471)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", default=",".join(map(str, USERS)))
    parser.add_argument("--draws", type=int, default=200, help="draws and tuning steps per chain (the report's 200)")
    parser.add_argument("--per-event", action="store_true", help="each run's event, sampler, R-hat and ESS on stderr")
    args = parser.parse_args()
    if args.per_event:
        logging.basicConfig(stream=sys.stderr, format="%(message)s")
        logging.getLogger("ddpbayes.engines.sampling.runs").setLevel(logging.DEBUG)
    data = load_data()
    part = kmeans(data.points, 8, np.random.default_rng([0, 0]))  # `ddpbayes attack --seed 0`'s stream
    print(f"python benchmarks/bench_gowalla_ego.py --users {args.users} --draws {args.draws}; load average at the "
          f"start: {', '.join(f'{v:.1f}' for v in os.getloadavg())}")
    print("| user | degree | coordinate | samplers (SMC runs, of them direct, widened) | R-hat | bulk ESS "
          "| estimate [interval] | CAR | verdict | CPU s (forked) | wall s | idle wall s | load |")
    print("| ---: | ---: | --- | --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for user in map(int, args.users.split(",")):
        (here, forked), wall = _cpu(), time.perf_counter()
        (row,) = audit_sample(data, part, data.near, users=1, seed=0, draws=args.draws, tune=args.draws, ids=[user])
        here, forked, wall = _cpu()[0] - here, _cpu()[1] - forked, time.perf_counter() - wall
        for name in ("x", "y"):
            near, d = row[f"near_{name}"], row[f"near_{name}"]["diagnostics"]
            spent = (f"{here + forked:.0f} ({forked:.0f}) | {wall:.0f} | {here + forked / 2:.0f} | "
                     f"{os.getloadavg()[1]:.1f}") if name == "x" else "(both) | | | "
            smc = d.get("smc") or {"runs": 0, "direct": 0, "widened": 0}
            print(f"| {user} | {row['degree']} | {name} | {'/'.join(d.get('samplers', []))} ({smc['runs']} of "
                  f"{d.get('runs')}, {smc['direct']} direct, {smc['widened']} widened) | "
                  f"{d.get('rhat_max', float('nan')):.4f} | "
                  f"{d.get('ess_bulk_min', float('nan')):.0f} | {near['estimate']:.3f} [{near['lower']:.3f}, "
                  f"{near['upper']:.3f}] | {row[f'car_{name}']:.4f} | {near['verdict']} | {spent} |", flush=True)
            print(f"{user} {name}: {near['verdict']}: {near['verdict_reason']}", file=sys.stderr, flush=True)
    print(f"load average at the end: {', '.join(f'{v:.1f}' for v in os.getloadavg())}")
    return 0


def _cpu() -> tuple[float, float]:
    """CPU seconds of this process, and of its ended children (SMC's forked runs, `parallel.forked_map`)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time(), children.ru_utime + children.ru_stime


if __name__ == "__main__":
    sys.exit(main())
