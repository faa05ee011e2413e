"""Hand-written numpy references for issue #29: leakage of a sum over a Markov chain, with no ddpbayes code.

The chain X_0..X_{n-1} on states 0..k-1 (initial law `init`, transition matrices `P[d]` from day d to d+1)
releases q = Σ_d x_d (weights 1, values = states) with Laplace(b) noise. For a target i (no known tuples),
forward messages F(x, s) = P(X_i = x, Σ_{d<i} X_d = s) and backward messages B(x, s) = P(Σ_{d>i} X_d = s | X_i = x)
in linear space, each scaled by its maximum (log scale kept apart), give P(X_i = t, q = t + s) by one convolution
per t; log L(y | t) = log Σ_q P(q | t) e^{-|y - q| / b} at the integer breakpoints y (two first-order recursions,
scipy.signal.lfilter) and the tails y -> ±inf, and the leakage is max_y max_{t,t'} log L(y|t) - log L(y|t').

Linear space loses the tails below 1e-308 of a message's maximum: right for stay probabilities well above 1/2
(the benchmark's 0.8), not at n = 1000 with stay <= 0.5 (ddpbayes works in log space there).
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter


def _shift(msg: np.ndarray) -> np.ndarray:
    """msg (x, s) -> (x, s + x): each state's value added to the partial sum."""
    k, S = msg.shape
    out = np.zeros((k, S + k - 1))
    for x in range(k):
        out[x, x:x + S] = msg[x]
    return out


def forward_backward(init: np.ndarray, P: list[np.ndarray]) -> tuple[list, list]:
    """Every day's scaled forward and backward messages: F[i] = (table, log scale) over (x_i, Σ_{d<i} x_d),
    B[i] over (x_i, Σ_{d>i} x_d)."""
    n = len(P) + 1
    k = len(init)
    F = [None] * n
    msg, scale = init[:, None].astype(float), 0.0
    F[0] = (msg, scale)
    for d in range(1, n):
        nxt = P[d - 1].T @ _shift(msg)  # X_{d-1}'s value enters the sum
        top = nxt.max()
        msg, scale = nxt / top, scale + np.log(top)
        F[d] = (msg, scale)
    B = [None] * n
    msg, scale = np.ones((k, 1)), 0.0
    B[n - 1] = (msg, scale)
    for d in range(n - 2, -1, -1):
        nxt = P[d] @ _shift(msg)  # X_{d+1}'s value enters the sum
        top = nxt.max()
        msg, scale = nxt / top, scale + np.log(top)
        B[d] = (msg, scale)
    return F, B


def target_leakage(F: tuple, B: tuple, b: float) -> float:
    """idp of one target from its forward and backward messages (no known tuples), Laplace(b)."""
    (f, _), (g, _) = F, B
    k = f.shape[0]
    rows = [np.convolve(f[t], g[t]) for t in range(k)]
    S = max(len(r) for r in rows) + k - 1
    w = np.zeros((k, S))  # P(X_i = t, q = t + s), up to one common scale
    for t in range(k):
        w[t, t:t + len(rows[t])] = rows[t]
    alive = w.sum(axis=1) > 0
    w = w[alive] / w[alive].sum(axis=1, keepdims=True)  # P(q | t)
    r = np.exp(-1.0 / b)
    below = lfilter([1.0], [1.0, -r], w, axis=1)  # Σ_{q <= y} w_q r^{y - q}
    above = lfilter([1.0], [1.0, -r], w[:, ::-1], axis=1)[:, ::-1] - w  # Σ_{q > y} w_q r^{q - y}
    log_l = np.log(below + above)
    q = np.arange(S)
    top = np.log(w @ np.exp((q - q.max()) / b))  # y -> +inf: Σ w_q e^{q/b}, scaled
    bottom = np.log(w @ np.exp(-q / b))  # y -> -inf
    gaps = [np.max(log_l.max(axis=0) - log_l.min(axis=0)), top.max() - top.min(), bottom.max() - bottom.min()]
    return float(max(gaps))


def chain_leakage(init: np.ndarray, P: list[np.ndarray], b: float, targets: list[int] | None = None) -> np.ndarray:
    """idp of every target (all days when None) of the sum over the chain, Laplace(b)."""
    F, B = forward_backward(init, P)
    days = range(len(F)) if targets is None else targets
    return np.array([target_leakage(F[i], B[i], b) for i in days])


def one_target(init: np.ndarray, P: list[np.ndarray], b: float, i: int) -> float:
    """idp of target i alone: the forward pass up to i and the backward pass down to i only."""
    n, k = len(P) + 1, len(init)
    msg = init[:, None].astype(float)
    for d in range(1, i + 1):
        msg = P[d - 1].T @ _shift(msg)
        msg /= msg.max()
    f = msg
    msg = np.ones((k, 1))
    for d in range(n - 2, i - 1, -1):
        msg = P[d] @ _shift(msg)
        msg /= msg.max()
    return target_leakage((f, 0.0), (msg, 0.0), b)
