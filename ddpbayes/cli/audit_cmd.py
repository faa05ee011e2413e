"""`ddpbayes audit`: the leakage of one mechanism under one notion."""

from __future__ import annotations

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
    p.add_argument("--claim", type=float, default=None,
                   help="claimed epsilon to check: exit 1 when the leakage exceeds it, 4 when an estimate cannot "
                   "settle it (also when the MCMC diagnostics fail)")
    p.add_argument("--information", choices=("nats", "bits", "none"), default="nats", metavar="UNIT",
                   help="Wu et al.'s (IDP) information measures beside the leakage: worst KL (Thm. 2), mutual "
                   "information (Thm. 3), conditional mutual information (Prop. 4), in nats (default) or bits; "
                   "none skips them")
    add_run_settings(p, method=True)
    add_output(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from ddpbayes.auditing import audit
    from ddpbayes.cli.text import audit_text
    from ddpbayes.composition import compose

    check_release_flags(args)
    settings = run_settings(args)
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
        lattice=args.lattice,
        information=None if args.information == "none" else args.information,
        settings=settings,
    )
    print(result.to_json() if args.format == "json" else audit_text(result))
    return EXIT_CODES.get(result.verdict, 0)
