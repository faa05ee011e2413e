"""One path for Gowalla (issue #41 item 5): `ddpbayes fit --template graph` reproduces the shipped
fits of models/data/gowalla_fit.json (CAR) and gowalla_near_fit.json (near-friend model).

Each model is fitted as its script fits it (models/gowalla_friends.py, models/gowalla_near.py:
the CAR 2 chains x 500 draws after 500 tuning steps, seed 2011; the near model 2 x 1,000 after
1,000, seed 3030) through `gowalla_friends.fit_graph`, i.e. `ddpbayes.fit(..., template="graph")`
on the shipped tables. Printed per parameter: the shipped posterior mean, the new fit's mean and
posterior SD, and |difference| / SD (the test: at most 1; the NUTS seeds differ, since `fit` derives
its chains' seeds from --seed, so the two are independent runs of the same posterior); then the
fit's wall time, its convergence and its checks.

Run from the repository root:

    python benchmarks/bench_fit_gowalla.py            # both models (about 15 min on 2 idle cores)
    python benchmarks/bench_fit_gowalla.py --model car
    python benchmarks/bench_fit_gowalla.py --model near --draws 400   # 2 x 400 after 400: faster
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
SETTINGS = {"car": {"draws": 500, "tune": 500, "chains": 2, "seed": 2011},
            "near": {"draws": 1000, "tune": 1000, "chains": 2, "seed": 3030}}


def friends_module():
    spec = importlib.util.spec_from_file_location("gowalla_friends", MODELS / "gowalla_friends.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shipped(model: str) -> dict[str, float]:
    """The shipped fit's posterior means, by the graph template's parameter names."""
    if model == "car":
        doc = json.loads((MODELS / "data" / "gowalla_fit.json").read_text())
        return {"alpha": doc["alpha"], "mu_x": doc["mu"][0], "mu_y": doc["mu"][1], "tau_x": doc["tau"][0],
                "tau_y": doc["tau"][1]}
    doc = json.loads((MODELS / "data" / "gowalla_near_fit.json").read_text())
    names = ["w_population", *(f"w_{s + 1}" for s in range(len(doc["sigma_km"])))]
    return dict(zip(names, doc["weights"])) | {f"sigma_{s + 1}_km": v for s, v in enumerate(doc["sigma_km"])}


def compare(model: str, draws: int | None = None) -> dict:
    """Fit `model` with its script's settings (`draws`: draws and tuning steps per chain instead)."""
    settings = SETTINGS[model] | ({"draws": draws, "tune": draws} if draws else {})
    start = time.perf_counter()
    doc = friends_module().fit_graph(model, **settings).doc
    seconds = time.perf_counter() - start
    rows = {name: {"shipped": old, "mean": doc["parameters"][name]["mean"], "sd": doc["parameters"][name]["sd"],
                   "sds_apart": abs(doc["parameters"][name]["mean"] - old) / doc["parameters"][name]["sd"]}
            for name, old in shipped(model).items()}
    return {"model": model, "settings": settings, "seconds": seconds, "parameters": rows,
            "converged": doc["diagnostics"]["ok"], "failures": doc["diagnostics"]["failures"],
            "worst_rhat": doc["diagnostics"]["worst_rhat"], "worst_ess_bulk": doc["diagnostics"]["worst_ess_bulk"],
            "checks": doc["checks"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("car", "near"), action="append")
    parser.add_argument("--draws", type=int, default=None,
                        help="draws and tuning steps per chain (default: the scripts' own, 500 car, 1,000 near)")
    args = parser.parse_args()
    ok = True
    for model in args.model or ["car", "near"]:
        result = compare(model, args.draws)
        for name, row in result["parameters"].items():
            print(f"{model} {name:<14} shipped {row['shipped']:.4g}  fit {row['mean']:.4g} (sd {row['sd']:.3g})  "
                  f"{row['sds_apart']:.2f} sd apart", flush=True)
        print(json.dumps(result, indent=1), flush=True)
        ok &= all(row["sds_apart"] <= 1 for row in result["parameters"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
