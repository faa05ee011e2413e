"""Seed 003's counterexample to "the weakest adversary leaks most": mixed-sign correlations.

Three jointly Gaussian tuples (DESIGN §3.2) with covariance

    Sigma = [[ 1,  1,   -1 ],
             [ 1,  1.5, -1 ],
             [-1, -1,   1.5]]

X_0 and X_1 are positively correlated, both negatively with X_2. Each tuple's domain is an
interval of width 1 (`Interval(lo, lo + 1)`), which bounds the target values an adversary
compares. Released: the sum with Laplace(b).

Expected, by DESIGN §2.2 (leak(i, K) = width / b * |w_i + sum_{j in U} w_j C_ji / C_ii|,
C = Cov(X_{i ∪ U} | X_K)), target X_0, b = 1:
- K = {}: beta_1 = 1, beta_2 = -1, so |1 + 1 - 1| = 1.0;
- K = {2}: C = Sigma_{01,01} - Sigma_{01,2} Sigma_{2,01} / 1.5 = [[1/3, 1/3], [1/3, 5/6]],
  beta_1 = 1, so |1 + 1| = 2.0: knowing X_2 makes the adversary leak twice as much;
- K = {1}: C_{02|1} = -1 + 1/1.5 = -1/3, C_00 = 1 - 1/1.5 = 1/3, beta_2 = -1: |1 - 1| = 0;
- K = {1, 2}: nothing unknown but X_0: 1.0 (classic DP).
"""

import numpy as np
import pymc as pm

from ddpbayes import DependenceModel, Interval

COVARIANCE = [[1.0, 1.0, -1.0], [1.0, 1.5, -1.0], [-1.0, -1.0, 1.5]]


def build(lo: float = -0.5) -> DependenceModel:
    """The three tuples as one MvNormal "x" with mean 0; every domain is [lo, lo + 1]."""
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(3), cov=np.array(COVARIANCE))
    return DependenceModel(m, tuples="x", domains=Interval(lo, lo + 1.0))
