"""Privacy notions as sets of adversaries over the one quantity leak(i, K) (DESIGN §1).

| notion | adversaries                                            | source           |
| dp     | K = all others, x_{-i} over the product of the domains  | model-free       |
| idp    | K = {} for every target                                | 004 Def. 3       |
| pdp    | every K for every target (the WHG lattice)             | 003 Def. 2       |
| ddp    | K = the tuples outside the target's dependence set     | 000 Def. 3–4     |
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import replace

import numpy as np

from ddpbayes.engines.base import AdversaryLeakage, Witness
from ddpbayes.errors import InputError
from ddpbayes.model import Finite
from ddpbayes.problem import Adversary, Problem
from ddpbayes.profiles import Profile
from ddpbayes.queries import Linear
from ddpbayes.vocabulary import NOTIONS

TIE = 1e-12  # leakages this close (relative) are equal: the weakest such adversary is the witness


def check_notion(notion: str) -> str:
    if notion not in NOTIONS:
        raise InputError(f"unknown notion '{notion}' (use {', '.join(NOTIONS)})")
    return notion


def adversaries(
    notion: str,
    n: int,
    targets: Sequence[int],
    known: Sequence[int] | None = None,
    dependence_sets: Sequence[frozenset[int]] | None = None,
) -> Iterator[Adversary]:
    """The adversaries a notion takes the supremum over, one at a time (the pdp lattice has
    |targets| 2^(n-1) of them: it is never listed; dp is model-free: see `dp_leakage`)."""
    if notion == "idp":
        return (Adversary(i) for i in targets)
    if notion == "ddp":
        everyone = frozenset(range(n))
        return (Adversary(i, everyone - dependence_sets[i] - {i}) for i in targets)
    if notion == "pdp":
        if known is not None:
            return (Adversary(i, frozenset(known)) for i in targets)
        return (Adversary(i, frozenset(k)) for i in targets for size in range(n)
                for k in itertools.combinations([j for j in range(n) if j != i], size))
    raise InputError(f"notion '{notion}' has no adversary set")


def adversary_count(notion: str, n: int, targets: Sequence[int], known: Sequence[int] | None = None) -> int:
    """How many adversaries `adversaries` yields."""
    return len(targets) * 2 ** (n - 1) if notion == "pdp" and known is None else len(targets)


def dp_leakage(problem: Problem, targets: Sequence[int]) -> list[AdversaryLeakage]:
    """Classic DP: sup over x_{-i} in the product of domains, t, t', y — the mechanism's
    leakage at the query's L1 sensitivity to tuple i; infinite for an unbounded domain."""
    model, query, mech = problem.model, problem.query, problem.mechanism
    out = []
    everyone = frozenset(range(model.n))
    for i in targets:
        adv = Adversary(i, everyone - {i})
        dom = model.domains[i]
        value, reason = mech.tuple_dp_leakage(query, i, model.domains)
        profile = mech.classic_profile(_l2(query, i, model.domains)) if mech.profile else None
        t, t_prime, y = _dp_witness(problem, i)
        if math.isinf(value):
            reason = f"tuple {model.names[i]} has the unbounded domain {dom}: additive noise cannot hide it"
        bounds = getattr(query, "sensitivity_range", lambda *_: None)(i, model.domains)  # expr: on continuous domains
        ci = None if bounds is None or bounds[0] >= bounds[1] else (mech.dp_leakage(bounds[0]), value)
        if ci is not None:  # a sure range (no diagnostics), not a 95% interval
            reason = (f"the query's sensitivity to {model.names[i]} is bounded in [{bounds[0]:.6g}, {bounds[1]:.6g}], "
                      "not computed: the leakage lies between the two (give --sensitivity to state it)")
        y = None if mech.profile else y  # a profile's witness is a set of outputs, not one
        out.append(AdversaryLeakage(adv, value, Witness(adv, None, t, t_prime, y), ci=ci, reason=reason,
                                    profile=profile))
    return out


def _l2(query, i: int, domains) -> float:
    """The change of the query in L2 norm when tuple i changes (classic Gaussian DP reads it)."""
    from ddpbayes.mechanisms import l2_sensitivity

    return l2_sensitivity(query, i, domains)


def _dp_witness(problem: Problem, i: int) -> tuple[float, float, tuple[float, ...] | None]:
    dom = problem.model.domains[i]
    lo, hi = (dom.values[0], dom.values[-1]) if isinstance(dom, Finite) else (dom.lo, dom.hi)
    if isinstance(problem.query, Linear):
        w = problem.query.weights(problem.model.n)[i]
        return (hi, lo, (math.inf,)) if w >= 0 else (lo, hi, (math.inf,))
    pair = getattr(problem.query, "sensitivity_pair", None)  # an expr:/fn: query: the values attaining it
    if pair is not None:
        t, t_prime = pair(i, problem.model.domains) or (None, None)
        return t, t_prime, None
    return hi, lo, None


def aggregate(results: list[AdversaryLeakage], n: int) -> tuple[AdversaryLeakage, list[float | None]]:
    """The worst adversary (`worst_of`) and the worst leakage for every target (None where not a target)."""
    return worst_of(results), worst_by_target(results, n)


def worst_of(results: list[AdversaryLeakage]) -> AdversaryLeakage:
    """The worst adversary of `results`, with the largest leakage among them.

    For estimates, the worst adversary is chosen by its selection-half score, so that its
    held-out lower bound stays valid (DESIGN §2.3); its upper bound becomes the largest of all."""
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
    worst adversary (DESIGN §3.5)."""
    profiles = [r.profile for r in results if r.profile is not None]
    if len(profiles) < len(results) or not profiles:
        return None
    return functools.reduce(Profile.merge, profiles).with_rho_of(worst.profile)


def worst_by_target(results: list[AdversaryLeakage], n: int,
                    start: list[float | None] | None = None) -> list[float | None]:
    """The largest leakage of each target (None where not a target), continuing from `start`."""
    per_target = list(start) if start is not None else [None] * n
    for r in results:
        i = r.adversary.target
        per_target[i] = r.value if per_target[i] is None else max(per_target[i], r.value)
    return per_target


def lattice_summary(results: list[AdversaryLeakage]) -> dict:
    """PDP lattice by layer |K|: the max per layer, and whether the weakest adversary leaks most."""
    layers: dict[int, float] = {}
    for r in results:
        size = len(r.adversary.known)
        layers[size] = max(layers.get(size, -np.inf), r.value)
    return {"max_by_known_size": {str(k): layers[k] for k in sorted(layers)}}
