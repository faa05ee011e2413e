"""A report section on Gaussian noise (DESIGN §3.5), from the spec's `[profile]` table
(`reports.profile_spec`).

The same query is audited with that noise under each notion (`ddpbayes.audit`, the spec's
engine settings and targets); the section shows ε at δ, zCDP ρ and GDP μ per notion, the profile
ε(δ) on the δ grid beside classic DP's (μ = Δ₂ / σ, `Gaussian.classic_profile`) and a figure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ddpbayes.auditing import AuditResult, audit
from ddpbayes.mechanisms.gaussian import global_l2_sensitivity
from ddpbayes.model import DependenceModel
from ddpbayes.profiles import Profile
from ddpbayes.reports.document import Figure, Para, Section, Table
from ddpbayes.reports.profile_spec import ProfileSpec


@dataclass(frozen=True)
class ProfileView:
    """The audits with Gaussian noise, one per notion, and classic DP's profile for comparison."""

    spec: ProfileSpec
    results: dict[str, AuditResult]
    sigma: float
    l2: float
    classic: Profile

    def to_json(self) -> dict:
        return {"spec": self.spec.to_json(), "sigma": self.sigma, "l2_sensitivity": self.l2,
                "classic": self.classic.to_json(self.spec.delta),
                "audits": {n: r.to_dict() for n, r in self.results.items()}}


def profile_view(spec, model: DependenceModel, say: Callable[[str], None]) -> ProfileView:
    """Audit the spec's query with the `[profile]` noise under each of its notions."""
    p: ProfileSpec = spec.profile
    results = {}
    for notion in p.notions:
        say(f"{p.kind} noise: {notion}")
        kwargs = {**spec.audit_kwargs(notion, say.enabled), "claim": None, "information": None}
        results[notion] = audit(model, spec.query_object(), p.kind, notion, **{
            **kwargs, "scale": p.sigma, "epsilon": p.epsilon, "delta": p.delta, "rho": p.rho})
    first = next(iter(results.values())).problem
    query, mechanism = first.query, first.mechanism
    l2 = global_l2_sensitivity(query, model.domains)
    return ProfileView(p, results, mechanism.sigma, l2, mechanism.classic_profile(l2))


def profile_section(view: ProfileView, names: list[str]) -> Section:
    """ε at δ, ρ and μ per notion; the profile on the δ grid against classic DP's; the figure."""
    from ddpbayes.reports.figures import profile_figure
    from ddpbayes.reports.results import fmt  # results imports collect, which imports this module

    p, delta = view.spec, view.spec.delta
    setting = (f"zCDP rho = {fmt(p.rho)}: sigma = Δ₂ / √(2 rho)" if p.rho is not None else
               f"(epsilon, delta) = ({fmt(p.epsilon)}, {delta:g}): the analytic Gaussian sigma" if p.epsilon is not None
               else "sigma given")
    blocks: list = [Para(t.strip()) for t in (p.text or "").split("\n\n") if t.strip()]
    blocks.append(Para(f"Noise: {p.kind.replace('_', ' ')} N(0, sigma²) with sigma = {fmt(view.sigma, 6)} "
                       f"({setting}; the query's global L2 sensitivity Δ₂ = {fmt(view.l2, 6)}). Classic DP: "
                       f"GDP μ = Δ₂ / sigma = {fmt(view.l2 / view.sigma, 6)}, epsilon at delta = {delta:g} is "
                       f"{fmt(view.classic.epsilon_at(delta), 6)}."))
    rows = [[n, fmt(r.leakage, 6), fmt(r.profile.rho, 6), "–" if r.profile.mu is None else fmt(r.profile.mu, 6),
             fmt(r.profile.tv, 6), r.engine, _worst(r, names)] for n, r in view.results.items()]
    rows.append(["classic DP (model-free)", fmt(view.classic.epsilon_at(delta), 6), fmt(view.classic.rho, 6),
                 fmt(view.classic.mu, 6), fmt(view.classic.tv, 6), "closed form", "any two neighbours"])
    blocks.append(Table(["notion", f"ε at δ = {delta:g}", "zCDP ρ", "GDP μ", "δ(0) = TV", "engine", "worst adversary"],
                        rows, caption="ε at δ: the smallest ε whose hockey-stick divergence is at most δ, over the "
                        "notion's adversaries, known values and pairs t ≠ t' (DESIGN §3.5). GDP μ: where the privacy "
                        "loss is Gaussian (a jointly Gaussian model), the profile is μ-GDP's; – where it is not."))
    blocks.append(Table(["δ", *view.results, "classic DP"],
                        [[f"{d:.3g}", *(fmt(r.profile.epsilon_at(d), 6) for r in view.results.values()),
                          fmt(view.classic.epsilon_at(d), 6)] for d in view.classic.deltas],
                        caption="The privacy profile ε(δ) on the δ grid (half a decade apart, plus the spec's δ)."))
    blocks.append(Figure("profile.png", profile_figure({n: r.profile for n, r in view.results.items()}, view.classic,
                                                       delta),
                         f"Privacy profiles δ(ε) (log scale) of each notion against classic DP's μ = "
                         f"{fmt(view.l2 / view.sigma, 4)} GDP curve; the dotted line is δ = {delta:g}.",
                         "privacy profiles: log delta against epsilon"))
    title = p.title or f"{p.kind.replace('_', ' ').capitalize()} noise: privacy profiles"
    return Section(title, "profile", blocks)


def _worst(r: AuditResult, names: list[str]) -> str:
    from ddpbayes.reports.results import fmt, set_text

    w = r.witness
    if w is None:
        return "–"
    known = set_text(w.adversary.known, names, w.adversary.target)
    return f"{names[w.adversary.target]} = {fmt(w.t, 6)} vs {fmt(w.t_prime, 6)}, knows {known}"
