"""A household whose members catch an infection through a shared latent state.

A latent Bernoulli `h` (is the household exposed?) makes every member's infection more
likely: X_k | h ~ Bernoulli(p_sick if h else p_base). Members are dependent only through `h`
(conditionally independent given it), a discrete latent that the engines marginalise. This is
the running example of DESIGN §4 and the contagious-disease story of seed 004 §1 with imperfect
contagion.

Expected: for a count with Laplace(b), idp is below n/b (perfect contagion) and above 1/b
(independence); tests/test_exact.py derives it by hand from the two-component mixture.
"""

import pymc as pm

from ddpbayes import DependenceModel


def build(n: int = 4, p_house: float = 0.2, p_sick: float = 0.8, p_base: float = 0.1) -> DependenceModel:
    with pm.Model() as m:
        h = pm.Bernoulli("h", p_house)
        for k in range(n):
            pm.Bernoulli(f"x{k}", pm.math.switch(h, p_sick, p_base))
    return DependenceModel(m, tuples=[f"x{k}" for k in range(n)])
