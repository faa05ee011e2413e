"""Leakage of one adversary from MCMC draws, with an honest interval (DESIGN §2.3).

The witness (x_K, t, t', y) is chosen on the first half of every chain and the log-ratio is
re-estimated at that fixed witness on the second half, whose Monte Carlo standard error
(ArviZ's MCSE of the kernel values, delta method for the log) gives a one-sided 95% lower
confidence bound: since the witness was fixed before the second half was looked at, the bound
holds for leak(i, K) >= that log-ratio, so a `fail` it supports is sound. The estimate is the
supremum over all draws (plug-in); the upper bound adds the same z-score margin to it. The
upper bound is approximate: the target grid and the known values x_K considered are finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import arviz as az
import numpy as np

from ddpbayes.engines.sampling.mixture import candidate_outputs, kernel_values, log_mixture
from ddpbayes.engines.sampling.runs import quiet_arviz

Z95 = 1.6448536269514722  # one-sided 95% normal quantile


@dataclass(frozen=True)
class Draws:
    """Query draws (chains, draws) for one conditioning event."""

    known: dict[int, float]
    t: float
    q: np.ndarray

    def half(self, k: int) -> np.ndarray:
        d = self.q.shape[1] // 2
        return self.q[:, :d] if k == 0 else self.q[:, d:]


@dataclass(frozen=True)
class Peak:
    value: float
    known: dict[int, float]
    t: float
    t_prime: float
    y: float


def sup_ratio(groups: list[list[Draws]], b: float, half: int | None) -> Peak:
    """max over x_K groups, ordered pairs (t, t') and candidate y of the estimated log-ratio."""
    best = Peak(0.0, {}, math.nan, math.nan, math.nan)
    for group in groups:
        for a in range(len(group)):
            for c in range(a + 1, len(group)):
                qa, qc = (group[a].q, group[c].q) if half is None else (group[a].half(half), group[c].half(half))
                ys = candidate_outputs(qa, qc)
                r = log_mixture(qa, ys, b) - log_mixture(qc, ys, b)
                for sign, first, second in ((1, group[a], group[c]), (-1, group[c], group[a])):
                    k = int(np.argmax(sign * r))
                    if sign * r[k] > best.value or math.isnan(best.t):
                        best = Peak(float(sign * r[k]), first.known, first.t, second.t, float(ys[k]))
    return best


def ratio_at(first: Draws, second: Draws, y: float, b: float, half: int | None) -> tuple[float, float]:
    """The estimated log-ratio at a fixed witness and its Monte Carlo standard error."""
    est, var = 0.0, 0.0
    for sign, d in ((1, first), (-1, second)):
        q = d.q if half is None else d.half(half)
        est += sign * float(log_mixture(q, np.array([y]), b)[0])
        k = kernel_values(q, y, b)
        if np.ptp(k) > 0:
            with quiet_arviz():
                var += (float(np.ravel(az.mcse(k))[0]) / float(k.mean())) ** 2
    return est, math.sqrt(var)


def estimate(groups: list[list[Draws]], b: float) -> tuple[Peak, float, tuple[float, float], dict]:
    """(witness chosen on the first halves, plug-in estimate, (lower, upper) bounds, and the
    held-out estimate at that witness with its standard error)."""
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
    return chosen, max(plug_in.value, 0.0), (lower, upper), {"held_out": held_out, "held_out_se": se_held}


def _find(groups: list[list[Draws]], known: dict[int, float], t: float) -> Draws:
    for group in groups:
        for d in group:
            if d.known == known and d.t == t:
                return d
    raise KeyError((known, t))
