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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ddpbayes.ddp.coefficients import dependence_engine, dependence_problem
from ddpbayes.engines import DependenceProfile
from ddpbayes.model import DependenceModel
from ddpbayes.queries import Query
from ddpbayes.settings import RunSettings


@dataclass(frozen=True)
class IdpBounds:
    """Prop. 3 and Thm. 4 for Laplace(scale): M is (dp_epsilon)-DP, eps = k dp_epsilon."""

    scale: float
    dp_epsilon: float
    k: int
    eta: float | None
    prop3: float
    thm4: float | None
    thm4_b: float | None
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {
            "scale": self.scale,
            "dp_epsilon": self.dp_epsilon,
            "k": self.k,
            "eta": self.eta,
            "prop3": self.prop3,
            "thm4": self.thm4,
            "thm4_b": self.thm4_b,
            "notes": list(self.notes),
        }


def dependence_profile(model: DependenceModel, settings: RunSettings | None = None) -> DependenceProfile:
    """k (with the joint-independence check where the engine has the joint) and eta (module docstring)."""
    engine, dep = dependence_engine(model, settings or RunSettings())
    return engine.dependence_profile(dependence_problem(model, settings or RunSettings()), dep)


def idp_bounds(
    model: DependenceModel, query: Query, scale: float, profile: DependenceProfile | None = None,
    settings: RunSettings | None = None,
) -> IdpBounds:
    """Prop. 3 and Thm. 4 for `query` released with Laplace(scale) on `model`."""
    profile = profile or dependence_profile(model, settings)
    dp_eps = float(query.global_sensitivity(model.domains)) / scale
    eps, k = profile.k * dp_eps, profile.k
    thm4 = b = None
    if profile.eta is not None:
        b = max(0.0, min(-math.log(profile.eta) if profile.eta > 0 else math.inf, eps * (1 - 1 / k)))
        thm4 = eps - b + math.log(2)
    return IdpBounds(float(scale), dp_eps, k, profile.eta, eps, thm4, b, profile.notes)
