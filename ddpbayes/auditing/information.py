"""The `information` block of an audit: the measures per target, their bounds and checks (DESIGN §3.4)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from ddpbayes.encoding import number
from ddpbayes.engines import engine_named
from ddpbayes.engines.base import NoMixtures
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import NotAvailable
from ddpbayes.information.measures import TargetMeasures, target_measures
from ddpbayes.notions import DP, IDP, Notion
from ddpbayes.problem import Adversary, Problem

UNITS = {"nats": 1.0, "bits": 1 / math.log(2)}
BUDGET_SECONDS = 2.0  # the other audited targets too when, timed on the worst, they would take at most this
METHOD = ("the engine's exact mixture weights; Laplace: Gauss-Legendre per piece between breakpoints with node "
          "doubling (quadrature to 1e-10) and closed-form tails, sup over y by scan + Brent; geometric and "
          "randomized response: exact sums")


def check_unit(unit: str | None) -> None:
    if unit is not None and unit not in UNITS:
        raise InputError(f"unknown information unit '{unit}' (use nats or bits)")


def information_block(problem: Problem, engine_name: str, notion: Notion, targets: Sequence[int],
                      per_target: Sequence[float | None], worst_target: int | None,
                      unit: str) -> tuple[dict | None, str | None]:
    """(the JSON block, None), or (None, why the measures are not available)."""
    engine = engine_named(engine_name)
    if engine is None or notion.model_free:
        return None, f"the {notion} audit runs no engine (model-free): audit idp or ddp for the measures"
    if problem.mechanism.profile:  # 004's bounds compare them with a pure ε, which Gaussian noise has not
        return None, (f"not computed for {problem.mechanism.kind} noise: Wu et al.'s (IDP) bounds compare them with "
                      "a pure epsilon, and its leakage is a privacy profile (DESIGN §3.5)")
    worst = worst_target if worst_target is not None else max(targets, key=lambda i: per_target[i] or 0.0)

    def one(i: int) -> TargetMeasures:
        return target_measures(engine, problem, i, lambda: _idp(engine, problem, notion, i, per_target))

    try:
        begun = time.perf_counter()
        measures = [one(worst)]
        each = time.perf_counter() - begun
        rest = [i for i in targets if i != worst]
        if each * len(rest) <= BUDGET_SECONDS:
            measures += [one(i) for i in rest]
            rule = "every audited target"
        else:
            rule = (f"the worst target only: the other {len(rest):,} would take about {each * len(rest):.3g} s "
                    f"(over {BUDGET_SECONDS:g} s)")
    except (NoMixtures, NotAvailable, InputError) as e:  # InputError: a size limit of the integrals
        return None, str(e)
    measures.sort(key=lambda m: m.target)
    main = next(m for m in measures if m.target == worst)
    block = {**_json(main, unit, problem.model.names), "unit": unit, "method": METHOD,
             "per_target": [_json(m, unit, problem.model.names) for m in measures], "notes": [rule]}
    return block, None


def _idp(engine, problem: Problem, notion: Notion, target: int, per_target: Sequence[float | None]) -> float:
    """leak(i, ∅), the bound 004 states: the audit's own value when it was idp (the weakest adversary)."""
    if notion.weakest and per_target[target] is not None:
        return float(per_target[target])
    return engine.leakage(problem.with_adversaries([Adversary(target)]))[0].value


def _json(m: TargetMeasures, unit: str, names: Sequence[str]) -> dict:
    k = UNITS[unit]
    return {
        "target": m.target,
        "target_name": names[m.target],
        "kl_max": number(k * m.kl_max),
        "mutual_information": number(k * m.mutual_information),
        "conditional_mutual_information": number(k * m.conditional_mutual_information),
        "bounds": {IDP.name: number(k * m.idp), DP.name: number(k * m.dp)},
        "holds": m.holds(),
        "error": number(k * m.error),
        **({"dp_note": m.dp_note} if m.dp_note else {}),
    }


def information_text(block: dict | None, reason: str | None) -> list[str]:
    """The terminal lines of the block: the reported target's measures against their bounds."""
    if block is None:
        return [f"information not available: {reason}"] if reason else []
    holds = block["holds"]
    mark = {True: "<=", False: "> "}
    unit, idp, dp = block["unit"], block["bounds"][IDP.name], block["bounds"][DP.name]
    return [
        (f"information ({unit}, target {block['target_name']}; Wu et al. (IDP) Thms 2-3, Prop. 4; "
         f"bound eps = idp {idp:.6g}, dp {dp:.6g})"),
        f"  sup_y D(X_i || X_i|Y=y)  {block['kl_max']:.6g}  {mark[holds['kl_max_le_idp']]} idp",
        f"  I(X_i; Y)                {block['mutual_information']:.6g}  {mark[holds['mutual_information_le_idp']]} idp",
        (f"  I(X_i; Y | X_(i))        {block['conditional_mutual_information']:.6g}  "
         f"{mark[holds['conditional_mutual_information_le_idp']]} idp (as stated), "
         f"{mark[holds['conditional_mutual_information_le_dp']]} dp (what the proof uses)"),
    ]
