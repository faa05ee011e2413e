"""What every mechanism's information integrals share (004 Eqs. 26, 28; DESIGN §3.4).

A group is the law of (X_i, q) given what is fixed: log P(X_i = t, q = q_s) as `log_w` (T, S)
over distinct query levels q_s, every row t of positive mass, summing to one. With
g_t(y) = Σ_s P(t, q_s) p(y | q_s), f = Σ_t g_t and p_t = Σ_s P(t, q_s):

    I(X_i; Y) = Σ_t ∫ g_t log(g_t / (p_t f)) dy,     D(y) = Σ_t p_t log(p_t f(y) / g_t(y)).

Each mechanism integrates its own (`Mechanism.information`): Laplace and geometric in
`mechanisms.laplace.information`, randomized response in `mechanisms.randomized_response`.
"""

from __future__ import annotations

import numpy as np


class NotAvailable(Exception):
    """The measures cannot be computed exactly for this group; the message says why."""


def terms(log_g: np.ndarray, log_p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per output (columns of log_g (T, N)): Σ_t g_t log(g_t/(p_t f)) and D = Σ_t p_t log(p_t f/g_t)."""
    peak = log_g.max(axis=0)  # finite: every output has positive density under some t
    log_f = np.log(np.exp(log_g - peak).sum(axis=0)) + peak  # scipy's logsumexp costs ~50 us a call here
    log_ratio = log_g - log_p[:, None] - log_f[None, :]
    mi = np.sum(np.exp(log_g) * log_ratio, axis=0)
    kl = -np.sum(np.exp(log_p)[:, None] * log_ratio, axis=0)
    return mi, kl
