"""The verdict of an audit against a claim: pass, fail or inconclusive, and why (DESIGN §2.3)."""

from __future__ import annotations

from ddpbayes.engines import AdversaryLeakage

RELATIVE_TOLERANCE = 1e-9  # exact leakage within this of the claim passes (floating-point rounding)


def judge(worst: AdversaryLeakage, claim: float | None, lower_bound: bool = False) -> tuple[str | None, str | None]:
    """pass / fail / inconclusive against `claim`, and why when it is not plain.

    An exact leakage passes when it is at most the claim (to floating-point rounding). An
    estimate fails when its held-out lower bound exceeds the claim, passes only when its upper
    bound clears the claim and nothing blocks a pass (every target and known value compared),
    and needs passing MCMC diagnostics for
    either (DESIGN §2.3). A `lower_bound` on the notion (a greedy pdp search) fails a claim
    below it, soundly, and never passes one.

    Parameters
    ----------
    worst : AdversaryLeakage
        The worst adversary's leakage, with its interval and diagnostics for an estimate.
    claim : float or None
        The leakage claimed; None: no verdict.
    lower_bound : bool, default False
        Whether the leakage is only a lower bound on the notion.

    Returns
    -------
    tuple of (str or None, str or None)
        The verdict ("pass", "fail" or "inconclusive"; None without a claim) and why, when it is
        not plain.
    """
    verdict, reason = _judge(worst, claim)
    if verdict == "pass" and lower_bound:
        return "inconclusive", ("a lower bound cannot pass a claim: the known sets the search did not visit may leak "
                                "more (--search full searches every one)")
    return verdict, reason


def _judge(worst: AdversaryLeakage, claim: float | None) -> tuple[str | None, str | None]:
    if claim is None:
        return None, None
    diag = worst.diagnostics or {}
    if worst.ci is None or diag.get("exact"):  # exact, or summed exactly by the sampling engine (width zero)
        return ("pass" if worst.value <= claim * (1 + RELATIVE_TOLERANCE) + 1e-12 else "fail"), worst.reason
    lower, upper = worst.ci
    if not diag.get("ok", True):
        if diag.get("chains", 2) < 2:
            return "inconclusive", "R-hat compares chains and needs at least 2 per run: raise --chains"
        return "inconclusive", (
            f"MCMC diagnostics failed (R-hat max {diag.get('rhat_max', float('nan')):.4g}, "
            f"bulk ESS min {diag.get('ess_bulk_min', float('nan')):.4g}, divergences {diag.get('divergences', 0)}); "
            "raise --draws/--tune"
        )
    if diag.get("lower_bound_only"):  # a program's certified bound (DESIGN §2.6)
        if lower > claim:
            return "fail", f"the certified 95% lower bound {lower:.4g} exceeds the claim"
        return "inconclusive", (f"the certified lower bound {lower:.4g} does not exceed the claim, and a program's "
                                "audit is a lower bound only: it can fail a claim, never pass one")
    level = "95% " if diag else ""  # no diagnostics: a sure range (dp of an expr: query with a bounded sensitivity)
    if lower > claim:
        return "fail", f"the {level}lower bound {lower:.4g} exceeds the claim"
    if upper <= claim and not diag.get("pass_blocked"):
        return "pass", f"the {level}upper bound {upper:.4g} clears the claim"
    if upper <= claim:
        return "inconclusive", diag["pass_blocked"]
    return "inconclusive", (f"the claim lies inside the interval [{lower:.4g}, {upper:.4g}]; "
                            + ("raise --draws" if diag else "give --sensitivity"))
