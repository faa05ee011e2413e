"""A mechanisms-under-dependence report as a `Document` and its results.json (issue #28 item 5): per
(model, mechanism) the nominal ε (the classic DP level, `--notion dp`) against the leakage under each
other notion, and their ratio."""

from __future__ import annotations

import math
import shlex
from pathlib import Path

from ddpbayes.encoding import jsonable
from ddpbayes.notions import NOTIONS, notion
from ddpbayes.reports.render import figures
from ddpbayes.reports.render.document import Code, Document, Figure, Notes, Para, Section, Table
from ddpbayes.papers import DING, DWORK_ROTH, ERLINGSSON, GHOSH, LIU, LYU, MCSHERRY_TALWAR
from ddpbayes.reports.render.results import FORMAT, fmt, reproducibility, set_text
from ddpbayes.reports.views.mechanisms import CaseResult, MechanismsView

SAME = 1e-9  # a relative difference below which a leakage is "at" the nominal ε


def title(v: MechanismsView) -> str:
    return v.spec.title or f"{len(v.cases)} mechanisms under dependence against their nominal ε"


def times(r: float | None) -> str:
    """A ratio as the report shows it: "×3.13", "×∞", or – when it means nothing."""
    return "–" if r is None else f"×{fmt(r, 3)}"


def finding(v: MechanismsView) -> str:
    """One line: how many cases leak above their nominal ε under some notion, the largest ratios, and
    the others."""
    rated = [(c, c.ratio(c.worst[0])) for c in v.cases if c.worst is not None]
    above = sorted([(c, r) for c, r in rated if r is not None and r > 1 + SAME], key=lambda cr: -cr[1])
    unbounded = [c for c in v.cases if not math.isfinite(c.nominal.leakage)]
    parts = [f"above the nominal ε in {len(above)} of {len(rated)} cases"]
    if above:
        parts[0] += ": " + ", ".join(f"{c.case.label} {times(r)} ({c.worst[0]} {fmt(c.worst[1].leakage)} vs "
                                     f"{fmt(c.nominal.leakage)})" for c, r in above[:4])
        if len(above) > 4:
            parts[0] += f" and {len(above) - 4} more"
    below = [(c, r) for c, r in rated if r is not None and r <= 1 + SAME]
    if below:
        low = min(below, key=lambda cr: cr[1])
        parts.append(f"at or below it in {len(below)} (lowest {times(low[1])}: {low[0].case.label})")
    over_set = [c for c in v.cases if (set_ratio(c) or 0) > 1 + SAME]
    if over_set:
        parts.append(f"above the ε they are set with, where that differs from the nominal, in {len(over_set)} "
                     f"(up to {times(max(set_ratio(c) for c in over_set))})")
    if unbounded:
        parts.append(f"nominal ε unbounded in {len(unbounded)} ({', '.join(c.case.label for c in unbounded)})")
    return "; ".join(parts) + "."


def mechanisms_json(v: MechanismsView, command: str) -> dict:
    """results.json of a mechanisms report: every number it shows, each case's audits as `audit` gives them."""
    cases = []
    for c in v.cases:
        worst = c.worst
        cases.append({
            **c.case.to_dict(), "model_description": c.model.describe(),
            "nominal": c.nominal.leakage, "nominal_reason": c.nominal.reason,
            "leakage": {name: r.leakage for name, r in c.results.items()},
            "ratio": {name: c.ratio(name) for name in c.results},
            "worst_notion": None if worst is None else worst[0],
            "worst_ratio": None if worst is None else c.ratio(worst[0]),
            "worst_over_set_epsilon": set_ratio(c),
            "seconds": round(c.seconds, 3),
            "audits": {c.nominal.notion: c.nominal.to_dict(), **{n: r.to_dict() for n, r in c.results.items()}},
        })
    return jsonable({"ddpbayes_report": FORMAT, "title": title(v), "finding": finding(v), "spec": v.spec.to_dict(),
                     "cases": cases, "seconds": round(sum(c.seconds for c in v.cases), 3),
                     "reproducibility": reproducibility(v.spec.seed, command)})


def mechanisms_document(v: MechanismsView, command: str) -> Document:
    lead = [v.spec.description] if v.spec.description else []
    lead.append(f"Finding: {finding(v)}")
    sections = [_summary(v), _figure(v), _each(v), _witnesses(v), _papers(), _reproducibility(v, command)]
    return Document(title(v), lead, sections)


def _columns(v: MechanismsView) -> list[str]:
    """The notions (model-free one aside: it is the nominal ε) some case was audited under, in NOTIONS' order."""
    return [n for n in NOTIONS if not notion(n).model_free and any(n in c.results for c in v.cases)]


def mechanism_text(c: CaseResult) -> str:
    """The mechanism with its settings, as `--mechanism-param` gives them."""
    params = ", ".join(f"{k}={val}" for k, val in (c.case.mechanism_params or {}).items())
    return f"`{c.case.mechanism}`" + (f" ({params})" if params else "")


def set_level(c: CaseResult) -> str:
    """The level the case sets: ε, or the noise scale, or its parameters alone."""
    if c.case.epsilon is not None:
        return f"ε = {fmt(c.case.epsilon)}"
    if c.case.scale is not None:
        return f"scale {fmt(c.case.scale)}"
    return "its parameters"


def _summary(v: MechanismsView) -> Section:
    columns = _columns(v)
    rows = []
    for c in v.cases:
        cells = []
        for name in columns:
            r = c.results.get(name)
            cells.append("not run" if r is None else f"{fmt(r.leakage)} ({times(c.ratio(name))})")
        worst = c.worst
        engines = sorted({r.engine for r in c.results.values()})
        rows.append([c.case.label, f"`{c.case.query}`", mechanism_text(c), set_level(c), fmt(c.nominal.leakage), *cells,
                     "–" if worst is None else f"{times(c.ratio(worst[0]))} ({worst[0]})", times(set_ratio(c)),
                     ", ".join(engines) or "–",
                     f"{c.seconds:.2f} s"])
    return Section("Summary", "summary", [
        Para("Each row audits one mechanism releasing one query on one dependence model. The nominal ε is the "
             "mechanism's classic DP leakage (`--notion dp`, model-free: the largest log-ratio over every value of "
             "the other records, computed exactly over the finite domains; the textbook ε where the domains are "
             "too large, section Each mechanism says why). It can be below the ε the case is set with, which "
             "the textbook states for the worst neighbouring answers any query could give. Every other column is the exact "
             "leakage under that notion on the model (the worst target; the ratio to the nominal ε in "
             "parentheses): what an adversary who knows how the records depend learns about one record from the "
             "output. Above ×1 the model lets the output say more about a record than the classic level counts; "
             "the mechanism still keeps its classic promise, which is about neighbouring databases, not about "
             "dependent records."),
        Table(["case", "query", "mechanism", "set by", "nominal ε (dp)", *columns, "worst / nominal", "worst / ε set",
               "engine", "time"], rows,
              caption="Leakages in nats, exact (the exact or structured engine; integrals to 1e-12, DESIGN §5.2). "
                      "\"worst / ε set\": the worst leakage over the ε the case sets, where that differs from the "
                      "nominal ε (the exact classic leakage on these domains is below the textbook level, or "
                      "grows with the number of queries). "
                      "\"not run\": the case does not ask for that notion (the section Each mechanism says why)."),
    ])


def _figure(v: MechanismsView) -> Section:
    return Section("Leakage against the nominal ε", "figure", [
        Figure("mechanisms_ratio.png", _ratio_figure(v),
               "Each case's leakage under each notion divided by its nominal ε (1: the classic level; a bar "
               "above the line, more leakage than the classic level counts). A case whose nominal ε is unbounded "
               "has no bar; an unbounded leakage over a finite nominal is drawn to the top and marked ∞.",
               "bars of leakage over nominal epsilon per case and notion"),
    ])


def _ratio_figure(v: MechanismsView) -> bytes:
    columns = _columns(v)
    n = len(v.cases)
    fig, ax = figures.plt.subplots(figsize=(max(8.0, 0.75 * n + 2.5), 4.6))
    finite = [c.ratio(name) for c in v.cases for name in c.results]
    finite = [r for r in finite if r is not None and math.isfinite(r)]
    top = max([1.0, *finite]) * 1.15
    width = 0.8 / max(1, len(columns))
    for j, name in enumerate(columns):
        colour = figures.NOTION_STYLE.get(name, ("C0", "o", "-"))[0]
        xs, heights = [], []
        for i, c in enumerate(v.cases):
            r = c.ratio(name) if name in c.results else None
            if r is None:
                continue
            x = i + (j - (len(columns) - 1) / 2) * width
            xs.append(x)
            heights.append(top if math.isinf(r) else r)
            if math.isinf(r):
                ax.text(x, top, "∞", ha="center", va="bottom", fontsize=9)
        ax.bar(xs, heights, width=width, color=colour, label=name)
    for i, c in enumerate(v.cases):
        if not math.isfinite(c.nominal.leakage):
            ax.text(i, 0.05 * top, "nominal ∞", ha="center", va="bottom", rotation=90, fontsize=8, color="0.3")
    ax.axhline(1.0, color="k", lw=1, alpha=0.7)
    ax.set_xticks(range(n))
    ax.set_xticklabels([c.case.label for c in v.cases], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("leakage / nominal ε")
    ax.set_ylim(0, top * 1.08)
    ax.legend(fontsize=9, frameon=False, loc="upper right")
    fig.tight_layout()
    return figures.png(fig)


def _each(v: MechanismsView) -> Section:
    blocks = []
    for c in v.cases:
        blocks.append(Para(f"{c.case.label}: {mechanism_text(c)} on `{c.case.query}`, "
                           f"{Path(c.case.model_ref).stem} ({_params(c.case.params)}). {how_far(c)}"))
        items = []
        if c.nominal.reason:
            items.append(f"nominal ε {fmt(c.nominal.leakage)} is an upper bound: {c.nominal.reason}")
        if c.case.note:
            items.append(c.case.note)
        skipped = [n for n in NOTIONS if not notion(n).model_free and n not in c.results]
        if skipped:
            items.append(f"not run: {', '.join(skipped)}" + ("" if c.case.note else " (not asked for)"))
        output = c.nominal.mechanism.get("output") if isinstance(c.nominal.mechanism, dict) else None
        if output:
            items.append(f"output: {output}")
        if items:
            blocks.append(Notes(items))
    return Section("Each mechanism", "each", blocks)


def how_far(c: CaseResult) -> str:
    """How far the case's leakage is above (or below) its nominal ε, notion by notion, and the reason
    the numbers give."""
    nominal = c.nominal.leakage
    if not c.results:
        return f"Nominal ε {fmt(nominal)}; no other notion asked for."
    parts = []
    for name, r in c.results.items():
        text = f"{name} {fmt(r.leakage)} ({times(c.ratio(name))})"
        if notion(name).lattice and r.witness is not None:
            text += f" with K = {set_text(r.witness.adversary.known, c.model.names, r.witness.adversary.target)}"
        parts.append(text)
    line = f"Nominal ε {fmt(nominal)}; under this model " + ", ".join(parts) + ". "
    name, worst = c.worst
    r = c.ratio(name)
    if not math.isfinite(nominal):
        return line + ("The mechanism is not private at all (unbounded classic ε), and the dependence does not "
                       "change that: some output is impossible under one value of the record and possible under "
                       "the other." if math.isinf(worst.leakage) else
                       "Its classic ε is unbounded; under this model the leakage stays finite.")
    if r is not None and r > 1 + SAME:
        return line + against_set(c) + (f" The leakage is {fmt(r, 3)} times the nominal ε: through the model one record moves the "
                       "other records in expectation, so it moves several answers (or one answer by more than its "
                       "sensitivity) and the output's law given the record's value shifts more than the classic "
                       "analysis, which holds the other records fixed, allows for.")
    if r is not None and r >= 1 - SAME:
        return line + ("The leakage equals the nominal ε: the dependence adds nothing over the classic worst case."
                       + against_set(c))
    return line + (f"The leakage stays below the nominal ε (×{fmt(r, 3)}), a worst case over every answer vector and "
                   "neighbouring pair (an upper bound where the notes say so) that this query on this model does not "
                   "reach, dependence included." + against_set(c))


def set_ratio(c: CaseResult) -> float | None:
    """The worst leakage over the ε the case is set with (None when it sets none, that ε is the nominal, or the
    nominal is unbounded)."""
    eps = c.case.epsilon
    nominal = c.nominal.leakage
    if eps is None or c.worst is None or not math.isfinite(nominal) or abs(eps - nominal) <= SAME * eps:
        return None
    return c.worst[1].leakage / eps


def against_set(c: CaseResult) -> str:
    """A sentence comparing the worst leakage with the ε the case is set with, when that is not the nominal ε."""
    r = set_ratio(c)
    if r is None:
        return ""
    return (f" The ε the mechanism is set with, {fmt(c.case.epsilon)}, is not its nominal ε here; against it the "
            f"worst leakage is {times(r)}.")


def _params(params: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in params.items()) or "its defaults"


def _witnesses(v: MechanismsView) -> Section:
    rows = []
    for c in v.cases:
        for name, r in c.results.items():
            w = r.witness
            if w is None:
                rows.append([c.case.label, name, fmt(r.leakage), "–", "–", "–", "–"])
                continue
            names = c.model.names
            known = set_text(w.adversary.known, names, w.adversary.target)
            y = "–" if w.y is None else ", ".join(fmt(x) for x in w.y)
            rows.append([c.case.label, name, fmt(r.leakage), names[w.adversary.target], known,
                         f"{fmt(w.t)} vs {fmt(w.t_prime)}", y])
    return Section("Witnesses", "witnesses", [
        Table(["case", "notion", "leakage", "target", "known K", "t vs t′", "output y"], rows,
              caption="The adversary and output attaining each leakage (DESIGN §1): the target's two values t, t′ "
                      "and the output whose likelihood ratio is largest (an index, a TRUE/FALSE pattern, report "
                      "bits or a count; ±∞ a limit)."),
    ])


def _papers() -> Section:
    return Section("The mechanisms and their papers", "papers", [
        Notes([f"report-noisy-max with Laplace noise: {DWORK_ROTH}, §3.3 (Claim 3.9); with one-sided exponential "
               f"noise: {DING}, Alg. 6",
               f"the exponential mechanism: {MCSHERRY_TALWAR} ({DWORK_ROTH}, §3.4)",
               f"the sparse vector technique: {LYU}, Alg. 1 (ε-DP) and Algs. 5 and 6 (not private)",
               f"RAPPOR and one-time RAPPOR: {ERLINGSSON} (Bloom filter, permanent and instantaneous randomized "
               "response)",
               f"the truncated geometric mechanism: {GHOSH}",
               f"dependent records and the notions: {LIU} (DDP), Li et al. 2019 (PDP), Wu et al. (IDP)"]),
    ])


def _reproducibility(v: MechanismsView, command: str) -> Section:
    rep = reproducibility(v.spec.seed, command)
    rows = [[k, val] for k, val in rep["versions"].items()] + [["platform", rep["platform"]],
                                                               ["seed", str(v.spec.seed)]]
    lines = [cli_line(c, c.worst[0] if c.worst else c.nominal.notion) for c in v.cases]
    return Section("Reproducibility", "reproducibility", [
        Para("Regenerate this report (from the directory it was generated in):"), Code(command),
        Para("Each case's worst notion on the command line:"), Code("\n".join(lines)),
        Table(["component", "version"], rows),
    ])


def cli_line(c: CaseResult, name: str) -> str:
    case = c.case
    words = ["ddpbayes", "audit", _relative(case.model)]
    for k, val in case.params.items():
        words += ["-p", f"{k}={val}"]
    words += ["--query", case.query, "--mechanism", case.mechanism]
    if case.epsilon is not None:
        words += ["--epsilon", f"{case.epsilon:g}"]
    if case.scale is not None:
        words += ["--scale", f"{case.scale:g}"]
    for k, val in (case.mechanism_params or {}).items():
        words += ["--mechanism-param", f"{k}={val}"]
    words += ["--notion", name]
    if case.engine != "auto":
        words += ["--engine", case.engine]
    return " ".join(shlex.quote(w) for w in words)


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)

