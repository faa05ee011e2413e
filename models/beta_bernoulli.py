"""Exchangeable binary records with a shared unknown rate (a Beta–Bernoulli model).

r ~ Beta(a, b) is the population's rate (e.g. the share of a clinic's patients who test
positive); given r the records are independent: X_k | r ~ Bernoulli(r). Marginally the records
are exchangeable and positively dependent — learning one record moves the adversary's belief
about r and so about everyone else (de Finetti). The latent rate is continuous, so the exact
engine cannot enumerate it; the sampling engine can.

Closed form (used by tests/test_sampling.py): given X_i = t the other records' count S is
beta-binomial, S ~ BetaBinomial(n - 1, a + t, b + 1 - t), so for a count with Laplace(s)
noise, L(y | t) = Σ_k P(S = k | t) exp(-|y - t - k| / s), and idp is the sup of its log-ratio
over y, attained at a breakpoint or as y -> ±inf. With n = 4, a = b = 1 and s = 1 it is
1.8403 (tests derive it), above classic DP's 1.0.
"""

import pymc as pm

from ddpbayes import DependenceModel


def build(n: int = 4, a: float = 1.0, b: float = 1.0) -> DependenceModel:
    with pm.Model() as m:
        rate = pm.Beta("rate", a, b)
        pm.Bernoulli("x", rate, shape=n)
    return DependenceModel(m, tuples="x")
