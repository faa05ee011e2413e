"""A binary Markov chain: one person's daily "at home" status over n days (temporal dependence).

X_k = 1 if the person is at home on day k. Day 0 is at home with probability `p_init` (by
default the chain's stationary probability p01 / (p01 + p10)); each next day keeps or flips
the status: P(X_k = 1 | X_{k-1} = 0) = p01 (goes home), P(X_k = 0 | X_{k-1} = 1) = p10
(goes out). `p_stay` sets both at once (p01 = p10 = 1 - p_stay). Releasing a count of the
days at home is a time-series release of the kind seed 003 cites among continuous data
release and temporal correlation in time-series data (003 §I, §II-A, refs. [19, 22, 37]);
seed 002's location traces are the same kind of data. Consecutive days are dependent; days
further apart only through the days between (the Markov property), so X_i's dependence set
is every other day when 0 < p01, p10 < 1 and p01 + p10 != 1.

Expected, for the count with Laplace(b) (--epsilon eps gives b = 1/eps):
- p01 = p10 = 0 (p_stay = 1): every day equals day 0, the count is 0 or n, and the weakest
  adversary sees the ratio of Laplace densities centred n apart: idp = n/b (like
  contagious_family.py). Knowing any other day leaves nothing to learn: pdp with K != {} is 0.
- p01 + p10 = 1 (both rows of the transition matrix equal) with the stationary start: the
  days are independent Bernoulli(p01), and every notion gives 1/b (003 Thm. 1, independent.py).
- p01 = p10 = 1 (p_stay = 0): the status alternates deterministically; the count is n/2
  whatever X_0 is for even n (idp = 0, the perfectly negatively dependent pair of 004 for
  n = 2) and moves by 1 with X_0 for odd n (idp = 1/b).
- 0 < p01, p10 < 1: every configuration has positive probability, so the adversary who knows
  all other days leaks dp = 1/b; so does any adversary who knows both neighbours of the
  target (its Markov blanket): the unknown days are then independent of X_i, their sum S has a
  law free of t, and sup_y of E[e^{-|y-c-1-S|/b}] / E[e^{-|y-c-S|/b}] is e^{1/b} (y -> +inf).
- n = 2 is correlated_pair.py's table [[pi0 (1-p01), pi0 p01], [pi1 p10, pi1 (1-p10)]]
  (pi1 = p_init, pi0 = 1 - pi1). With p01 = p10 = 1 - c and pi1 = 1/2 (symmetric),
  idp = 1/b + log((1 - c + c e^{1/b}) / (c + (1 - c) e^{1/b})), at y -> +-inf (c = p_stay);
  for n = 2, p_stay = 0.8, b = 1 that is 1.56944.
- Defaults (n = 5, p_stay = 0.8, stationary start, b = 1), computed by brute force over the
  32 configurations with plain numpy (mixture weights of the count given X_i = t and x_K,
  the log-ratio on the breakpoints y = 0..5 and at both tails): idp = 1.96426 for the first
  and last day (X_0, X_4), 2.49980 for X_1, X_3 and 2.66253 for the middle day X_2, each at
  y = 0, 5 or the tails y -> +-inf (equal here, as every count lies on one side). The pdp
  lattice is not monotone in |K|: for X_0, K = {4} leaks 2.04121 > K = {} (a stronger
  adversary leaks more, as in DESIGN §3.2), K = {3} 1.88673,
  K = {2} 1.52383, and K = {1} (a neighbour) 1; for X_2, K = {1} or {3} gives 1.83127,
  K = {0, 4} 2.04765, K = {1, 3} 1. The pdp maximum over the lattice is idp(X_2) = 2.66253.

Finding (DPM): seed 000's dependent perturbation mechanism meets eps here with the defaults
(count, eps = 1: its scale 2.90634 leaks 0.99269 under idp, pdp and ddp; the smallest scale
that meets eps is 2.88457) but not with asymmetric transitions: p01 = 0.1, p10 = 0.4 gives the
DPM scale 2.59195 (rho_0j = 1, 0.5256, 0.2703, 0.1372, 0.0692 there) and leakage 1.01689 under
idp = pdp = ddp (target X_2, y = 5: every day at home), against the smallest adequate scale
2.63401; 1.0103 at eps = 0.5 and 1.0178 at eps = 2. Reproduce: `ddpbayes calibrate
models/markov_chain.py -p p01=0.1 -p p10=0.4 --query count --notion idp --epsilon 1 --method dpm`.
"""

import pymc as pm

from ddpbayes import DependenceModel


def build(
    n: int = 5,
    p01: float = 0.2,
    p10: float = 0.2,
    p_init: float | None = None,
    p_stay: float | None = None,
) -> DependenceModel:
    if p_stay is not None:
        p01 = p10 = 1.0 - p_stay
    for name, value in (("p01", p01), ("p10", p10)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be a probability, got {value}")
    if p_init is None:
        p_init = p01 / (p01 + p10) if p01 + p10 > 0 else 0.5
    with pm.Model() as m:
        prev = pm.Bernoulli("x0", p_init)
        for k in range(1, n):
            prev = pm.Bernoulli(f"x{k}", pm.math.switch(prev, 1.0 - p10, p01))
    return DependenceModel(m, tuples=[f"x{k}" for k in range(n)])
