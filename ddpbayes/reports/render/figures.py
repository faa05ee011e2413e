"""The report's figures as PNG bytes (matplotlib, Agg backend, small files: dpi 90)."""

from __future__ import annotations

import io
import math

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
import numpy as np  # noqa: E402

from ddpbayes.engines import Curve  # noqa: E402
from ddpbayes.reports.views.lattice import LatticeView  # noqa: E402
from ddpbayes.reports.views.sweep import SAME, Sweep  # noqa: E402

DPI = 90
JITTER_TARGETS = 6
TRACE_POINTS = 400
NOTION_STYLE = {"dp": ("0.45", "s", ":"), "idp": ("C0", "o", "-"), "pdp": ("C3", "^", "-"), "ddp": ("C2", "D", "--")}
MARKER_SIZE = {"dp": 6, "idp": 10, "pdp": 7.5, "ddp": 5}  # hollow and nested: equal values stay visible
plt.rcParams.update({"font.size": 11, "axes.spines.top": False, "axes.spines.right": False,
                     "axes.grid": True, "grid.alpha": 0.3})


def png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def lattice_figure(view: LatticeView, names: list[str], claim: float | None) -> bytes:
    """leak(i, K) against |K|: every adversary a point, coloured by target; the maximum, and each
    target's weakest (K = {}) and strongest (K = all others) adversary marked. Up to
    `JITTER_TARGETS` targets sit side by side within a layer; beyond, they share one column."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    targets = sorted({p.target for p in view.points})
    colours = {t: plt.get_cmap("tab10" if len(targets) <= 10 else "tab20")(k % 20) for k, t in enumerate(targets)}
    spread = 0.28 if 1 < len(targets) <= JITTER_TARGETS else 0.0
    offset = {t: (k / max(1, len(targets) - 1) - 0.5) * spread for k, t in enumerate(targets)}
    finite = [p for p in view.points if math.isfinite(p.leakage)]
    for t in targets:
        pts = [p for p in finite if p.target == t]
        ax.scatter([len(p.known) + offset[t] for p in pts], [p.leakage for p in pts], s=22, color=colours[t],
                   alpha=0.75, label=names[t] if len(targets) <= 12 else None, zorder=3)
    layers = sorted({len(p.known) for p in finite})
    ax.plot(layers, [max(p.leakage for p in finite if len(p.known) == s) for s in layers], color="0.5", lw=1,
            ls="--", zorder=2, label="max per |K|")
    for size, marker, label in ((0, "o", "weakest, K = {}"), (view.n - 1, "s", "strongest, K = all others")):
        spots = {(len(p.known) + offset[p.target], round(p.leakage, 9)) for p in finite if len(p.known) == size}
        ax.scatter([x for x, _ in spots], [y for _, y in spots], s=110, marker=marker, facecolors="none",
                   edgecolors="k", lw=1.2, label=label, zorder=4)
    if finite:
        top = max(finite, key=lambda p: (p.leakage, -len(p.known)))
        x = len(top.known) + offset[top.target]
        ax.scatter([x], [top.leakage], s=260, marker="*", color="gold", edgecolors="k", lw=1,
                   label=f"maximum {top.leakage:.4g}", zorder=5)
        known = "{" + ", ".join(names[k] for k in sorted(top.known)) + "}" if len(top.known) <= 3 else f"|K| = {x:g}"
        ax.annotate(f"A({names[top.target]}, {known})", xy=(x, top.leakage), xytext=(12, -4),
                    textcoords="offset points", fontsize=9, va="top")
    if claim is not None:
        ax.axhline(claim, color="C3", ls=":", lw=1.2, label=f"claim {claim:g}")
    ax.set_xticks(range(view.n))
    ax.set_xlabel("|K|: number of tuples the adversary knows")
    ax.set_ylabel("leakage  leak(i, K)")
    ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]), top=ax.get_ylim()[1] * 1.06)
    ax.legend(fontsize=9, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, markerscale=1.0)
    return png(fig)


def curves_figure(curves: list[Curve], names: list[str]) -> bytes:
    """One panel per witness: r(y) with its limits as y -> ±inf as horizontal asymptotes."""
    cols = min(3, len(curves))
    rows = math.ceil(len(curves) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False)
    for ax, c in zip(axes.flat, curves):
        style = NOTION_STYLE.get(c.notion.split(",")[0], ("C0", "o", "-"))
        if c.integer:
            ax.plot(c.y, c.log_ratio, ".", color=style[0], ms=4)
        else:
            ax.plot(c.y, c.log_ratio, color=style[0], lw=1.6)
        for value, side, where in ((c.limits[0], "y → −∞", 0.02), (c.limits[1], "y → +∞", 0.98)):
            ax.axhline(value, color="0.35", ls="--", lw=0.9)
            ax.annotate(f"{side}: {value:.4g}", xy=(where, value), xycoords=("axes fraction", "data"),
                        xytext=(0, 3), textcoords="offset points", ha="left" if where < 0.5 else "right",
                        fontsize=9, color="0.25")
        y_w = (c.witness.y or (math.nan,))[0]
        if math.isfinite(y_w):
            ax.plot([y_w], [np.interp(y_w, c.y, c.log_ratio)], "*", color="gold", mec="k", ms=13, zorder=5)
        lo, hi = min(c.log_ratio.min(), *c.limits), max(c.log_ratio.max(), *c.limits)
        pad = 0.15 * max(hi - lo, 0.1)
        ax.set_ylim(lo - pad, hi + 1.6 * pad)
        known = ", ".join(f"{names[k]}={_short(v)}" for k, v in sorted(c.known_values.items())) or "nothing"
        ax.set_title(f"{c.notion}: {names[c.witness.adversary.target]} = {_short(c.witness.t, 6)} vs "
                     f"{_short(c.witness.t_prime, 6)}\nknown: {known}", fontsize=9)
        ax.set_xlabel("output y")
    for ax in axes.flat[len(curves):]:
        ax.set_visible(False)
    axes[0, 0].set_ylabel("log L(y | t, x_K) − log L(y | t', x_K)")
    fig.tight_layout()
    return png(fig)


def sweep_figure(s: Sweep, claim: float | None) -> bytes:
    """Leakage of every notion against the noise level (log axis), the spec's level and
    calibrated scales marked."""
    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    for notion, values in s.leakage.items():
        colour, marker, ls = NOTION_STYLE.get(notion, ("C0", "o", "-"))
        ax.plot(s.values, values, marker=marker, ls=ls, color=colour, ms=MARKER_SIZE.get(notion, 6), mfc="none",
                mew=1.5, label=notion)
        cis = s.ci[notion]
        if any(c is not None for c in cis):
            ax.fill_between(s.values, [c[0] if c else v for c, v in zip(cis, values)],
                            [c[1] if c else v for c, v in zip(cis, values)], color=colour, alpha=0.15, lw=0)
    label_values(ax, s.values)
    ax.axvline(s.base, color="k", lw=1, alpha=0.6)
    ax.annotate(f"spec: {s.base:.4g}", xy=(s.base, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -12),
                textcoords="offset points", fontsize=8)
    lo, hi = min(s.values), max(s.values)
    for k, (value, labels) in enumerate(_grouped(s.calibrated)):
        if lo <= value <= hi:
            ax.axvline(value, color=f"C{4 + k % 6}", ls="-.", lw=1.2, label=f"{', '.join(labels)}: {value:.4g}")
    if claim is not None:
        ax.axhline(claim, color="C3", ls=":", lw=1.2, label=f"claim {claim:g}")
    ax.set_xlabel("noise scale b" if s.parameter == "scale" else "per-bit epsilon")
    ax.set_ylabel("leakage")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=9, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return png(fig)


def profile_figure(profiles: dict, classic, delta: float) -> bytes:
    """δ(ε) of each notion's profile (log δ) against classic DP's GDP curve; δ = `delta` dotted."""
    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    curves = {**profiles, "classic DP (GDP)": classic}
    for k, (name, profile) in enumerate(curves.items()):
        colour, marker, ls = NOTION_STYLE.get(name, ("k", "", "-"))
        points = [(e, d) for e, d in profile.pairs() if d > 0]
        ax.plot([e for e, _ in points], [d for _, d in points], marker=marker or None, ls=ls, color=colour,
                ms=MARKER_SIZE.get(name, 6) * 0.7, mfc="none", mew=1.2, lw=2.2 if name == "classic DP (GDP)" else 1.4,
                alpha=0.6 if name == "classic DP (GDP)" else 1.0, label=name, zorder=3 + k)
    positive = [d for p in curves.values() for _, d in p.pairs() if d > 0]
    log_axis(ax, "y", positive + [delta])
    ax.axhline(delta, color="C3", ls=":", lw=1.2, label=f"delta = {delta:g}")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("delta(epsilon)")
    ax.set_xlim(left=0)
    ax.legend(fontsize=9, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return png(fig)


def trace_figure(draws: list[tuple[str, np.ndarray]]) -> bytes:
    """Trace of the query draws, one panel per conditioning event, one line per chain (every
    k-th draw when a chain has more than TRACE_POINTS, to keep the PNG small)."""
    fig, axes = plt.subplots(len(draws), 1, figsize=(7.5, 1.9 * len(draws)), squeeze=False, sharex=True)
    for ax, (label, q) in zip(axes[:, 0], draws):
        step = max(1, math.ceil(q.shape[1] / TRACE_POINTS))
        for c, chain in enumerate(q):
            ax.plot(np.arange(0, chain.size, step), chain[::step], lw=0.6, alpha=0.8, color=f"C{c}", label=f"chain {c}")
        ax.set_title(label + (f" (one draw in {step} shown)" if step > 1 else ""), fontsize=9, loc="left")
        ax.set_ylabel("q(x)")
        ax.ticklabel_format(axis="y", useOffset=False)
    axes[0, 0].legend(fontsize=8, loc="upper right", ncol=4)
    axes[-1, 0].set_xlabel("draw")
    fig.tight_layout()
    return png(fig)


def formula_figure(lines: list[str]) -> bytes:
    """LaTeX lines rendered with matplotlib's mathtext (raises ValueError if one does not parse)."""
    fig = plt.figure(figsize=(8, 0.7 * len(lines) + 0.2))
    for k, line in enumerate(lines):
        # full-size fractions; mathtext ignores spaces, so keep a thin one before a named symbol
        display = line.replace(r"\frac", r"\dfrac").replace(r" \mathrm{width}", r"\,\mathrm{width}")
        fig.text(0.01, 1 - (k + 0.6) / len(lines), f"${display}$", fontsize=15, va="center")
    return png(fig)


def label_values(ax, values: list[float]) -> None:
    """A log x axis labelled at the plotted `values` (those `_spaced` keeps), no minor ticks: every
    swept level readable, at least two labels when two levels differ."""
    ax.set_xscale("log")
    ticks = _spaced(values)
    if len(ticks) == 1 and max(values) > ticks[0]:  # levels closer than `_spaced`'s ratio: label both ends
        ticks.append(max(values))
    ax.set_xticks(ticks, [f"{v:.3g}" for v in ticks], rotation=30 if len(ticks) > 6 else 0)
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def log_axis(ax, which: str, values: list[float], most: int = 8) -> None:
    """Put the `which` ("x" or "y") axis on a log scale with at least two labelled ticks inside the
    positive `values`' range: decades when it spans two or more (every k-th, at most `most`), else
    the 1-2-5 values inside it, else its ends. Minor ticks stay unlabelled."""
    lo, hi = min(v for v in values if v > 0), max(values)
    if lo == hi:
        lo, hi = lo / 2, hi * 2
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    first, last = math.ceil(math.log10(lo) - 1e-12), math.floor(math.log10(hi) + 1e-12)
    if last > first:
        step = math.ceil((last - first + 1) / most)
        ticks = [10.0**k for k in range(first, last + 1, step)]
        labels = [f"$10^{{{k}}}$" for k in range(first, last + 1, step)]
    else:
        ticks = [m * 10.0**k for k in range(first - 1, last + 1) for m in (1, 2, 5) if lo <= m * 10.0**k <= hi]
        if len(ticks) < 2:
            ticks = [lo, hi]
        labels = [f"{v:.3g}" for v in ticks]
    axis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    axis.set_major_formatter(matplotlib.ticker.FixedFormatter(labels))
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    lim = ax.get_xlim() if which == "x" else ax.get_ylim()
    (ax.set_xlim if which == "x" else ax.set_ylim)(min(lim[0], lo), max(lim[1], hi))


def _spaced(values: list[float], ratio: float = 1.3) -> list[float]:
    """The swept values to label: each at least `ratio` times the previous label (no overlaps)."""
    out: list[float] = []
    for v in sorted(values):
        if not out or v >= out[-1] * ratio:
            out.append(v)
    return out


def _grouped(scales: dict[str, float]) -> list[tuple[float, list[str]]]:
    """Calibrated scales, equal ones (to SAME, relative) under one line with all their labels."""
    groups: list[tuple[float, list[str]]] = []
    for label, value in sorted(scales.items(), key=lambda kv: kv[1]):
        if groups and abs(groups[-1][0] - value) <= SAME * value:
            groups[-1][1].append(label)
        else:
            groups.append((value, [label]))
    return groups


def _short(v: float | None, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}g}"
