"""Wu et al.'s information measures of one target (004 Thm 2 Eq. 26, Thm 3 Eq. 28, Prop. 4 Eq. 30).

    kl_max = sup_y D(X_i ‖ X_i | Y = y)         from A(i, ∅)
    mi     = I(X_i; Y)                           from A(i, ∅)
    cmi    = I(X_i; Y | X_(i)) = Σ_x P(x) I(X_i; Y | X_(i) = x)   from A(i, all others)

in nats, from the engine's mixture weights (`Engine.mixtures`), each group integrated exactly
(`Mechanism.information`). Bounds: Thms 2–3 and Prop. 4 state ≤ ε under ε-IDP (the target's idp leakage);
Prop. 4's proof uses the mechanism's classic DP for tuple i (its dp leakage), reported beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from ddpbayes.engines.base import Engine, MixtureGroup, Mixtures
from ddpbayes.mechanisms import Mechanism
from ddpbayes.problem import Adversary, Problem

TOLERANCE = 1e-9  # relative slack of a bound check (rounding), on top of the quadrature error


@dataclass(frozen=True)
class TargetMeasures:
    """The three measures of one target in nats, the bounds they are checked against, and the
    quadrature error estimate (0 for exact sums).

    Parameters
    ----------
    target : int
        The target tuple i.
    kl_max : float
        sup_y D(X_i ‖ X_i | Y = y), from A(i, ∅) (004 Thm 2, Eq. 26).
    mutual_information : float
        I(X_i; Y), from A(i, ∅) (004 Thm 3, Eq. 28).
    conditional_mutual_information : float
        I(X_i; Y | X_(i)), from A(i, all others) (004 Prop. 4, Eq. 30).
    idp : float
        The target's idp leakage leak(i, ∅), the bound 004 states.
    dp : float
        The mechanism's classic DP leakage for tuple i, the bound Prop. 4's proof uses.
    error : float
        The quadrature error estimate, added to the slack of every check (0 for exact sums).
    dp_note : str or None, default None
        What the user should know about `dp`, when anything.
    """

    target: int
    kl_max: float
    mutual_information: float
    conditional_mutual_information: float
    idp: float
    dp: float
    error: float
    dp_note: str | None = None

    def holds(self) -> dict[str, bool]:
        """Each measure against the bound 004 states (idp) and, for the CMI, the one its proof uses (dp).

        Returns
        -------
        dict[str, bool]
            ``kl_max_le_idp``, ``mutual_information_le_idp``, ``conditional_mutual_information_le_idp`` and
            ``conditional_mutual_information_le_dp``: True when the measure is at most the bound, to rounding
            and `error`.
        """
        return {
            "kl_max_le_idp": self._le(self.kl_max, self.idp),
            "mutual_information_le_idp": self._le(self.mutual_information, self.idp),
            "conditional_mutual_information_le_idp": self._le(self.conditional_mutual_information, self.idp),
            "conditional_mutual_information_le_dp": self._le(self.conditional_mutual_information, self.dp),
        }

    def _le(self, value: float, bound: float) -> bool:
        return value <= bound * (1 + TOLERANCE) + 1e-12 + self.error


def shift_invariant(mechanism: Mechanism) -> bool:
    """True when every output coordinate's noise is a translation kernel (Laplace, geometric)."""
    return all(m.laplace for m in mechanism.releases)


def target_measures(engine: Engine, problem: Problem, target: int, idp: Callable[[], float]) -> TargetMeasures:
    """The measures of `target` (NotAvailable or NoMixtures when they cannot be computed exactly);
    `idp()` gives leak(target, ∅), asked only once the measures are known.

    Parameters
    ----------
    engine : Engine
        An engine with exact mixture weights (`Engine.mixtures`).
    problem : Problem
        The audit problem.
    target : int
        The target tuple i.
    idp : callable
        Called with no argument, returns the target's idp leakage leak(i, ∅).

    Returns
    -------
    TargetMeasures
        The measures, in nats, with their bounds.

    Raises
    ------
    NoMixtures
        When `engine` has no exact mixture weights for this problem.
    NotAvailable
        When the mechanism cannot integrate a group's measures exactly.

    References
    ----------
    Wu et al. (seed 004), Thm 2 Eq. 26, Thm 3 Eq. 28, Prop. 4 Eq. 30; DESIGN §3.4.
    """
    invariant = shift_invariant(problem.mechanism)
    alone = engine.mixtures(problem, Adversary(target), invariant)
    others = frozenset(range(problem.model.n)) - {target}
    given = engine.mixtures(problem, Adversary(target, others), invariant) if others else alone
    kl, mi, error = -math.inf, 0.0, 0.0
    for group in alone.groups:
        g_mi, g_kl, g_err = group_measures(problem.mechanism, alone, group)
        weight = math.exp(group.log_prob)
        mi, kl, error = mi + weight * g_mi, max(kl, g_kl), error + weight * g_err
    cmi = 0.0
    for group in given.groups:
        g_mi, _, g_err = group_measures(problem.mechanism, given, group)
        cmi += math.exp(group.log_prob) * g_mi
        error += math.exp(group.log_prob) * g_err
    dp, dp_note = problem.mechanism.tuple_dp_leakage(problem.query, target, problem.model.domains)
    return TargetMeasures(target, max(kl, 0.0) + 0.0, max(mi, 0.0) + 0.0, max(cmi, 0.0) + 0.0, idp(), float(dp), error,
                          dp_note)  # + 0.0: no -0.0


def group_measures(mechanism: Mechanism, mixtures: Mixtures, group: MixtureGroup) -> tuple[float, float, float]:
    """(I(X_i; Y | group), sup_y D, error) of one group: its varying output coordinates only (the
    others are independent of X_i within the group)."""
    log_w = group.log_w[np.isfinite(logsumexp(group.log_w, axis=1))]
    varying = [a for a in range(group.levels.shape[1]) if np.ptp(group.levels[:, a]) > 0]
    levels, inverse = np.unique(group.levels[:, varying], axis=0, return_inverse=True)
    if len(log_w) < 2 or len(levels) < 2:
        return 0.0, 0.0, 0.0
    merged = np.full((len(log_w), len(levels)), -np.inf)
    for s, u in enumerate(inverse.reshape(-1)):
        merged[:, u] = np.logaddexp(merged[:, u], log_w[:, s])
    merged -= logsumexp(merged)
    kernels = [mechanism.coordinate(mixtures.coordinates[a]) for a in varying]
    return kernels[0].information(levels, merged, kernels)  # NotAvailable when not integrated
