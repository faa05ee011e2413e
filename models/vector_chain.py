"""categorical_chain.py written as ONE vector variable: pymc-extras' `DiscreteMarkovChain`.

A K-state Markov chain over n days (0 = home, 1 = local, 2 = travelling, ... up to K - 1), the
way PyMC users write long chains: one variable x of shape (n,) instead of n Categoricals, so
building a 10,000-day model takes a tenth of a second. Day 0 follows the chain's stationary
law (uniform); each next day stays at the same level with probability `p_stay` and otherwise
moves to one of the other K - 1 levels uniformly: P = p_stay I + (1 - p_stay)/(K - 1) (1 1ᵀ - I).
The tuples are x's elements x[0], ..., x[n-1] in {0, ..., K-1}; ddpbayes reads the chain as an
initial term over x[0] and one transition term per day over (x[k], x[k-1]) (DESIGN §2.1b), so
the structured engine audits it as it does categorical_chain.py. Needs pymc-extras (the
`chains` extra: pip install "ddpbayes[chains]").

Expected: the same law as categorical_chain.py with the same parameters, so every leakage is
equal. p_stay = 1/K makes every row of P uniform, so the days are independent and every notion
gives (K - 1)/b for the sum (003 Thm. 1); for n = 2 the pair's joint table is
P(x0, x1) = P[x0, x1] / K. Defaults (n = 5, K = 3, p_stay = 0.7), sum with Laplace(1), by brute
force over the 243 configurations in plain numpy (tests/bruteforce.py's dense grid): idp =
3.30958 for days 0 and 4, 4.24114 for days 1 and 3, 4.44814 for day 2 (tests/test_vector_chains.py).
"""

import numpy as np
import pymc as pm
from pymc_extras.distributions import DiscreteMarkovChain

from ddpbayes import DependenceModel


def build(n: int = 5, k: int = 3, p_stay: float = 0.7) -> DependenceModel:
    if not 0.0 <= p_stay <= 1.0:
        raise ValueError(f"p_stay must be a probability, got {p_stay}")
    if k < 2 or n < 2:
        raise ValueError(f"k and n must be at least 2, got k = {k}, n = {n}")
    move = (1.0 - p_stay) / (k - 1)
    transition = np.full((k, k), move) + np.eye(k) * (p_stay - move)
    with pm.Model() as m:
        DiscreteMarkovChain("x", P=transition, init_dist=pm.Categorical.dist(p=np.full(k, 1.0 / k)), shape=(n,))
    return DependenceModel(m, tuples="x")
