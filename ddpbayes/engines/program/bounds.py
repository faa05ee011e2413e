"""Exact (Clopper–Pearson) binomial confidence bounds, one-sided, from the Beta quantiles.

`lower(k, n, alpha)` is the largest p with P(Bin(n, p) >= k) <= alpha, i.e. a bound that holds
with probability at least 1 - alpha: Beta(alpha; k, n - k + 1), and 0 when k = 0. `upper` mirrors
it: Beta(1 - alpha; k + 1, n - k), and 1 when k = n. Both take arrays (broadcast) and also
non-integer k (a projected count: `event` scores candidate events by the bound they would get on
a sample of another size)."""

from __future__ import annotations

import numpy as np
from scipy.stats import beta


def _check(n, alpha) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if np.any(np.asarray(n) <= 0):
        raise ValueError("n must be positive")


def lower(k, n, alpha: float) -> np.ndarray | float:
    """One-sided Clopper–Pearson lower bound on p from k successes in n trials, level 1 - alpha."""
    _check(n, alpha)
    k, n = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    kk = np.clip(k, 1e-300, n)
    out = np.where(k <= 0, 0.0, beta.ppf(alpha, kk, np.maximum(n - kk + 1, 1e-300)))
    return out if out.ndim else float(out)


def upper(k, n, alpha: float) -> np.ndarray | float:
    """One-sided Clopper–Pearson upper bound on p from k successes in n trials, level 1 - alpha."""
    _check(n, alpha)
    k, n = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    kk = np.clip(k, 0, n)
    out = np.where(k >= n, 1.0, beta.ppf(1 - alpha, kk + 1, np.maximum(n - kk, 1e-300)))
    return out if out.ndim else float(out)


def interval(k, n, confidence: float) -> tuple:
    """The two-sided Clopper–Pearson interval at `confidence` (each side at (1 - confidence) / 2)."""
    alpha = (1 - confidence) / 2
    return lower(k, n, alpha), upper(k, n, alpha)


def rate_ratio_lower(k_num, k_den, alpha: float) -> np.ndarray | float:
    """Lower bound, level 1 - alpha, on the ratio lambda_num / lambda_den of two independent Poisson
    counts k_num, k_den: given their sum S, k_num ~ Bin(S, pi) with pi = lambda_num / (lambda_num +
    lambda_den), so pi's one-sided Clopper–Pearson bound pi_lo gives pi_lo / (1 - pi_lo) (the
    conditional test comparing two Poisson rates: Lehmann & Romano, "Testing Statistical
    Hypotheses", ch. 4); 0 when k_num = 0. Holds conditionally on every S, hence unconditionally.
    With both sides' numbers of runs Poisson of the same mean n, an event's hits are Poisson(n p)
    per side, so this bounds the probability ratio p_num / p_den with one interval at the whole
    level, not two at half of it (about 1.8 times narrower on the log scale at equal counts)."""
    k_num, k_den = np.broadcast_arrays(np.asarray(k_num, dtype=float), np.asarray(k_den, dtype=float))
    pi_lo = np.asarray(lower(k_num, np.maximum(k_num + k_den, 1.0), alpha))  # 0 where k_num = 0
    with np.errstate(divide="ignore"):
        out = np.where(pi_lo < 1.0, pi_lo / np.maximum(1.0 - pi_lo, 1e-300), np.inf)
    return out if out.ndim else float(out)


def paired_ratio_lower(k_num_only, k_den_only, k_both, alpha: float, share: float = 0.5) -> np.ndarray | float:
    """Lower bound, level 1 - alpha, on P(A) / P(B) from independent pairs of indicators (A_i, B_i)
    (one program run on each input from one generator: common random numbers), counted as
    k_num_only = #(A, not B), k_den_only = #(B, not A), k_both = #(A and B). Given the m pairs with
    a hit, k_both ~ Bin(m, theta), theta = q11 / (q11 + q10 + q01); given also k_both, k_num_only ~
    Bin(k_num_only + k_den_only, pi), pi = q10 / (q10 + q01). The ratio is

        R(theta, pi) = (theta + (1 - theta) pi) / (theta + (1 - theta)(1 - pi)),

    increasing in pi, and in theta of the sign of 1 - 2 pi (dR/dtheta = (1 - 2 pi) / D^2). With
    theta_hi the Clopper–Pearson upper bound at share * alpha and pi_lo the lower one at
    (1 - share) * alpha, both hold with probability at least 1 - alpha (the union bound; each
    conditionally valid, hence unconditionally), and then R >= R(theta_hi, pi_lo) where pi_lo >= 1/2
    (the minimum over theta <= theta_hi, pi >= pi_lo is that corner), R >= pi_lo / (1 - pi_lo)
    (theta = 0) otherwise. 0 without a hit or a discordant pair. Nested events (B_i implies A_i,
    as for a shift whose noise is shared) leave only theta uncertain: its interval is far narrower
    than the two independent counts' (DESIGN §2.6 step 4). Arrays broadcast; non-integer counts
    (projected) are taken as they are."""
    if not 0 < alpha < 1 or not 0 < share < 1:
        raise ValueError(f"alpha and share must be in (0, 1), got {alpha}, {share}")
    a, b, c = np.broadcast_arrays(*(np.asarray(k, dtype=float) for k in (k_num_only, k_den_only, k_both)))
    m = a + b + c
    theta_hi = np.asarray(upper(c, np.maximum(m, 1e-300), share * alpha))
    pi_lo = np.asarray(lower(a, np.maximum(a + b, 1e-300), (1 - share) * alpha))
    corner = (theta_hi + (1 - theta_hi) * pi_lo) / (theta_hi + (1 - theta_hi) * (1 - pi_lo))
    out = np.where(a <= 0, 0.0, np.where(pi_lo < 0.5, pi_lo / np.maximum(1.0 - pi_lo, 1e-300), corner))
    return out if out.ndim else float(out)
