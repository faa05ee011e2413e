"""`ddpbayes rho`: seed 000's dependence coefficients rho_ij at one Laplace scale (DESIGN §3.1)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddpbayes.cli.args import add_model, add_output, add_run_settings, load_model_of, run_settings
from ddpbayes.cli.text import INTERVAL
from ddpbayes.formatting import fmt

if TYPE_CHECKING:
    from ddpbayes.ddp import Coefficients


def register(sub) -> None:
    p = sub.add_parser(
        "rho",
        help="dependence coefficients rho_ij, dependence sets and the dependence size L",
        description="rho_ij = leak_i(D_j released with Laplace(sigma)) * sigma / dD_j: exp(rho_ij dD_j / sigma) is the "
        "sup over d_i1, d_i2, y of E[Lap_sigma(y - D_j) | D_i = d_i1] / E[Lap_sigma(y - D_j) | D_i = d_i2] "
        "(Liu et al. 2016, DDP, Eq. 14-16).",
    )
    add_model(p)
    p.add_argument("--scale", type=float, required=True, help="Laplace scale sigma (rho depends on it)")
    add_run_settings(p)
    add_output(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from ddpbayes.ddp import dependence_coefficients

    settings = run_settings(args)
    model = load_model_of(args, settings)
    c = dependence_coefficients(model, args.scale, settings)
    print(c.to_json() if args.format == "json" else rho_text(c))
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
    if c.assumption_note():
        lines.append(f"note: {c.assumption_note()}")
    if c.ci is not None:
        d = c.diagnostics or {}
        ok = "ok" if d.get("ok", True) else "FAILED"
        lines.append(f"estimates: [lower, upper] is a {INTERVAL}; MCMC diagnostics {ok}")
    return "\n".join(lines)
