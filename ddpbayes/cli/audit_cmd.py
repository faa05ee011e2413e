"""`ddpbayes audit`: the leakage of one mechanism under one notion."""

from __future__ import annotations

import json
import sys

from ddpbayes.cli.args import add_mechanism, add_model, add_output, index_list
from ddpbayes.limits import DEFAULT_MAX_ADVERSARIES
from ddpbayes.vocabulary import ENGINES, NOTIONS


EXIT_CODES = {"fail": 1, "inconclusive": 4}


def register(sub) -> None:
    p = sub.add_parser("audit", help="leakage of a mechanism on a dependence model, with a verdict")
    add_model(p)
    add_mechanism(p)
    p.add_argument("--notion", required=True, choices=NOTIONS)
    p.add_argument("--target", type=index_list, default=None, help="target tuple(s), e.g. 0 or 0,2")
    p.add_argument("--known", type=index_list, default=None, help="pdp: indices the adversary knows ('' for none)")
    p.add_argument("--lattice", action="store_true", help="pdp: list every (target, known set)")
    p.add_argument("--claim", type=float, default=None, help="claimed epsilon to check")
    p.add_argument("--engine", choices=("auto", *ENGINES), default="auto")
    p.add_argument("--max-states", type=int, default=None,
                   help="refuse a state space, support, kernel or output grid larger than this (default 2^22)")
    p.add_argument("--max-adversaries", type=int, default=DEFAULT_MAX_ADVERSARIES,
                   help=f"refuse to evaluate more adversaries than this (pdp lattice; default {DEFAULT_MAX_ADVERSARIES:,})")
    p.add_argument("--draws", type=int, default=None, help="sampling: draws per chain (default 1000)")
    p.add_argument("--tune", type=int, default=None, help="sampling: tuning steps per chain (default 1000)")
    p.add_argument("--chains", type=int, default=None, help="sampling: chains per conditioning event (default 2)")
    p.add_argument("--method", choices=("likelihood", "posterior"), default="likelihood",
                   help="sampling: likelihood route, or the adversary's posterior odds (004 Thm. 1)")
    add_output(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from ddpbayes.auditing import audit
    from ddpbayes.cli.text import audit_text
    from ddpbayes.model.loading import load_model, parse_params

    model = load_model(args.model, parse_params(args.param), max_states=args.max_states)
    result = audit(
        model,
        args.query,
        args.mechanism,
        args.notion,
        scale=args.scale,
        epsilon=args.epsilon,
        claim=args.claim,
        targets=args.target,
        known=args.known,
        engine=args.engine,
        lattice=args.lattice,
        seed=args.seed,
        max_states=args.max_states,
        max_adversaries=args.max_adversaries,
        draws=args.draws,
        tune=args.tune,
        chains=args.chains,
        method=args.method,
        progress=args.format == "text" or sys.stderr.isatty(),
    )
    print(json.dumps(result.to_json(), indent=2) if args.format == "json" else audit_text(result))
    return EXIT_CODES.get(result.verdict, 0)
