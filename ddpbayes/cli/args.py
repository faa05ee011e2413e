"""Argument types and options shared by the subcommands."""

from __future__ import annotations

import argparse
import gc
import sys

from ddpbayes.errors import InputError
from ddpbayes.parallel.cluster import check_where
from ddpbayes.settings import DEFAULT_TOP_K, METHODS, SEARCHES, RunSettings, search_width
from ddpbayes.vocabulary import ENGINES, LIBRARY, PROGRAM

PROGRAM_ENGINE = PROGRAM.rstrip(":")  # the engine of `--mechanism program:FILE:NAME`, audit's alone


def index_list(text: str) -> list[int]:
    """'0,2' -> [0, 2]; '' -> []."""
    if not text.strip():
        return []
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise InputError(f"expected comma-separated tuple indices, got '{text}'") from None


def load_model_of(args: argparse.Namespace, settings: RunSettings):
    """The model of `add_model`'s flags. What the process holds by then (PyMC and the other imports,
    the model) lives until it exits, so it leaves the cyclic garbage collector's reach (`gc.freeze`):
    its full passes no longer walk those million objects again and again (DESIGN §2.4). A caller that
    froze its own objects first (a test session calling `main([...])`) keeps its collector as it was."""
    from ddpbayes.model.loading import load_model, parse_params

    model = load_model(args.model, parse_params(args.param), max_states=settings.max_states)
    if not gc.get_freeze_count():
        gc.freeze()
    return model


def add_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="model file exposing build(**params) -> DependenceModel, or a shipped model's "
                        "name (`ddpbayes models` lists them)")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                        help="parameter for build(), a Python literal (repeatable)")


QUERY_HELP = ("sum, count, mean, linear:w0,w1,... (rows separated by ';' for a vector release), centroids:FILE "
              "(cluster means; a CSV with a cluster column), histogram:e0,e1,..., level:L[:w0,w1,...] (the "
              "(weighted) count of tuples equal to L, e.g. one level of a categorical outcome), identity, "
              "expr:EXPR (over the "
              "model's variable names, e.g. expr:d_i*d_j or expr:sum(x>3); ';' separates outputs) or fn:NAME "
              "(NAME(x) in the model file, x a dict of arrays by variable name)")


NOTION_HELP = ("the privacy notion, i.e. the adversaries: dp (classic DP: all others known, any values; "
               "model-free), idp (nobody known; Wu et al., identity DP), pdp (every known set; Li et al. 2019, "
               "prior DP), ddp (the tuples independent of the target known; Liu et al. 2016, dependent DP)")


def add_sensitivity(parser: argparse.ArgumentParser) -> None:
    """--sensitivity: the global L1 sensitivity of an expr:/fn: query on continuous domains."""
    parser.add_argument("--sensitivity", type=float, metavar="S",
                        help="global L1 sensitivity of an expr:/fn: query when a domain is continuous (computed "
                        "exactly on finite domains); needed by --epsilon, the dp notion and calibrate")


def add_mechanism(parser: argparse.ArgumentParser, releases: bool = False) -> None:
    """--query, --mechanism and --scale or --epsilon; with `releases`, --release (repeatable) is
    the alternative to them, checked by `check_release_flags` (audit: several releases jointly)."""
    parser.add_argument("--query", required=not releases, help=QUERY_HELP)
    add_sensitivity(parser)
    parser.add_argument("--mechanism", required=not releases,
                        help="laplace, geometric, prefix_sums, randomized_response, gaussian, discrete_gaussian; "
                        "mechanisms with an output law over all the answers: report_noisy_max, exponential, "
                        "sparse_vector, numerical_sparse_vector, rappor, one_time_rappor, truncated_geometric (settings "
                        "by --mechanism-param; `ddpbayes mechanisms` describes each); or program:FILE:NAME, a Python "
                        "function mechanism(answers, rng) audited as a black box (a certified lower bound); or "
                        "py:MODULE:EXPRESSION, a diffprivlib or OpenDP object or a function built by a Python "
                        "expression in MODULE's namespace, e.g. 'py:diffprivlib.mechanisms:Laplace(epsilon=1, "
                        "sensitivity=1)' (it runs code: give only what you trust)")
    parser.add_argument("--mechanism-param", action="append", default=None, metavar="NAME=VALUE",
                        help="a setting of the mechanism (repeat it), e.g. --mechanism-param threshold=1 "
                        "--mechanism-param cutoff=2 for sparse_vector; `ddpbayes mechanisms` lists each one's")
    noise = parser.add_mutually_exclusive_group()  # required unless --release or a program: check_release_flags
    noise.add_argument("--scale", type=float, help="noise scale b (Laplace, geometric; sigma for Gaussian noise)")
    noise.add_argument("--epsilon", type=float, help="classic DP level: scale = global sensitivity / epsilon; with "
                       "--delta, the analytic Gaussian mechanism's sigma (Balle & Wang 2018)")
    noise.add_argument("--sigma", type=float, help="Gaussian noise: its standard deviation")
    noise.add_argument("--rho", type=float, help="Gaussian noise at zCDP rho: sigma = global L2 sensitivity / sqrt(2 rho)")
    parser.add_argument("--delta", type=float, default=None,
                        help="Gaussian noise: the delta at which the leakage epsilon is read off the privacy profile "
                        "(default 1e-6), and with --epsilon the (epsilon, delta) that sets sigma")
    if releases:
        parser.add_argument("--release", action="append", default=None, metavar="QUERY:MECHANISM:PARAM",
                            help="one of several releases audited jointly (repeat it; instead of --query/--mechanism/"
                            "--scale): PARAM is the scale b, eps=E for scale = sensitivity / E, or randomized "
                            "response's epsilon; e.g. linear:1,1,0:laplace:0.5")


def check_release_flags(args: argparse.Namespace) -> None:
    """Either --release (at least twice) or --query, --mechanism and --scale/--epsilon, never both."""
    single = [flag for flag in ("query", "mechanism", "scale", "epsilon", "sigma", "rho", "delta", "sensitivity",
                                "mechanism_param") if getattr(args, flag) is not None]
    if args.release:
        if single:
            raise InputError("--release gives each release its own query and noise: drop --" + ", --".join(single))
        return
    missing = [f"--{flag}" for flag in ("query", "mechanism") if getattr(args, flag) is None]
    if _sets_own_noise(args.mechanism):  # a program, or a joint law that validates its own flags (`build`)
        pass
    elif all(getattr(args, flag) is None for flag in ("scale", "epsilon", "sigma", "rho")):
        missing.append("--scale, --epsilon, --sigma or --rho")
    if missing:
        raise InputError(f"give {', '.join(missing)} for one release, or --release QUERY:MECHANISM:PARAM for each "
                         "of several")


def _sets_own_noise(mechanism: str | None) -> bool:
    """A program or a library object (its noise is its code), or a mechanism with a joint output law, which its
    `build` checks (RAPPOR is set by --mechanism-param alone)."""
    if mechanism is None:
        return False
    if mechanism.startswith((PROGRAM, LIBRARY)):
        return True
    from ddpbayes.mechanisms import lookup  # not at import: `--help` loads nothing heavy (scipy)

    cls = lookup(mechanism)
    return cls is not None and cls.joint


def add_run_settings(parser: argparse.ArgumentParser, method: bool = False) -> None:
    """The flags of `RunSettings`, one per field, for every command that runs engines; `method`
    adds audit's own: the sampling route, the greedy pdp search (a lower bound, which a
    calibration must not take for the leakage) and the program engine (only `audit` takes a
    program: `rho` and `calibrate` neither offer nor accept it). A flag left out keeps
    RunSettings' default."""
    d = RunSettings()
    engines = ENGINES if method else tuple(e for e in ENGINES if e != PROGRAM_ENGINE)
    parser.add_argument("--engine", choices=("auto", *engines), default=None,
                        help="auto (default: exact while the joint fits --max-states, then structured, gaussian, "
                        "sampling), or one engine by name")
    if method:
        parser.add_argument("--method", choices=METHODS, default=None, dest="sampling_method",
                            help="sampling: likelihood route (default), or the adversary's posterior odds "
                            "(Wu et al., IDP, Thm. 1)")
        parser.add_argument("--search", choices=SEARCHES, default=None,
                            help="pdp: full (default), every known set; greedy, Li et al. 2019's search keeping the "
                            "--top-k best known sets per layer: a lower bound, not a verification")
        parser.add_argument("--top-k", type=int, default=None, metavar="K",
                            help=f"pdp, with --search greedy: known sets kept per layer (default {DEFAULT_TOP_K})")
        parser.add_argument("--pdp-greedy", type=int, default=None, metavar="K",
                            help="the same as --search greedy --top-k K (0: --search full)")
    parser.add_argument("--seed", type=int, default=None,
                        help=f"seed for every random step, 0..2^32-1 (default {d.seed}; same seed on the same "
                        "installation: same JSON; docs: guide/dask, Reproducibility)")
    parser.add_argument("--draws", type=int, default=None, help=f"sampling: draws per chain (default {d.draws})")
    parser.add_argument("--tune", type=int, default=None, help=f"sampling: tuning steps per chain (default {d.tune})")
    parser.add_argument("--chains", type=int, default=None,
                        help=f"sampling: chains per conditioning event (default {d.chains})")
    if method:
        parser.add_argument("--program-runs", type=int, default=None, metavar="N",
                            help=f"program engine: runs of the program per target value in each of its two stages, "
                            f"the event search and the certificate (default {d.program_runs})")
    add_workers(parser)
    parser.add_argument("--max-runs", type=int, default=None,
                        help=f"sampling: refuse to plan more MCMC runs than this (default {d.max_runs})")
    parser.add_argument("--max-states", type=int, default=None,
                        help=f"refuse a state space, support, kernel or output grid larger than this "
                        f"(default {d.max_states:,})")
    parser.add_argument("--max-adversaries", type=int, default=None,
                        help=f"refuse to evaluate more adversaries than this (default {d.max_adversaries:,})")
    parser.add_argument("--force", action="store_true", default=None,
                        help="evaluate adversaries the engine estimates would take more than a day")


def add_workers(parser: argparse.ArgumentParser) -> None:
    """--workers and --scheduler: where independent units of work run (`ddpbayes.parallel`)."""
    parser.add_argument("--workers", type=int, default=None,
                        help="processes for independent units of work (MCMC runs, sweep points, users): an embedded "
                             "Dask LocalCluster; 1 runs here without Dask (default: DDPBAYES_WORKERS, else every core)")
    parser.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                        help="run the units on an existing Dask cluster (default: DDPBAYES_SCHEDULER, else embedded)")


def execution(args: argparse.Namespace) -> RunSettings:
    """The settings `add_workers` gives (the others at their defaults), checked; a scheduler that
    was named is reached now, so an unreachable one is one line before any work starts."""
    settings = RunSettings.of(workers=args.workers, scheduler=args.scheduler)
    check_where(settings)
    return settings


def run_settings(args: argparse.Namespace) -> RunSettings:
    """The RunSettings the flags of `add_run_settings` give (progress on stderr for text output)."""
    given = {name: getattr(args, name, None) for name in ("engine", "seed", "draws", "tune", "chains", "workers", "scheduler",
                                                          "max_runs", "max_states", "max_adversaries", "force",
                                                          "program_runs")}
    width = search_width(getattr(args, "search", None), getattr(args, "top_k", None), getattr(args, "pdp_greedy", None))
    settings = RunSettings.of(**given, pdp_greedy=width, method=getattr(args, "sampling_method", None),
                              progress=args.format == "text" or sys.stderr.isatty())
    check_where(settings)  # a cluster named but not there, too many workers: say so now, not after the model
    return settings


FORMAT_HELP = "text (default): tables for the terminal; json: one JSON document on stdout with every field"


def add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("text", "json"), default="text", help=FORMAT_HELP)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def noise(args: argparse.Namespace) -> dict:
    """The noise flags as `audit`'s keywords: --sigma is the Gaussian's scale, refused
    for other noise (whose scale is --scale)."""
    from ddpbayes.mechanisms import lookup  # not at import: `--help` loads nothing heavy (scipy)

    kind = lookup(args.mechanism)
    if args.sigma is not None and (kind is None or not kind.gaussian):
        raise InputError(f"--sigma is the standard deviation of Gaussian noise: {args.mechanism} noise takes --scale "
                         "or --epsilon")
    scale = args.sigma if args.sigma is not None else args.scale
    return {"scale": scale, "epsilon": args.epsilon, "delta": args.delta, "rho": args.rho,
            "mechanism_params": mechanism_params(args)}


def mechanism_params(args: argparse.Namespace) -> dict[str, str]:
    """--mechanism-param NAME=VALUE (repeatable) as a dict; a malformed or repeated one is one line of bad input."""
    out: dict[str, str] = {}
    for item in args.mechanism_param or ():
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise InputError(f"--mechanism-param takes NAME=VALUE, got '{item}'")
        if name in out:
            raise InputError(f"--mechanism-param {name} is given twice")
        out[name] = value
    return out
