"""Short readable tables for the terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddpbayes.formatting import abbreviated, fmt, short_text, witness_output

if TYPE_CHECKING:
    from ddpbayes.auditing import AuditResult
    from ddpbayes.plausible import FittedAudit

INTERVAL = "90% interval (two one-sided 95% bounds)"  # the sampling engine's `ci`: (lower, upper)


def audit_text(r: AuditResult) -> str:
    certified = (r.diagnostics or {}).get("lower_bound_only")  # a program's certified lower bound (DESIGN §2.6)
    if certified:
        leakage = f"leakage    >= {fmt(r.leakage)}    certified lower bound (95%; a program: it can fail a claim, never pass)"
    else:
        leakage = (f"leakage    {'>= ' if r.lower_bound else ''}{fmt(r.leakage)}"
                   + (f" (epsilon at delta = {r.problem.mechanism.delta:g})" if r.profile is not None else "")
                   + (f"    {_interval_name(r)} [{fmt(r.ci[0])}, {fmt(r.ci[1])}]" if r.ci else "")
                   + ("    (a lower bound: greedy search)" if r.lower_bound else ""))
    lines = [f"notion     {r.notion}", f"query      {short_text(r.query)}    mechanism  {r.mechanism_text()}", leakage]
    if r.profile is not None:
        lines.extend(_profile_text(r.profile, r.problem.mechanism.delta))
    if r.claim is not None:
        lines.append(f"claim      {fmt(r.claim)}    verdict  {r.verdict.upper()}")
        if r.verdict_reason:
            lines.append(f"           {r.verdict_reason}")
    if r.reason:
        lines.append(f"reason     {r.reason}")
    lines.append(f"engine     {r.engine}    time  {r.seconds:.2f} s")
    if r.information is not None or r.information_reason is not None:
        from ddpbayes.auditing.information import information_text  # not at import: `--help` must not load PyMC

        lines.extend(information_text(r.information, r.information_reason))
    if certified:
        d = r.diagnostics
        lines.append(f"program    {d['program_runs']:,} runs of the program for the worst adversary; plain estimate "
                     f"{fmt(d['estimate'])}")
    elif r.diagnostics and r.diagnostics.get("summed"):
        lines.append(f"mcmc       none: {r.diagnostics['summed']}")
    elif r.diagnostics:
        d = r.diagnostics
        lines.append(
            f"mcmc       {d.get('runs', 0)} runs, R-hat max {fmt(d.get('rhat_max'))}, bulk ESS min {fmt(d.get('ess_bulk_min'))}, "
            f"divergences {d.get('divergences', 0)}, samplers {'/'.join(d.get('samplers', []))}"
            + ("" if d.get("ok", True) else "  (diagnostics FAILED: the interval is not to be trusted; raise "
               "--draws/--tune" + (", and a claim would be inconclusive)" if r.claim is None else ")"))
        )
        if d.get("runs_chose"):
            lines.append(f"           chose the witness on {d['runs_chose']}; bounded it on {d['runs_bounded']}")
    if r.witness is not None:
        w = r.witness
        known = "{" + abbreviated([r.tuples[k] for k in sorted(w.adversary.known)]) + "}"
        if w.known_values:
            known += " = (" + abbreviated([fmt(v) for _, v in sorted(w.known_values.items())]) + ")"
        shown = witness_output(w.y, (r.diagnostics or {}).get("event"), r.profile is not None)
        lines.append(f"witness    target {r.tuples[w.adversary.target]}, knows {known}, "
                     f"t={fmt(w.t)} vs t'={fmt(w.t_prime)}, {shown}")
    lines.append("")
    width = max(len(n) for n in [*r.tuples, "target"])
    lines.append(f"{'tuple'.ljust(width)}  leakage")
    lines += [f"{name.ljust(width)}  {fmt(v)}" for name, v in zip(r.tuples, r.per_target) if v is not None]  # audited
    if r.dependence_sets is not None:
        lines.append("")
        lines.extend(_dependence_text(r))
    if r.lattice is not None:
        lines.append("")
        lines.append(f"{'target'.ljust(width)}  known set  leakage")
        for a in sorted(r.lattice, key=lambda a: (a.adversary.target, len(a.adversary.known), sorted(a.adversary.known))):
            ks = "{" + ",".join(str(k) for k in sorted(a.adversary.known)) + "}"
            lines.append(f"{r.tuples[a.adversary.target].ljust(width)}  {ks:<9}  {fmt(a.value)}")
    if r.composition is not None:
        from ddpbayes.composition import summary_text  # not at import: `--help` must not load PyMC

        lines.extend(summary_text(r.composition))
    lines.extend(f"note: {n}" for n in r.notes)
    return "\n".join(lines)


def _dependence_text(r: AuditResult, keep: int = 12) -> list[str]:
    """The audited tuples' dependence sets, one a line, each abbreviated, the first `keep` of them (the JSON
    has all)."""
    audited = [i for i, v in enumerate(r.per_target) if v is not None]
    lines = [f"  {r.tuples[i]}: {{{abbreviated([r.tuples[j] for j in r.dependence_sets[i]])}}}" for i in audited[:keep]]
    more = [f"  ... ({len(audited) - keep:,} more audited tuples)"] if len(audited) > keep else []
    return ["dependence sets:", *lines, *more]


def fitted_audit_text(found: FittedAudit) -> str:
    """An audit under a fitted model: how its parameters were set first, then the audit; for
    draws:S the plausible models' leakages."""
    mode = found.parameters.mode
    says = {"mean": "the posterior means, fixed", "draw": "one posterior draw, fixed",
            "integrated": f"integrated over {found.parameters.draws} posterior draws (the Bayesian adversary)",
            "draws": f"each of {found.parameters.draws} posterior draws (Pufferfish: a class of plausible models)"}
    lines = [f"parameters {found.parameters}    {says[mode]}"]
    p = found.plausible
    if p is not None:
        lines.append(f"plausible  leakage median {fmt(p['median'])}, 95th percentile {fmt(p['p95'])}, "
                     f"max {fmt(p['max'])} over {p['draws']} draws")
    return "\n".join([*lines, audit_text(found.result)])


def _interval_name(r: AuditResult) -> str:
    if r.engine == "analytic":
        return "sure range"
    return "exact (summed, width zero)" if (r.diagnostics or {}).get("exact") else INTERVAL


def _profile_text(profile, delta: float) -> list[str]:
    """The privacy profile in a few lines: δ(ε) at δ(0), every second decade and the user's δ; the
    GDP μ and zCDP ρ where known."""
    shown = {10.0 ** -k for k in (1, 2, 4, 6, 8, 10, 12)} | {delta}
    points = "  ".join(f"({fmt(e)}, {d:.3g})" for e, d in profile.pairs() if e == 0 or d in shown)
    known = [f"GDP mu {fmt(profile.mu)}" if profile.mu is not None else "",
             f"zCDP rho {fmt(profile.rho)}" if profile.rho is not None else ""]
    return [f"profile    (epsilon, delta): {points}", *([f"           {'    '.join(k for k in known if k)}"]
                                                          if any(known) else [])]

