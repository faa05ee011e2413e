"""The report's section on seed 004's information measures (Thms 2–3, Prop. 4; DESIGN §3.4):
a table at the spec's noise level and one figure against the noise level beside the idp leakage."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ddpbayes.auditing import AuditResult
from ddpbayes.encoding import number
from ddpbayes.engines import engine_named
from ddpbayes.reports.document import Figure, Para, Section, Table
from ddpbayes.reports.sweep import Sweep

MEASURES = (("kl_max", "sup_y D(X_i ‖ X_i | Y = y)", "Thm 2, Eq. 26"),
            ("mutual_information", "I(X_i; Y)", "Thm 3, Eq. 28"),
            ("conditional_mutual_information", "I(X_i; Y | X_(i))", "Prop. 4, Eq. 30"))


@dataclass(frozen=True)
class InformationView:
    """The measures (nats) of one target at the spec's level and at every swept level, or why not."""

    reason: str | None = None
    block: dict | None = None  # the audit's `information` at the spec's level
    parameter: str = "scale"
    values: list[float] = field(default_factory=list)
    idp: list[float] = field(default_factory=list)
    measures: dict[str, list[float]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"reason": self.reason, "at_spec": self.block, "parameter": self.parameter, "values": self.values,
                "idp": [number(v) for v in self.idp],
                "measures": {k: [number(v) for v in vs] for k, vs in self.measures.items()}}


def information_view(run: Callable[..., AuditResult], results: dict[str, AuditResult], swept: Sweep,
                     say: Callable[[str], None]) -> InformationView:
    """idp audits with the measures, at the spec's level and at every level of the sweep (exact
    engines only: nothing is estimated)."""
    engines = [engine_named(r.engine) for r in results.values() if engine_named(r.engine) is not None]
    if all(e.estimates for e in engines):  # an estimating engine has no exact weights: spare its MCMC runs
        names = ", ".join(sorted({e.name for e in engines})) or "analytic"
        return InformationView(reason=f"the {names} engine has no exact mixture weights to integrate (the measures "
                                      "are not estimated)")
    say("information measures")
    base = run("idp", information="nats")
    if base.information is None:
        return InformationView(reason=base.information_reason)
    target = base.information["target"]
    other = "scale" if swept.parameter == "epsilon" else "epsilon"
    idp, measures = [], {key: [] for key, _, _ in MEASURES}
    for v in swept.values:
        r = run("idp", information="nats", targets=[target], **{swept.parameter: v, other: None})
        idp.append(r.information["bounds"]["idp"])
        for key, values in measures.items():
            values.append(r.information[key])
    return InformationView(None, base.information, swept.parameter, list(swept.values), idp, measures)


def information_section(view: InformationView, names: list[str]) -> Section:
    from ddpbayes.reports import figures
    from ddpbayes.reports.results import fmt

    title = "Information measures (Wu et al.)"
    if view.block is None:
        return Section(title, "information", [Para(f"Not available: {view.reason}.")])
    b = view.block
    holds = b["holds"]
    rows = [[f"{label} ({where})", fmt(b[key]), fmt(b["bounds"]["idp"]), "yes" if holds[f"{key}_le_idp"] else "NO",
             (fmt(b["bounds"]["dp"]) + (" (yes)" if holds[f"{key}_le_dp"] else " (NO)")) if f"{key}_le_dp" in holds
             else ""] for key, label, where in MEASURES]
    label = "scale b" if view.parameter == "scale" else "epsilon"
    return Section(title, "information", [
        Para(f"Wu et al. bound three information measures of target {b['target_name']} by ε when the mechanism is "
             "ε-IDP, i.e. by the target's idp leakage; Prop. 4's proof uses the mechanism's classic DP for the "
             "tuple instead, so the CMI is shown against both. In nats, from "
             f"{b['method']}."),
        Table(["measure", "value (nats)", "bound: idp", "holds", "bound: dp (Prop. 4's proof)"], rows,
              caption="; ".join(b["notes"])),
        Figure("information.png", figures_information(figures, view),
               f"The measures of {b['target_name']} against the noise {label}, beside its idp leakage.",
               f"information measures against the noise {label}"),
        Table([label, "idp", *(lbl for _, lbl, _ in MEASURES)],
              [[fmt(v), fmt(view.idp[k]), *(fmt(view.measures[key][k]) for key, _, _ in MEASURES)]
               for k, v in enumerate(view.values)]),
    ])


def figures_information(figures, view: InformationView) -> bytes:
    """Left: the idp leakage (the bound); right: the three measures; both against the noise level."""
    plt = figures.plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    left.plot(view.values, view.idp, marker="o", mfc="none", color="C0", label="idp leakage (bound ε)")
    for k, (key, label, _) in enumerate(MEASURES):
        right.plot(view.values, view.measures[key], marker="os^"[k], mfc="none", color=f"C{k + 1}", label=label)
    for ax, ylabel in ((left, "leakage (nats)"), (right, "nats")):
        figures.label_values(ax, view.values)
        ax.set_xlabel("noise scale b" if view.parameter == "scale" else "per-bit epsilon")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=9, frameon=False)
    return figures.png(fig)
