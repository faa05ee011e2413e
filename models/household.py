"""A household whose members catch an infection through a shared latent state.

A latent Bernoulli `h` (is the household exposed?) makes every member's infection more
likely: X_k | h ~ Bernoulli(p_sick if h else p_base). Members are dependent only through `h`
(conditionally independent given it), a discrete latent that the engines marginalise. This is
the running example of DESIGN §4 and the contagious-disease story of seed 004 §1 with imperfect
contagion.

Expected: for a count with Laplace(b), idp is below n/b (perfect contagion) and above 1/b
(independence); tests/test_exact.py derives it by hand from the two-component mixture.

Finding (DPM): seed 000's dependent perturbation mechanism does not meet eps on this model.
For the count at eps = 1 its fixed point sigma = DS_Q(sigma) / eps is sigma = 2.35853 (rho_ij =
0.4528 for every pair there, DS_Q = 1 + 3 rho), and the exact leakage at that scale is 1.03152
under idp, ddp (N(i) = all others, so ddp = idp) and pdp (the weakest adversary leaks most),
at y = 4 (everyone infected). The pairwise coefficients add up the effect of X_i on each other
member separately, but through h the members move together: given X_i = 1 the others' count
is shifted more than the sum of the pairwise shifts. The smallest scale that meets eps is
2.43016 (the group baseline L dQ / eps = 4 leaks 0.59654; classic DP's scale 1 leaks 2.44577).
n = 6: DPM 3.23723 leaks 1.0526. Reproduce: `ddpbayes calibrate models/household.py --query
count --notion idp --epsilon 1`; tests/test_ddp_calibration.py rederives it by brute force.
"""

import pymc as pm

from ddpbayes import DependenceModel


def build(n: int = 4, p_house: float = 0.2, p_sick: float = 0.8, p_base: float = 0.1) -> DependenceModel:
    with pm.Model() as m:
        h = pm.Bernoulli("h", p_house)
        for k in range(n):
            pm.Bernoulli(f"x{k}", pm.math.switch(h, p_sick, p_base))
    return DependenceModel(m, tuples=[f"x{k}" for k in range(n)])
