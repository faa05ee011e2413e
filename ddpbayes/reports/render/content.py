"""The report as a `Document`: sections, tables and figures built from what `collect` found."""

from __future__ import annotations

import ast
import math

from ddpbayes.auditing import AuditResult
from ddpbayes.notions import notion
from ddpbayes.reports.render import figures
from ddpbayes.reports.render.document import Code, Document, Figure, Notes, Para, Section, Table
from ddpbayes.reports.render.information import information_section
from ddpbayes.reports.render.profile import profile_section
from ddpbayes.reports.render.results import finding, fmt, reproducibility, set_text, title
from ddpbayes.reports.views.closed_form import GENERAL
from ddpbayes.reports.views.collect import Collected

NOTION_MEANING = {
    "dp": "classic DP: model-free, the adversary knows every other tuple, whatever their values",
    "idp": "identity DP (Wu et al.): the weakest adversary, who knows no other tuple (K = {})",
    "pdp": "prior DP (Li et al., IEEE TIFS 2019): every known set K, the worst over the whole lattice",
    "ddp": "dependent DP (Liu, Chakraborty, Mittal, NDSS 2016): the adversary knows the tuples outside the "
           "target's dependence set",
}


def build_document(c: Collected, command: str) -> Document:
    spec = c.spec
    lead = [spec.description] if spec.description else []
    lead.append(f"Finding: {finding(c)}")
    sections = [_summary(c), _model(c), _per_target(c)]
    if c.lattice is not None:
        sections.append(_lattice(c))
    sections += [_witness(c), _sweep(c)]
    if c.profile is not None:
        sections.append(profile_section(c.profile, c.model.names))
    if c.information is not None:
        sections.append(information_section(c.information, c.model.names))
    if c.closed_forms:
        sections.append(_closed_form(c))
    if any(r.diagnostics for r in c.results.values()):  # estimates: MCMC diagnostics to show
        sections.append(_mcmc(c))
    sections.append(_reproducibility(c, command))
    return Document(title(c), lead, sections)


def _summary(c: Collected) -> Section:
    names = c.model.names
    rows = []
    notes: dict[str, list[str]] = {}  # note -> the notions it applies to (a model's note once, not per notion)
    for name, r in c.results.items():
        ci = f"[{fmt(r.ci[0])}, {fmt(r.ci[1])}]" if r.ci else "exact"
        verdict = (r.verdict.upper(), r.verdict) if r.verdict else "–"
        leakage = f"≥ {fmt(r.leakage)} (lower bound)" if r.lower_bound else fmt(r.leakage)
        rows.append([name, leakage, ci, fmt(r.claim), verdict, r.engine, _witness_text(r, names)])
        for text in (r.reason, r.verdict_reason, *r.notes):
            if text:
                notes.setdefault(text, []).append(name)
    mech = next(iter(c.results.values())).mechanism
    blocks = [
        Para(f"Query `{c.spec.query}` released with {mech.get('noise', mech['kind'])}"
             + (f"; claimed epsilon {fmt(c.spec.claim)}." if c.spec.claim is not None else ".")),
        Table(["notion", "leakage", "90% interval", "claim", "verdict", "engine", "worst adversary (witness)"], rows,
              caption="Leakage: the largest log-ratio log L(y | t, x_K) − log L(y | t', x_K) an adversary of the "
                      "notion sees, over the values x_K it knows, two values t, t' of its target and the output y; "
                      "L(y | t, x_K) is the output's density given them, the other tuples integrated out under the "
                      "model. Estimates (sampling engine) come with a 90% interval (two one-sided 95% bounds: "
                      "a lower bound at a witness chosen on other runs than those that bound it, and an approximate "
                      "upper bound); exact and closed-form values need none."),
        Notes([f"`{n}`: {NOTION_MEANING[n]}" for n in c.results]
              + [f"{', '.join(which)}: {text}" for text, which in notes.items()]),
    ]
    return Section("Summary", "summary", blocks)


def _witness_text(r: AuditResult, names: list[str]) -> str:
    w = r.witness
    if w is None:
        return "–"
    known = set_text(w.adversary.known, names, w.adversary.target)
    if w.known_values:
        known += " = (" + ", ".join(fmt(v) for _, v in sorted(w.known_values.items())) + ")"
    y = "–" if w.y is None else ", ".join(_y(v) for v in w.y)
    return f"{names[w.adversary.target]} = {fmt(w.t, 6)} vs {fmt(w.t_prime, 6)}, knows {known}, y = {y}"


def grouped(rows: list[list], labels: int = 1, threshold: int = 6) -> list[list]:
    """Consecutive rows equal but for their first `labels` cells merged into one ("a – b"),
    when there are more than `threshold` rows."""
    if len(rows) <= threshold:
        return rows
    out: list[list] = []
    first = None
    for row in rows:
        if out and row[labels:] == out[-1][labels:]:
            out[-1] = [f"{a} – {b}" for a, b in zip(first[:labels], row[:labels])] + row[labels:]
        else:
            first = row
            out.append(list(row))
    return out


def _y(v: float) -> str:
    return ("+∞" if v > 0 else "−∞") if math.isinf(v) else fmt(v)


def _model(c: Collected) -> Section:
    spec, model = c.spec, c.model
    params = ", ".join(f"{k} = {v!r}" for k, v in spec.params.items()) or "defaults"
    rows = grouped([[str(k), name, str(dom), set_text(dep, model.names, k)]
                    for k, (name, dom, dep) in enumerate(zip(model.names, model.domains, c.dependence_sets))], 2)
    latent = ", ".join(f"`{rv.name}`" for rv in model.latent_rvs) or "none"
    where = "relative to the spec" if (spec.path.parent / spec.model_ref).resolve() == spec.model else "shipped"
    blocks = [Para(f"Model file `{spec.model_ref}` ({where}), built with {params}.")]
    doc = _docstring(spec.model)
    if doc:
        blocks.append(Para(doc))
    blocks += [
        Table(["#", "tuple", "domain", "dependence set N(i)"], rows,
              caption="N(i): the tuples whose conditional law changes with tuple i, as the engine reads the model."),
        Para(f"Latent variables (marginalised): {latent}."),
    ]
    return Section("Model", "model", blocks)


def _docstring(path) -> str | None:
    """The first paragraph of the model file's docstring."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    return " ".join(doc.split("\n\n")[0].split()) if doc else None


def _per_target(c: Collected) -> Section:
    notions = list(c.results)
    rows = grouped([[name] + [fmt(c.results[n].per_target[k]) for n in notions]
                    for k, name in enumerate(c.model.names)])
    return Section("Leakage per target", "targets", [
        Table(["tuple", *notions], rows, caption="The worst adversary of each notion against each target "
                                                 "(– where the tuple is not a target)."),
    ])


def _lattice(c: Collected) -> Section:
    view, names = c.lattice, c.model.names
    blocks = [Para("Every adversary A(i, K) of prior DP is a point: its leakage against the number of tuples it "
                   "knows. The star is the maximum; circles mark the weakest adversaries (K = {}), squares the "
                   "strongest (K = all others).")]
    if view.note:
        blocks.append(Para(view.note))
    blocks.append(Figure("lattice.png", figures.lattice_figure(view, names, c.spec.claim),
                         f"PDP lattice: {len(view.points):,} of {view.total:,} adversaries.",
                         "leakage of every pdp adversary against |K|"))
    rows = []
    for t in sorted({p.target for p in view.points}):
        pts = [p for p in view.points if p.target == t]
        weakest = [p.leakage for p in pts if not p.known]
        strongest = [p.leakage for p in pts if len(p.known) == view.n - 1]
        top = max(pts, key=lambda p: (p.leakage, -len(p.known)))
        rows.append([names[t], fmt(weakest[0]) if weakest else "–", fmt(strongest[0]) if strongest else "–",
                     fmt(top.leakage), set_text(top.known, names, t)])
    blocks.append(Table(["target", "weakest (K = {})", "strongest (K = all others)", "maximum shown", "at K"],
                        grouped(rows)))
    return Section("PDP lattice", "lattice", blocks)


def _witness(c: Collected) -> Section:
    names = c.model.names
    if not c.curves:
        return Section("Witness: log-ratio against the output", "witness", [
            Para("No witness curve is drawn for this spec:"), Notes(c.curve_notes)])
    blocks = [Para("For each notion's witness (the adversary, its known values x_K and the two target values t, "
                   "t' that attain the leakage), the log-ratio log L(y | t, x_K) − log L(y | t', x_K) against the "
                   "output y. The dashed lines are its limits as y → ±∞; the leakage is the largest value of the "
                   "curve or of a limit (the star marks a witness output y that is finite)."),
              Figure("witness.png", figures.curves_figure(c.curves, names),
                     "Witness log-ratio against the output y.", "log-ratio of the witness against y")]
    rows = [[cv.notion, names[cv.witness.adversary.target], _known_values(cv.known_values, names),
             fmt(cv.witness.t, 6), fmt(cv.witness.t_prime, 6), fmt(float(cv.log_ratio.max())), fmt(cv.limits[0]),
             fmt(cv.limits[1]), cv.method] for cv in c.curves]
    blocks.append(Table(["notion", "target", "x_K", "t", "t'", "max on the y grid", "y → −∞", "y → +∞", "computed by"],
                        rows))
    if c.curve_notes:
        blocks.append(Notes(c.curve_notes))
    return Section("Witness: log-ratio against the output", "witness", blocks)


def _known_values(values: dict[int, float], names: list[str], shown: int = 4) -> str:
    items = [f"{names[k]} = {fmt(v)}" for k, v in sorted(values.items())]
    more = f", … ({len(items) - shown} more)" if len(items) > shown else ""
    return "{" + ", ".join(items[:shown]) + more + "}"


def _sweep(c: Collected) -> Section:
    s = c.sweep
    label = "scale b" if s.parameter == "scale" else "epsilon"
    shaded = any(x is not None for cis in s.ci.values() for x in cis)
    blocks = [
        Para(f"Every notion audited again at other noise levels ({label}); the vertical line is the spec's "
             f"{label} = {fmt(s.base)}" + (", the dash-dotted ones the scales `ddpbayes calibrate` prescribes"
                                           if s.calibrated else "") + "."
             + (" Shaded: the sampling engine's 90% interval (two one-sided 95% bounds)." if shaded else "")
             + (" pdp is the greedy search's at every level: a lower bound." if _greedy_pdp(c) else "")),
        Figure("sweep.png", figures.sweep_figure(s, c.spec.claim), f"Leakage against the noise {label}.",
               f"leakage against the noise {label}"),
        Table([label, *s.leakage, "calibrated scale"],
              [[fmt(v)] + [fmt(s.leakage[n][k]) for n in s.leakage] + [", ".join(s.marks(v))]
               for k, v in enumerate(s.values)]),
    ]
    if s.calibrated:
        lo, hi = min(s.values), max(s.values)
        rows = [[k, fmt(v), "yes" if lo <= v <= hi else "no (out of range)"] for k, v in s.calibrated.items()]
        blocks.append(Table(["calibration", "scale", "swept"], rows,
                            caption="exact (notion): the smallest scale whose leakage under the notion is at most "
                                    "epsilon; dpm: Liu et al.'s dependent perturbation mechanism; group: the "
                                    "group-privacy baseline L·Δq/epsilon; dp: classic Δq/epsilon."))
    if c.calibration_notes:
        blocks.append(Notes(c.calibration_notes))
    return Section("Leakage against the noise level", "sweep", blocks)


def _greedy_pdp(c: Collected) -> bool:
    """Was pdp searched greedily (the spec's `search = "greedy"`): its values are lower bounds."""
    return any(notion(n).lattice and r.lower_bound for n, r in c.results.items())


def _closed_form(c: Collected) -> Section:
    names = c.model.names
    lines = [GENERAL] + [
        rf"\mathrm{{leak}}({_tex(names[f.target])}, \{{{', '.join(_tex(names[k]) for k in f.known)}\}}) = {f.latex}"
        + r"\qquad" + _tex("(" + f.source.split(" = ")[0] + ")") for f in c.closed_forms]
    blocks = [Para("Jointly Gaussian tuples, a linear query and Laplace noise: leak(i, K) has the closed form "
                   "below (U: the tuples neither known nor targeted), derived with sympy for each witness adversary "
                   "(width: the target's domain width; b: the Laplace scale). It does not depend on the known "
                   "values, and it is reached only as y → ±∞.")]
    try:
        blocks.append(Figure("closed_form.png", figures.formula_figure(lines), "Closed forms (matplotlib mathtext).",
                             "closed-form leakage"))
    except ValueError as exc:
        reason = str(exc).strip().splitlines()[-1]
        blocks.append(Para(f"The formulas could not be rendered as a picture ({reason}); their LaTeX follows."))
    rows = [[", ".join(f.notions), f"A({names[f.target]}, {set_text(f.known, names, f.target)})",
             f.source, f"`{f.expression}`", fmt(f.value), fmt(f.engine_value)] for f in c.closed_forms]
    header = ["notions", "adversary", "covariance", "closed form", "value (width, b put in)", "engine"]
    blocks.append(Table(header, rows))
    blocks.append(Code("\n".join(f"{f.source}: {f.latex}" for f in c.closed_forms)))
    return Section("Closed form", "closed-form", blocks)


def _tex(name: str) -> str:
    return r"\mathrm{" + name.replace("_", r"\_").replace(" ", r"\ ") + "}"


def _mcmc(c: Collected) -> Section:
    rows = []
    for name, r in c.results.items():
        d = r.diagnostics
        if not d:
            continue
        ok = ("ok", "pass") if d.get("ok") else ("FAILED", "fail")
        rows.append([name, str(d.get("runs", 0)), fmt(d.get("rhat_max")), fmt(d.get("ess_bulk_min")),
                     str(d.get("divergences", 0)), "/".join(d.get("samplers", [])), ok])
    spec = c.spec
    blocks = [
        Para(f"The sampling engine ran one MCMC run per conditioning event (draws {spec.draws or 'default'}, tune "
             f"{spec.tune or 'default'}, chains {spec.chains or 'default'} per run, seed {spec.seed}) to choose each "
             "witness, then fresh runs of the witness's two events, with twice the chains and other seeds, to bound "
             "it (half of their chains estimate, the other half give the standard error); discrete variables are "
             "summed out exactly given each draw of the continuous ones (the samplers column says how many "
             "configurations). Its verdicts need R-hat ≤ 1.01, bulk ESS ≥ 400 and no divergences in every run "
             "(else inconclusive)."),
        Table(["notion", "runs", "R-hat max", "bulk ESS min", "divergences", "samplers", "diagnostics"], rows),
    ]
    if c.traces:
        blocks.append(Figure("trace.png", figures.trace_figure(c.traces), "Trace of the query draws of the worst "
                             "witness's two conditioning events, one line per chain.", "trace plot of the query draws"))
    return Section("MCMC diagnostics", "mcmc", blocks)


def _reproducibility(c: Collected, command: str) -> Section:
    rep = reproducibility(c.spec.seed, command)
    rows = [[k, v] for k, v in rep["versions"].items()] + [["platform", rep["platform"]], ["seed", str(c.spec.seed)]]
    return Section("Reproducibility", "reproducibility", [
        Para("Regenerate this report (from the directory it was generated in):"),
        Code(command),
        Table(["component", "version"], rows),
        Para("`results.json` holds every number shown, at full precision; `report.md` is the same report in "
             "Markdown with the figures under `figures/`. Regenerated on the same installation every number is "
             "the same to the last digit (timings aside); elsewhere the sampling engine's digits may differ within their intervals: MCMC "
             "amplifies last-bit differences in floating-point arithmetic (`results.json` records, under "
             "`numerics`, how this machine's NumPy and PyTensor compute)."),
    ])
