"""Argument types and options shared by the subcommands."""

from __future__ import annotations

import argparse

from ddpbayes.errors import InputError


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
    parser.add_argument("--query", required=True, help="sum, count, mean, linear:w0,w1,..., histogram:e0,e1,..., identity")
    parser.add_argument("--mechanism", required=True, help="laplace, geometric or randomized_response")
    noise = parser.add_mutually_exclusive_group(required=True)
    noise.add_argument("--scale", type=float, help="noise scale b")
    noise.add_argument("--epsilon", type=float, help="classic DP level: scale = global sensitivity / epsilon")


def add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--seed", type=int, default=None, help="seed for every random step (same seed on the same installation: same JSON; README, Reproducibility)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
