"""Leakage of one adversary from MCMC draws, with an honest interval (DESIGN §2.3).

The witness (x_K, t, t', y) is chosen on the first half of every chain and the log-ratio is
re-estimated at that fixed witness on the second half, whose Monte Carlo standard error
(ArviZ's MCSE of the kernel values, delta method for the log) gives a one-sided 95% lower
confidence bound: since the witness was fixed before the second half was looked at, the bound
holds for leak(i, K) >= that log-ratio, so a `fail` it supports is sound. The estimate is the
supremum over all draws (plug-in); the upper bound adds the same z-score margin to it. The
upper bound is approximate: the target grid and the known values x_K considered are finite.
With several output coordinates the kernel is the product of the coordinates' Laplace kernels
and the sup over y is `vector.pair_sup`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import arviz as az
import numpy as np

from ddpbayes.engines.sampling.runs import quiet_arviz
from ddpbayes.engines.sampling.vector import log_kernels, log_mixture_nd, pair_sup

Z95 = 1.6448536269514722  # one-sided 95% normal quantile


@dataclass(frozen=True)
class Draws:
    """Query draws (chains, draws, C) for one conditioning event."""

    known: dict[int, float]
    t: float
    q: np.ndarray

    def half(self, k: int | None) -> np.ndarray:
        """The draws of the first (k = 0) or second (k = 1) half of every chain; all for None."""
        if k is None:
            return self.q
        d = self.q.shape[1] // 2
        return self.q[:, :d] if k == 0 else self.q[:, d:]

    def flat(self, k: int | None) -> np.ndarray:
        q = self.half(k)
        return q.reshape(-1, q.shape[-1])


@dataclass(frozen=True)
class Peak:
    value: float
    known: dict[int, float]
    t: float
    t_prime: float
    y: tuple[float, ...] | None
    complete: bool = True  # the sup over y was searched over every breakpoint (`vector`)


def sup_ratio(groups: list[list[Draws]], b: np.ndarray, half: int | None) -> Peak:
    """max over x_K groups, ordered pairs (t, t') and outputs y of the estimated log-ratio."""
    best, complete = Peak(0.0, {}, math.nan, math.nan, None), True
    for group in groups:
        for a in range(len(group)):
            for c in range(a + 1, len(group)):
                both, done = pair_sup(group[a].flat(half), group[c].flat(half), b)
                complete = complete and done
                for (value, y), first, second in zip(both, (group[a], group[c]), (group[c], group[a])):
                    if value > best.value or math.isnan(best.t):
                        best = Peak(value, first.known, first.t, second.t, tuple(float(v) for v in y))
    return replace(best, complete=complete)


def ratio_at(first: Draws, second: Draws, y: tuple[float, ...], b: np.ndarray, half: int | None) -> tuple[float, float]:
    """The estimated log-ratio at a fixed witness and its Monte Carlo standard error (ArviZ's
    MCSE of the product-kernel values, delta method for the log)."""
    est, var, point = 0.0, 0.0, np.array([y], dtype=float)
    for sign, d in ((1, first), (-1, second)):
        est += sign * float(log_mixture_nd(d.flat(half), point, b)[0])
        q = d.half(half)
        z = log_kernels(q.reshape(-1, q.shape[-1]), point, b)[0].reshape(q.shape[:2])
        k = np.exp(z - z.max())
        if np.ptp(k) > 0:
            with quiet_arviz():
                se = float(np.ravel(az.mcse(k))[0])
            if not math.isfinite(se):  # ArviZ gives nan when k varies at rounding level: use its range
                se = float(np.ptp(k))
            var += (se / float(k.mean())) ** 2
    return est, math.sqrt(var)


def estimate(groups: list[list[Draws]], b: np.ndarray) -> tuple[Peak, float, tuple[float, float], dict]:
    """(witness chosen on the first halves, plug-in estimate, (lower, upper) bounds, and the
    held-out estimate at that witness with its standard error); b: each output coordinate's
    Laplace scale. The peak's `complete` is False when either search over y was not exhaustive."""
    chosen = sup_ratio(groups, b, half=0)
    if math.isnan(chosen.t):
        return chosen, 0.0, (0.0, 0.0), {}
    first, second = _find(groups, chosen.known, chosen.t), _find(groups, chosen.known, chosen.t_prime)
    held_out, se_held = ratio_at(first, second, chosen.y, b, half=1)
    plug_in = sup_ratio(groups, b, half=None)
    _, se_full = ratio_at(_find(groups, plug_in.known, plug_in.t), _find(groups, plug_in.known, plug_in.t_prime),
                          plug_in.y, b, half=None)
    lower = max(0.0, min(held_out - Z95 * se_held, plug_in.value))  # lowering a lower bound keeps it valid
    upper = max(plug_in.value, 0.0) + Z95 * se_full
    chosen = replace(chosen, complete=chosen.complete and plug_in.complete)
    return chosen, max(plug_in.value, 0.0), (lower, upper), {"held_out": held_out, "held_out_se": se_held}


def _find(groups: list[list[Draws]], known: dict[int, float], t: float) -> Draws:
    for group in groups:
        for d in group:
            if d.known == known and d.t == t:
                return d
    raise KeyError((known, t))
