"""`ddpbayes audit`: the leakage of one mechanism under one notion."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddpbayes.cli.args import (
    NOTION_HELP,
    add_mechanism,
    add_model,
    add_output,
    add_run_settings,
    check_release_flags,
    index_list,
    load_model_of,
    noise,
    run_settings,
)
from ddpbayes.vocabulary import NOTIONS

if TYPE_CHECKING:
    from ddpbayes.plausible import Parameters
    from ddpbayes.settings import RunSettings

EXIT_CODES = {"fail": 1, "inconclusive": 4}


def register(sub) -> None:
    p = sub.add_parser("audit", help="leakage of a mechanism on a dependence model, with a verdict")
    add_model(p)
    add_mechanism(p, releases=True)
    p.add_argument("--notion", required=True, choices=NOTIONS, help=NOTION_HELP)
    p.add_argument("--target", type=index_list, default=None,
                   help="target tuple(s) by index, e.g. 0 or 0,2 (default every tuple)")
    p.add_argument("--known", type=index_list, default=None,
                   help="pdp: indices the adversary knows ('' for none; default every known set)")
    p.add_argument("--lattice", action="store_true", help="pdp: list every (target, known set)")
    p.add_argument("--pairs", default=None, metavar="FILE",
                   help="dp of a program: a JSON list of [x, x'] pairs of neighbouring databases, each x the "
                   "records' values in tuple order, differing in one record (default: pairs searched over the "
                   "domains)")
    p.add_argument("--claim", type=float, default=None,
                   help="claimed epsilon to check: exit 1 when the leakage exceeds it, 4 when an estimate cannot "
                   "settle it (also when the MCMC diagnostics fail)")
    p.add_argument("--information", choices=("nats", "bits", "none"), default="nats", metavar="UNIT",
                   help="Wu et al.'s (IDP) information measures beside the leakage: worst KL (Thm. 2), mutual "
                   "information (Thm. 3), conditional mutual information (Prop. 4), in nats (default) or bits; "
                   "none skips them")
    p.add_argument("--parameters", default=None, metavar="MODE",
                   help="a model written by `ddpbayes fit` only: mean (default; the posterior means), draw:K (posterior "
                   "draw K; also -p parameters=\"'draw:K'\"), integrated[:S] "
                   "(the Bayesian adversary: parameters integrated over S posterior draws; clustered and chain fits) or "
                   "draws[:S] (Pufferfish: "
                   "the leakage under each of S posterior draws, their worst, and the share meeting --claim); "
                   "S defaults to 200")
    add_run_settings(p, method=True)
    add_output(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from ddpbayes.auditing import audit
    from ddpbayes.cli.text import audit_text
    from ddpbayes.composition import compose

    check_release_flags(args)
    settings = run_settings(args)
    fitted = fitted_parameters(args)
    if fitted is not None:
        return _run_fitted(args, settings, fitted)
    model = load_model_of(args, settings)
    query, mechanism = compose(args.release, model) if args.release else (args.query, args.mechanism)
    result = audit(
        model,
        query,
        mechanism,
        args.notion,
        **({} if args.release else noise(args)),
        sensitivity=args.sensitivity,
        claim=args.claim,
        target=args.target,
        known=args.known,
        pairs=args.pairs,
        lattice=args.lattice,
        information=None if args.information == "none" else args.information,
        settings=settings,
    )
    print(result.to_json() if args.format == "json" else audit_text(result))
    return EXIT_CODES.get(result.verdict, 0)


def fitted_parameters(args) -> Parameters | None:
    """The `Parameters` of a fitted model file (mean unless --parameters or -p parameters=... says
    otherwise), None for any other model; --parameters on another model, with --release, or with
    -p other than the model file's own keywords (`parameters`; a chain's `individual` and `n`) is bad input."""
    from ddpbayes.errors import InputError
    from ddpbayes.fitting.posterior import BUILD_KEYS, fit_of, template_of
    from ddpbayes.model.loading import parse_params
    from ddpbayes.plausible import check_fitted, parse_parameters

    if args.parameters is None:
        if fit_of(args.model) is None:
            return None
    fit = check_fitted(args.model)
    given = parse_params(args.param)
    others = BUILD_KEYS.get(template_of(fit), ())
    if set(given) - {"parameters", *others} or ("parameters" in given and args.parameters is not None):
        takes = "one parameter" if not others else f"parameters, {', '.join(others)}"
        raise InputError(f"a fitted model's build takes {takes}: give --parameters MODE (or -p parameters=..., "
                         "not both)")
    parameters = parse_parameters(args.parameters or given.get("parameters", "mean"))
    if args.release:
        raise InputError("--parameters audits one release (--query, --mechanism): --release is not built for it")
    return parameters


def _run_fitted(args, settings: RunSettings, parameters: Parameters) -> int:
    """`audit` of a fitted model under --parameters (DESIGN §9.6)."""
    from ddpbayes.cli.text import fitted_audit_text
    from ddpbayes.errors import InputError
    from ddpbayes.model.loading import parse_params
    from ddpbayes.plausible import audit_fitted
    from ddpbayes.queries import parse_query
    from ddpbayes.queries.general import with_sensitivity

    if args.pairs is not None:
        raise InputError("--pairs certifies a program's classic dp on given databases: a fitted model's --parameters "
                         "audit does not take it")
    query = args.query if args.sensitivity is None else with_sensitivity(parse_query(args.query), args.sensitivity)
    build = {k: v for k, v in parse_params(args.param).items() if k != "parameters"}
    found = audit_fitted(args.model, parameters, query, args.mechanism, args.notion, settings=settings, build=build,
                         claim=args.claim, information=None if args.information == "none" else args.information,
                         targets=args.target, known=args.known, lattice=args.lattice, **noise(args))
    print(found.to_json() if args.format == "json" else fitted_audit_text(found))
    return EXIT_CODES.get(found.result.verdict, 0)
