"""A report from a spec naming a fit as a `Document` and its results.json (issue #41 item 4): the fit and
its checks, one target's leakage under each notion with the parameters set each way, the Laplace scale
each needs for the claim, and classic DP's answer beside."""

from __future__ import annotations

from ddpbayes.encoding import jsonable, number
from ddpbayes.papers import LIU
from ddpbayes.reports.render import figures
from ddpbayes.reports.render.document import Code, Document, Figure, Notes, Para, Section, Table
from ddpbayes.reports.render.results import FORMAT, fmt, reproducibility
from ddpbayes.reports.input.fitted_spec import CLUSTER_KNOWN, CLUSTER_QUERY
from ddpbayes.reports.views.fitted import Cell, FittedView

MODES = {"mean": "the posterior means, fixed", "integrated": "the Bayesian adversary: parameters integrated "
         "over the posterior draws", "draws": "every plausible model (Pufferfish): the worst posterior draw"}


def title(v: FittedView) -> str:
    return v.spec.title or f"{v.spec.fit.data_ref}: a fitted {v.spec.fit.template} model"


def classic_epsilon(v: FittedView) -> float:
    """Classic DP's epsilon of the release: dQ / b (dQ = 1 for a count)."""
    return _sensitivity(v) / v.spec.scale


def _sensitivity(v: FittedView) -> float:
    found = [c.calibration.sensitivity for c in v.cells if c.calibration is not None]
    return found[0] if found else 1.0


def finding(v: FittedView) -> str:
    """One line: classic DP's epsilon, each notion's range of leakages over the modes, the scales the claim needs."""
    leaks = {}
    for c in v.cells:
        if c.audit is not None:
            leaks.setdefault(c.notion, []).append(c.audit.result.leakage)
    parts = [f"classic DP {fmt(classic_epsilon(v))} at scale {fmt(v.spec.scale)}"]
    parts += [f"{n} {fmt(min(x))}–{fmt(max(x))}" for n, x in leaks.items()]
    scales = [c.calibration.scale for c in v.cells if c.calibration is not None]
    if scales:
        parts.append(f"ε = {fmt(v.spec.claim)} needs scale {fmt(min(scales))}–{fmt(max(scales))} "
                     f"(classic DP: {fmt(_sensitivity(v) / v.spec.claim)})")
    return "; ".join(parts) + f" (target {v.spec.target}, over {', '.join(v.spec.parameters)})."


def fitted_json(v: FittedView, command: str) -> dict:
    """results.json: every number the report shows."""
    cells = []
    for c in v.cells:
        a, k = c.audit, c.calibration
        cells.append({
            "notion": c.notion, "parameters": c.parameters,
            "leakage": None if a is None else number(a.result.leakage),
            "verdict": None if a is None else a.result.verdict,
            "engine": None if a is None else a.result.engine,
            "plausible": None if a is None or a.plausible is None else
            {key: a.plausible[key] for key in ("draws", "median", "p95", "max", "share_meeting_claim")},
            "scale": None if k is None else k.scale,
            "scale_over_classic": None if k is None else k.scale / k.classic_scale,
            "leakage_at_scale": None if k is None else number(k.found.result.leakage),
            "errors": c.errors, "seconds": {key: round(s, 3) for key, s in c.seconds.items()},
        })
    fit = v.fit
    return jsonable({
        "ddpbayes_report": FORMAT, "title": title(v), "finding": finding(v), "spec": v.spec.to_dict(),
        "fit": {"reused": v.reused, "model": f"fit/{v.model.name}", "parameters": fit["parameters"],
                "diagnostics": {k: fit["diagnostics"][k] for k in ("ok", "worst_rhat", "worst_ess_bulk",
                                                                  "divergences")},
                "checks": fit["checks"], "data": {k: fit["data"][k] for k in ("sha256", "rows", "clusters")}},
        "release": {"cluster": v.cluster, "cluster_label": v.label, "cluster_size": v.cluster_size,
                    "sensitivity": _sensitivity(v)},
        "classic_dp": {"epsilon_at_scale": classic_epsilon(v), "scale_for_claim": _sensitivity(v) / v.spec.claim},
        "cells": cells, "seconds": round(v.seconds, 3), "reproducibility": reproducibility(v.spec.seed, command),
    })


def fitted_document(v: FittedView, command: str) -> Document:
    lead = [v.spec.description] if v.spec.description else []
    lead.append(f"Finding: {finding(v)}")
    sections = [_fit(v), _checks(v), _leakage(v), _calibration(v), _release(v), _reproducibility(v, command)]
    return Document(title(v), lead, sections)


def _fit(v: FittedView) -> Section:
    f = v.fit
    rows = [[name, fmt(p["mean"]), fmt(p["sd"]), f"[{fmt(p['hdi'][0])}, {fmt(p['hdi'][1])}]",
             fmt(f["diagnostics"]["parameters"][name]["rhat"]), fmt(f["diagnostics"]["parameters"][name]["ess_bulk"])]
            for name, p in f["parameters"].items()]
    d, s = f["diagnostics"], f["sampler"]
    how = "reused from this folder (same data sha256, template, options and settings)" if v.reused else "fitted now"
    return Section("The fit", "fit", [
        Para(f"`ddpbayes fit {v.spec.fit.data_ref} --template {v.spec.fit.template} "
             + " ".join(o for o in (_option(k, val) for k, val in v.spec.fit.options.items()) if o)
             + f" --seed {v.spec.fit.seed}`: {f['data']['rows']:,} records in {f['data']['clusters']} clusters, "
             f"{s['chains']} chains × {s['draws']:,} draws of PyMC's NUTS ({how}; the model file and its draws are "
             f"`fit/{v.model.name}` and `fit/{v.model.stem}.fit.json` in this folder, the whole posterior is not "
             "kept). Worst R-hat "
             f"{fmt(d['worst_rhat']['value'])} ({d['worst_rhat']['parameter']}), lowest bulk ESS "
             f"{fmt(d['worst_ess_bulk']['value'])} ({d['worst_ess_bulk']['parameter']}), {d['divergences']} "
             "divergences (DESIGN §9.2)."),
        Table(["parameter", "posterior mean", "sd", "94% HDI", "R-hat", "bulk ESS"], rows,
              caption="sigma: the standard deviation of the cluster effects on the log-odds; intercept: the log-odds "
                      "of a record in a typical cluster (DESIGN §9.1)." + _spatial_caption(f)),
    ])


def _option(key: str, value) -> str:
    """`ddpbayes fit`'s option as typed: a switch (--ordered) when true, left out when false."""
    if isinstance(value, bool):
        return f"--{key}" if value else ""
    return f"--{key} {value}"


def _spatial_caption(fit: dict) -> str:
    """What a spatial fit's further parameters are (DESIGN §9.8); nothing for a fit without the field."""
    spatial = fit["data"].get("spatial")
    if not spatial:
        return ""
    return (" With the spatial field, sigma is the SD of the whole cluster effect, field and iid parts together; "
            "phi: the field's share of its variance; sigma_iid = sigma·sqrt(1 − phi); gp_length_scale: the field's "
            f"Matérn length scale, in {spatial['units']} (DESIGN §9.8).")


def _checks(v: FittedView) -> Section:
    c = v.fit["checks"]
    rows = []
    levels = c.get("levels")  # a categorical outcome: each level's indicator (DESIGN §9.9)
    for where, say in ([(c, "")] if levels is None else [(x, f"level {k}: ") for k, x in levels.items()]):
        for key, label in (("icc", "intra-cluster correlation"), ("cluster_total_sd", "SD of the cluster totals")):
            x = where[key]
            rows.append([say + label, fmt(x["data"]), _rep(x["replicated"]), fmt(x["p_value"]),
                         _rep(x["independent"]["replicated"]), fmt(x["independent"]["p_value"])])
    caption = (f"Posterior predictive checks over {c['draws']:,} draws (replicated: mean [94% HDI]; p: the share of "
               "replications at or above the data's); without the dependence: no cluster effects. DESIGN §9.2.")
    if "morans_i" in c:
        from ddpbayes.fitting.spatial import NEIGHBOURS

        x = c["morans_i"]
        rows.append([f"Moran's I of the clusters' residual rates ({NEIGHBOURS} nearest neighbours)", fmt(x["data"]),
                     _rep(x["replicated"]), fmt(x["p_value"]), _rep(x["without_field"]["replicated"]),
                     fmt(x["without_field"]["p_value"])])
        caption += " Moran's I without the dependence: the fit without the spatial field (its cluster effects kept)."
    loo = c["loo"]
    return Section("Does the data support the dependence?", "checks", [
        Table(["statistic", "data", "replicated: fitted model", "p", "replicated: without the dependence", "p"], rows,
              caption=caption),
        Para(f"PSIS-LOO prefers the clustered model by {fmt(loo['elpd_diff'])} (se {fmt(loo['se_diff'])}) to the "
             f"model without cluster effects; dependence supported: {'yes' if c['dependence_supported'] else 'no'}."),
        *_spatial_loo(c),
    ])


def _spatial_loo(c: dict) -> list[Para]:
    """A spatial fit's LOO against the fit without the field, record by record and cluster by cluster, with
    the latter's reliability, and whether the field is supported (DESIGN §9.8); nothing otherwise."""
    if "loo_spatial" not in c:
        return []
    s, v = c["loo_spatial"], c["loo_cluster"]
    trust = ("reliable (no cluster's Pareto k-hat over 0.7 in either fit)" if v["reliable"] else
             f"NOT reliable: Pareto k-hat over 0.7 for {v['pareto_k_over_0_7']} of {v['clusters']} clusters with the "
             f"field, {v['pareto_k_over_0_7_without_field']} without it (the difference is reported, not to be "
             "trusted)")
    return [Para(f"Against the fit without the spatial field (positive: the field predicts better): PSIS-LOO (one "
                 f"record left out) elpd difference {fmt(s['elpd_diff'])} (se {fmt(s['se_diff'])}); "
                 f"leave-one-cluster-out LOO (a cluster's records left out together, its own effect integrated out) "
                 f"{fmt(v['elpd_diff'])} (se {fmt(v['se_diff'])}), largest Pareto k-hat {fmt(v['pareto_k_max'])}: "
                 f"{trust}. Spatial field supported (Moran's I without it, p < 0.01): "
                 f"{'yes' if c['spatial_supported'] else 'no'}. DESIGN §9.8.")]


def _rep(x: dict) -> str:
    return f"{fmt(x['mean'])} [{fmt(x['hdi'][0])}, {fmt(x['hdi'][1])}]"


def _leakage(v: FittedView) -> Section:
    rows = [["dp (classic DP: records independent)", *(fmt(classic_epsilon(v)) for _ in v.spec.parameters)]]
    for name in v.spec.notions:
        rows.append([name, *(_leak_cell(v.cell(name, mode)) for mode in v.spec.parameters)])
    blocks = [
        Para(f"Record {v.spec.target}'s leakage (nats) when its cluster's count is released with Laplace noise of "
             f"scale {fmt(v.spec.scale)}, claim ε = {fmt(v.spec.claim)}. Columns: how the fitted parameters are set "
             "(" + "; ".join(f"`{m}`: {MODES[m.split(':')[0]]}" for m in v.spec.parameters) + "). Under `draws:S` "
             "the cell is the worst draw's leakage, with the median and the share of draws meeting the claim."),
        Table(["notion", *v.spec.parameters], rows, caption="An asterisk marks a leakage above the claim. Classic "
              "DP's ε is ΔQ/b whatever the model: it assumes the records independent."),
        Figure("leakage.png", _figure(v), "Leakage per notion and way of setting the parameters; the dashed line "
               "is classic DP's ε for the same release, the dotted one the claim.",
               "bars of leakage per notion and parameters mode"),
    ]
    return Section("Leakage under the fitted model", "leakage", blocks + _errors(v, "audit"))


def _leak_cell(c: Cell) -> str:
    if c.audit is None:
        return "not computed (below)"
    r = c.audit.result
    text = fmt(r.leakage) + ("*" if r.verdict == "fail" else "")
    p = c.audit.plausible
    if p is not None:
        meeting = round(p["share_meeting_claim"] * p["draws"])
        text += f" (median {fmt(p['median'])}; {meeting} of {p['draws']} draws meet ε)"
    return text


def _figure(v: FittedView) -> bytes:
    modes = list(v.spec.parameters)
    fig, ax = figures.plt.subplots(figsize=(7.5, 4.2))
    width = 0.8 / len(modes)
    for j, mode in enumerate(modes):
        xs, hs = [], []
        for i, name in enumerate(v.spec.notions):
            c = v.cell(name, mode)
            if c.audit is not None:
                xs.append(i + (j - (len(modes) - 1) / 2) * width)
                hs.append(c.audit.result.leakage)
        ax.bar(xs, hs, width=width, label=mode, color=f"C{j}")
    ax.axhline(classic_epsilon(v), color="k", ls="--", lw=1, label="classic DP")
    ax.axhline(v.spec.claim, color="0.4", ls=":", lw=1, label="claim")
    ax.set_xticks(range(len(v.spec.notions)))
    ax.set_xticklabels(v.spec.notions)
    ax.set_ylabel("leakage (nats)")
    ax.legend(fontsize=9, frameon=False)
    fig.tight_layout()
    return figures.png(fig)


def _calibration(v: FittedView) -> Section:
    classic = _sensitivity(v) / v.spec.claim
    rows = [["dp (classic DP)", *(fmt(classic) for _ in v.spec.parameters)]]
    for name in v.spec.calibrate:
        cells = []
        for mode in v.spec.parameters:
            k = v.cell(name, mode).calibration
            cells.append("not computed (below)" if k is None else f"{fmt(k.scale)} (×{fmt(k.scale / classic, 3)})")
        rows.append([name, *cells])
    return Section(f"The noise ε = {fmt(v.spec.claim)} needs", "calibration", [
        Para(f"The smallest Laplace scale whose leakage is at most ε = {fmt(v.spec.claim)} for record "
             f"{v.spec.target} (`ddpbayes calibrate MODEL.py --parameters MODE`; DESIGN §9.6), against classic DP's "
             f"ΔQ/ε = {fmt(classic)} (× the classic scale in parentheses). Under `draws:S`: the largest of the draws' "
             "own scales, the noise that makes every plausible model meet ε (each draw's leakage falls with the "
             "scale)."),
        Table(["notion", *v.spec.parameters], rows, caption="Laplace scales b; the accuracy cost is b ln 20 at "
              "95% (the noise exceeds it with probability 0.05)."),
        *_errors(v, "calibration"),
    ])


def _errors(v: FittedView, what: str) -> list:
    items = [f"{c.notion} under {c.parameters}: {c.errors[what]}" for c in v.cells if what in c.errors]
    return [Notes(items)] if items else []


def _release(v: FittedView) -> Section:
    s = v.spec
    known = ("every known set" if s.known is None else
             f"the rest of the target's cluster ({v.cluster_size - 1} records"
             + ("; given them the cluster's count moves by the target's record alone, so pdp's leakage is classic "
                "DP's epsilon whatever the model)" if s.query.partition(":")[0] == CLUSTER_QUERY else ")")
             if s.known == CLUSTER_KNOWN else
             f"{len(s.known)} of the other records (tuples {', '.join(map(str, s.known))})")
    items = [
        f"The release audited: the count{_of_level(s.query)} of record {s.target}'s cluster ({v.label}: "
        f"{v.cluster_size} records) with Laplace noise. "
        "With the parameters fixed (`mean`, each draw) the clusters are independent, so the other clusters' noisy "
        "counts, if published too, are independent of the record and do not change its leakage (DESIGN §2.1b); under "
        "`integrated` they would also inform the parameters, which this audit of the one count leaves out.",
        f"pdp's adversary knows {known}; ddp's knows the records independent of the target ({LIU}); idp's none.",
        "Seconds per cell: " + "; ".join(f"{c.notion} {c.parameters} "
                                         + ", ".join(f"{k} {t:.1f}" for k, t in c.seconds.items())
                                         for c in v.cells) + f"; total {v.seconds:.0f} s.",
    ]
    return Section("What is audited", "release", [Notes(items)])


def _of_level(query: str) -> str:
    """" of level L" for `cluster:L` (a categorical outcome), else nothing."""
    kind, sep, level = query.partition(":")
    return f" of level {level.strip()}" if kind == CLUSTER_QUERY and sep else ""


def _reproducibility(v: FittedView, command: str) -> Section:
    rep = reproducibility(v.spec.seed, command)
    rows = [[k, val] for k, val in rep["versions"].items()] + [["platform", rep["platform"]],
                                                               ["seed", str(v.spec.seed)]]
    return Section("Reproducibility", "reproducibility", [
        Para("Regenerate this report (from the directory it was generated in); the fit kept in `fit/` is reused "
             "while the data's sha256, the template, its options and NUTS's settings are unchanged:"), Code(command),
        Table(["component", "version"], rows),
    ])
