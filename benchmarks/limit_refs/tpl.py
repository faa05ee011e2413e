"""Reference for the continual release (issue #29): Cao, Yoshikawa, Xiao and Xiong, "Quantifying
Differential Privacy under Temporal Correlations" (ICDE 2017), temporal privacy leakage of every
day of a binary Markov chain whose days are each released with an eps-DP mechanism.

Independent of ddpbayes (plain Python, written from the paper): with P^B the backward transition
matrix (rows x_t, entries P(x_{t-1} | x_t)) and P^F the forward one (rows x_t, entries
P(x_{t+1} | x_t)),

    BPL_1 = eps,  BPL_t = L^B(BPL_{t-1}) + eps;   FPL_T = eps,  FPL_t = L^F(FPL_{t+1}) + eps;
    TPL_t = BPL_t + FPL_t - eps,

and for two states L(alpha) is the max over ordered pairs (q, d) of distinct rows and a column j
of log((q_j e^alpha + 1 - q_j) / (d_j e^alpha + 1 - d_j)) (their Alg. 1: the linear-fractional
program's optimum puts e^alpha on a subset of the states; with two states, on one state j).
The chain starts from its stationary law, so P^B is the same every day: P^B[a][b] = pi_b P[b][a] / pi_a
(Bayes). Both recursions run, as in the paper (for two states P^B = P^F: the chain is reversible).
"""

from __future__ import annotations

import math

import numpy as np


def _log_affine(q: float, alpha: float) -> float:
    """log(q e^alpha + 1 - q) for alpha >= 0, without overflow: alpha + log(q + (1 - q) e^-alpha)."""
    return alpha + math.log(q + (1.0 - q) * math.exp(-alpha))


def loss(alpha: float, rows: list[list[float]]) -> float:
    """Cao et al.'s L^B (or L^F) of a two-state transition matrix `rows` at leakage alpha."""
    best = 0.0
    for j in (0, 1):
        for q, d in ((rows[0][j], rows[1][j]), (rows[1][j], rows[0][j])):
            best = max(best, _log_affine(q, alpha) - _log_affine(d, alpha))
    return best


def tpl_reference(p01: float, p10: float, eps: float, T: int) -> np.ndarray:
    """TPL_t for t = 1..T (an array of T values) of the stationary chain with P(1 | 0) = p01 and
    P(0 | 1) = p10 (p01 + p10 > 0), every day released with an eps-DP mechanism."""
    forward = [[1.0 - p01, p01], [p10, 1.0 - p10]]
    pi = [p10 / (p01 + p10), p01 / (p01 + p10)]
    backward = [[pi[b] * forward[b][a] / pi[a] if pi[a] > 0 else 0.0 for b in (0, 1)] for a in (0, 1)]
    bpl = [eps]
    for _ in range(T - 1):
        bpl.append(loss(bpl[-1], backward) + eps)
    fpl = [eps]
    for _ in range(T - 1):
        fpl.append(loss(fpl[-1], forward) + eps)
    fpl.reverse()
    return np.array([b + f - eps for b, f in zip(bpl, fpl)])
