"""`ddpbayes calibrate`: the Laplace scale (or Gaussian sigma) each recipe prescribes for epsilon,
audited under every notion."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddpbayes.cli.args import (
    NOTION_HELP,
    QUERY_HELP,
    add_model,
    add_output,
    add_run_settings,
    add_sensitivity,
    index_list,
    load_model_of,
    run_settings,
)
from ddpbayes.cli.audit_cmd import EXIT_CODES
from ddpbayes.formatting import fmt
from ddpbayes.vocabulary import CALIBRATION_METHODS, NOTIONS

if TYPE_CHECKING:
    from ddpbayes.ddp import Calibration
    from ddpbayes.plausible import FittedCalibration, Parameters
    from ddpbayes.settings import RunSettings

_MARK = {"fail": "*", "inconclusive": "?"}
FITTED_METHOD = CALIBRATION_METHODS[0]  # exact: the one recipe of a fitted model


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate",
        help="the Laplace scale (Gaussian sigma) for epsilon: exact (smallest audited), DPM, group baseline, classic DP",
        description="exact: the smallest Laplace scale whose audited leakage under --notion is at most --epsilon; "
        "dpm: Liu et al. 2016's (DDP) DS_Q / epsilon at its fixed point; group: L dQ / epsilon; dp: dQ / epsilon. "
        "Every scale is audited under every notion and shown with Wu et al.'s IDP bounds (Prop. 3, Thm. 4). "
        "With --mechanism gaussian --delta D: the smallest sigma whose profile meets (epsilon, D) under --notion; "
        "dp and group: the analytic Gaussian sigma for the L2 sensitivity and L times it; dpm n/a. "
        "Exit code: that of an audit of the reported scale under --notion with --epsilon as the claim: 0 it meets "
        "epsilon, 1 it does not (dpm, group or dp can fall short), 4 an estimate cannot settle it.",
    )
    add_model(p)
    p.add_argument("--query", required=True, help=QUERY_HELP)
    add_sensitivity(p)
    p.add_argument("--mechanism", default="laplace", help="the noise to calibrate: laplace (default) or gaussian")
    p.add_argument("--delta", type=float, default=None,
                   help="gaussian only (required): the delta at which the leakage epsilon is read off the profile")
    p.add_argument("--notion", required=True, choices=NOTIONS, help=NOTION_HELP)
    p.add_argument("--epsilon", type=float, required=True, help="the privacy level to meet")
    p.add_argument("--method", choices=CALIBRATION_METHODS, default="exact",
                   help="the recipe whose scale is reported (default exact)")
    p.add_argument("--parameters", default=None, metavar="MODE",
                   help="a model written by `ddpbayes fit` only (and then the only recipe: exact): mean (default; the "
                   "posterior means), draw:K, integrated[:S] (the Bayesian adversary) or draws[:S] (the smallest scale "
                   "meeting epsilon under every one of S posterior draws); S defaults to 200")
    p.add_argument("--target", type=index_list, default=None,
                   help="a fitted model only: the target tuple(s) by index (default every tuple)")
    p.add_argument("--known", type=index_list, default=None,
                   help="a fitted model only, pdp: the indices the adversary knows (default every known set)")
    add_run_settings(p)
    add_output(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from ddpbayes.ddp import calibrate

    settings = run_settings(args)
    parameters = _fitted(args)
    if parameters is not None:
        return _run_fitted(args, settings, parameters)
    model = load_model_of(args, settings)
    c = calibrate(model, args.query, args.notion, args.epsilon, method=args.method, mechanism=args.mechanism,
                  delta=args.delta, sensitivity=args.sensitivity, settings=settings)
    print(c.to_json() if args.format == "json" else calibrate_text(c, args.model))
    return EXIT_CODES.get(c.audit.verdict, 0)


def _fitted(args) -> Parameters | None:
    """The `Parameters` of a fitted model file (mean unless --parameters says otherwise), None for
    any other model; --parameters, --target or --known on another model, a recipe other than
    exact, Gaussian noise or -p on a fitted one: one line."""
    from ddpbayes.errors import InputError
    from ddpbayes.fitting.posterior import fit_of
    from ddpbayes.plausible import check_fitted, parse_parameters

    if args.parameters is None and fit_of(args.model) is None:
        if args.target is not None or args.known is not None:
            raise InputError("--target and --known apply to a model written by `ddpbayes fit` (the recipes' table "
                             "audits every tuple)")
        return None
    check_fitted(args.model)
    from ddpbayes.mechanisms import Laplace

    if args.method != FITTED_METHOD or args.mechanism != Laplace.kind or args.param:
        raise InputError("a fitted model is calibrated by the exact recipe on Laplace noise, its parameters set by "
                         "--parameters: --method, --mechanism and -p do not apply")
    return parse_parameters(args.parameters or "mean")


def _run_fitted(args, settings: RunSettings, parameters: Parameters) -> int:
    """`calibrate` of a fitted model under --parameters (DESIGN §9.6)."""
    from ddpbayes.plausible import calibrate_fitted
    from ddpbayes.queries import parse_query
    from ddpbayes.queries.general import with_sensitivity

    query = with_sensitivity(parse_query(args.query), args.sensitivity)
    c = calibrate_fitted(args.model, parameters, query, args.notion, args.epsilon, settings=settings,
                         targets=args.target, known=args.known)
    print(c.to_json() if args.format == "json" else fitted_calibrate_text(c, args.model))
    return EXIT_CODES.get(c.found.result.verdict, 0)


def fitted_calibrate_text(c: FittedCalibration, model: str) -> str:
    """The scale under the fitted model, its leakage there, and classic DP's answer beside it."""
    r = c.found.result
    lines = [
        f"parameters {c.parameters}    model {model}    engine {r.engine}",
        f"query      {_short(c.query)}    laplace    notion {c.notion}    epsilon {fmt(c.epsilon)}",
        f"scale      {fmt(c.scale)} (exact)    {c.notion} leakage there {fmt(r.leakage)}    verdict "
        f"{(r.verdict or '').upper()}",
        f"classic DP scale {fmt(c.classic_scale)} (dQ / epsilon, dQ = {fmt(c.sensitivity)}): classic DP calls the "
        f"calibrated release {fmt(c.classic_epsilon)}-DP",
    ]
    if c.found.plausible is not None:
        p = c.found.plausible
        lines.append(f"plausible  leakage at the scale: median {fmt(p['median'])}, max {fmt(p['max'])} over "
                     f"{p['draws']} draws; {len(c.solved)} draw(s) solved, the others meet epsilon at a scale "
                     "already found")
    lines += [f"note: {n}" for n in [*c.notes, *r.notes]]
    return "\n".join(lines)


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _bound(value: float | None, premise: str | None) -> str:
    """A seed 004 bound, or n/a when its premise fails (said below the table)."""
    return "n/a" if premise else fmt(value)


def calibrate_text(c: Calibration, model: str) -> str:
    from ddpbayes.ddp.calibration import BETA

    if c.dpm is None:
        return _gaussian_text(c, model)
    a = c.audit
    lines = [
        f"model      {model} ({', '.join(c.tuples)})    engine {c.engine}",
        f"query      {c.query}    laplace    notion {c.notion}    epsilon {fmt(c.epsilon)}",
        f"scale      {fmt(c.scale)} ({c.method})    {c.notion} leakage there {fmt(a.leakage)}"
        + (f" [{fmt(a.ci[0])}, {fmt(a.ci[1])}]" if a.ci else "") + f"    verdict {a.verdict.upper()}",
        "",
    ]
    head = ["method", "scale", f"alpha@{BETA:g}", *NOTIONS, "Prop.3", "Thm.4"]
    table = [head]
    for r in c.rows:
        cells = [r.method, fmt(r.scale), fmt(r.alpha)]
        for n in NOTIONS:
            audit = r.audits.get(n)
            cells.append("-" if audit is None else fmt(audit.leakage) + _MARK.get(audit.verdict, ""))
        cells += [_bound(r.bounds.prop3, r.bounds.prop3_premise), _bound(r.bounds.thm4, r.bounds.thm4_premise)]
        table.append(cells)
    widths = [max(len(row[k]) for row in table) for k in range(len(head))]
    lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() for row in table]
    lines.append("")
    lines.append(f"* leakage above epsilon = {fmt(c.epsilon)} under the model" + (
        "; ? an estimate that cannot settle it" if any(a.ci for r in c.rows for a in r.audits.values()) else ""))
    b = c.rows[0].bounds
    eta = "" if b.eta is None else f", eta = {fmt(b.eta)}"
    lines.append(f"Prop.3 / Thm.4: Wu et al.'s (IDP) bounds on idp from the mechanism's DP level (k = {b.k}{eta}); "
                 f"alpha: the noise magnitude exceeded with probability {BETA:g}")
    if b.prop3_premise and b.prop3_premise == b.thm4_premise:
        lines.append(f"Prop.3, Thm.4 n/a (premise: {b.prop3_premise})")
    else:
        lines += [f"{name} n/a (premise: {premise})" for name, premise in
                  (("Prop.3", b.prop3_premise), ("Thm.4", b.thm4_premise)) if premise]
    group = c.row("group").scale
    for m in ("exact", "dpm"):
        saving = 1 - c.row(m).scale / group
        lines.append(f"{m} adds {abs(saving):.1%} {'less' if saving >= 0 else 'more'} noise than the group baseline "
                     f"(scale {fmt(c.row(m).scale)} vs {fmt(group)}, L = {c.dependence_size})")
    lines.append(f"DPM: DS_Q = {fmt(c.dpm.dependent_sensitivity)} at its fixed point sigma = DS_Q(sigma) / epsilon")
    for r in c.rows:
        lines += [f"note: {r.method} {n}: {e}" for n, e in r.errors.items()]
    lines += [f"note: {n}" for n in c.notes]
    return "\n".join(lines)


def _gaussian_text(c: Calibration, model: str) -> str:
    """The Gaussian calibration: sigma per recipe, epsilon at delta under every notion (DPM n/a)."""
    from ddpbayes.ddp.calibration import BETA, BOUNDS_NA, DPM_NA

    a = c.audit
    lines = [
        f"model      {model} ({', '.join(c.tuples)})    engine {c.engine}",
        f"query      {c.query}    gaussian    notion {c.notion}    epsilon {fmt(c.epsilon)}    delta {c.delta:g}",
        f"sigma      {fmt(c.scale)} ({c.method})    {c.notion} epsilon at delta there {fmt(a.leakage)}"
        + (f" [{fmt(a.ci[0])}, {fmt(a.ci[1])}]" if a.ci else "") + f"    verdict {a.verdict.upper()}",
        "",
    ]
    table = [["method", "sigma", f"alpha@{BETA:g}", *NOTIONS]]
    for r in c.rows:
        cells = [r.method, fmt(r.scale), fmt(r.alpha)]
        for n in NOTIONS:
            audit = r.audits.get(n)
            cells.append("-" if audit is None else fmt(audit.leakage) + _MARK.get(audit.verdict, ""))
        table.append(cells)
    table.append(["dpm", "n/a", "", *("" for _ in NOTIONS)])
    widths = [max(len(row[k]) for row in table) for k in range(len(table[0]))]
    lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() for row in table]
    lines += [
        "",
        (f"epsilon at delta = {c.delta:g} of each notion's privacy profile; * above epsilon = {fmt(c.epsilon)} "
         f"under the model; alpha: the noise magnitude exceeded with probability {BETA:g}"),
        (f"dp, group: the analytic Gaussian sigma (Balle & Wang 2018) for the L2 sensitivity and L = "
         f"{c.dependence_size} times it"),
        f"dpm {DPM_NA}",
        f"Prop.3 / Thm.4 {BOUNDS_NA}",
    ]
    group = c.row("group").scale
    saving = 1 - c.row("exact").scale / group
    lines.append(f"exact adds {abs(saving):.1%} {'less' if saving >= 0 else 'more'} noise than the group baseline "
                 f"(sigma {fmt(c.row('exact').scale)} vs {fmt(group)}, L = {c.dependence_size})")
    for r in c.rows:
        lines += [f"note: {r.method} {n}: {e}" for n, e in r.errors.items()]
    lines += [f"note: {n}" for n in c.notes]
    return "\n".join(lines)
