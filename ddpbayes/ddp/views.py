"""A `Calibration`'s views for people (DESIGN §3.1): a one-line repr, a notebook's HTML table, a
pandas DataFrame (one row per recipe) and a matplotlib figure of the leakage against the noise
scale per notion. `Calibration`'s methods of the same names call these."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ddpbayes.errors import InputError
from ddpbayes.formatting import fmt
from ddpbayes.notions import NOTIONS

if TYPE_CHECKING:
    import pandas
    from matplotlib.axes import Axes

    from ddpbayes.ddp.calibration import Calibration, MethodRow

MARK = {"fail": "*", "inconclusive": "?"}  # beside a leakage above epsilon, as `ddpbayes calibrate` marks it
STYLE = {"dp": ("0.45", "s", ":", 6), "idp": ("C0", "o", "-", 10), "pdp": ("C3", "^", "-", 7.5),
         "ddp": ("C2", "D", "--", 5)}  # colour, marker, line, size: hollow and nested, so equal values stay visible


def summary(c: Calibration) -> str:
    """`Calibration(idp epsilon=1: exact scale=1.94 (laplace) leakage=1 verdict=pass; L=3 engine=exact)`."""
    noise = c.mechanism if c.delta is None else f"{c.mechanism}, delta={c.delta:g}"
    return (f"Calibration({c.notion} epsilon={fmt(c.epsilon)}: {c.method} scale={fmt(c.scale)} ({noise}) "
            f"leakage={fmt(c.leakage_at_scale)} verdict={c.audit.verdict}; L={c.dependence_size} engine={c.engine})")


def frame(c: Calibration) -> pandas.DataFrame:
    """One row per recipe: `method`, `scale` (σ for Gaussian noise), `alpha`, each notion's leakage
    at that scale (NaN where it could not be audited), and Wu et al.'s `prop3` and `thm4` bounds
    (NaN when their premise fails or the noise is Gaussian). `attrs`: notion, epsilon, method,
    scale, mechanism, delta, verdict, L and engine."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("Calibration.to_dataframe needs pandas: pip install 'ddpbayes[dataframe]' "
                          "(or pip install pandas)") from None
    rows = [{"method": r.method, "scale": float(r.scale), "alpha": float(r.alpha),
             **{n: _leakage(r, n) for n in NOTIONS},
             "prop3": _bound(None if r.bounds is None else r.bounds.prop3),
             "thm4": _bound(None if r.bounds is None else r.bounds.thm4)} for r in c.rows]
    out = pd.DataFrame(rows, columns=["method", "scale", "alpha", *NOTIONS, "prop3", "thm4"])
    out.attrs.update(notion=c.notion, epsilon=c.epsilon, method=c.method, scale=c.scale, mechanism=c.mechanism,
                     delta=c.delta, verdict=c.audit.verdict, L=c.dependence_size, engine=c.engine)
    return out


def table(c: Calibration) -> str:
    """The HTML table `ddpbayes calibrate` prints as text: a header line, then a row per recipe with
    each notion's leakage (* above epsilon, ? an estimate that cannot settle it)."""
    e = html.escape
    scale = "sigma" if c.delta is not None else "scale"
    head = (f"<b>{e(c.notion)}</b> epsilon {e(fmt(c.epsilon))}"
            + (f" at delta {c.delta:g}" if c.delta is not None else "")
            + f": {e(c.method)} {scale} <b>{e(fmt(c.scale))}</b> ({e(c.mechanism)}), {e(c.notion)} leakage there "
            f"{e(fmt(c.leakage_at_scale))} &middot; verdict <b>{e(str(c.audit.verdict))}</b> &middot; "
            f"L = {c.dependence_size} &middot; engine {e(c.engine)} &middot; query {e(c.query)}")
    cells = ["method", scale, "alpha", *NOTIONS]
    rows = ["<tr>" + "".join(f"<th>{x}</th>" for x in cells) + "</tr>"]
    for r in c.rows:
        leaks = [_marked(r, n) for n in NOTIONS]
        rows.append("<tr>" + "".join(f"<td>{e(x)}</td>" for x in (r.method, fmt(r.scale), fmt(r.alpha), *leaks))
                    + "</tr>")
    notes = f"<p>* leakage above epsilon = {e(fmt(c.epsilon))} under the model</p>"
    return f'<div class="ddpbayes-calibration"><p>Calibration: {head}</p><table>{"".join(rows)}</table>{notes}</div>'


def plot(c: Calibration, ax: Axes | None = None, scales: Sequence[float] | None = None) -> Axes:
    """Each notion's leakage against the noise scale (log axis): at every recipe's scale, and at
    `scales` too when given (each audited now, under every notion); epsilon drawn, and the chosen
    scale marked. The leakage is non-increasing in the scale (module docstring of
    `ddp.calibration`), so the lines join points of one decreasing curve per notion."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    points = {r.scale: {n: a.leakage for n, a in r.audits.items()} for r in c.rows}
    for s in scales or ():
        points.setdefault(float(s), _audited(c, float(s)))
    ax = ax if ax is not None else plt.subplots(figsize=(7, 4))[1]
    xs = sorted(points)
    for n in NOTIONS:
        kept = [(x, points[x][n]) for x in xs if n in points[x] and math.isfinite(points[x][n])]
        colour, marker, line, size = STYLE.get(n, ("C0", "o", "-", 6))
        if kept:
            ax.plot(*zip(*kept), marker=marker, ls=line, color=colour, ms=size, mfc="none", mew=1.4, label=n)
    ax.axhline(c.epsilon, color="k", ls=":", lw=1, label=f"epsilon {fmt(c.epsilon)}")
    for r in c.rows:
        ax.axvline(r.scale, color="0.6", lw=0.8, ls="--" if r.method != c.method else "-")
        ax.annotate(r.method, xy=(r.scale, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -4),
                    textcoords="offset points", fontsize=8, color="0.3", rotation=90, va="top")
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("Gaussian sigma" if c.delta is not None else "Laplace scale b")
    ax.set_ylabel("leakage (epsilon at delta)" if c.delta is not None else "leakage")
    ax.set_title(f"{c.query}: the {c.method} scale {fmt(c.scale)} gives {c.notion} leakage {fmt(c.leakage_at_scale)} "
                 f"({c.audit.verdict} at epsilon {fmt(c.epsilon)})", fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return ax


def _audited(c: Calibration, scale: float) -> dict[str, float]:
    """Every notion's leakage at `scale` (the calibrated mechanism with that scale), where it can be audited."""
    from ddpbayes.auditing import audit

    problem = c.audit.problem
    if problem is None:
        raise InputError("this calibration keeps no problem to audit other scales with: plot it without scales")
    if not (isinstance(scale, float) and math.isfinite(scale) and scale > 0):
        raise InputError(f"the scales to plot must be positive finite numbers, got {scale}")
    out = {}
    for n in NOTIONS:
        try:
            out[n] = audit(problem.model, problem.query, problem.mechanism.with_scale(scale), n, information=None,
                           settings=problem.settings).leakage
        except InputError:  # as `calibrate`'s rows: a notion that cannot be audited there is left out
            continue
    return out


def _leakage(row: MethodRow, notion: str) -> float:
    audited = row.audits.get(notion)
    return math.nan if audited is None else float(audited.leakage)


def _marked(row: MethodRow, notion: str) -> str:
    audited = row.audits.get(notion)
    return "-" if audited is None else fmt(audited.leakage) + MARK.get(audited.verdict, "")


def _bound(value: float | None) -> float:
    return math.nan if value is None else float(value)
