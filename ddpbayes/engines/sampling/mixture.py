"""Monte Carlo estimates of L(y | t, x_K) = E[p_M(y | X) | t, x_K] from draws of the query.

With Laplace(b) noise, L(y) = mean_s exp(-|y - q_s| / b) (Rao–Blackwellised: the exact
mechanism density averaged over the draws, and over each draw's summed law when the discrete
variables were summed out; DESIGN §2.3). The estimate is a positive mixture with breakpoints at
the draws, so, as in the exact engine, its log-ratio between two target values peaks at a draw
or at y -> ±inf, where L ∝ mean exp(±q_s / b). `vector.log_mixture_nd` evaluates it at any y;
`candidate_outputs` gives the y to try.
"""

from __future__ import annotations

import math

import numpy as np


def candidate_outputs(*draws: np.ndarray, limit: int = 400) -> np.ndarray:
    """Outputs where the estimated log-ratio can peak: the draws (thinned to `limit` quantiles
    when there are more), and ±inf."""
    q = np.unique(np.concatenate([np.asarray(d, dtype=float).ravel() for d in draws]))
    if q.size > limit:
        q = np.unique(np.quantile(q, np.linspace(0, 1, limit), method="nearest"))
    return np.concatenate([q, [math.inf, -math.inf]])
