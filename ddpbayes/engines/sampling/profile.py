"""The privacy profile under Gaussian noise from MCMC draws, with an interval (DESIGN §2.3, §3.5).

L(y | t, x_K) is estimated by the mixture (1/S) Σ_s N(q_s, σ²) over the S draws of the query
given X_i = t, x_K (the discrete Gaussian N_Z(q_s, σ²) for integer queries): the exact
mechanism density averaged over the draws, as for Laplace noise. For every x_K and ordered pair
t ≠ t' the mixtures' profile ε(δ) comes from the mechanism (`Gaussian.pair_profiles`),
with every distinct draw as a level weighted by its count: no thinning, so the plug-in is the
profile of the estimated mixtures themselves. The adversary's plug-in profile is the pointwise
maximum over x_K and pairs.

Interval. Any event A gives δ(ε) >= P_t(A) − e^ε P_t'(A), so ε(δ) >= ε_A(δ) = log((P_t(A) − δ) / P_t'(A)).
A = {y : L̂_t(y) > e^ε* L̂_t'(y)} is fixed on the choosing runs (the pair worst at the user's δ,
ε* its ε there); on fresh bounding runs of its two events (`estimate`: other seeds, twice the
chains) P_t(A) and P_t'(A) are means over draws of the noise's exact mass of A (Φ in closed form;
a finite sum on the integers), each with ArviZ's MCSE (the runs for t and t' are independent),
and the delta method gives a one-sided 95% lower confidence bound on ε_A(δ), hence on ε(δ); the
first half of the bounding chains estimates, and the larger of the two halves' standard errors
scales it. The estimate is the plug-in ε(δ) over all draws; the
approximate upper bound moves it by 1.645 standard errors of δ̂(ε̂) = P̂_t(A) − e^ε̂ P̂_t'(A) at the
plug-in event, through dε/dδ = −1/(e^ε̂ P_t'(A)) (first order: δ(ε) is convex, so the true shift
is at least this).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import arviz as az
import numpy as np
from scipy import optimize, special

from ddpbayes.engines.sampling.estimate import Z95, Draws, split_chains
from ddpbayes.engines.sampling.runs import quiet_arviz
from ddpbayes.errors import InputError
from ddpbayes.mechanisms.gaussian import Gaussian
from ddpbayes.mechanisms.gaussian.discrete import support
from ddpbayes.mechanisms.gaussian.kernel import discrete_log_normaliser
from ddpbayes.profiles import Profile, zero_profile

REACH = 10.0  # the event is searched within [min q − REACH σ, max q + REACH σ]; the noise's mass beyond < 1e-23
STEP = 0.125  # grid step (in σ) on which the sign changes of the log-ratio are bracketed
MAX_POINTS = 1 << 17  # grid points at most (the step grows beyond: a missed root only loosens the bound)


@dataclass(frozen=True)
class Found:
    """The worst pair of a set of draws at the user's δ (its ε there, its δ(0), the two events'
    draws) and the profile of all pairs (pointwise maximum) with their largest δ(0)."""

    value: float
    tv: float
    first: Draws | None
    second: Draws | None
    epsilons: np.ndarray
    tv_max: float


@dataclass(frozen=True)
class Event:
    """A set of outputs: intervals [lo_j, hi_j] of y (continuous noise) or integer points (discrete)."""

    lo: np.ndarray
    hi: np.ndarray
    points: np.ndarray | None = None


def scalar_groups(groups: list[list[Draws]], seed: int) -> list[list[Draws]]:
    """The draws of the one output coordinate that varies (the others, constant over every
    event, cancel in every ratio), unweighted (`Draws.sampled`: one configuration per draw when
    the discrete variables were summed); several varying coordinates are refused."""
    groups = [[d.sampled(seed) for d in g] for g in groups]
    q = np.concatenate([d.q.reshape(-1, d.q.shape[-1]) for g in groups for d in g]) if groups else np.zeros((0, 1))
    varying = [c for c in range(q.shape[1]) if np.ptp(q[:, c]) > 0] if q.size else []
    if len(varying) > 1:
        raise InputError(f"Gaussian noise on {len(varying)} varying output coordinates: the sampling engine's privacy "
                         "profile needs one (several need a multi-dimensional integral); use a scalar query")
    c = varying[0] if varying else 0
    return [[Draws(d.known, d.t, d.q[..., c]) for d in g] for g in groups]


def profile_estimate(chosen: Found, fresh: list[Draws], mech: Gaussian) -> tuple[float, tuple[float, float], dict,
                                                                             Profile]:
    """(plug-in ε at the user's δ, (lower, upper), the held-out ε_A and its standard error, the
    plug-in profile) for the pair `chosen` on the choosing runs; `fresh`: unweighted scalar draws
    of its two events on the bounding runs (first half of the chains estimates, second half gives
    the standard error, the larger of the two halves' is used)."""
    if chosen.first is None:
        return 0.0, (0.0, 0.0), {}, zero_profile(mech.deltas)
    event = outcome_event(chosen.first.q, chosen.second.q, chosen.value, mech)
    first, second = fresh
    held, se, _ = split_chains(first.chains, lambda part: held_out(event, first.part(part), second.part(part), mech))
    lower = max(0.0, min(held - Z95 * se, chosen.value)) if math.isfinite(held) and math.isfinite(se) else 0.0
    upper = chosen.value + upper_margin(chosen, mech)
    return chosen.value, (lower, upper), {"held_out": held, "held_out_se": se}, plug_in_profile(chosen, mech)


def worst_pair(groups: list[list[Draws]], mech: Gaussian) -> Found:
    """The plug-in profile of every x_K and ordered pair (t, t') on these draws (pointwise maximum
    over `mech.deltas`) and the pair worst at the user's δ (ties: the larger δ(0))."""
    deltas = mech.deltas
    at = deltas.index(mech.delta)
    eps, tv_max = np.zeros(len(deltas)), 0.0
    best: tuple = (-1.0, 0.0, None, None)
    for group in groups:
        for a in range(len(group)):
            for c in range(a + 1, len(group)):
                levels, logp, logq = pair_weights(group[a].q, group[c].q)
                found = mech.pair_profiles(np.stack([logp, logq]), np.stack([logq, logp]), levels, deltas)
                eps, tv_max = np.maximum(eps, found.epsilons.max(axis=0)), max(tv_max, float(found.tv.max()))
                for row, first, second in ((0, group[a], group[c]), (1, group[c], group[a])):
                    key = (float(found.epsilons[row, at]), float(found.tv[row]))
                    if key > best[:2]:
                        best = (*key, first, second)
    return Found(max(best[0], 0.0), best[1], best[2], best[3], eps, tv_max)


def pair_weights(qa: np.ndarray, qb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The two draw-mixtures on their common levels (the distinct draws): (levels, log p, log q),
    each weight its count over the event's number of draws (−inf for a level the event never drew)."""
    qa, qb = np.ravel(qa), np.ravel(qb)
    levels, inverse = np.unique(np.concatenate([qa, qb]), return_inverse=True)
    with np.errstate(divide="ignore"):
        logp = np.log(np.bincount(inverse[:qa.size], minlength=levels.size) / qa.size)
        logq = np.log(np.bincount(inverse[qa.size:], minlength=levels.size) / qb.size)
    return levels, logp, logq


def plug_in_profile(plug: Found, mech: Gaussian) -> Profile:
    """The adversary's plug-in profile. No zCDP ρ: sup_α D_α/α is set by the tails of the two
    mixtures, which the draws do not resolve (the plug-in mixtures' tails are those of their
    extreme draws), so ρ is not reported rather than guessed."""
    return Profile(mech.deltas, tuple(float(e) for e in plug.epsilons), plug.tv_max)


def held_out(event: Event, first: Draws, second: Draws, mech: Gaussian) -> tuple[float, float]:
    """ε_A(δ) = log((P_t(A) − δ) / P_t'(A)) on fresh draws and its delta-method standard error
    (−inf when P_t(A) <= δ: this event shows nothing at δ)."""
    log_a, rel_a = mean_mass(event, first.q, mech)
    log_b, rel_b = mean_mass(event, second.q, mech)
    a, delta = math.exp(log_a), mech.delta
    if a <= delta:
        return -math.inf, math.nan
    eps = math.log(a - delta) - log_b
    return eps, math.hypot(rel_a * a / (a - delta), rel_b)


def upper_margin(plug: Found, mech: Gaussian) -> float:
    """How far 1.645 standard errors of δ̂ at the plug-in event move ε̂: (δ̂(ε̂) + 1.645 se − δ)⁺ / (e^ε̂ P_t'(A))
    with δ̂(ε̂) = δ when ε̂ > 0 and the total variation when ε̂ = 0 (first order in the slope)."""
    event = outcome_event(plug.first.q, plug.second.q, plug.value, mech)
    log_a, rel_a = mean_mass(event, plug.first.q, mech)
    log_b, rel_b = mean_mass(event, plug.second.q, mech)
    slope = math.exp(plug.value + log_b)  # e^ε Q(A) = −dδ/dε
    se = math.hypot(rel_a * math.exp(log_a), rel_b * slope)
    at = mech.delta if plug.value > 0 else plug.tv
    return max(0.0, at + Z95 * se - mech.delta) / slope if slope > 0 else math.inf


def outcome_event(qa: np.ndarray, qb: np.ndarray, eps: float, mech: Gaussian) -> Event:
    """A = {y : L̂_a(y) > e^ε L̂_b(y)} for the draw-mixtures of `qa` and `qb`."""
    levels, logp, logq = pair_weights(qa, qb)
    if mech.discrete:
        y = support(levels, mech.sigma, REACH)  # checked against --max-states before it is built
        return Event(np.empty(0), np.empty(0), y[log_ratio(y, levels, logp, logq, mech.sigma) > eps])
    u = levels / mech.sigma
    count = min(MAX_POINTS, math.ceil((np.ptp(u) + 2 * REACH) / STEP) + 1)
    z = np.linspace(u.min() - REACH, u.max() + REACH, count)
    inside = log_ratio(z, u, logp, logq, 1.0) > eps
    f = lambda x: float(log_ratio(np.array([x]), u, logp, logq, 1.0)[0]) - eps
    changes = np.flatnonzero(inside[1:] != inside[:-1])
    cuts = [optimize.brentq(f, z[j], z[j + 1], xtol=1e-12) for j in changes]
    ends = np.concatenate([[-np.inf], cuts, [np.inf]]) * mech.sigma  # piece j lies between ends j and j + 1
    keep = np.flatnonzero(np.concatenate([inside[:1], inside[changes + 1]]))  # the pieces inside A
    return Event(ends[keep], ends[keep + 1])


def log_ratio(y: np.ndarray, levels: np.ndarray, logp: np.ndarray, logq: np.ndarray, sigma: float) -> np.ndarray:
    """log Σ p_s φ((y − v_s)/σ) − log Σ q_s φ((y − v_s)/σ) at every y (in chunks)."""
    out = np.empty(y.size)
    chunk = max(1, (1 << 22) // max(levels.size, 1))
    for s in range(0, y.size, chunk):
        with np.errstate(over="ignore"):  # far from every level at a tiny σ: e^-inf = 0
            k = -0.5 * ((y[s:s + chunk, None] - levels[None, :]) / sigma) ** 2
        out[s:s + chunk] = special.logsumexp(k + logp, axis=1) - special.logsumexp(k + logq, axis=1)
    return out


def mean_mass(event: Event, q: np.ndarray, mech: Gaussian) -> tuple[float, float]:
    """log of the mean over draws q (chains, draws) of the noise's mass of the event around q_s, and
    the relative standard error of that mean (ArviZ's MCSE of the per-draw masses)."""
    levels, inverse = np.unique(np.ravel(q), return_inverse=True)
    log_m = (_log_mass_discrete(event.points, levels, mech.sigma) if mech.discrete
             else _log_mass_intervals(event, levels, mech.sigma))[inverse].reshape(q.shape)
    top = float(log_m.max())
    if not math.isfinite(top):
        return -math.inf, 0.0
    k = np.exp(log_m - top)
    mean = float(k.mean())
    return top + math.log(mean), _mcse(k) / mean


def _log_mass_intervals(event: Event, levels: np.ndarray, sigma: float) -> np.ndarray:
    """log P(N(v, σ²) ∈ ∪ [lo_j, hi_j]) for every level v, without cancellation: upper tails when the
    interval lies above v, lower tails when below, one minus both tails when it straddles v."""
    if event.lo.size == 0:
        return np.full(levels.size, -np.inf)
    x1 = (event.lo[None, :] - levels[:, None]) / sigma
    x2 = (event.hi[None, :] - levels[:, None]) / sigma
    with np.errstate(divide="ignore", invalid="ignore"):
        above = special.log_ndtr(-x1) + np.log1p(-np.exp(special.log_ndtr(-x2) - special.log_ndtr(-x1)))
        below = special.log_ndtr(x2) + np.log1p(-np.exp(special.log_ndtr(x1) - special.log_ndtr(x2)))
        straddle = np.log1p(-(special.ndtr(x1) + special.ndtr(-x2)))
    log_m = np.where(x1 > 0, above, np.where(x2 < 0, below, straddle))
    return special.logsumexp(log_m, axis=1)


def _log_mass_discrete(points: np.ndarray, levels: np.ndarray, sigma: float) -> np.ndarray:
    """log P(N_Z(v, σ²) ∈ points) for every integer level v: Σ e^{−(y − v)²/2σ²} / Σ_k e^{−k²/2σ²}."""
    if points.size == 0:
        return np.full(levels.size, -np.inf)
    with np.errstate(over="ignore"):  # a tiny σ: e^-inf = 0 away from the level
        log_k = -0.5 * ((points[None, :] - levels[:, None]) / sigma) ** 2
    return special.logsumexp(log_k, axis=1) - discrete_log_normaliser(sigma)


def _mcse(k: np.ndarray) -> float:
    """ArviZ's MCSE of the mean of k (chains, draws); the range when ArviZ gives nan (k constant to rounding)."""
    if np.ptp(k) == 0:
        return 0.0
    with quiet_arviz():
        se = float(np.ravel(az.mcse(k))[0])
    return se if math.isfinite(se) else float(np.ptp(k))

