"""The privacy profile of one adversary from its mixture weights (DESIGN §3.5): what the exact
and structured engines compute for (ε, δ) mechanisms such as Gaussian noise.

Given x_K, L(y | t, x_K) = Σ_s P(q = q_s | t, x_K) p_M(y | q_s), a mixture over the query's levels.
The adversary's δ(ε) is the largest hockey-stick divergence between L(· | t) and L(· | t') over
the groups x_K of positive probability and the ordered pairs t ≠ t' possible in them; its ε(δ)
is therefore the largest of the pairs' ε(δ), δ by δ, which the mechanism computes
(`Gaussian.pair_profiles`, `mechanisms.gaussian.mixture`). The worst pair at the user's δ is the witness,
and its Rényi ρ is the adversary's zCDP ρ.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddpbayes.engines.base import AdversaryLeakage, Witness
from ddpbayes.numerics import logsumexp
from ddpbayes.problem import Adversary
from ddpbayes.profiles import Profile, zero_profile

PAIRS = 4096  # pairs handed to the mechanism at once


@dataclass(frozen=True)
class MixtureProfile:
    """ε(δ) of the worst pairs seen so far (pointwise), δ(0), and the pair worst at the user's δ
    (its group, t, t' and normalised log-weights, for the witness and ρ)."""

    epsilons: np.ndarray
    tv: float
    value: float
    group: int
    t: int
    t_prime: int
    logp: np.ndarray
    logq: np.ndarray
    levels: np.ndarray
    certified: bool | None = None  # every pair's sign changes proved complete (mechanisms.gaussian.mixture)

    def merge(self, other: MixtureProfile | None) -> MixtureProfile:
        """Both together: the pointwise maximum, the worse witness (this one on ties)."""
        if other is None:
            return self
        best = other if other.value > self.value else self
        known = [c for c in (self.certified, other.certified) if c is not None]
        return MixtureProfile(np.maximum(self.epsilons, other.epsilons), max(self.tv, other.tv), best.value,
                              best.group, best.t, best.t_prime, best.logp, best.logq, best.levels,
                              all(known) if known else None)

    def leakage(self, adv: Adversary, witness: Witness, mechanism) -> AdversaryLeakage:
        """The adversary's result: ε at the user's δ, its profile, and the worst pair's zCDP ρ
        (pending: computed for the notion's worst adversary only)."""

        def rho() -> tuple[float, str]:
            value, note = mechanism.pair_rho(self.logp, self.logq, self.levels)
            return value, f"of the worst adversary's worst pair (t, t') at delta; {note}"

        profile = Profile(mechanism.deltas, tuple(float(e) for e in self.epsilons), float(self.tv), pending=rho,
                          certified=self.certified)
        return AdversaryLeakage(adv, self.value, witness, profile=profile)


def mixture_profile(logw: np.ndarray, levels: np.ndarray, mechanism) -> MixtureProfile | None:
    """The profile of the groups of `logw` (G, T, m): log P(x_K, X_i = t, q = levels_s), -inf where
    impossible; None when no group has two possible values of t (the adversary learns nothing)."""
    return mixture_profiles(logw, levels, mechanism, np.zeros(len(logw), dtype=np.int64), 1)[0]


def mixture_profiles(logw: np.ndarray, levels: np.ndarray, mechanism, owner: np.ndarray,
                     owners: int) -> list[MixtureProfile | None]:
    """`mixture_profile` of several adversaries at once: group g of `logw` belongs to adversary
    `owner[g]` (0 .. owners - 1). Their pairs go to the mechanism together, so the mixtures' grid
    on the common `levels` is built once for all of them (the structured engine's targets)."""
    log_pt = logsumexp(logw, axis=2)
    rows = np.where(np.isfinite(log_pt)[:, :, None], logw - np.where(np.isfinite(log_pt), log_pt, 0)[:, :, None],
                    -np.inf)
    g, t, u = _pairs(np.isfinite(log_pt))
    found: list[MixtureProfile | None] = [None] * owners
    at = mechanism.deltas.index(mechanism.delta)
    for start in range(0, g.size, PAIRS):
        sl = slice(start, start + PAIRS)
        p, q = rows[g[sl], t[sl]], rows[g[sl], u[sl]]
        pairs = mechanism.pair_profiles(p, q, levels)
        who = owner[g[sl]]
        for a in np.unique(who):
            mine = np.flatnonzero(who == a)
            b = int(mine[np.argmax(pairs.epsilons[mine, at])])
            certified = None if pairs.certified is None else bool(np.all(pairs.certified[mine]))
            chunk = MixtureProfile(pairs.epsilons[mine].max(axis=0), float(pairs.tv[mine].max()),
                                   float(pairs.epsilons[b, at]), int(g[sl][b]), int(t[sl][b]), int(u[sl][b]), p[b],
                                   q[b], levels, certified)
            found[a] = chunk if found[a] is None else found[a].merge(chunk)
    return found


def learns_nothing(adv: Adversary, witness: Witness, mechanism) -> AdversaryLeakage:
    """An adversary for whom only one value of the target is possible in every group: 0."""
    return AdversaryLeakage(adv, 0.0, witness, profile=zero_profile(mechanism.deltas))


def _pairs(possible: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (group, t, t') with t ≠ t' both possible in the group, in (group, t, t') order."""
    n_t = possible.shape[1]
    t, u = np.meshgrid(np.arange(n_t), np.arange(n_t), indexing="ij")
    off = t != u
    both = possible[:, :, None] & possible[:, None, :] & off[None]
    g, ti, ui = np.nonzero(both)
    return g, ti, ui
