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
give it by construction. eta needs P(X_(i) | t) itself: finite discrete models only (the
enumerated joint table, `ddpbayes.engines.joint`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ddpbayes.ddp.coefficients import dependence_engine
from ddpbayes.ddp.options import RunOptions
from ddpbayes.engines.joint import DEFAULT_MAX_STATES, JointTable, joint_table
from ddpbayes.model import DependenceModel
from ddpbayes.queries import Query

INDEPENDENT = 1e-10  # probabilities this close count as equal (rounding)


@dataclass(frozen=True)
class DependenceProfile:
    """The model's side of 004's conditions: k, and eta when the joint can be enumerated."""

    k: int
    eta: float | None
    notes: tuple[str, ...] = ()


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


def dependence_profile(model: DependenceModel, options: RunOptions | None = None) -> DependenceProfile:
    """k (with the joint-independence check where the joint is enumerated) and eta (module docstring)."""
    options = options or RunOptions()
    engine, dep = dependence_engine(model, options)
    n = model.n
    k = max(len(s) for s in dep) + 1
    if engine.name != "exact":
        reason = f"eta needs the enumerated joint (finite discrete model); the {engine.name} engine fits this one"
        return DependenceProfile(k, None, (reason,))
    table = joint_table(model, options.max_states or DEFAULT_MAX_STATES)
    notes = []
    for i in range(n):
        rest = [j for j in range(n) if j != i and j not in dep[i]]
        if rest and not _jointly_independent(table, i, rest):
            others = ", ".join(model.names[j] for j in rest)
            notes.append(
                f"tuple {model.names[i]} is pairwise but not jointly independent of {{{others}}}: k = n = {n}"
            )
            k = n
            break
    return DependenceProfile(k, max(_largest_tv(table, i) for i in range(n)), tuple(notes))


def idp_bounds(
    model: DependenceModel, query: Query, scale: float, profile: DependenceProfile | None = None,
    options: RunOptions | None = None,
) -> IdpBounds:
    """Prop. 3 and Thm. 4 for `query` released with Laplace(scale) on `model`."""
    profile = profile or dependence_profile(model, options)
    dp_eps = float(query.global_sensitivity(model.domains)) / scale
    eps, k = profile.k * dp_eps, profile.k
    thm4 = b = None
    if profile.eta is not None:
        b = max(0.0, min(-math.log(profile.eta) if profile.eta > 0 else math.inf, eps * (1 - 1 / k)))
        thm4 = eps - b + math.log(2)
    return IdpBounds(float(scale), dp_eps, k, profile.eta, eps, thm4, b, profile.notes)


def _others_ids(table: JointTable, cols: list[int]) -> np.ndarray:
    key = np.zeros(len(table.logp), dtype=np.int64)
    for c in cols:
        key = key * len(table.values[c]) + table.codes[:, c]
    return np.unique(key, return_inverse=True)[1].reshape(-1)


def _pair_table(table: JointTable, i: int, cols: list[int]) -> np.ndarray:
    """P(X_i = t, X_cols = u) as a dense (values of X_i, configurations u) array."""
    u = _others_ids(table, cols)
    n_u, n_t = int(u.max()) + 1, len(table.values[i])
    return np.bincount(table.codes[:, i] * n_u + u, np.exp(table.logp), n_t * n_u).reshape(n_t, n_u)


def _jointly_independent(table: JointTable, i: int, cols: list[int]) -> bool:
    p = _pair_table(table, i, cols)
    return bool(np.abs(p - np.outer(p.sum(axis=1), p.sum(axis=0))).max() <= INDEPENDENT)


def _largest_tv(table: JointTable, i: int) -> float:
    """max over t, t' in supp(X_i) of TV(P(X_(i) | t), P(X_(i) | t')) = 1 - sum_x a_x (004 Eq. 40)."""
    p = _pair_table(table, i, [j for j in range(table.codes.shape[1]) if j != i])
    pt = p.sum(axis=1)
    cond = p[pt > 0] / pt[pt > 0, None]
    if len(cond) < 2:
        return 0.0
    return float(max(0.5 * np.abs(cond[a] - cond[b]).sum() for a in range(len(cond)) for b in range(a + 1, len(cond))))
