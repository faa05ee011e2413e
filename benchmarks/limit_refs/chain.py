"""Hand-written numpy references for issue #29: leakage of a sum over a Markov chain, with no ddpbayes code.

The chain X_0..X_{n-1} on states 0..k-1 (initial law `init`, transition matrices `P[d]` from day d to d+1)
releases q = Σ_d x_d (weights 1, values = states) with Laplace(b) noise. For a target i (no known tuples),
forward messages F(x, s) = P(X_i = x, Σ_{d<i} X_d = s) and backward messages B(x, s) = P(Σ_{d>i} X_d = s | X_i = x)
in linear space, each scaled by its maximum (log scale kept apart), give P(X_i = t, q = t + s) by one convolution
per t; log L(y | t) = log Σ_q P(q | t) e^{-|y - q| / b} at the integer breakpoints y (two first-order recursions,
scipy.signal.lfilter) and the tails y -> ±inf, and the leakage is max_y max_{t,t'} log L(y|t) - log L(y|t').

Linear space loses the tails below 1e-308 of a message's maximum: right for stay probabilities well above 1/2
(the benchmark's 0.8) up to ~1,300 days, not at n = 1000 with stay <= 0.5. `log_chain_leakage` is the same
computation in log space (messages by logaddexp, each target's convolution band by band in linear space,
the Laplace sums by cumulative logaddexps), which computes every target at any n (issue #44: n = 5000).
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


def log_forward_backward(init: np.ndarray, P: list[np.ndarray]) -> tuple[list, list]:
    """`forward_backward` in log space: F[i] = log P(X_i = x, Σ_{d<i} X_d = s) over (x, s), B[i] = log P(Σ_{d>i}
    X_d = s | X_i = x); exact at any span (no entry underflows), k^2 logaddexps over the sums a day."""
    n, k = len(P) + 1, len(init)
    with np.errstate(divide="ignore"):
        logs = [np.log(p) for p in P]
        msg = np.log(init.astype(float))[:, None]
    F = [msg]
    for d in range(1, n):
        F.append(msg := _log_step(msg, logs[d - 1]))  # X_{d-1}'s value enters the sum
    msg = np.zeros((k, 1))
    B = [msg]
    for d in range(n - 2, -1, -1):
        B.append(msg := _log_step(msg, logs[d].T))  # X_{d+1}'s value enters the sum
    return F, B[::-1]


def _log_step(msg: np.ndarray, log_p: np.ndarray) -> np.ndarray:
    """out[x', s] = log Σ_x exp(log_p[x, x'] + msg[x, s - x])."""
    k, S = msg.shape
    out = np.full((k, S + k - 1), -np.inf)
    for x in range(k):
        for x2 in range(k):
            out[x2, x:x + S] = np.logaddexp(out[x2, x:x + S], msg[x] + log_p[x, x2])
    return out


def _bands(v: np.ndarray, width: float = 300.0) -> list[tuple[int, float, np.ndarray]]:
    """v (log values) cut into contiguous runs whose finite entries lie in one band of `width` nats below v's
    maximum: (start, the run's top, exp(run - top))."""
    top = v.max()
    with np.errstate(invalid="ignore"):
        band = np.where(np.isfinite(v), np.floor((top - v) / width), -1)
    edges = np.flatnonzero(np.diff(band)) + 1
    out = []
    for start, stop in zip([0, *edges.tolist()], [*edges.tolist(), len(v)]):
        if band[start] >= 0:
            run = v[start:stop]
            out.append((start, float(run.max()), np.exp(run - run.max())))
    return out


def log_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log Σ_j exp(a[j] + b[s - j]) exactly at any span: each band-run of a convolved with each of b's in linear
    space (every product within 600 nats of its pair's scale), the results added with logaddexp."""
    out = np.full(len(a) + len(b) - 1, -np.inf)
    runs_b = _bands(b)
    for start_a, top_a, va in _bands(a):
        for start_b, top_b, vb in runs_b:
            c = np.convolve(va, vb)
            at = slice(start_a + start_b, start_a + start_b + len(c))
            with np.errstate(divide="ignore"):
                out[at] = np.logaddexp(out[at], np.log(c) + (top_a + top_b))
    return out


def log_target_leakage(f: np.ndarray, g: np.ndarray, b: float) -> float:
    """`target_leakage` from log messages, in log space throughout: log L(y | t) at the integer breakpoints by
    cumulative logaddexps (Σ_{q<=y} w_q e^{(q-y)/b} = e^{-y/b} Σ_{q<=y} w_q e^{q/b}), and the tails."""
    k = f.shape[0]
    rows = [log_convolve(f[t], g[t]) for t in range(k)]
    S = max(len(r) for r in rows) + k - 1
    lw = np.full((k, S), -np.inf)  # log P(X_i = t, q = t + s)
    for t in range(k):
        lw[t, t:t + len(rows[t])] = rows[t]
    alive = np.isfinite(lw).any(axis=1)
    lw = lw[alive]
    lw = lw - np.logaddexp.reduce(lw, axis=1, keepdims=True)  # log P(q | t)
    q = np.arange(S)
    below = np.logaddexp.accumulate(lw + q / b, axis=1) - q / b  # log Σ_{q' <= y} w e^{-(y - q')/b}
    upper = np.logaddexp.accumulate((lw - q / b)[:, ::-1], axis=1)[:, ::-1]  # log Σ_{q' >= y} w e^{q'/b}
    above = np.concatenate([upper[:, 1:], np.full((len(lw), 1), -np.inf)], axis=1) + q / b  # q' > y
    log_l = np.logaddexp(below, above)
    top = np.logaddexp.reduce(lw + q / b, axis=1)  # y -> +inf, up to the common e^{-y/b}
    bottom = np.logaddexp.reduce(lw - q / b, axis=1)  # y -> -inf
    gaps = [np.max(log_l.max(axis=0) - log_l.min(axis=0)), top.max() - top.min(), bottom.max() - bottom.min()]
    return float(max(gaps))


def log_chain_leakage(init: np.ndarray, P: list[np.ndarray], b: float,
                      targets: list[int] | None = None) -> np.ndarray:
    """`chain_leakage` in log space: every target computed at any n (the linear form underflows past ~1,300
    days of the benchmark's chain)."""
    F, B = log_forward_backward(init, P)
    days = range(len(F)) if targets is None else targets
    return np.array([log_target_leakage(F[i], B[i], b) for i in days])


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
