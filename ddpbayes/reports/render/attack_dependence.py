"""The attack report's dependence model (issue 30): the near-friend model's fit, its posterior
predictive check against the CAR on held-out friendships (computed once by models/gowalla_near.py
and shipped as models/data/gowalla_heldout.json), and, for a stated sample of users, its audit by the
sampling engine beside the CAR's exact one (`attack.audit_near`)."""

from __future__ import annotations

import json

from ddpbayes import shipped
from ddpbayes.attack.run import NEAR, AttackResult
from ddpbayes.reports.render.document import Para, Section, Table
from ddpbayes.reports.render.results import fmt

HELDOUT = "models/data/gowalla_heldout.json"


def model_view(result: AttackResult, audit_users: int) -> dict:
    """The near-friend fit the attack used; the held-out check when the fit is the shipped one; the
    sampled audit of `audit_users` users (us region only)."""
    near = result.data.near
    view: dict = {"near_fit": {"weights": list(near.weights), "sigma_km": list(near.sigma_km),
                               "bandwidth_km": near.bandwidth_km, "diagnostics": near.diagnostics}}
    path = shipped.path(HELDOUT)
    if result.meta["inputs"]["near"] == NEAR and path.is_file():
        view["heldout"] = json.loads(path.read_text())
    if audit_users and result.meta["region"] == "us":
        from ddpbayes.attack.audit_near import audit_sample

        view["audit"] = audit_sample(result.data, result.partition, near, users=audit_users,
                                     seed=result.meta["seed"])
    return view


def summary_line(model: dict) -> str:
    return "The near-friend model against the CAR on held-out friendships: see the dependence model's section."


def sections(model: dict | None) -> list[Section]:
    if not model:
        return []
    fit = model["near_fit"]
    d = fit["diagnostics"]
    rows = [["population (where people live)", fmt(fit["weights"][0], 3), "–"]]
    rows += [[f"near a friend, scale {k + 1}", fmt(w, 3), fmt(s, 4)]
             for k, (w, s) in enumerate(zip(fit["weights"][1:], fit["sigma_km"]))]
    blocks = [
        Para("A user with friends lives, with probability w_0, where people live (a Gaussian kernel density of the "
             f"other users, bandwidth {fmt(fit['bandwidth_km'], 3)} km), and otherwise near a uniformly chosen friend, "
             "at a fitted scale, where people live; a user without friends lives where people live. Fitted with PyMC "
             "(NUTS) as a pseudo-likelihood, the product of every user's conditional law (Besag 1975)."),
        Table(["component", "weight", "scale σ (km)"], rows,
              "Posterior means. " + ", ".join(f"{k}: {v}" for k, v in d.items() if not isinstance(v, (dict, list)))),
    ]
    return [Section("A dependence model that fits", "model", blocks)]
