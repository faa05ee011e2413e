"""How the three audits of a fitted model compare, and how `integrated:S` moves with S (issue #41
item 3, DESIGN §9.6), on a fit small enough for a brute force: 6 children in 2 villages.

    printf 'village,pos\\na,1\\na,1\\na,0\\nb,0\\nb,0\\nb,1\\n' > /tmp/small.csv
    ddpbayes fit /tmp/small.csv --template clustered --cluster village --outcome pos --draws 500 \\
        --chains 2 --seed 1 --out /tmp/small.py --force --quiet
    python benchmarks/bench_fitted_modes.py /tmp/small.fit.json

idp of child 0 under a Laplace(1) count (epsilon 1), computed as tests/test_fitted_audit.py's brute
force does (each village's effect by 200-node Gauss-Hermite, the 2^6 tables enumerated; it agrees with
`ddpbayes audit --parameters ...` to 1e-8 where the structured engine answers): `mean`, then for
S = 50, 100, 200 and every draw the integrated leakage and the draws:S summary.

    python benchmarks/bench_fitted_modes.py --time /tmp/speed41/gambia.py [--draws 200]

times `--parameters draws:S` (idp of child 0, Laplace count at epsilon 1, claim 1) on a real fit such as
the Gambia survey's (`ddpbayes fit models/data/gambia_malaria.csv --template clustered --cluster x,y
--outcome pos --out /tmp/speed41/gambia.py --seed 0`): cold (the first audit in the process) and warm
(again in the same process), and checks three draws' leakages against fresh audits of their models.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

import numpy as np
from scipy.special import expit

NODES = 200
SCALE = 1.0
CLAIM = 1.3  # the claim for share_meeting_claim


def main(path: str) -> None:
    doc = json.load(open(path))
    draws, index = doc["draws"], np.asarray(doc["table"]["cluster_index"])
    if doc["data"]["covariates"]:
        raise SystemExit("this benchmark takes a fit without covariates")
    ys = np.array(list(itertools.product((0, 1), repeat=len(index))))
    laws = np.array([law(a, s, index, ys) for a, s in zip(draws["intercept"], draws["sigma"])])
    per_draw = np.array([idp(p, ys) for p in laws])
    mean = law(np.mean(draws["intercept"]), np.mean(draws["sigma"]), index, ys)
    print(f"mean: {idp(mean, ys):.6f}")
    for count in (50, 100, 200, len(per_draw)):
        pick = np.rint(np.linspace(0, len(per_draw) - 1, count)).astype(int)
        v = per_draw[pick]
        print(f"S = {count:4d}: integrated {idp(laws[pick].mean(axis=0), ys):.6f}   draws: median {np.median(v):.4f}, "
              f"p95 {np.percentile(v, 95):.4f}, max {v.max():.4f}, share meeting {CLAIM} {(v <= CLAIM).mean():.3f}")


def law(intercept: float, sigma: float, index: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """P(Y = y) for every row of `ys`: villages independent given the parameters, each effect integrated."""
    z, w = np.polynomial.hermite_e.hermegauss(NODES)
    w = w / w.sum()
    out = np.ones(len(ys))
    for c in np.unique(index):
        rows = np.flatnonzero(index == c)
        p = expit(intercept + sigma * z)[:, None]
        y = ys[:, rows][:, None, :]
        out *= np.prod(np.where(y == 1, p, 1 - p), axis=2) @ w
    return out


def idp(p: np.ndarray, ys: np.ndarray) -> float:
    """idp of record 0 under a Laplace(SCALE) count: the sup over the breakpoints and both tails."""
    counts, s = ys.sum(axis=1), np.arange(ys.shape[1] + 1)
    w = np.array([[p[(ys[:, 0] == t) & (counts == v)].sum() for v in s] for t in (0, 1)])
    w /= w.sum(axis=1, keepdims=True)
    kernels = [np.exp(-np.abs(y - s) / SCALE) for y in s] + [np.exp(s / SCALE), np.exp(-s / SCALE)]
    return max(abs(np.log(w[1] @ k) - np.log(w[0] @ k)) for k in kernels)


def timed(model: str, draws: int) -> None:
    """draws:S cold then warm, and three draws (first, middle, last) against fresh audits of build(draw:K)."""
    from ddpbayes.auditing import audit
    from ddpbayes.model.loading import load_model
    from ddpbayes.plausible import audit_fitted

    run = dict(query="count", mechanism="laplace", notion="idp", epsilon=1.0, targets=[0], claim=1.0,
               progress=False)
    for label in ("cold", "warm"):
        start = time.perf_counter()
        found = audit_fitted(model, f"draws:{draws}", **run)
        p = found.plausible
        print(f"draws:{draws} {label}: {time.perf_counter() - start:.1f} s; median {p['median']:.6f}, p95 "
              f"{p['p95']:.6f}, max {p['max']:.6f}, share meeting 1: {p['share_meeting_claim']}")
    for j in (0, draws // 2, draws - 1):
        k = p["posterior_draws"][j]
        fresh = audit(load_model(model, {"parameters": f"draw:{k}"}), information=None, **run).leakage
        print(f"draw {k}: draws:{draws} {p['leakages'][j]!r}, fresh audit {fresh!r}, difference "
              f"{abs(p['leakages'][j] - fresh):.2g}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="a .fit.json (the modes against the brute force) or, with --time, a MODEL.py")
    parser.add_argument("--time", action="store_true", help="time draws:S on a fitted model file")
    parser.add_argument("--draws", type=int, default=200)
    args = parser.parse_args()
    if args.time:
        timed(args.path, args.draws)
    else:
        main(args.path)
