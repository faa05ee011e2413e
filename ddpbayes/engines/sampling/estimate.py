"""Leakage of one adversary from MCMC draws, with a bound valid after the choice (DESIGN §2.3, issue #27).

Two independent sets of runs (`RunSettings.role`). The witness (x_K, t, t', y) is the plug-in
supremum on the *choosing* runs: over every x_K group, ordered pair (t, t') and output y. The two
events of that witness are then drawn again on fresh *bounding* runs (other seeds, twice the
chains): the first half of their chains estimates the log-ratio at the fixed witness, the second
half gives a standard error independent of that estimate (ArviZ's MCSE of the per-draw kernel
values, delta method for the log), and the one-sided 95% lower bound is the estimate minus 1.645
times the larger of the two halves' standard errors. Both choices matter
(benchmarks/coverage_diagnosis.md): the witness is fixed before the bounding draws are seen (no
winner's curse), and an estimate's own MCSE is anticorrelated with its error (at y -> ±inf a few
draws carry most of the mixture: -0.61 on the household), so a bound with its own standard error
missed 10.4% at 500 draws, with an independent one 5.0%. The point estimate is the plug-in
supremum on the choosing runs; the upper bound adds 1.645 times the larger of its own standard
error and the bounding runs' (the engine; approximate: a normal approximation; between a
continuous target's values `cells` adds a certified slack where it applies; sampled x_K are
finite). With several output coordinates the kernel is the product of the coordinates' Laplace
kernels and the sup over y is `vector.pair_sup`'s.

Rao–Blackwellised draws: when the discrete variables were summed out (`Run.logw`), each draw
carries the exact law of the query given its continuous values; the mixture is over every
(draw, configuration) with weight P(c | draw) / S, and a draw's kernel value is its law's
average kernel.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace

import arviz as az
import numpy as np
from scipy import stats

from ddpbayes.engines.sampling.mixture import law, same_at_every_draw
from ddpbayes.engines.sampling.runs import quiet_arviz
from ddpbayes.engines.sampling.vector import log_kernels, pair_sup
from ddpbayes.numerics import logsumexp

Z95 = 1.6448536269514722  # one-sided 95% normal quantile


@dataclass(frozen=True)
class Draws:
    """Query draws for one conditioning event: q (chains, draws, C), or with the discrete
    variables summed out q (chains, draws, K, C) and `logw` (chains, draws, K)."""

    known: dict[int, float]
    t: float
    q: np.ndarray
    logw: np.ndarray | None = None
    groups: int = 1  # SMC: independent runs per chain, end to end along the draws (`runs.Run.groups`)

    @property
    def chains(self) -> int:
        return self.q.shape[0]

    def part(self, chains: slice) -> Draws:
        """The draws of some of the chains."""
        return Draws(self.known, self.t, self.q[chains], None if self.logw is None else self.logw[chains],
                     self.groups)

    def mixture(self) -> tuple[np.ndarray, np.ndarray]:
        """The estimated law of the query: distinct points (M, C) and their log-weights (M,),
        summing to one (every draw, and configuration when summed, weighted; equal points merged
        in log space, so a tail weight far below 1e-300 keeps its value)."""
        return law(self.q, self.logw)

    def log_kernels(self, y: np.ndarray, b: np.ndarray) -> np.ndarray:
        """log of each draw's kernel value at the output y (C,), (chains, draws): the Laplace
        product kernel at the draw, or its average over the draw's summed law."""
        chains, draws = self.q.shape[:2]
        y = np.asarray(y, dtype=float)[None, :]
        if self.logw is not None and same_at_every_draw(self.q):  # the configurations' kernels, once
            return logsumexp(log_kernels(self.q[0, 0], y, b)[0] + self.logw, axis=2)
        z = log_kernels(self.q.reshape(-1, self.q.shape[-1]), y, b)[0]
        if self.logw is None:
            return z.reshape(chains, draws)
        return logsumexp((z + self.logw.reshape(-1)).reshape(chains, draws, -1), axis=2)

    def expected(self) -> np.ndarray:
        """Each draw's query (chains, draws, C): the draw itself, or the mean of its summed law."""
        if self.logw is None:
            return self.q
        return np.einsum("abk,abkc->abc", np.exp(self.logw), self.q)

    def sampled(self, seed: int) -> Draws:
        """Unweighted draws: for each draw, one configuration drawn from its summed law (exact
        conditional draws given the continuous values)."""
        if self.logw is None:
            return self
        w = np.exp(self.logw)
        cum = np.cumsum(w, axis=-1)
        stream = zlib.crc32(repr((sorted(self.known.items()), self.t)).encode())  # events draw independently
        u = np.random.default_rng([seed, stream]).random(w.shape[:2]) * cum[..., -1]
        k = np.minimum((cum < u[..., None]).sum(axis=-1), w.shape[-1] - 1)
        return Draws(self.known, self.t, np.take_along_axis(self.q, k[..., None, None], axis=2)[:, :, 0],
                     groups=self.groups)


@dataclass(frozen=True)
class Peak:
    value: float
    known: dict[int, float]
    t: float
    t_prime: float
    y: tuple[float, ...] | None
    complete: bool = True  # the sup over y was searched over every breakpoint (`vector`)


def sup_ratio(groups: list[list[Draws]], b: np.ndarray) -> Peak:
    """max over x_K groups, ordered pairs (t, t') and outputs y of the estimated log-ratio."""
    best, complete = Peak(0.0, {}, math.nan, math.nan, None), True
    for group in groups:
        laws = [d.mixture() for d in group]
        for a in range(len(group)):
            for c in range(a + 1, len(group)):
                both, done = pair_sup(*laws[a], *laws[c], b)
                complete = complete and done
                for (value, y), first, second in zip(both, (group[a], group[c]), (group[c], group[a])):
                    if value > best.value or math.isnan(best.t):
                        best = Peak(value, first.known, first.t, second.t, tuple(float(v) for v in y))
    return replace(best, complete=complete)


def ratio_at(first: Draws, second: Draws, y: tuple[float, ...], b: np.ndarray) -> tuple[float, float]:
    """The estimated log-ratio at a fixed witness and its Monte Carlo standard error (ArviZ's
    MCSE of the per-draw kernel values, delta method for the log; the two events' runs are
    independent, so their variances add)."""
    est, var = 0.0, 0.0
    for sign, d in ((1, first), (-1, second)):
        z = d.log_kernels(np.asarray(y, dtype=float), b)
        top = float(z.max())
        k = np.exp(z - top)
        mean = float(k.mean())
        est += sign * (math.log(mean) + top)
        if np.ptp(k) > 0:
            se = _between_runs(k, d.groups) if d.groups > 1 else _mcse(k)
            var += (se / mean) ** 2
    return est, math.sqrt(var)


def _mcse(k: np.ndarray) -> float:
    """ArviZ's MCSE of the mean of MCMC draws k (chains, draws)."""
    with quiet_arviz():
        se = float(np.ravel(az.mcse(k))[0])
    return se if math.isfinite(se) else float(np.ptp(k))  # ArviZ gives nan when k varies at rounding level


def _between_runs(k: np.ndarray, groups: int) -> float:
    """The standard error of the mean of SMC particles k (chains, groups × particles) from the spread
    of its independent runs' means: particles of one run share ancestors through resampling, and a
    run's mode weights are one random quantity for all its particles, which their own spread misses.
    Widened by t_{m-1}(0.95) / z(0.95) for the m runs' estimated spread: the bounds' 1.645 standard
    errors are then Student's one-sided 95% quantile (DESIGN §2.3)."""
    means = k.reshape(k.shape[0] * groups, -1).mean(axis=1)
    m = len(means)
    return float(np.std(means, ddof=1) / math.sqrt(m) * stats.t.ppf(0.95, m - 1) / stats.norm.ppf(0.95))


def choose(groups: list[list[Draws]], b: np.ndarray) -> tuple[Peak, tuple[float, float]]:
    """The witness and plug-in estimate on the choosing runs, and the approximate upper bound
    (plug-in plus 1.645 of its standard errors); b: each output coordinate's Laplace scale."""
    peak = sup_ratio(groups, b)
    if math.isnan(peak.t):
        return peak, (0.0, 0.0)
    _, se = ratio_at(_find(groups, peak.known, peak.t), _find(groups, peak.known, peak.t_prime), peak.y, b)
    return peak, (max(peak.value, 0.0), max(peak.value, 0.0) + Z95 * se)


def split_chains(chains: int, measure: Callable[[slice], tuple[float, float]]) -> tuple[float, float, float]:
    """(estimate, standard error, other estimate) of a quantity on fresh bounding runs of
    `chains` chains: `measure(part)` gives its estimate and standard error on a slice of the
    chains; the first half estimates, and the standard error is the larger finite one of the two
    halves' (the second half's is independent of the estimate it scales)."""
    half = chains // 2
    (est, se_own), (other, se_other) = (measure(part) for part in (slice(0, half), slice(half, None)))
    return est, max(se_own, se_other) if math.isfinite(se_other) else se_own, other


def bound(peak: Peak, first: Draws, second: Draws, b: np.ndarray) -> tuple[float, dict]:
    """The one-sided 95% lower bound at the chosen witness from fresh runs of its two events
    (`first` given t, `second` given t', each with an even number of chains; `split_chains`)."""
    est, se, other = split_chains(first.chains, lambda part: ratio_at(first.part(part), second.part(part), peak.y, b))
    lower = max(0.0, min(est - Z95 * se, peak.value))  # lowering a lower bound keeps it valid
    return lower, {"held_out": est, "held_out_se": se, "held_out_other": other}


def _find(groups: list[list[Draws]], known: dict[int, float], t: float) -> Draws:
    for group in groups:
        for d in group:
            if d.known == known and d.t == t:
                return d
    raise KeyError((known, t))
