"""Seed 004's information measures for the report (Thms 2–3, Prop. 4; DESIGN §3.4): at the spec's
noise level and at every swept level, beside the idp leakage that bounds them (`render.information`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ddpbayes.auditing import AuditResult
from ddpbayes.encoding import number
from ddpbayes.engines import engine_named
from ddpbayes.notions import IDP
from ddpbayes.reports.views.sweep import Sweep

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

    def to_dict(self) -> dict:
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
    base = run(IDP, information="nats")
    if base.information is None:
        return InformationView(reason=base.information_reason)
    target = base.information["target"]
    other = "scale" if swept.parameter == "epsilon" else "epsilon"
    idp, measures = [], {key: [] for key, _, _ in MEASURES}
    for v in swept.values:
        r = run(IDP, information="nats", targets=[target], **{swept.parameter: v, other: None})
        idp.append(r.information["bounds"][IDP.name])
        for key, values in measures.items():
            values.append(r.information[key])
    return InformationView(None, base.information, swept.parameter, list(swept.values), idp, measures)
