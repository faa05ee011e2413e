"""The report's section on seed 004's information measures (Thms 2–3, Prop. 4; DESIGN §3.4):
a table at the spec's noise level and one figure against the noise level beside the idp leakage."""

from __future__ import annotations

from ddpbayes.reports.render import figures
from ddpbayes.reports.render.document import Figure, Para, Section, Table
from ddpbayes.reports.render.results import fmt
from ddpbayes.notions import DP, IDP
from ddpbayes.reports.views.information import MEASURES, InformationView


def information_section(view: InformationView, names: list[str]) -> Section:
    title = "Information measures (Wu et al.)"
    if view.block is None:
        return Section(title, "information", [Para(f"Not available: {view.reason}.")])
    b = view.block
    holds = b["holds"]
    rows = [[f"{label} ({where})", fmt(b[key]), fmt(b["bounds"][IDP.name]), "yes" if holds[f"{key}_le_idp"] else "NO",
             (fmt(b["bounds"][DP.name]) + (" (yes)" if holds[f"{key}_le_dp"] else " (NO)")) if f"{key}_le_dp" in holds
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
        Table([label, IDP.name, *(lbl for _, lbl, _ in MEASURES)],
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
