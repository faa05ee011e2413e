"""Continual release at T = 1000 against Cao et al.'s TPL recursion, in one process (issue #29, DESIGN §2.1c).

    fixed     models/markov_chain.py, n = 1000, p01 = p10 = 0.2
    varying   the same chain with a different stay probability every day,
              stay[k] = 0.7 + 0.2 sin(2 pi k / 7) (a weekly pattern), built in PyMC here

Randomized response with eps = 1 on every day, idp of all 1000 days. For each chain: the first
`audit` after loading (it builds the factor tables: `engines/terms.py`), then best of 3 of the
audit again and of `continual_leakage` alone (the algorithm: both sweeps, every adversary, every
witness), against best of 3 of `benchmarks/limit_refs/tpl.py` (plain Python, both recursions).
The witnesses hold 1000 outputs per day, so 10^6 floats: building them (tuples of shared floats,
the least Python allows) is timed alone as the floor any implementation pays. Times are process
CPU seconds (the machine is shared: wall clock counts other processes' turns), wall clock beside.

    python benchmarks/bench_continual.py
    python benchmarks/bench_continual.py --skip-varying-first   # the varying chain's first table build is slow
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location("tpl", ROOT / "benchmarks" / "limit_refs" / "tpl.py")
tpl = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(tpl)

T, EPS, STAY = 1000, 1.0, 0.8


def _timed(run, repeat: int = 1) -> tuple[float, float, object]:
    """Best CPU and wall seconds of `repeat` runs, and the last result."""
    cpu, wall, out = math.inf, math.inf, None
    for _ in range(repeat):
        c, w = time.process_time(), time.perf_counter()
        out = run()
        cpu, wall = min(cpu, time.process_time() - c), min(wall, time.perf_counter() - w)
    return cpu, wall, out


def _varying(n: int):
    import pymc as pm  # noqa: PLC0415

    import ddpbayes  # noqa: PLC0415

    stay = [0.7 + 0.2 * math.sin(2 * math.pi * k / 7) for k in range(n)]
    with pm.Model() as m:
        prev = pm.Bernoulli("x0", 0.5)
        for k in range(1, n):
            prev = pm.Bernoulli(f"x{k}", pm.math.switch(prev, stay[k], 1 - stay[k]))
    return ddpbayes.DependenceModel(m, tuples=[f"x{k}" for k in range(n)])


def continual_figures(first_varying: bool = True) -> dict:
    """The figures this benchmark prints, as a dict (seconds)."""
    import ddpbayes  # noqa: PLC0415
    from ddpbayes.engines.structured.continual import continual_leakage  # noqa: PLC0415
    from ddpbayes.engines.structured.graph import factor_graph  # noqa: PLC0415
    from ddpbayes.mechanisms import RandomizedResponse  # noqa: PLC0415
    from ddpbayes.problem import Adversary, Problem  # noqa: PLC0415
    from ddpbayes.queries import parse_query  # noqa: PLC0415

    def audit(model):
        return ddpbayes.audit(model, "identity", "randomized_response", "idp", epsilon=EPS, information=None)

    out = {"reference": _timed(lambda: tpl.tpl_reference(1 - STAY, 1 - STAY, EPS, T), 3)[:2]}
    rest = tuple([1.0] * T)
    out["witness floor"] = _timed(lambda: [rest[:p] + (0.0,) + rest[p + 1:] for p in range(T)], 3)[:2]
    builds = {"fixed": lambda: ddpbayes.load_model(ROOT / "models" / "markov_chain.py", {"n": T, "p_stay": STAY}),
              "varying": lambda: _varying(T)}
    for name, build in builds.items():
        cpu, wall, model = _timed(build)
        out[f"{name} load"] = (cpu, wall)
        if name == "fixed" or first_varying:
            out[f"{name} first audit"] = _timed(lambda: audit(model))[:2]
        else:
            factor_graph(model, 10**7)
        out[f"{name} audit"] = _timed(lambda: audit(model), 3)[:2]
        every = tuple(Adversary(i) for i in range(T))
        problem = Problem(model, parse_query("identity"), RandomizedResponse(EPS), every)
        graph = factor_graph(model, problem.settings.max_states)
        out[f"{name} continual_leakage"] = _timed(lambda: continual_leakage(problem, graph), 3)[:2]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-varying-first", action="store_true", help="do not time the varying chain's first audit")
    args = parser.parse_args()
    figures = continual_figures(not args.skip_varying_first)
    ref = figures["reference"][0]
    print(f"load average {os.getloadavg()[0]:.2f}; T = {T}, randomized response eps = {EPS}, idp of every day")
    print(f"{'':32} {'cpu s':>9} {'wall s':>9} {'cpu / reference':>16}")
    for name, (cpu, wall) in figures.items():
        print(f"{name:32} {cpu:9.4f} {wall:9.4f} {cpu / ref:15.1f}x")


if __name__ == "__main__":
    main()
