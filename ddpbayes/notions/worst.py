"""A notion's leakage is the supremum over its adversaries: `worst_of` folds their leakages into
the worst (ties to the weakest adversary; estimates by their choosing-run score, DESIGN §2.3),
`worst_by_target` into each target's, `merged_profile` into the notion's privacy profile (§3.5)."""

from __future__ import annotations

import functools
import math
from dataclasses import replace

from ddpbayes.engines.base import AdversaryLeakage
from ddpbayes.profiles import Profile

TIE = 1e-12  # leakages this close (relative) are equal: the weakest such adversary is the witness


def aggregate(results: list[AdversaryLeakage], n: int) -> tuple[AdversaryLeakage, list[float | None]]:
    """The worst adversary (`worst_of`) and the worst leakage for every target (None where not a target).

    Parameters
    ----------
    results : list of AdversaryLeakage
        The adversaries' leakages.
    n : int
        The number of tuples.

    Returns
    -------
    tuple of (AdversaryLeakage, list of float or None)
        The worst adversary, and per tuple its largest leakage (None where not a target).
    """
    return worst_of(results), worst_by_target(results, n)


def worst_of(results: list[AdversaryLeakage]) -> AdversaryLeakage:
    """The worst adversary of `results`, with the largest leakage among them.

    For estimates, the worst adversary is chosen by its choosing-run score, so that its
    held-out lower bound stays valid (DESIGN §2.3); its upper bound becomes the largest of all.

    Parameters
    ----------
    results : list of AdversaryLeakage
        The adversaries' leakages, at least one.

    Returns
    -------
    AdversaryLeakage
        The worst adversary (exact values: among ties, the one with the smallest known set, then the
        smallest target), its value the largest of `results`, its profile the notion's (`merged_profile`,
        None unless every adversary has one).
    """
    if len(results) == 1 and results[0].ci is None and results[0].profile is None:
        return results[0]  # what the general case returns, without copying it (a target's single adversary)
    if all(r.ci is None for r in results):
        top = max(r.value for r in results)
        slack = TIE * max(1.0, abs(top)) if math.isfinite(top) else 0.0  # rounding noise is a tie
        tied = [r for r in results if r.value >= top - slack]
        worst = min(tied, key=lambda r: (len(r.adversary.known), r.adversary.target))
        return replace(worst, value=top, profile=merged_profile(results, worst))
    worst = max(results, key=lambda r: (r.score if r.score is not None else r.value, -len(r.adversary.known)))
    upper = max(r.ci[1] if r.ci else r.value for r in results)
    if all(r.diagnostics is None for r in results):  # sure ranges (dp of an expr: query whose sensitivity is bounded)
        lower = max(r.ci[0] if r.ci else r.value for r in results)
        return replace(worst, value=max(r.value for r in results), ci=(lower, upper),
                       profile=merged_profile(results, worst))
    diagnostics = dict(worst.diagnostics or {})
    diagnostics["ok"] = all((r.diagnostics or {}).get("ok", True) for r in results)
    diagnostics["pass_blocked"] = next(
        ((r.diagnostics or {}).get("pass_blocked") for r in results if (r.diagnostics or {}).get("pass_blocked")), None)
    value = max(r.value for r in results)
    return replace(worst, value=value, ci=(worst.ci[0], max(upper, value)), diagnostics=diagnostics,
                   profile=merged_profile(results, worst))


def merged_profile(results: list[AdversaryLeakage], worst: AdversaryLeakage) -> Profile | None:
    """The notion's privacy profile: the pointwise maximum of its adversaries', with the ρ of the
    worst adversary (DESIGN §3.5).

    Parameters
    ----------
    results : list of AdversaryLeakage
        The adversaries' leakages.
    worst : AdversaryLeakage
        The worst adversary, whose ρ the profile takes.

    Returns
    -------
    Profile or None
        The merged profile, or None unless every adversary has a profile.
    """
    profiles = [r.profile for r in results if r.profile is not None]
    if len(profiles) < len(results) or not profiles:
        return None
    return functools.reduce(Profile.merge, profiles).with_rho_of(worst.profile)


def worst_by_target(results: list[AdversaryLeakage], n: int,
                    start: list[float | None] | None = None) -> list[float | None]:
    """The largest leakage of each target (None where not a target), continuing from `start`.

    Parameters
    ----------
    results : list of AdversaryLeakage
        The adversaries' leakages.
    n : int
        The number of tuples.
    start : list of float or None, optional
        The per-tuple worst leakages so far (copied, not changed); None starts from none.

    Returns
    -------
    list of float or None
        One entry per tuple.
    """
    per_target = list(start) if start is not None else [None] * n
    for r in results:
        i = r.adversary.target
        per_target[i] = r.value if per_target[i] is None else max(per_target[i], r.value)
    return per_target


def fold_targets(results: list[AdversaryLeakage],
                 by_target: dict[int, AdversaryLeakage]) -> dict[int, AdversaryLeakage]:
    """Fold `results` into each target's worst adversary so far, picked as the notion's is (`worst_of`:
    for estimates by the choosing-run score, with the largest upper bound: DESIGN §2.3).

    Parameters
    ----------
    results : list of AdversaryLeakage
        The adversaries' leakages.
    by_target : dict[int, AdversaryLeakage]
        Each target's worst adversary so far; updated in place.

    Returns
    -------
    dict[int, AdversaryLeakage]
        `by_target`, updated.
    """
    groups: dict[int, list[AdversaryLeakage]] = {}
    for r in results:
        groups.setdefault(r.adversary.target, []).append(r)
    for i, group in groups.items():
        by_target[i] = worst_of(group + ([by_target[i]] if i in by_target else []))
    return by_target
