"""A K-state Markov chain: one person's daily activity level over n days (0 = home, 1 = local,
2 = travelling, ... up to K - 1).

Day 0 follows the chain's stationary law; each next day stays at the same level with
probability `p_stay` and otherwise moves to one of the other K - 1 levels uniformly, so the
transition matrix is P = p_stay I + (1 - p_stay)/(K - 1) (1 1ᵀ - I), whose stationary law is
uniform. Every tuple is a `Categorical` whose support {0, ..., K-1} ddpbayes infers from the
graph. A sum of the levels released with Laplace(b) leaks through the chain as in
markov_chain.py (the K = 2 case with p01 = p10 = 1 - p_stay).

Expected: p_stay = 1/K makes every row of P uniform, so the days are independent and every
notion gives (K - 1)/b for the sum (003 Thm. 1); for n = 2 the pair's joint table is
P(x0, x1) = P[x0, x1] / K, and tests/test_reliability.py enumerates it by hand.
"""

import numpy as np
import pymc as pm

from ddpbayes import DependenceModel


def build(n: int = 5, k: int = 3, p_stay: float = 0.7) -> DependenceModel:
    if not 0.0 <= p_stay <= 1.0:
        raise ValueError(f"p_stay must be a probability, got {p_stay}")
    if k < 2:
        raise ValueError(f"k must be at least 2, got {k}")
    move = (1.0 - p_stay) / (k - 1)
    transition = np.full((k, k), move) + np.eye(k) * (p_stay - move)
    with pm.Model() as m:
        prev = pm.Categorical("x0", p=np.full(k, 1.0 / k))
        for day in range(1, n):
            prev = pm.Categorical(f"x{day}", p=pm.math.constant(transition)[prev])
    return DependenceModel(m, tuples=[f"x{day}" for day in range(n)])
