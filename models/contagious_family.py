"""Wu et al.'s contagious-disease family (their §1, Example 2): k perfectly dependent members.

One member is infected with prior probability `p`; contagion is perfect, so every member
shares that state (X_1 = ... = X_k). A count released with Laplace(1/eps) or two-sided
geometric noise then leaks k·eps to the weakest adversary (idp): the count is 0 or k, and
the likelihood ratio of Laplace densities at those two centres is e^{k/b}. For k = 2 this is
004 Example 2's 2·eps. An adversary who already knows one member learns nothing more
(pdp with that member known: 0).
"""

import pymc as pm

from ddpbayes import DependenceModel


def build(k: int = 2, p: float = 0.1) -> DependenceModel:
    with pm.Model() as m:
        first = pm.Bernoulli("x0", p)
        for j in range(1, k):
            pm.Bernoulli(f"x{j}", pm.math.switch(first, 1.0, 0.0))
    return DependenceModel(m, tuples=[f"x{j}" for j in range(k)])
