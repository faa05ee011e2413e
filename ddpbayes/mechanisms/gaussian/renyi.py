"""The zCDP ρ of a pair of Gaussian mixtures (DESIGN §3.5; Bun & Steinke 2016, Def. 1.1).

ρ = sup_{α>1} max(D_α(P‖Q), D_α(Q‖P)) / α with D_α(P‖Q) = log ∫ P^α Q^{1-α} / (α - 1). The
integral is a trapezoid sum on a uniform grid in z = y/σ (the discrete Gaussian: the exact sum over
the integers). For an analytic integrand that has decayed at both ends the trapezoid rule converges
geometrically in 1/h; the step is halved until two steps agree to 1e-12 (relative) and the window is
widened until the log-integrand at both ends is 80 below its peak. The sup over α is taken on a log
grid of α - 1 in [1e-3, ALPHA_MAX - 1], refined by bounded Brent search around the best point;
the note says when the best point is at either end (the sup may be approached as α -> 1 or -> ∞).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from ddpbayes.limits import max_states
from ddpbayes.numerics import logsumexp
from ddpbayes.mechanisms.gaussian.kernel import discrete_log_normaliser, log_mixture_grid

ALPHA_MAX = 64.0
DROP = 80.0  # the log-integrand is this far below its peak at the window's ends
WORK = 40_000_000  # the largest grid evaluated, in points x levels
STEP = 0.1
DIRECT = 2_000_000  # grids up to this many (points x levels) are summed directly


class _Divergence:
    """D_α in both orders for one pair, in standard units. log P and log Q do not depend on α, so
    they are kept for the current window and step, which only widen and shrink as α grows."""

    def __init__(self, logp, logq, u, sigma, discrete):
        self.logp, self.logq, self.u = logp[None, :], logq[None, :], u
        self.sigma, self.discrete = sigma, discrete
        self.log_norm = discrete_log_normaliser(sigma) if discrete else 0.5 * math.log(2 * math.pi)
        self.lo, self.hi, self.h = u[0] - 15.0, u[-1] + 15.0, STEP
        self._cache: dict = {}

    def _log_density(self, logw, z):
        if z.size * self.u.size <= DIRECT:
            return logsumexp(logw[0][None, :] - 0.5 * (z[:, None] - self.u[None, :]) ** 2, axis=1) - self.log_norm
        return log_mixture_grid(logw, self.u, z)[0] - self.log_norm

    def logs(self, lo, hi, h):
        """(z, log P(z), log Q(z)) on the grid, or None when it outgrows --max-states points or WORK."""
        key = (lo, hi, h)
        if key not in self._cache:
            first, last = math.floor(lo * self.sigma), math.ceil(hi * self.sigma)
            size = last - first + 1 if self.discrete else math.ceil((hi - lo) / h) + 1
            if size > max_states() or size * self.u.size > WORK:  # checked before the grid is built
                return None
            if self.discrete:  # the integers in [lo σ, hi σ], in standard units
                z = np.arange(first, last + 1) / self.sigma
            else:
                z = np.linspace(lo, hi, size)
            self._cache = {k: v for k, v in self._cache.items() if k[:2] == (lo, hi)}
            self._cache[key] = (z, self._log_density(self.logp, z), self._log_density(self.logq, z))
        return self._cache[key]

    @staticmethod
    def log_integrals(alpha, grid):
        _, lp, lq = grid
        one = alpha * lp + (1 - alpha) * lq
        two = alpha * lq + (1 - alpha) * lp
        return one, two

    def value(self, alpha) -> float:
        """max of the two D_α / α (nan when the window or grid outgrows WORK)."""
        while True:
            grid = self.logs(self.lo, self.hi, self.h)
            if grid is None:
                return math.nan
            one, two = self.log_integrals(alpha, grid)
            peak = max(one.max(), two.max())
            wide_lo = max(one[0], two[0]) > peak - DROP
            wide_hi = max(one[-1], two[-1]) > peak - DROP
            if wide_lo or wide_hi:
                span = self.hi - self.lo
                self.lo, self.hi = self.lo - span * wide_lo, self.hi + span * wide_hi
                continue
            total = self._total(one, two, grid[0])
            if self.discrete:
                return total / (alpha - 1) / alpha
            finer = self.logs(self.lo, self.hi, self.h / 2)
            if finer is None:
                return math.nan
            better = self._total(*self.log_integrals(alpha, finer), finer[0])
            if abs(better - total) <= 1e-12 * max(1.0, abs(better)):
                return better / (alpha - 1) / alpha
            self.h /= 2

    def _total(self, one, two, z) -> float:
        """The larger of the two log-integrals (sum over integers, or trapezoid: the ends are ~e^-80)."""
        weight = 0.0 if self.discrete else math.log(z[1] - z[0])
        return float(max(logsumexp(one, 0), logsumexp(two, 0))) + weight


def pair_rho(logp, logq, levels, sigma, discrete) -> tuple[float, str]:
    """ρ and a note saying how the sup over α was found (levels in units of σ from the first)."""
    u = (levels - levels[0]) / sigma
    if np.array_equal(logp, logq):
        return 0.0, "P = Q"
    div = _Divergence(logp, logq, u, sigma, discrete)
    alphas = 1 + np.logspace(-3, math.log10(ALPHA_MAX - 1), 13)
    values = []
    for a in alphas:
        v = div.value(float(a))
        if math.isnan(v):
            break
        values.append(v)
    if not values:
        return math.nan, (f"not computed: the grid for alpha = {alphas[0]:g} exceeds --max-states points or "
                          f"{WORK:g} points x levels")
    searched = alphas[: len(values)]
    best = int(np.argmax(values))
    rho, at = values[best], float(searched[best])
    if 0 < best < len(values) - 1:  # an interior maximum: refine it, from a fresh window (the larger α widened it)
        fresh = _Divergence(logp, logq, u, sigma, discrete)
        res = optimize.minimize_scalar(lambda a: -np.nan_to_num(fresh.value(a), nan=-1e300),
                                       bounds=(searched[best - 1], searched[best + 1]), method="bounded",
                                       options={"xatol": 1e-4 * searched[best - 1], "maxiter": 20})
        if -res.fun > rho:
            rho, at = float(-res.fun), float(res.x)
    top = float(searched[-1])
    if max(values) - min(values) <= 1e-6 * abs(max(values)):
        note = f"D_alpha/alpha constant to 1e-6 over alpha in (1, {top:g}] (a Gaussian privacy loss)"
    elif best == len(values) - 1:
        note = (f"sup over alpha in (1, {top:g}] of D_alpha/alpha, still increasing there: the sup as "
                "alpha -> infinity may be larger")
    elif best == 0:
        note = f"D_alpha/alpha largest as alpha -> 1 (alpha = {at:.4g}; the sup is approached there)"
    else:
        note = f"sup over alpha of D_alpha/alpha at alpha = {at:.6g}"
    if len(values) < alphas.size:  # the search stopped early: the sup may lie beyond
        note += (f"; alpha searched up to {top:g} only (the grid for alpha = {alphas[len(values)]:g} exceeds "
                 f"--max-states points or {WORK:g} points x levels)")
    return max(rho, 0.0), note
