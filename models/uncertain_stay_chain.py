"""A K-state Markov chain whose stay probability is unknown: one person's daily activity level
over n days (0 = home, 1 = local, 2 = travelling, ...), with p_stay ~ Beta(a, b).

As models/categorical_chain.py given p_stay: day 0 is uniform over the K levels; each next day
stays at the same level with probability p_stay and otherwise moves to one of the other K - 1
levels uniformly. The stay probability itself is uncertain, so every day depends on every
other through it as well as through the chain. Given p_stay the K^n day configurations are
summed out exactly (DESIGN §2.3); p_stay is sampled (sampling engine) or integrated by
quadrature (structured engine). The issue's case (#42.3) is K = 3, n = 5: 3^4 = 81
configurations of the other days.
"""

import numpy as np
import pymc as pm

from ddpbayes import DependenceModel


def build(n: int = 5, k: int = 3, a: float = 2.0, b: float = 2.0) -> DependenceModel:
    if k < 2:
        raise ValueError(f"k must be at least 2, got {k}")
    with pm.Model() as m:
        p = pm.Beta("p_stay", a, b)
        move = (1.0 - p) / (k - 1)
        transition = np.eye(k) * (p - move) + move
        prev = pm.Categorical("x0", p=np.full(k, 1.0 / k))
        for day in range(1, n):
            prev = pm.Categorical(f"x{day}", p=transition[prev])
    return DependenceModel(m, tuples=[f"x{day}" for day in range(n)])
