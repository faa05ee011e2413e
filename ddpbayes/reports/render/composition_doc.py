"""A composition report as a `Document` and its results.json: the joint leakage against Thms 3–4
(DESIGN §3.1b)."""

from __future__ import annotations

from pathlib import Path

from ddpbayes.encoding import jsonable
from ddpbayes.reports.render import figures
from ddpbayes.reports.render.document import Code, Document, Figure, Notes, Para, Section, Table
from ddpbayes.reports.render.results import FORMAT, fmt, reproducibility
from ddpbayes.reports.views.composition import Composed

RESPECTED = {True: ("respected", "pass"), False: ("VIOLATED", "fail"), None: ("undecided", "inconclusive")}


def title(c: Composed) -> str:
    return c.spec.title or f"{Path(c.spec.model_ref).stem}: {len(c.spec.releases)} releases audited jointly"


def finding(c: Composed) -> str:
    """One line: per notion the joint leakage against Σ ε_t (and max ε_t) and, when a bound fails,
    Thm 3 at both levels (`thm3_levels`) and Thm 4."""
    parts = []
    for notion, r in c.results.items():
        s = r.composition
        text = f"{notion} {fmt(s['joint'])} vs Σ {fmt(s['sequential_bound'])}"
        if s["parallel_bound"] is not None:
            text += f", max {fmt(s['parallel_bound'])}"
        wide, per = thm3_levels(r)
        broken = []
        if s["sequential_respected"] is not True or per[1] == "fail":
            broken.append(f"Thm 3 {wide[0]} notion-wide" + ("" if per[1] is None else
                                                             f"{' but' if wide[1] != per[1] else ' and'} {per[0]}"))
        if s["parallel_respected"] is False:
            broken.append("Thm 4 violated")
        parts.append(text + (f" ({'; '.join(broken)})" if broken else ""))
    return "; ".join(parts)


def thm3_levels(r) -> tuple[tuple[str, str | None], tuple[str, str | None]]:
    """Thm 3 at its two levels, each (text, css class): notion-wide, the notion's joint leakage (its
    worst target) against Σ ε_t, the sum of each release's worst; per target, each target's joint
    leakage against the sum of what each release alone leaks to that same target (exact values
    only: estimates and greedy lower bounds are not compared target by target)."""
    s = r.composition
    wide = {True: ("holds", "pass"), False: ("fails", "fail"), None: ("is undecided", "inconclusive")}[
        s["sequential_respected"]]
    exact = r.ci is None and not r.lower_bound and all(rel["ci"] is None for rel in s["releases"])
    compared = [i for i, joint in enumerate(r.per_target)
                if joint is not None and all(rel["per_target"][i] is not None for rel in s["releases"])]
    if not exact or not compared:
        return wide, ("not compared (estimates)" if not exact else "no target to compare", None)
    over = len(s["targets_over_sequential"])
    if over:
        return wide, (f"fails for {over} of {len(compared)} target{'s' if len(compared) > 1 else ''}", "fail")
    return wide, (f"holds for every target ({len(compared)})", "pass")


def composition_json(c: Composed, command: str) -> dict:
    """results.json of a composition report: every number it shows."""
    spec = c.spec
    return jsonable({
        "ddpbayes_report": FORMAT, "title": title(c), "finding": finding(c), "spec": spec.to_dict(),
        "model": {"file": spec.model_ref, "params": spec.params, **c.model.describe()},
        "audits": {n: r.to_dict() for n, r in c.results.items()}, "sweep": c.sweep,
        "reproducibility": reproducibility(spec.seed, command)})


def composition_document(c: Composed, command: str) -> Document:
    lead = [c.spec.description] if c.spec.description else []
    lead.append(f"Finding: {finding(c)}")
    sections = [_summary(c), _releases(c), _per_target(c), _premise(c), _sweep(c), _reproducibility(c, command)]
    return Document(title(c), lead, sections)


def _summary(c: Composed) -> Section:
    rows = []
    for notion, r in c.results.items():
        s = r.composition
        wide, per = thm3_levels(r)
        rows.append([notion, fmt(s["joint"]), fmt(s["sequential_bound"]), fmt(s["ratio_to_sequential"]),
                     wide if wide[1] else wide[0], per if per[1] else per[0], fmt(s["parallel_bound"]),
                     fmt(s["ratio_to_parallel"]),
                     RESPECTED[s["parallel_respected"]] if s["parallel_bound"] is not None else "–", r.engine])
    releases = ", ".join(f"`{spec}`" for spec in c.spec.releases)
    return Section("Summary", "summary", [
        Para(f"Releases {releases}, each with its own independent noise, audited jointly: the leakage of the "
             "stacked output (every release's output at once) under each notion, next to the bounds Liu et al. "
             "2016 prove for their DDP — Thm 3's Σ ε_t and, when the releases touch disjoint tuples, Thm 4's max "
             "ε_t — with ε_t each release's own leakage under the same notion (audited alone, same engine)."),
        Table(["notion", "joint leakage", "Σ ε_t (Thm 3)", "joint / Σ", "Thm 3 notion-wide: joint ≤ Σ ε_t",
               "Thm 3 per target: joint ≤ its own sum", "max ε_t (Thm 4)", "joint / max", "Thm 4", "engine"], rows,
              caption="Thm 3 is checked at two levels. Notion-wide: the notion's joint leakage (its worst target) "
                      "against Σ ε_t, the sum of each release's worst. Per target: each target's joint leakage "
                      "against the sum of what each release alone leaks to that same target (section Per target). "
                      "The first can hold while the second fails: each release's worst may be another target. "
                      "Leakage is Bayesian: the output's likelihood given the target's value mixes over the tuples "
                      "the adversary does not know, and the releases are independent given every tuple, not given "
                      "the target alone, so neither theorem need hold (DESIGN §3.1b); a violation is a finding."),
    ])


def _releases(c: Composed) -> Section:
    rows = []
    for notion, r in c.results.items():
        for k, rel in enumerate(r.composition["releases"]):
            ci = "exact" if rel["ci"] is None else f"[{fmt(rel['ci'][0])}, {fmt(rel['ci'][1])}]"
            rows.append([notion, f"{k}: `{rel['release']}`", fmt(rel["leakage"]), ci, ", ".join(rel["touched"])])
    return Section("Each release alone", "releases", [
        Table(["notion", "release", "leakage ε_t", "interval", "tuples it touches"], rows,
              caption="A release touches tuple k when its sensitivity to k is positive."),
    ])


def _per_target(c: Composed) -> Section:
    names = c.model.names
    rows = []
    for notion, r in c.results.items():
        s = r.composition
        for i, joint in enumerate(r.per_target):
            own = [rel["per_target"][i] for rel in s["releases"]]
            if joint is None or any(v is None for v in own):
                continue
            over = names[i] in {t["target"] for t in s["targets_over_sequential"]}
            rows.append([notion, names[i], fmt(joint), " + ".join(fmt(v) for v in own), fmt(sum(own)),
                         RESPECTED[False] if over else RESPECTED[True] if r.ci is None else "–"])
    return Section("Per target", "per-target", [
        Table(["notion", "target", "joint", "each release", "sum", "joint ≤ sum"], rows,
              caption="Thm 3 per target: the joint leakage to one target against the sum of what each release "
                      "alone leaks to that target (exact values only)."),
    ])


def _premise(c: Composed) -> Section:
    first = next(iter(c.results.values())).composition
    items = [f"{notion}: {r.composition['parallel_premise']}" for notion, r in c.results.items()]
    pairs = next((r.composition["dependent_pairs"] for r in c.results.values() if r.composition["dependent_pairs"]), [])
    rows = [[f"{p['release']}: {p['tuple']}", f"{p['other_release']}: {p['other_tuple']}"] for p in pairs]
    blocks = [Para("Thm 4 assumes the releases read disjoint subsets of the data; under dependence a tuple of one "
                   "release can still move a tuple of another. " + ("The releases are disjoint." if first["disjoint"]
                                                                   else "The releases share tuples.")),
              Notes(items)]
    if rows:
        blocks.append(Table(["release: tuple", "dependent release: tuple"], rows,
                            caption="Dependent pairs across releases (the engine's dependence sets, pairwise)."))
    return Section("Parallel composition's premise", "premise", blocks)


def _sweep(c: Composed) -> Section:
    factors = [p["factor"] for p in next(iter(c.sweep.values()))]
    rows = [[notion, fmt(p["factor"]), fmt(p["joint"]), fmt(p["sequential_bound"]),
             fmt(p["joint"] / p["sequential_bound"] if p["sequential_bound"] else None), fmt(p["parallel_bound"]),
             RESPECTED[p["sequential_respected"]]] for notion, points in c.sweep.items() for p in points]
    return Section("Noise sweep", "sweep", [
        Figure("composition_sweep.png", _sweep_figure(c), "Left: the joint leakage (solid) against Σ ε_t (dashed) "
               f"and max ε_t (dotted) as every release's noise is multiplied by {', '.join(fmt(f) for f in factors)}; "
               "right: the joint leakage's ratio to each bound (above 1: the bound fails).",
               "joint leakage and the composition bounds against the noise factor"),
        Table(["notion", "noise factor", "joint", "Σ ε_t", "joint / Σ", "max ε_t", "Thm 3 notion-wide"], rows),
    ])


def _sweep_figure(c: Composed) -> bytes:
    """Left: the joint leakage and both bounds; right: the joint's ratio to each (1: the bound).
    Markers are hollow and nested (`figures.MARKER_SIZE`) and each notion's bound lines thinner than
    the previous notion's, so notions with equal values (idp and ddp, often) stay visible."""
    fig, (left, right) = figures.plt.subplots(1, 2, figsize=(10.5, 4.0))
    for k, (notion, points) in enumerate(c.sweep.items()):
        colour, marker, _ = figures.NOTION_STYLE.get(notion, ("C0", "o", "-"))
        size, width = figures.MARKER_SIZE.get(notion, 6), max(0.6, 2.2 - 0.5 * k)
        x = [p["factor"] for p in points]
        joint = [p["joint"] for p in points]
        left.plot(x, joint, marker=marker, color=colour, mfc="none", ms=size, label=f"{notion} joint")
        left.plot(x, [p["sequential_bound"] for p in points], ls="--", color=colour, lw=width, label=f"{notion} Σ ε_t")
        right.plot(x, [_ratio(j, p["sequential_bound"]) for j, p in zip(joint, points)], marker=marker, ls="--",
                   color=colour, mfc="none", ms=size, label=f"{notion} joint / Σ")
        if all(p["parallel_bound"] is not None for p in points):
            left.plot(x, [p["parallel_bound"] for p in points], ls=":", color=colour, lw=width,
                      label=f"{notion} max ε_t")
            right.plot(x, [_ratio(j, p["parallel_bound"]) for j, p in zip(joint, points)], marker=marker, ls=":",
                       color=colour, mfc="none", ms=size, label=f"{notion} joint / max")
    right.axhline(1.0, color="k", lw=1, alpha=0.6)
    factors = [p["factor"] for p in next(iter(c.sweep.values()))]
    for ax, label in ((left, "leakage"), (right, "joint leakage / bound")):
        figures.label_values(ax, factors)
        ax.set_xlabel("noise factor (every release's noise times it)")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
    right.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    left.legend(fontsize=7, loc="upper right", frameon=False, ncol=2)
    fig.tight_layout()
    return figures.png(fig)


def _ratio(joint: float, bound: float) -> float:
    return joint / bound if bound else float("nan")


def _relative(path: Path) -> str:
    """`path` relative to the working directory when inside it (as the regenerate command is)."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _reproducibility(c: Composed, command: str) -> Section:
    rep = reproducibility(c.spec.seed, command)
    rows = [[k, v] for k, v in rep["versions"].items()] + [["platform", rep["platform"]], ["seed", str(c.spec.seed)]]
    audit = " ".join(f"--release '{r}'" for r in c.spec.releases)
    return Section("Reproducibility", "reproducibility", [
        Para("Regenerate this report (from the directory it was generated in):"), Code(command),
        Para("One notion on the command line:"),
        Code(f"ddpbayes audit {_relative(c.spec.model)} "
             + " ".join(f"-p {k}={v!r}" for k, v in c.spec.params.items()) + f" {audit} --notion {c.spec.notions[0]}"),
        Table(["component", "version"], rows),
    ])
