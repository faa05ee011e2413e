"""An `AuditResult`'s pictures (matplotlib; `AuditResult.plot` calls these): the worst leakage
per target, for audits of many targets (a year of days), and the witness's log-ratio
r(y) = log L(y | t, x_K) - log L(y | t', x_K) against the output y, the curve whose supremum is
the leakage (DESIGN §1), with the leakage and the claim drawn."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ddpbayes.engines import NoCurve, engine_named
from ddpbayes.errors import InputError
from ddpbayes.formatting import fmt

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ddpbayes.auditing.result import AuditResult

KINDS = ("targets", "witness")
NAMED_TICKS = 20  # targets named on the x axis up to this many; beyond, their indices
STAR = dict(marker="*", color="gold", mec="k", ms=14, zorder=5)


def plot(result: AuditResult, kind: str | None = None, ax: Axes | None = None) -> Axes:
    """`kind` "targets" (the default when several targets were audited) or "witness" (else)."""
    kind = kind or ("targets" if len(result._audited()) > 1 else "witness")
    if kind not in KINDS:
        raise InputError(f"unknown plot '{kind}' (use {' or '.join(KINDS)})")
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.subplots(figsize=(7, 3.8))[1]
    (per_target if kind == "targets" else witness)(result, ax)
    return ax


def per_target(result: AuditResult, ax: Axes) -> None:
    """Each audited target's worst leakage (an estimate's interval shaded), the worst starred,
    the claim drawn; an unbounded leakage is said in the title, not drawn."""
    audited = result._audited()
    finite = [(i, v) for i, v in audited if math.isfinite(v)]
    if finite:
        xs, ys = (np.array(col, dtype=float) for col in zip(*finite))
        many = len(finite) > NAMED_TICKS
        ax.plot(xs, ys, "-" if many else "o", color="C0", lw=1.2, ms=5, label=f"{result.notion} leakage per target")
        _intervals(result, [i for i, _ in finite], ax)
        worst = int(np.argmax(ys))
        ax.plot([xs[worst]], [ys[worst]], **STAR, label=f"worst {fmt(ys[worst])}: {result._name(int(xs[worst]))}")
        if not many:
            ax.set_xticks(xs, [result._name(int(i)) for i in xs], rotation=45 if len(xs) > 8 else 0)
    if result.claim is not None:
        ax.axhline(result.claim, color="C3", ls=":", lw=1.2, label=f"claim {fmt(result.claim)}")
    unbounded = len(audited) - len(finite)
    ax.set_title(f"{_title(result)}" + (f"; {unbounded} target(s) leak inf (not drawn)" if unbounded else ""),
                 fontsize=10)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("target tuple")
    ax.set_ylabel("lower bound on leakage" if result.lower_bound else "worst leakage")
    if ax.get_legend_handles_labels()[0]:  # every target unbounded and no claim: nothing to label
        ax.legend(fontsize=8, frameon=False)


def witness(result: AuditResult, ax: Axes) -> None:
    """The engine's witness curve (`Engine.witness_curve`): r(y) over y, its limits as y -> ±inf
    dashed, the leakage and the claim drawn, the witness output starred."""
    curve = _curve(result)
    if curve.integer:
        ax.plot(curve.y, curve.log_ratio, ".", color="C0", ms=5, label="r(y)")
    else:
        ax.plot(curve.y, curve.log_ratio, color="C0", lw=1.6, label="r(y)")
    for value, side in zip(curve.limits, ("y → −∞", "y → +∞")):
        if math.isfinite(value):
            ax.axhline(value, color="0.55", ls="--", lw=0.8)
            ax.annotate(f"{side}: {fmt(value)}", xy=(0.02 if "−" in side else 0.98, value),
                        xycoords=("axes fraction", "data"), xytext=(0, 3), textcoords="offset points",
                        ha="left" if "−" in side else "right", fontsize=8, color="0.3")
    if math.isfinite(result.leakage):
        ax.axhline(result.leakage, color="C1", lw=1, label=f"leakage {fmt(result.leakage)}")
    if result.claim is not None:
        ax.axhline(result.claim, color="C3", ls=":", lw=1.2, label=f"claim {fmt(result.claim)}")
    y = (result.witness.y or (math.nan,))[0]
    if math.isfinite(y) and curve.y.min() <= y <= curve.y.max():
        ax.plot([y], [np.interp(y, curve.y, curve.log_ratio)], **STAR, label=f"witness y = {fmt(y)}")
    w = result.witness
    known = ", ".join(f"{result._name(k)}={fmt(v)}" for k, v in sorted(curve.known_values.items())) or "nothing"
    ax.set_title(f"{_title(result)}\n{result._name(w.adversary.target)} = {fmt(w.t)} vs {fmt(w.t_prime)}, "
                 f"known: {known}", fontsize=10)
    ax.set_xlabel("output y")
    ax.set_ylabel("log L(y | t, x_K) − log L(y | t', x_K)")
    ax.legend(fontsize=8, frameon=False)


def _curve(result: AuditResult):
    """The witness's curve from the engine that found it; a one-line InputError when there is none."""
    engine = engine_named(result.engine)
    if result.problem is None or result.witness is None or engine is None:
        why = ("it keeps no problem" if result.problem is None else "it has no witness" if result.witness is None
               else f"{result.notion} is model-free: its log-ratio is that of two noise densities a sensitivity apart")
        raise InputError(f"this result has no witness curve: {why} (plot(kind='targets') draws the leakage per target)")
    try:
        return engine.witness_curve(result.problem, result.notion, result.witness)
    except NoCurve as exc:
        raise InputError(f"this result has no witness curve: {exc}") from None


def _intervals(result: AuditResult, targets: list[int], ax: Axes) -> None:
    """An estimate's 90% interval per target, shaded."""
    worst = result.target_worst or {}
    cis = [worst[i].ci if i in worst else None for i in targets]
    if any(ci is not None for ci in cis):
        lo = [ci[0] if ci is not None else math.nan for ci in cis]
        hi = [ci[1] if ci is not None else math.nan for ci in cis]
        ax.fill_between(targets, lo, hi, color="C0", alpha=0.2, lw=0, label="90% interval")


def _title(result: AuditResult) -> str:
    """`idp of count, kind=laplace, scale=1.0 (exact engine)`: what was released, as far as the result says."""
    released = ", ".join(part for part in (result.query, result.mechanism_text()) if part)
    return f"{result.notion}{f' of {released}' if released else ''} ({result.engine} engine)"
