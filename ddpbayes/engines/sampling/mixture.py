"""Monte Carlo estimates of L(y | t, x_K) = E[p_M(y | X) | t, x_K] from draws of the query.

With Laplace(b) noise, L(y) = mean_s exp(-|y - q_s| / b) (Rao–Blackwellised: the exact
mechanism density averaged over the draws; DESIGN §2.3). The estimate is a positive mixture
with breakpoints at the draws, so, as in the exact engine, its log-ratio between two target
values peaks at a draw or at y -> ±inf, where L ∝ mean exp(±q_s / b). `log_mixture` evaluates
it at any y in O((S + G) log S) with prefix sums in log space.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp


def log_mixture(q: np.ndarray, y: np.ndarray, b: float) -> np.ndarray:
    """log mean_s k(y, q_s) for every y, where k(y, q) = exp(-|y - q|/b) for finite y,
    exp((q - y0)/b) at y = +inf and exp((y0 - q)/b) at y = -inf (y0 = 0: the factor that
    depends on y alone cancels in every ratio of two mixtures at the same y)."""
    q = np.sort(np.asarray(q, dtype=float).ravel())
    y = np.asarray(y, dtype=float)
    out = np.empty(y.shape)
    up, down = np.isposinf(y), np.isneginf(y)
    out[up] = logsumexp(q / b) - math.log(q.size)
    out[down] = logsumexp(-q / b) - math.log(q.size)
    fin = ~(up | down)
    yf = y[fin]
    # left: sum_{q <= y} e^{(q - y)/b};  right: sum_{q > y} e^{(y - q)/b}
    cum_left = np.concatenate([[-np.inf], np.logaddexp.accumulate(q / b)])
    cum_right = np.concatenate([np.logaddexp.accumulate((-q / b)[::-1])[::-1], [-np.inf]])
    idx = np.searchsorted(q, yf, side="right")
    with np.errstate(invalid="ignore"):
        left = cum_left[idx] - yf / b
        right = cum_right[idx] + yf / b
    out[fin] = np.logaddexp(left, right) - math.log(q.size)
    return out


def candidate_outputs(*draws: np.ndarray, limit: int = 400) -> np.ndarray:
    """Outputs where the estimated log-ratio can peak: the draws (thinned to `limit` quantiles
    when there are more), and ±inf."""
    q = np.unique(np.concatenate([np.asarray(d, dtype=float).ravel() for d in draws]))
    if q.size > limit:
        q = np.unique(np.quantile(q, np.linspace(0, 1, limit), method="nearest"))
    return np.concatenate([q, [math.inf, -math.inf]])
