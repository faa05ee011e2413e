"""`ddpbayes derive`: closed forms with sympy (DESIGN §2.2, §3.1, §3.5).

The input is bounded as it is read (ddpbayes.symbolic.parse), but sympy's algebra on a bounded
input can still take minutes (a 6x6 covariance of distinct symbols, (x+y)**20 off the diagonal):
`--time-limit` stops it and says so on one line (exit 2).
"""

from __future__ import annotations

import argparse
import math
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ddpbayes.cli.args import FORMAT_HELP, index_list
from ddpbayes.errors import InputError
from ddpbayes.vocabulary import DERIVED_NOISES

if TYPE_CHECKING:
    from ddpbayes.symbolic import Derivation

_COV_HELP = "covariance matrix of numbers and symbols, e.g. '[[1,rho],[rho,1]]'"
DEFAULT_TIME_LIMIT = 60.0
MAX_TIME_LIMIT = 1e6  # setitimer's range


def register(sub) -> None:
    p = sub.add_parser("derive", help="closed-form leakage with sympy")
    kinds = p.add_subparsers(dest="kind", required=True, help="the model family whose closed form is derived")

    g = kinds.add_parser(
        "gaussian",
        help="leak(i, K) of w·X + Laplace(b), or the GDP mu of w·X + N(0, sigma^2), for jointly Gaussian X",
        description="Laplace: leak(i, K) = width / b * |w_i + sum_{j in U} w_j C_ji / C_ii|, C = Cov(X_{i ∪ U} | X_K). "
        "The symbols 'width' (the target's range) and 'b' (the Laplace scale) stand in when not given. "
        "--mechanism gaussian: mu(i, K) = width |w_i + sum_{j in U} w_j C_ji / C_ii| / sqrt(sigma^2 + "
        "Var(w·X | X_i, X_K)), the profile delta(epsilon) of mu-GDP and rho = mu^2 / 2 ('sigma' stands in).",
    )
    g.add_argument("--cov", required=True, help=_COV_HELP)
    g.add_argument("--mean", default=None, help="mean vector (does not enter the leakage)")
    g.add_argument("--target", type=int, default=0, help="target tuple i (default 0)")
    g.add_argument("--known", type=index_list, default=[], help="tuples the adversary knows, e.g. 1,2 (default none)")
    g.add_argument("--weights", default=None, help="query weights w0,w1,... (numbers or symbols; default all 1)")
    g.add_argument("--width", type=float, default=None, help="width hi - lo of the target's domain")
    g.add_argument("--scale", type=float, default=None, help="Laplace scale b (with gaussian: sigma)")
    g.add_argument("--mechanism", choices=DERIVED_NOISES, default=DERIVED_NOISES[0],
                   help="the noise: laplace (default) or gaussian (the loss is Gaussian: mu-GDP)")
    g.add_argument("--sigma", type=float, default=None, help="Gaussian noise's standard deviation sigma")
    g.add_argument("--delta", type=float, default=None,
                   help="gaussian: also give epsilon at this delta when mu is a number")
    _add_common(g)
    g.set_defaults(run=_run_gaussian)

    r = kinds.add_parser(
        "gaussian-rho",
        help="Liu et al. 2016's (DDP) dependence coefficient rho_ij of a Gaussian pair",
        description="rho_ij = |Sigma_ij / Sigma_ii| * width_i / width_j: exp(rho_ij dD_j / sigma) is the sup over "
        "d_i1, d_i2, y of E[Lap_sigma(y - D_j) | D_i = d_i1] / E[Lap_sigma(y - D_j) | D_i = d_i2], with dD_j = width_j "
        "(D_j's domain width); it does not depend on sigma. Symbols width_i, width_j stand in when not given.",
    )
    r.add_argument("--cov", required=True, help=_COV_HELP)
    r.add_argument("--pair", type=index_list, default=[0, 1], help="i,j: D_i's value, D_j's release (default 0,1)")
    r.add_argument("--widths", default=None, help="width_i,width_j: the domain widths of D_i and D_j")
    _add_common(r)
    r.set_defaults(run=_run_rho)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, metavar="SECONDS",
                   help=f"stop a derivation that takes longer, with exit 2 (default {DEFAULT_TIME_LIMIT:g})")
    p.add_argument("--format", choices=("text", "json"), default="text", help=FORMAT_HELP)
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def _run_gaussian(args) -> int:
    from ddpbayes.symbolic import derive  # not at import: `--help` must not load sympy

    return _derive(args, lambda: derive(args.kind, args.cov, mechanism=args.mechanism, mean=args.mean,
                                        target=args.target, known=args.known, weights=args.weights, width=args.width,
                                        scale=args.scale, sigma=args.sigma, delta=args.delta))


def _run_rho(args) -> int:
    from ddpbayes.symbolic import derive

    widths = (None, None)
    if args.widths is not None:
        try:
            widths = tuple(float(v) for v in args.widths.split(","))
        except ValueError:
            raise InputError(f"--widths takes two numbers width_i,width_j, got '{args.widths}'") from None
    return _derive(args, lambda: derive(args.kind, args.cov, pair=args.pair, widths=widths))


def _derive(args, derive: Callable[[], Derivation]) -> int:
    """Run `derive` and render its result within --time-limit, then print it."""
    with _time_limit(args.time_limit):
        text = _render(derive(), args.format)
    print(text)
    return 0


class _TimeUp(BaseException):
    """The time limit passed (a BaseException: sympy's `except Exception` must not swallow it)."""


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise an InputError if the block runs longer than `seconds` (SIGALRM: main thread only)."""
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIME_LIMIT):
        raise InputError(f"--time-limit must be a positive number of seconds up to {MAX_TIME_LIMIT:g}, got {seconds}")
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    fired = []

    def on_alarm(signum: int, frame) -> None:
        fired.append(True)
        raise _TimeUp()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        try:
            # Then every 50 ms: an alarm whose exception Python swallowed (raised inside a weakref callback or a
            # __del__) is raised again, so a swallowed alarm does not leave sympy running to the end.
            signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if fired:  # the alarm's exception was raised where Python swallows it (a weakref callback, a __del__)
            raise _TimeUp()
    except _TimeUp:
        raise InputError(
            f"the derivation did not finish within --time-limit {seconds:g} s: sympy's algebra on this covariance "
            "is too slow (fewer symbols or lower powers help; or raise --time-limit)"
        ) from None
    finally:
        signal.signal(signal.SIGALRM, previous)


def _render(d: Derivation, fmt: str) -> str:
    if fmt == "json":
        return d.to_json()
    out = d.to_dict()
    value = "-" if out["value"] is None else out["value"]
    lines = [f"expression   {out['expression']}", f"latex        {out['latex']}", f"value        {value}"]
    for name in d.extras:
        extra = out[name]
        lines.append(f"{name:<12} {extra['expression']}" + ("" if extra["value"] is None else f" = {extra['value']}"))
    lines += [f"{name:<12} {out[name]}" for name in d.numbers]
    lines += ["assumptions"] + [f"  - {a}" for a in d.assumptions]
    return "\n".join(lines)
