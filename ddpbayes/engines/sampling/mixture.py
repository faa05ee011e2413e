"""Monte Carlo estimates of L(y | t, x_K) = E[p_M(y | X) | t, x_K] from draws of the query.

With Laplace(b) noise, L(y) = mean_s exp(-|y - q_s| / b) (Rao–Blackwellised: the exact
mechanism density averaged over the draws, and over each draw's summed law when the discrete
variables were summed out; DESIGN §2.3). The estimate is a positive mixture with breakpoints at
the draws, so, as in the exact engine, its log-ratio between two target values peaks at a draw
or at y -> ±inf, where L ∝ mean exp(±q_s / b). `vector.log_mixture_lines` evaluates it along a coordinate;
`candidate_outputs` gives the y to try; `law` is the estimated law itself.
"""

from __future__ import annotations

import math

import numpy as np

from ddpbayes.numerics import logsumexp


def candidate_outputs(*draws: np.ndarray, limit: int = 400) -> np.ndarray:
    """Outputs where the estimated log-ratio can peak: the draws (thinned to `limit` quantiles
    when there are more), and ±inf."""
    q = np.unique(np.concatenate([np.asarray(d, dtype=float).ravel() for d in draws]))
    if q.size > limit:
        q = np.unique(np.quantile(q, np.linspace(0, 1, limit), method="nearest"))
    return np.concatenate([q, [math.inf, -math.inf]])


def same_at_every_draw(a: np.ndarray) -> bool:
    """True for a summed run's configurations that do not change between draws (`Table.expand`'s
    broadcast view (chains, draws, C, ...), kept once)."""
    return a.ndim >= 3 and a.strides[0] == 0 and a.strides[1] == 0


def law(q: np.ndarray, logw: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The estimated law of the query from draws q (chains, draws, outputs) or, summed, q (chains,
    draws, C, outputs) with the configurations' log-probabilities `logw` (chains, draws, C):
    distinct points (M, outputs) and log-weights (M,) summing to one. Configurations the same at
    every draw are weighted by their law averaged over the draws first (C points, not draws × C)."""
    chains, draws = q.shape[:2]
    if logw is not None and same_at_every_draw(q):
        points, weights = q[0, 0], logsumexp(logw.reshape(-1, logw.shape[-1]), axis=0)
    else:
        points = q.reshape(-1, q.shape[-1])
        weights = np.zeros(len(points)) if logw is None else logw.reshape(-1)
    keep = np.isfinite(weights)
    levels, merged = _merge(points[keep], weights[keep])
    return levels, merged - math.log(chains * draws)


def _merge(points: np.ndarray, logw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Equal points merged, their weights added in log space (a tail weight far below 1e-300
    keeps its value)."""
    levels, inverse = np.unique(points, axis=0, return_inverse=True)
    inverse = np.ravel(inverse)
    order = np.argsort(inverse, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(inverse[order]) != 0])
    top = np.maximum.reduceat(logw[order], starts)
    sums = np.add.reduceat(np.exp(logw[order] - np.repeat(top, np.diff(np.r_[starts, len(order)]))), starts)
    return levels, top + np.log(sums)
