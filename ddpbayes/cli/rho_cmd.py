"""`ddpbayes rho`: seed 000's dependence coefficients rho_ij at one Laplace scale (DESIGN §3.1)."""

from __future__ import annotations

import json
import sys

from typing import TYPE_CHECKING

from ddpbayes.cli.args import add_model
from ddpbayes.cli.text import INTERVAL, fmt
from ddpbayes.vocabulary import ENGINES

if TYPE_CHECKING:
    from ddpbayes.ddp import Coefficients, RunOptions


def register(sub) -> None:
    p = sub.add_parser(
        "rho",
        help="dependence coefficients rho_ij, dependence sets and the dependence size L",
        description="rho_ij = leak_i(D_j released with Laplace(sigma)) * sigma / dD_j: exp(rho_ij dD_j / sigma) is the "
        "sup over d_i1, d_i2, y of E[Lap_sigma(y - D_j) | D_i = d_i1] / E[Lap_sigma(y - D_j) | D_i = d_i2] (seed 000).",
    )
    add_model(p)
    p.add_argument("--scale", type=float, required=True, help="Laplace scale sigma (rho depends on it)")
    add_engine_options(p)
    p.set_defaults(run=run)


def add_engine_options(p) -> None:
    """--engine, the sampling settings, --format, --seed, --debug (shared with `calibrate`)."""
    p.add_argument("--engine", choices=("auto", *ENGINES), default="auto")
    p.add_argument("--max-states", type=int, default=None, help="refuse a joint state space larger than this")
    p.add_argument("--draws", type=int, default=None, help="sampling: draws per chain (default 1000)")
    p.add_argument("--tune", type=int, default=None, help="sampling: tuning steps per chain (default 1000)")
    p.add_argument("--chains", type=int, default=None, help="sampling: chains per conditioning event (default 2)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--seed", type=int, default=None, help="seed for every random step (same seed on the same installation: same JSON; README, Reproducibility)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def run_options(args) -> RunOptions:
    from ddpbayes.ddp import RunOptions

    return RunOptions(engine=args.engine, seed=args.seed, draws=args.draws, tune=args.tune, chains=args.chains,
                      max_states=args.max_states, progress=args.format == "text" or sys.stderr.isatty())


def run(args) -> int:
    from ddpbayes.ddp import dependence_coefficients
    from ddpbayes.model.loading import load_model, parse_params

    model = load_model(args.model, parse_params(args.param), max_states=args.max_states)
    c = dependence_coefficients(model, args.scale, run_options(args))
    print(json.dumps(c.to_json(), indent=2) if args.format == "json" else rho_text(c))
    return 0


def rho_text(c: Coefficients) -> str:
    names = c.tuples
    cells = [[fmt(v) for v in row] for row in c.rho]
    if c.ci is not None:
        cells = [[f"{cells[i][j]} [{fmt(c.ci[i, j, 0])}, {fmt(c.ci[i, j, 1])}]" if i != j else cells[i][j]
                  for j in range(len(names))] for i in range(len(names))]
    width = max(len(n) for n in names + ["D_i \\ D_j"])
    col = max(len(s) for s in [*names, *(x for row in cells for x in row)])
    lines = [f"rho_ij at Laplace scale {fmt(c.scale)}    engine {c.engine}", ""]
    lines.append("D_i \\ D_j".ljust(width) + "  " + "  ".join(n.ljust(col) for n in names))
    lines += [name.ljust(width) + "  " + "  ".join(x.ljust(col) for x in row) for name, row in zip(names, cells)]
    lines.append("")
    lines.append("dependence sets: " + "; ".join(
        f"{names[i]}: {{{', '.join(names[j] for j in sorted(s))}}}" for i, s in enumerate(c.dependence_sets)))
    lines.append(f"dependence size L = {c.dependence_size}")
    if c.ci is not None:
        d = c.diagnostics or {}
        ok = "ok" if d.get("ok", True) else "FAILED"
        lines.append(f"estimates: [lower, upper] is a {INTERVAL}; MCMC diagnostics {ok}")
    return "\n".join(lines)
