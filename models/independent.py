"""n independent tuples: the baseline where dependence adds nothing (003 Thm. 1, 004 Prop. 2).

Each tuple X_k ~ Bernoulli(p), or X_k ~ DiscreteUniform(low, high) when `high` is given,
independently of the others and with no latent variable. Seed 003 Thm. 1: prior knowledge
has no impact on leakage when the tuples are independent, so every adversary A(i, K) of
the pdp lattice leaks the same; seed 004 Prop. 2: an eps-DP mechanism is eps-IDP on
independent sources.

Expected: for a sum (or count) released with Laplace(b), dp = idp = pdp (every K) = ddp
= w/b, with w the domain width (1 for Bernoulli, high - low for DiscreteUniform). By hand:
given x_K, the unknown tuples' sum S has a law g that does not depend on t, so
L(y | t, x_K) = E[e^{-|y - c - t - S|/b}] = h(y - t) for one fixed mixture h of Laplace
densities (c = the known tuples' sum). The ratio h(y - hi)/h(y - lo) is at most e^{w/b}
(each Laplace component's ratio is) and tends to e^{w/b} as y -> +inf, where every
component behaves like e^{-(y - q)/b}. So with `--epsilon eps` (scale = w/eps) every notion
gives exactly eps. 004 Prop. 2 is only the inequality idp <= dp (its converse fails in
general, 004 §4); for Laplace on a sum the tail makes it an equality.
"""

import pymc as pm

from ddpbayes import DependenceModel


def build(n: int = 4, p: float = 0.5, high: int | None = None, low: int = 0) -> DependenceModel:
    if high is not None and high < low:
        raise ValueError(f"high ({high}) must be at least low ({low})")
    with pm.Model() as m:
        for k in range(n):
            if high is None:
                pm.Bernoulli(f"x{k}", p)
            else:
                pm.DiscreteUniform(f"x{k}", low, high)
    return DependenceModel(m, tuples=[f"x{k}" for k in range(n)])
