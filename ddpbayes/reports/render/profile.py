"""A report section on Gaussian noise (DESIGN §3.5), from `views.profile`: ε at δ, zCDP ρ and GDP μ
per notion, the profile ε(δ) on the δ grid beside classic DP's and a figure."""

from __future__ import annotations

from ddpbayes.auditing import AuditResult
from ddpbayes.reports.render.document import Figure, Para, Section, Table
from ddpbayes.reports.render.figures import profile_figure
from ddpbayes.reports.render.results import fmt, set_text
from ddpbayes.reports.views.profile import ProfileView


def profile_section(view: ProfileView, names: list[str]) -> Section:
    """ε at δ, ρ and μ per notion; the profile on the δ grid against classic DP's; the figure."""
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
    w = r.witness
    if w is None:
        return "–"
    known = set_text(w.adversary.known, names, w.adversary.target)
    return f"{names[w.adversary.target]} = {fmt(w.t, 6)} vs {fmt(w.t_prime, 6)}, knows {known}"
