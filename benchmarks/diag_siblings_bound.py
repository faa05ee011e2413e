"""Diagnosis (issue #42.5; not a test): the sampling engine's held-out lower bound at the witness of
`beta_bern11` (models/beta_bernoulli.py, n siblings on a Beta(2, 5) rate, count, Laplace b = 1, idp of
tuple 0), with exact independent draws of the rate in place of MCMC.

The sup is at t = 1, t' = 0, y -> +inf, where a draw's Rao–Blackwellised kernel is
e^{t} (1 - p + p e)^{n-1} (the n - 1 others summed given p) and p | X_0 = t ~ Beta(2 + t, 6 - t).
Prints (1) each event's kernel relative variance Var[k] / E[k]^2 by quadrature — the per-draw
variance that sets the interval's width, se ~ sqrt(sum of relvar / draws) — and (2) over `reps`
replications, how often `estimate.bound`'s construction misses: the first half of the draws
estimates log E_1[k] - log E_0[k], the standard error is the larger of the two halves' (delta
method), and the bound is estimate - 1.645 se.

    python benchmarks/diag_siblings_bound.py --per-half 2000 --reps 4000   # 1000 draws x 2 chains per half
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import integrate, stats

Z95 = 1.6448536269514722


def log_kernel(p: np.ndarray, t: int, n: int) -> np.ndarray:
    return t + (n - 1) * np.log1p(p * (np.e - 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=11)
    ap.add_argument("--per-half", type=int, default=2000, help="draws per event in each half")
    ap.add_argument("--reps", type=int, default=4000)
    args = ap.parse_args()
    post = {1: stats.beta(3.0, 5.0), 0: stats.beta(2.0, 6.0)}
    moments = {}
    for t, law in post.items():
        m1, m2 = (integrate.quad(lambda p: np.exp(j * log_kernel(p, t, args.n)) * law.pdf(p), 0, 1, epsabs=1e-14)[0]
                  for j in (1, 2))
        moments[t] = m1
        print(f"t = {t}: relative variance of the kernel {m2 / m1 ** 2 - 1:.3f}")
    truth = np.log(moments[1] / moments[0])
    rng = np.random.default_rng(1)
    z, misses = [], 0
    for _ in range(args.reps):
        est, var = 0.0, np.zeros(2)
        for sign, t in ((1, 1), (-1, 0)):
            k = np.exp(log_kernel(post[t].rvs(size=(2, args.per_half), random_state=rng), t, args.n))
            mean = k.mean(axis=1)
            est += sign * np.log(mean[0])
            var += (k.std(axis=1, ddof=1) / np.sqrt(args.per_half) / mean) ** 2
        se = float(np.sqrt(var.max()))
        z.append((est - truth) / se)
        misses += est - Z95 * se > truth
    lo, hi = (stats.beta.ppf(0.025, misses, args.reps - misses + 1) if misses else 0.0,
              stats.beta.ppf(0.975, misses + 1, args.reps - misses))
    print(f"truth {truth:.5f}; {args.per_half} draws per event per half: lower bound above the truth "
          f"{misses}/{args.reps} = {misses / args.reps:.4f} [CP 95% {lo:.4f}, {hi:.4f}]; (estimate - truth) / se: "
          f"mean {np.mean(z):+.3f}, sd {np.std(z):.3f}")


if __name__ == "__main__":
    main()
