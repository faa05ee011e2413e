"""Gaussian noise for the report (DESIGN §3.5), from the spec's `[profile]` table
(`input.profile_spec`): the same query audited with that noise under each notion (`ddpbayes.audit`,
the spec's engine settings and targets), and classic DP's profile (μ = Δ₂ / σ,
`Gaussian.classic_profile`) beside them (`render.profile` shows them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ddpbayes.auditing import AuditResult, audit
from ddpbayes.mechanisms.gaussian import global_l2_sensitivity
from ddpbayes.model import DependenceModel
from ddpbayes.profiles import Profile
from ddpbayes.reports.input.profile_spec import ProfileSpec
from ddpbayes.reports.input.spec import Spec
from ddpbayes.settings import RunSettings


@dataclass(frozen=True)
class ProfileView:
    """The audits with Gaussian noise, one per notion, and classic DP's profile for comparison."""

    spec: ProfileSpec
    results: dict[str, AuditResult]
    sigma: float
    l2: float
    classic: Profile

    def to_dict(self) -> dict:
        return {"spec": self.spec.to_dict(), "sigma": self.sigma, "l2_sensitivity": self.l2,
                "classic": self.classic.to_dict(self.spec.delta),
                "audits": {n: r.to_dict() for n, r in self.results.items()}}


def profile_view(spec: Spec, model: DependenceModel, say: Callable[[str], None]) -> ProfileView:
    """Audit the spec's query with the `[profile]` noise under each of its notions."""
    p: ProfileSpec = spec.profile
    results = {}
    for notion in p.notions:
        say(f"{p.kind} noise: {notion}")
        kwargs = {**spec.audit_kwargs(notion, RunSettings(progress=say.enabled)), "claim": None, "information": None}
        results[notion] = audit(model, spec.query_object(), p.kind, notion, **{
            **kwargs, "scale": p.sigma, "epsilon": p.epsilon, "delta": p.delta, "rho": p.rho})
    first = next(iter(results.values())).problem
    query, mechanism = first.query, first.mechanism
    l2 = global_l2_sensitivity(query, model.domains)
    return ProfileView(p, results, mechanism.sigma, l2, mechanism.classic_profile(l2))
