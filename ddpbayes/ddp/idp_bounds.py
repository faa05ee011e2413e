"""Seed 004's sufficient conditions for IDP, evaluated for a model (004 Prop. 3, Thm. 4; DESIGN §3.3).

Both take a mechanism M that is eps/k-DP, where each tuple is independent of all but k-1
others. For Laplace(b) on a query of global sensitivity dQ, M is (dQ / b)-DP, so eps = k dQ / b.

- Prop. 3 (group privacy): M is eps-IDP.
- Thm. 4: with a_x = min(P(X_(i) = x | X_i = t), P(X_(i) = x | X_i = t')) over the other
  tuples' configurations x, eta >= 1 - sum_x a_x (the largest total-variation distance between
  P(X_(i) | t) and P(X_(i) | t') over i, t, t') and eta = e^{-b}, eps (1 - 1/k) >= b:
  M is (eps - b + log 2)-IDP. The smallest such bound takes the largest admissible b,
  b = min(-log eta, eps (1 - 1/k)), i.e. log 2 + max(eps / k, eps + log eta).

k is the dependence size L = max |N(i)| + 1 when X_i is independent of the tuples outside
N(i) jointly, as Prop. 3's proof needs (P(X̄_(i) | X_i = t) = P(X̄_(i))). Pairwise independence
does not give that (X_2 = X_0 xor X_1 is pairwise independent of each), so the exact engine
checks it on the joint table and falls back to k = n; for jointly Gaussian tuples zero
covariances give it, and the sampling engine's structural sets (no common random ancestor)
give it by construction. eta needs P(X_(i) | t) itself: only an engine that holds the joint law
computes it (`Engine.dependence_profile`; the exact engine, from its enumerated joint).

Premises, checked before a bound is shown (else it is None with the premise that fails):
both need M to be eps/k-DP for the data the model produces. The DP level dQ / b is computed
from the declared domains, so it covers the model's data only when every tuple's support lies
within its declared domain (`wider_than_declared`); a Gaussian tuple declared on [0, 1] can
leave it, and its query moves further than dQ. k is always defined (the fallback k = n).
Thm. 4 needs eta as well; its b = min(-log eta, eps (1 - 1/k)) is then admissible by
construction (0 <= b <= eps (1 - 1/k) and e^{-b} >= eta).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ddpbayes.ddp.coefficients import dependence_engine, dependence_problem
from ddpbayes.engines import DependenceProfile
from ddpbayes.model import DependenceModel
from ddpbayes.model.supports import wider_than_declared
from ddpbayes.queries import Query
from ddpbayes.settings import RunSettings


@dataclass(frozen=True)
class IdpBounds:
    """Prop. 3 and Thm. 4 for Laplace(scale): M is (dp_epsilon)-DP, eps = k dp_epsilon.

    Parameters
    ----------
    scale : float
        The Laplace scale b.
    dp_epsilon : float
        dQ / b: the DP level of the mechanism over the declared domains.
    k : int
        The dependence size used (L, or n when joint independence fails).
    eta : float or None
        The largest total-variation distance between P(X_(i) | t) and P(X_(i) | t'); None when unknown.
    prop3 : float or None
        Prop. 3's IDP level, eps; None when its premise fails.
    thm4 : float or None
        Thm. 4's IDP level, eps - b + log 2; None when its premise fails.
    thm4_b : float or None
        The b Thm. 4 uses, ``min(-log eta, eps (1 - 1/k))``.
    notes : tuple of str, default ()
        What the dependence profile noted.
    prop3_premise, thm4_premise : str or None, default None
        Why Prop. 3 (Thm. 4) does not apply; None when it does.
    """

    scale: float
    dp_epsilon: float
    k: int
    eta: float | None
    prop3: float | None
    thm4: float | None
    thm4_b: float | None
    notes: tuple[str, ...] = ()
    prop3_premise: str | None = None  # why Prop. 3 does not apply (then prop3 is None)
    thm4_premise: str | None = None  # why Thm. 4 does not apply (then thm4 is None)

    def to_dict(self) -> dict:
        return {
            "scale": self.scale,
            "dp_epsilon": self.dp_epsilon,
            "k": self.k,
            "eta": self.eta,
            "prop3": self.prop3,
            "thm4": self.thm4,
            "thm4_b": self.thm4_b,
            "prop3_reason": None if self.prop3_premise is None else f"premise: {self.prop3_premise}",
            "thm4_reason": None if self.thm4_premise is None else f"premise: {self.thm4_premise}",
            "notes": list(self.notes),
        }


def dependence_profile(model: DependenceModel, settings: RunSettings | None = None) -> DependenceProfile:
    """k (with the joint-independence check where the engine has the joint) and eta (module docstring).

    Parameters
    ----------
    model : DependenceModel
        The tuples and their dependence.
    settings : RunSettings or None, default None
        How to run; None: the defaults.

    Returns
    -------
    DependenceProfile
        k, eta (None unless the engine holds the joint law) and notes.
    """
    engine, dep = dependence_engine(model, settings or RunSettings())
    return engine.dependence_profile(dependence_problem(model, settings or RunSettings()), dep)


def idp_bounds(
    model: DependenceModel, query: Query, scale: float, profile: DependenceProfile | None = None,
    settings: RunSettings | None = None,
) -> IdpBounds:
    """Prop. 3 and Thm. 4 for `query` released with Laplace(scale) on `model`, each None with
    the failed premise when it does not apply (module docstring).

    Parameters
    ----------
    model : DependenceModel
        The tuples and their dependence.
    query : Query
        The statistic released, bound to `model`.
    scale : float
        The Laplace scale b.
    profile : DependenceProfile or None, default None
        k and eta; None: computed with `dependence_profile`.
    settings : RunSettings or None, default None
        How to compute the profile; None: the defaults.

    Returns
    -------
    IdpBounds
        Both bounds, or their failed premises.

    References
    ----------
    Wu et al., "Extending Differential Privacy for Treating Dependent Records", Prop. 3 and Thm. 4.
    """
    profile = profile or dependence_profile(model, settings)
    dp_eps = float(query.global_sensitivity(model.domains)) / scale
    eps, k = profile.k * dp_eps, profile.k
    dp_premise = _dp_premise(model)
    thm4_premise = dp_premise or (None if profile.eta is not None else _eta_reason(profile))
    thm4 = b = None
    if thm4_premise is None:
        b = max(0.0, min(-math.log(profile.eta) if profile.eta > 0 else math.inf, eps * (1 - 1 / k)))
        thm4 = eps - b + math.log(2)
    return IdpBounds(float(scale), dp_eps, k, profile.eta, None if dp_premise else eps, thm4, b, profile.notes,
                     dp_premise, thm4_premise)


def _dp_premise(model: DependenceModel) -> str | None:
    """Why M is not (dQ / b)-DP for the model's data, or None when it is."""
    wider = wider_than_declared([slot.rv for slot in model.slots], model.domains)
    if not wider:
        return None
    names = ", ".join(model.names[k] for k in wider[:3]) + (f" and {len(wider) - 3} more" if len(wider) > 3 else "")
    return (f"M is dQ/b-DP only over data within the declared domains, and the model's {names} can leave them "
            "(support wider than the declared domain)")


def _eta_reason(profile: DependenceProfile) -> str:
    """Why eta is unknown: the engine's own note, or a plain one."""
    about = [n for n in profile.notes if "eta" in n]
    return about[0] if about else ("eta, the largest total-variation distance between P(X_(i) | t) and "
                                   "P(X_(i) | t'), is unknown")
