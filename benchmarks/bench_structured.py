"""Speed of the structured engine (DESIGN §2.1b) against the targets of issue 13.

    chain365    binary chain (models/markov_chain.py, p01 = p10 = 0.2), n = 365, count, idp for every target
    chain1000   the same at n = 1000
    three1000   three-state chain (models/categorical_chain.py), n = 1000, sum, idp for target 500
    house1000   household with one latent cause (models/household.py), n = 1000 members, count, idp for every target
    beta50      Beta–Bernoulli (models/beta_bernoulli.py), n = 50, count, idp by quadrature, against the
                beta-binomial closed form
    ddp365      binary chain, n = 365, count, ddp for every target (dependence sets, then each target's
                adversary knowing every day outside its set: DESIGN §2.1b)
    tpl1000     continual release: binary chain, n = 1000, identity with randomized response (eps = 1),
                idp for every target (Cao et al.'s TPL)
    scaling     binary chain, count, idp for target n // 2, n = 10 ... 2000, structured against exact
                enumeration on the sizes the exact engine can hold (n <= 20)

Each benchmark runs in a fresh Python process and times `load_model` + `audit` (the model's
building, its tables, every adversary) after the import of ddpbayes, which is reported apart.
Laplace noise with epsilon = 1 (b = 1) throughout.

    python benchmarks/bench_structured.py              # every benchmark, a table
    python benchmarks/bench_structured.py --only beta50 chain365
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"

BENCHMARKS = {
    "chain365": ("markov_chain.py", {"n": 365}, "count", "laplace", None, 5.0),
    "chain1000": ("markov_chain.py", {"n": 1000}, "count", "laplace", None, 30.0),
    "three1000": ("categorical_chain.py", {"n": 1000}, "sum", "laplace", [500], 2.0),
    "house1000": ("household.py", {"n": 1000}, "count", "laplace", None, 5.0),
    "beta50": ("beta_bernoulli.py", {"n": 50}, "count", "laplace", None, 5.0),
    "ddp365": ("markov_chain.py", {"n": 365}, "count", "laplace", None, 5.0),
    "tpl1000": ("markov_chain.py", {"n": 1000}, "identity", "randomized_response", None, 5.0),
}
NOTION = {"ddp365": "ddp"}  # the others: idp
SCALING = (10, 14, 18, 20, 50, 100, 200, 500, 1000, 2000)


def _beta_binomial_idp(n: int) -> float:
    """Closed form of models/beta_bernoulli.py (a = b = 1, s = 1): S | t ~ BetaBinomial(n - 1, 1 + t, 2 - t)."""
    import numpy as np  # noqa: PLC0415
    from scipy.special import betaln, gammaln  # noqa: PLC0415

    k = np.arange(n)

    def log_l(t: int) -> np.ndarray:
        w = np.exp(gammaln(n) - gammaln(k + 1) - gammaln(n - k) + betaln(k + 1 + t, n - k + 1 - t) - betaln(1 + t, 2 - t))
        q = k + t
        finite = [math.log(np.sum(w * np.exp(-np.abs(y - q)))) for y in range(n + 1)]
        return np.array([*finite, math.log(np.sum(w * np.exp(q))), math.log(np.sum(w * np.exp(-q)))])

    return float(np.max(np.abs(log_l(1) - log_l(0))))


def run_one(key: str) -> dict:
    t0 = time.perf_counter()
    import ddpbayes  # noqa: PLC0415
    import ddpbayes.auditing  # noqa: F401, PLC0415 — loads PyMC and PyTensor

    import_s = time.perf_counter() - t0
    if key.startswith("scaling:"):
        engine, n = key.split(":")[1], int(key.split(":")[2])
        start = time.perf_counter()
        model = ddpbayes.load_model(MODELS / "markov_chain.py", {"n": n})
        result = ddpbayes.audit(model, "count", "laplace", "idp", epsilon=1.0, targets=[n // 2], engine=engine,
                                information=None)
        return {"key": key, "import_s": import_s, "s": time.perf_counter() - start, "leakage": result.leakage,
                "engine": result.engine}
    path, params, query, mechanism, targets, _ = BENCHMARKS[key]
    start = time.perf_counter()
    model = ddpbayes.load_model(MODELS / path, params)
    result = ddpbayes.audit(model, query, mechanism, NOTION.get(key, "idp"), epsilon=1.0, targets=targets,
                            information=None)
    seconds = time.perf_counter() - start
    record = {"key": key, "import_s": import_s, "s": seconds, "leakage": result.leakage, "engine": result.engine,
              "targets": sum(v is not None for v in result.per_target)}
    if key == "beta50":
        record["closed_form"] = _beta_binomial_idp(params["n"])
    return record


def child(key: str) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", key], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"benchmark {key} failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=[*BENCHMARKS, "scaling"], help="run these benchmarks")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child)))
        return 0
    keys = args.only or [*BENCHMARKS, "scaling"]
    load = os.getloadavg()[0]
    print(f"structured engine, Laplace epsilon = 1; {os.cpu_count()} cores; load average before {load:.2f}")
    print("s = wall-clock seconds of load_model + audit in a fresh process (after the import)\n")
    missed = False
    rows = [k for k in keys if k != "scaling"]
    if rows:
        print(f"{'benchmark':<10} {'engine':<10} {'targets':>7} {'import s':>8} {'s':>7} {'target s':>8}  met  leakage")
        for key in rows:
            r = child(key)
            target = BENCHMARKS[key][-1]
            met = r["s"] <= target
            missed |= not met
            extra = f"  (closed form {r['closed_form']:.15g})" if "closed_form" in r else ""
            print(f"{key:<10} {r['engine']:<10} {r['targets']:>7} {r['import_s']:>8.2f} {r['s']:>7.2f} {target:>8.0f}  "
                  f"{'yes' if met else 'NO ':<4} {r['leakage']:.15g}{extra}")
    if "scaling" in keys:
        print("\nbinary chain, count, idp of target n // 2: seconds (load_model + audit)")
        print(f"{'n':>6} {'structured s':>13} {'exact s':>8}  leakage")
        for n in SCALING:
            s = child(f"scaling:structured:{n}")
            e = child(f"scaling:exact:{n}") if n <= 20 else None
            exact = f"{e['s']:>8.2f}" if e else f"{'-':>8}"
            agree = "" if e is None else f"  (exact {e['leakage']:.15g})"
            print(f"{n:>6} {s['s']:>13.2f} {exact}  {s['leakage']:.15g}{agree}")
    print(f"\nload average after {os.getloadavg()[0]:.2f}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
