"""Argument types and options shared by the subcommands."""

from __future__ import annotations

import argparse
import sys

from ddpbayes.errors import InputError
from ddpbayes.settings import METHODS, RunSettings
from ddpbayes.vocabulary import ENGINES


def index_list(text: str) -> list[int]:
    """'0,2' -> [0, 2]; '' -> []."""
    if not text.strip():
        return []
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise InputError(f"expected comma-separated tuple indices, got '{text}'") from None


def add_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="model file exposing build(**params) -> DependenceModel")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                        help="parameter for build(), a Python literal (repeatable)")


def add_mechanism(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--query", required=True, help="sum, count, mean, linear:w0,w1,... (rows separated by ';' for a vector release), "
                        "centroids:FILE (cluster means; a CSV with a cluster column), histogram:e0,e1,..., identity")
    parser.add_argument("--mechanism", required=True, help="laplace, geometric or randomized_response")
    noise = parser.add_mutually_exclusive_group(required=True)
    noise.add_argument("--scale", type=float, help="noise scale b")
    noise.add_argument("--epsilon", type=float, help="classic DP level: scale = global sensitivity / epsilon")


def add_run_settings(parser: argparse.ArgumentParser, method: bool = False) -> None:
    """The flags of `RunSettings`, one per field, for every command that runs engines; `method`
    adds audit's own: the sampling route and the greedy pdp search (a lower bound, which a
    calibration must not take for the leakage). A flag left out keeps RunSettings' default."""
    d = RunSettings()
    parser.add_argument("--engine", choices=("auto", *ENGINES), default=None, help="default auto")
    if method:
        parser.add_argument("--method", choices=METHODS, default=None, dest="sampling_method",
                            help="sampling: likelihood route (default), or the adversary's posterior odds (004 Thm. 1)")
        parser.add_argument("--pdp-greedy", type=int, default=None, metavar="K",
                            help="pdp: seed 003's greedy search, keeping the K best known sets per layer; a lower "
                            "bound, not a verification (default 0: every known set)")
    parser.add_argument("--seed", type=int, default=None,
                        help=f"seed for every random step, 0..2^32-1 (default {d.seed}; same seed on the same "
                        "installation: same JSON; README, Reproducibility)")
    parser.add_argument("--draws", type=int, default=None, help=f"sampling: draws per chain (default {d.draws})")
    parser.add_argument("--tune", type=int, default=None, help=f"sampling: tuning steps per chain (default {d.tune})")
    parser.add_argument("--chains", type=int, default=None,
                        help=f"sampling: chains per conditioning event (default {d.chains})")
    parser.add_argument("--cores", type=int, default=None, help="sampling: processes for the chains (default 0: all)")
    parser.add_argument("--max-runs", type=int, default=None,
                        help=f"sampling: refuse to plan more MCMC runs than this (default {d.max_runs})")
    parser.add_argument("--max-states", type=int, default=None,
                        help=f"refuse a state space, support, kernel or output grid larger than this "
                        f"(default {d.max_states:,})")
    parser.add_argument("--max-adversaries", type=int, default=None,
                        help=f"refuse to evaluate more adversaries than this (default {d.max_adversaries:,})")


def run_settings(args: argparse.Namespace) -> RunSettings:
    """The RunSettings the flags of `add_run_settings` give (progress on stderr for text output)."""
    given = {name: getattr(args, name, None) for name in ("engine", "seed", "draws", "tune", "chains", "cores",
                                                          "max_runs", "max_states", "max_adversaries", "pdp_greedy")}
    return RunSettings.of(**given, method=getattr(args, "sampling_method", None),
                          progress=args.format == "text" or sys.stderr.isatty())


def add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
