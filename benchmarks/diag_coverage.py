"""Diagnosis (issue #27): why the sampling engine's bounds miss. Not a test.

Two models whose leakage is known in closed form (count query, Laplace(1), idp):
  household   models/household.py (n = 4): X_k | h ~ Bernoulli(0.8 if h else 0.1), h ~ Bernoulli(0.2);
              given X_i = t the count is t + K, K | h ~ Binomial(3, p_h), h | t by Bayes. idp 2.44577.
  siblings    models/beta_bernoulli.py with n = 5, a = 2, b = 5: given X_i = t the count is
              t + BetaBinomial(4, 2 + t, 6 - t). idp 1.54372.

For every seed the script draws the engine's own MCMC runs (`runs.sample_event`: the runs an
`audit(..., engine="sampling", seed=s, draws=D)` uses) for every target and t in {0, 1}, and, in the
`iid` arm, the same number of independent exact draws from the same conditional laws (numpy, the
seed's stream), and applies the engine's `estimate.estimate` to each target, then `worst_of`'s rule
(the adversary with the largest selection-half score gives the lower bound). It records:

  final      LB/UB of the worst adversary against the truth (what the CLI reports)
  witness    the log-ratio's exact value at the witness chosen on the first halves, and whether
             the held-out bound (held_out - 1.645 se) exceeds it: a miss there is not multiplicity
             (the witness is fixed) but the standard error or the estimator's skew
  fixed      at the true argmax (t = 1, t' = 0, y = +inf, target 0): the estimate on the first
             halves, on the second halves, and their reported standard errors; over seeds, the
             empirical sd of the second-half estimate against the mean reported se, the bias of
             the estimate, and the correlation between the two halves' errors; the miss rate of
             est2 - 1.645 se2 > truth at the fixed witness (no selection at all); and candidate
             bounds at the fixed witness: the se taken from the other half (est2 - 1.645 se1),
             the ratio-scale Wald bound and Fieller's bound (`alternatives`)

Findings and the commands that gave them: benchmarks/coverage_diagnosis.md.

Usage:  PYTHONPATH=$PWD python benchmarks/diag_coverage.py --model household --seeds 20 --draws 500
        ... --arm iid   (exact independent draws instead of MCMC)
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
Z95 = 1.6448536269514722
B = 1.0  # Laplace scale (count: sensitivity 1, epsilon 1)


def household_pmf(t: int, n: int = 4, p_house: float = 0.2, p_sick: float = 0.8, p_base: float = 0.1) -> np.ndarray:
    """P(count = c | X_i = t) for c = 0..n."""
    like = {1: p_sick if t else 1 - p_sick, 0: p_base if t else 1 - p_base}
    post1 = p_house * like[1] / (p_house * like[1] + (1 - p_house) * like[0])
    pmf = np.zeros(n + 1)
    for h, w in ((1, post1), (0, 1 - post1)):
        p = p_sick if h else p_base
        pmf[t:t + n] += w * stats.binom.pmf(np.arange(n), n - 1, p)
    return pmf


def siblings_pmf(t: int, n: int = 5, a: float = 2.0, b: float = 5.0) -> np.ndarray:
    pmf = np.zeros(n + 1)
    pmf[t:t + n] = stats.betabinom.pmf(np.arange(n), n - 1, a + t, b + 1 - t)
    return pmf


MODELS = {
    "household": dict(path="models/household.py", params={}, n=4, pmf=household_pmf, truth=2.44577),
    "siblings": dict(path="models/beta_bernoulli.py", params={"n": 5, "a": 2.0, "b": 5.0}, n=5, pmf=siblings_pmf,
                     truth=1.54372),
}


def log_l(pmf: np.ndarray, y: float) -> float:
    """log L(y | t) up to the factor that depends on y alone (as `vector.log_kernels`)."""
    c = np.arange(len(pmf))
    k = c / B if y == math.inf else (-c / B if y == -math.inf else -np.abs(y - c) / B)
    return float(np.log(np.sum(pmf * np.exp(k))))


def exact_ratio(spec, t: float, t_prime: float, y: float) -> float:
    return log_l(spec["pmf"](int(t)), y) - log_l(spec["pmf"](int(t_prime)), y)


def exact_leak(spec) -> float:
    ys = [math.inf, -math.inf, *range(spec["n"] + 1)]
    return max(abs(exact_ratio(spec, 1, 0, y)) for y in ys)


def iid_draws(spec, t: int, chains: int, draws: int, rng) -> np.ndarray:
    pmf = spec["pmf"](t)
    return rng.choice(len(pmf), size=(chains, draws, 1), p=pmf).astype(float)


def one_seed(spec, model, seed: int, draws: int, arm: str, targets: list[int]) -> dict:
    from ddpbayes.engines.sampling.estimate import Draws, estimate, ratio_at
    from ddpbayes.engines.sampling.runs import sample_event
    from ddpbayes.settings import RunSettings

    settings = RunSettings.of(None, engine="sampling", seed=seed, draws=draws, progress=False)
    rng = np.random.default_rng([seed, 27])
    per = []
    fixed = None
    for i in targets:
        group = []
        for t in (0.0, 1.0):
            if arm == "mcmc":
                q = sample_event(model, {i: t}, settings).x.sum(axis=-1)[..., None]
            else:
                q = iid_draws(spec, int(t), settings.chains, draws, rng)
            group.append(Draws({}, t, q))
        b = np.array([B])
        peak, value, (lo, hi), held = estimate([group], b)
        first, second = (group[1], group[0]) if peak.t == 1.0 else (group[0], group[1])
        se_sel = ratio_at(first, second, peak.y, b, half=0)[1]  # the se on the half that chose the witness
        one, zero = group[1], group[0]
        e1, s1 = ratio_at(one, zero, (math.inf,), b, half=0)
        e2, s2 = ratio_at(one, zero, (math.inf,), b, half=1)
        ea, sa = ratio_at(one, zero, (math.inf,), b, half=None)
        fixed_i = dict(est1=e1, se1=s1, est2=e2, se2=s2, est=ea, se=sa, **alternatives(one, zero))
        fixed = fixed or fixed_i
        per.append(dict(target=i, score=peak.value, t=peak.t, t_prime=peak.t_prime, y=peak.y[0], plug_in=value, lo=lo,
                        hi=hi, held=held.get("held_out"), se=held.get("held_out_se"), se_sel=se_sel,
                        exact_at_witness=exact_ratio(spec, peak.t, peak.t_prime, peak.y[0]), fixed=fixed_i,
                        mean_q_t1=float(one.q.mean()), mean_q_t0=float(zero.q.mean())))
    worst = max(per, key=lambda r: r["score"])
    return dict(seed=seed, per=per, worst=worst, lo=worst["lo"], hi=max(r["hi"] for r in per),
                value=max(r["plug_in"] for r in per), fixed=fixed)


def alternatives(one, zero) -> dict:
    """Candidate lower bounds at the fixed witness (t = 1, t' = 0, y = +inf) on the second halves:
    the ratio-scale Wald bound log(r (1 - z se_r / r)), and Fieller's bound for a ratio of two
    independent means (the smallest r with (m1 - r m0) / sqrt(s1^2 + r^2 s0^2) <= z)."""
    import arviz as az

    from ddpbayes.engines.sampling.runs import quiet_arviz

    ms, ss = [], []
    for d in (one, zero):
        k = np.exp(d.half(1)[..., 0] / B)
        with quiet_arviz():
            ss.append(float(np.ravel(az.mcse(k))[0]))
        ms.append(float(k.mean()))
    (m1, m0), (s1, s0) = ms, ss
    rel = math.hypot(s1 / m1, s0 / m0)
    ratio_lb = math.log(max(1e-300, 1 - Z95 * rel)) + math.log(m1 / m0)
    disc = m1**2 * s0**2 + m0**2 * s1**2 - Z95**2 * s0**2 * s1**2
    den = m0**2 - Z95**2 * s0**2
    fieller = math.log(max(1e-300, (m1 * m0 - Z95 * math.sqrt(max(disc, 0.0))) / den)) if den > 0 else -math.inf
    return {"ratio_lb": ratio_lb, "fieller_lb": fieller}


def cp(k: int, n: int) -> tuple[float, float]:
    lo = stats.beta.ppf(0.025, k, n - k + 1) if k > 0 else 0.0
    hi = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def summary(spec, rows: list[dict]) -> dict:
    truth = spec["truth"]
    n = len(rows)

    def rate(k):
        lo, hi = cp(k, n)
        return f"{k}/{n} = {k / n:.2f} [CP {lo:.2f}, {hi:.2f}]"

    lb_miss = sum(r["lo"] > truth for r in rows)
    ub_miss = sum(r["hi"] < truth for r in rows)
    wit_miss = sum(r["worst"]["held"] - Z95 * r["worst"]["se"] > r["worst"]["exact_at_witness"] for r in rows)
    per_miss = sum(p["held"] - Z95 * p["se"] > p["exact_at_witness"] for r in rows for p in r["per"])
    per_n = sum(len(r["per"]) for r in rows)
    sel_miss = sum(r["worst"]["held"] - Z95 * r["worst"]["se_sel"] > r["worst"]["exact_at_witness"] for r in rows)
    f = {k: np.array([r["fixed"][k] for r in rows]) for k in rows[0]["fixed"]}
    fixed_miss = int(np.sum(f["est2"] - Z95 * f["se2"] > truth))
    err1, err2 = f["est1"] - truth, f["est2"] - truth
    corr_err_se = float(np.corrcoef(err2, f["se2"])[0, 1])
    return {
        "seeds": n,
        "LB > truth (final)": rate(lb_miss),
        "UB < truth (final)": rate(ub_miss),
        "held-out LB > exact at its own witness (worst adversary)": rate(wit_miss),
        "held-out est - 1.645 se(selection half) > exact at the witness (worst adversary)": rate(sel_miss),
        "held-out LB > exact at its own witness (every target)": f"{per_miss}/{per_n} = {per_miss / per_n:.2f}",
        "fixed witness: est2 - 1.645 se2 > truth": rate(fixed_miss),
        "fixed witness: est2 - 1.645 se1 > truth (se from the other half)": rate(int(np.sum(f["est2"] - Z95 * f["se1"] > truth))),
        "fixed witness: ratio-scale Wald LB > truth": rate(int(np.sum(f["ratio_lb"] > truth))),
        "fixed witness: Fieller LB > truth": rate(int(np.sum(f["fieller_lb"] > truth))),
        "fixed witness: mean est (all draws) - truth": float(np.mean(f["est"]) - truth),
        "fixed witness: mean est2 - truth (bias, half draws)": float(np.mean(err2)),
        "fixed witness: sd(est2) empirical": float(np.std(f["est2"], ddof=1)),
        "fixed witness: mean se2 reported": float(np.mean(f["se2"])),
        "fixed witness: sd(est2) / mean se2": float(np.std(f["est2"], ddof=1) / np.mean(f["se2"])),
        "fixed witness: sd(est) / mean se (all draws)": float(np.std(f["est"], ddof=1) / np.mean(f["se"])),
        "fixed witness: corr(err half1, err half2)": float(np.corrcoef(err1, err2)[0, 1]),
        "fixed witness: corr(err2, se2)": corr_err_se,
        "fixed witness: skewness of est2": float(stats.skew(f["est2"])),
        "witness chosen = true argmax (t=1, t'=0, y=+inf)": sum(
            r["worst"]["t"] == 1.0 and r["worst"]["y"] == math.inf for r in rows),
        "mean (worst score - truth) [selection half, winner's curse]": float(
            np.mean([r["worst"]["score"] - truth for r in rows])),
        "mean (final plug-in - truth)": float(np.mean([r["value"] - truth for r in rows])),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(MODELS), default="household")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--arm", choices=("mcmc", "iid"), default="mcmc")
    ap.add_argument("--targets", type=int, nargs="*", default=None, help="default: every tuple")
    ap.add_argument("--json", type=Path, default=None, help="write every seed's record here")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    import ddpbayes

    spec = MODELS[args.model]
    assert abs(exact_leak(spec) - spec["truth"]) < 1e-4, exact_leak(spec)
    model = ddpbayes.load_model(ROOT / spec["path"], spec["params"]) if args.arm == "mcmc" else None
    targets = args.targets if args.targets is not None else list(range(spec["n"]))
    rows, start = [], time.perf_counter()
    for s in range(args.first_seed, args.first_seed + args.seeds):
        rows.append(one_seed(spec, model, s, args.draws, args.arm, targets))
    secs = time.perf_counter() - start
    out = {"model": args.model, "arm": args.arm, "draws": args.draws, "targets": targets, "truth": spec["truth"],
           "seconds_per_seed": secs / args.seeds, **summary(spec, rows)}
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=float))


if __name__ == "__main__":
    main()
