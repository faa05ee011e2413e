"""The joint leakage against seed 000's Thm 3 (Σ ε_t) and Thm 4 (max ε_t, disjoint releases),
each ε_t a release's own leakage under the same notion (DESIGN §3.1b)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ddpbayes.errors import InputError
from ddpbayes.model.domains import Domain
from ddpbayes.queries import ComposedQuery, Query

TOLERANCE = 1e-9  # relative: a joint leakage within this of a bound respects it (rounding)


@dataclass(frozen=True)
class Leak:
    """A leakage as the summary compares it: its value and, for an estimate, its interval.

    Parameters
    ----------
    value : float
        The leakage.
    ci : tuple of float or None, default None
        An estimate's (lower, upper) interval; None for an exact value.
    """

    value: float
    ci: tuple[float, float] | None = None

    @property
    def lower(self) -> float:
        """The interval's lower end; the value when exact."""
        return self.value if self.ci is None else self.ci[0]

    @property
    def upper(self) -> float:
        """The interval's upper end; the value when exact."""
        return self.value if self.ci is None else self.ci[1]


def touched(query: ComposedQuery, domains: Sequence[Domain]) -> list[list[int]]:
    """Each release's tuples: those whose change moves its query (sensitivity > 0), and those
    whose sensitivity is not known (an expr: query on a continuous domain), which may.

    Parameters
    ----------
    query : ComposedQuery
        The releases' stacked query.
    domains : sequence of Domain
        The domains of the model's tuples, in tuple order.

    Returns
    -------
    list of list of int
        For each release, the indices of the tuples it touches.
    """
    return [[k for k in range(len(domains)) if _moves(q, k, domains)] for q in query.queries]


def _moves(query: Query, k: int, domains: Sequence[Domain]) -> bool:
    try:
        return query.sensitivity(k, domains) > 0
    except InputError:
        return True


def dependent_pairs(touches: list[list[int]], dependence_sets: Sequence[frozenset[int]]) -> list[tuple[int, int, int, int]]:
    """(r, j, s, k): tuple j of release r and tuple k of a later release s with k in N(j) — the
    dependence across disjoint subsets that Thm 4's premise rules out."""
    out = []
    for (r, a), (s, b) in itertools.combinations(enumerate(touches), 2):
        out += [(r, j, s, k) for j in a for k in b if k in dependence_sets[j] or j in dependence_sets[k]]
    return out


def respects(joint: Leak, bound: Leak) -> bool | None:
    """Whether the joint leakage is at most the bound: decided for exact values (to rounding);
    for estimates only when the intervals settle it, else None."""
    if joint.ci is None and bound.ci is None:
        return joint.value <= bound.value * (1 + TOLERANCE) + 1e-12
    if joint.lower > bound.upper * (1 + TOLERANCE) + 1e-12:
        return False
    return True if joint.upper <= bound.lower * (1 + TOLERANCE) + 1e-12 else None


def ratio(joint: float, bound: float) -> float | None:
    """joint / bound: 0/0 is None (nothing to compare), x/0 is inf."""
    if bound == 0:
        return None if joint == 0 else math.inf
    return joint / bound if math.isfinite(bound) else None


def summary(joint: Leak, joint_per_target: Sequence[float | None], releases: Sequence[tuple[str, Leak, Sequence]],
            touches: list[list[int]], dependence_sets: Sequence[frozenset[int]] | None, names: Sequence[str],
            lower_bounds: bool = False) -> dict:
    """The joint leakage against Thm 3's Σ ε_t and, for disjoint releases, Thm 4's max ε_t, each
    ε_t a release's own leakage under the same notion (`releases`: spec, leakage, per target).
    `lower_bounds`: the leakages are lower bounds (a greedy search), so nothing is decided.

    Parameters
    ----------
    joint : Leak
        The leakage of the joint release.
    joint_per_target : sequence of float or None
        The joint leakage of each tuple (None where not a target).
    releases : sequence of tuple of (str, Leak, sequence)
        Each release's spec, own leakage, and own leakage per tuple (None where not a target).
    touches : list of list of int
        Each release's tuples (`touched`).
    dependence_sets : sequence of frozenset of int or None
        N(j) for every tuple, to find dependent pairs across disjoint releases; None when the notion
        needs no model (dp).
    names : sequence of str
        The tuples' names, for the report.
    lower_bounds : bool, default False
        The leakages are lower bounds: no bound is decided respected or violated.

    Returns
    -------
    dict
        The releases, the joint leakage, the sequential bound (and for disjoint releases the parallel
        bound) with whether each is respected (None: undecided), the ratios, the targets over their
        sequential bound, the dependent pairs and a sentence on Thm 4's premise.

    References
    ----------
    Liu et al. 2016 (seed 000), §V-A, Thms 3–4.
    """
    leaks = [leak for _, leak, _ in releases]
    seq = Leak(sum(x.value for x in leaks), _interval(sum(x.lower for x in leaks), sum(x.upper for x in leaks), leaks))
    flat = [k for t in touches for k in t]
    disjoint = len(flat) == len(set(flat))
    par = None
    if disjoint:
        top = max(leaks, key=lambda x: x.value)
        par = Leak(top.value, _interval(max(x.lower for x in leaks), max(x.upper for x in leaks), leaks))
    pairs = None if dependence_sets is None or not disjoint else dependent_pairs(touches, dependence_sets)
    decide = (lambda a, b: None) if lower_bounds else respects
    return {
        "releases": [{"release": spec, "leakage": leak.value, "ci": leak.ci, "per_target": list(per),
                      "touched": [names[k] for k in t]} for (spec, leak, per), t in zip(releases, touches)],
        "joint": joint.value,
        "sequential_bound": seq.value,
        "sequential_ci": seq.ci,
        "sequential_respected": decide(joint, seq),
        "ratio_to_sequential": ratio(joint.value, seq.value),
        "targets_over_sequential": [] if lower_bounds else _over(joint, joint_per_target, releases, names),
        "disjoint": disjoint,
        "parallel_bound": None if par is None else par.value,
        "parallel_ci": None if par is None else par.ci,
        "parallel_respected": None if par is None else decide(joint, par),
        "ratio_to_parallel": None if par is None else ratio(joint.value, par.value),
        "dependent_pairs": None if pairs is None else [
            {"release": r, "tuple": names[j], "other_release": s, "other_tuple": names[k]} for r, j, s, k in pairs],
        "parallel_premise": _premise(disjoint, pairs),
    }


def _interval(lower: float, upper: float, leaks: Sequence[Leak]) -> tuple[float, float] | None:
    return None if all(x.ci is None for x in leaks) else (lower, upper)


def _over(joint: Leak, per_target: Sequence[float | None], releases: Sequence[tuple[str, Leak, Sequence]],
          names: Sequence[str]) -> list[dict]:
    """The targets whose joint leakage exceeds the sum of the releases' leakages for that target
    (exact values only: per-target estimates carry no interval)."""
    if joint.ci is not None or any(leak.ci is not None for _, leak, _ in releases):
        return []
    out = []
    for i, v in enumerate(per_target):
        own = [per[i] for _, _, per in releases]
        if v is None or any(o is None for o in own):
            continue
        bound = float(sum(own))
        if not respects(Leak(v), Leak(bound)):
            out.append({"target": names[i], "joint": v, "sequential_bound": bound})
    return out


def _premise(disjoint: bool, pairs: list | None) -> str:
    if not disjoint:
        return "the releases share tuples: Thm 4 does not apply"
    if pairs is None:
        return "disjoint tuples; dp is model-free, so they are independent by definition"
    if pairs:
        return f"disjoint tuples but {len(pairs)} dependent pair(s) across releases: Thm 4's premise fails"
    return "disjoint tuples, no dependent pair across releases (dependence sets are pairwise)"


def summary_text(s: dict) -> list[str]:
    """The summary as lines for `audit`'s text output.

    Parameters
    ----------
    s : dict
        A summary, as `summary` returns it.

    Returns
    -------
    list of str
        The lines, the first one empty.
    """
    lines = ["", "composition (Liu et al. 2016 (DDP) Thms 3-4; each release audited alone under the same notion):"]
    for r in s["releases"]:
        ci = "" if r["ci"] is None else f"  [{_fmt(r['ci'][0])}, {_fmt(r['ci'][1])}]"
        lines.append(f"  {r['release']:<32} leakage {_fmt(r['leakage'])}{ci}   touches {len(r['touched'])} tuple(s)")
    lines.append(f"  joint {_fmt(s['joint'])}  vs  sequential bound sum = {_fmt(s['sequential_bound'])}  "
                 f"(ratio {_fmt(s['ratio_to_sequential'])}, {_verdict(s['sequential_respected'])})")
    if s["parallel_bound"] is not None:
        lines.append(f"  joint {_fmt(s['joint'])}  vs  parallel bound max = {_fmt(s['parallel_bound'])}  "
                     f"(ratio {_fmt(s['ratio_to_parallel'])}, {_verdict(s['parallel_respected'])})")
    lines.append(f"  parallel premise: {s['parallel_premise']}")
    for p in (s["dependent_pairs"] or [])[:6]:
        lines.append(f"    release {p['release']} tuple {p['tuple']} ~ release {p['other_release']} tuple {p['other_tuple']}")
    for t in s["targets_over_sequential"][:6]:
        lines.append(f"  target {t['target']}: joint {_fmt(t['joint'])} exceeds the sum of its own release leakages "
                     f"{_fmt(t['sequential_bound'])}")
    return lines


def _verdict(respected: bool | None) -> str:
    return {True: "respected", False: "VIOLATED", None: "undecided"}[respected]


def _fmt(v) -> str:
    if v is None:
        return "-"
    return "+inf" if v == math.inf else f"{v:.6g}"
