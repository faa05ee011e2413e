"""The attack report's figures (PNG bytes): seed 002 Fig. 5 (a) the CDF of the inference error and
(b) the leaked information against ε with Theorem 2's bound (here with the release's own part in a
second panel), and the release itself (Fig. 2)."""

from __future__ import annotations

import numpy as np

from ddpbayes.attack.metrics import theorem2_bound_bits
from ddpbayes.attack.run import AttackResult
from ddpbayes.reports.render.figures import log_axis, plt, png

LABEL = {"independent": "w/o social relationships", "dependent": "with social relationships (Eq. 9)",
         "car": "with social relationships (CAR prior)"}
STYLE = {"independent": "--", "dependent": "-", "car": "-."}
MARKER = {"independent": "s", "dependent": "o", "car": "^"}


def _drawn(result: AttackResult) -> list[str]:
    """The adversaries of `result`, in drawing order (the friend-aware ones first)."""
    present = {r["adversary"] for r in result.rows}
    return [a for a in ("dependent", "car", "independent") if a in present]


def error_cdf_figure(result: AttackResult, epsilons: list[float]) -> bytes:
    """Fig. 5(a): the empirical CDF of the inference error at each ε in `epsilons`, every adversary,
    with the first known-set size; and the error of guessing the regional mean for reference. Each
    curve is drawn thinner than the one before, so curves that coincide stay visible."""
    everyone = result.meta["n_priors"][0]
    fig, ax = plt.subplots(figsize=(7.2, 4.2))
    for j, (k, e, a) in enumerate((k, e, a) for k, e in enumerate(epsilons) for a in _drawn(result)):
        km = np.sort(result.errors[(everyone, e, a)])
        ax.step(km, np.arange(1, len(km) + 1) / len(km), where="post", color=f"C{k}", ls=STYLE[a],
                lw=_thinner(j), zorder=2 + j, label=f"ε = {e:g}, {LABEL[a]}")
    km = np.sort(result.guess_errors)
    ax.step(km, np.arange(1, len(km) + 1) / len(km), where="post", color="0.45", ls=":", lw=1.4,
            label="reference: guess the regional mean")
    ax.set_xlabel("inference error (km): MAP cell centre to the true position")
    ax.set_ylabel("cumulative share of users")
    ax.set_xlim(left=0)
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=9, loc="lower right")
    return png(fig)


def leaked_figure(result: AttackResult) -> bytes:
    """Fig. 5(b), in two panels so that no curve hides another. Left: the mean leaked information
    (Eq. 11, bits) against ε for each adversary and known-set size, with Theorem 2's bound ε · log₂ e
    bits. Right: what the release alone adds (the adversary's own prior's entropy minus its
    posterior's; for the independent adversary this is its Eq. 11 value), on a log axis when every
    value is positive, where the near-zero curves of the left panel come apart. An adversary keeps
    its line style and marker, a known-set size its colour; each curve is drawn thinner, with
    smaller hollow markers, than the one before, so curves that coincide stay visible."""
    epsilons = result.meta["epsilons"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.5, 4.2))
    drawn = [(k, n, a) for k, n in enumerate(result.meta["n_priors"]) for a in _drawn(result)]
    for j, (k, n_prior, a) in enumerate(drawn):
        rows = [result.row(n_prior, e, a) for e in epsilons]
        style = dict(color=f"C{k}", ls=STYLE[a], lw=_thinner(j, 2.2), marker=MARKER[a], ms=max(3.0, 10.0 - 2.0 * j),
                     mfc="none", mew=1.3, label=f"{LABEL[a]}, N_prior = {n_prior:,}", zorder=3 + j)
        left.plot(epsilons, [r["leaked_bits"] for r in rows], **style)
        right.plot(epsilons, [r["release_bits"] for r in rows], **style)
    grid = np.linspace(0, max(epsilons), 50)
    bound = [theorem2_bound_bits(e) for e in grid]
    left.plot(grid, bound, color="k", lw=1.2, label="security guarantee by DP: Thm 2, ε nats = ε·log₂e bits")
    right.plot(grid[1:], bound[1:], color="k", lw=1.2)
    release = [r["release_bits"] for r in result.rows]
    if min(release) > 0:
        log_axis(right, "y", release + bound[1:])
    left.set_title("leaked information (Eq. 11)", fontsize=10)
    right.set_title("the release alone: own prior's entropy − posterior's", fontsize=10)
    for ax in (left, right):
        ax.set_xlabel("privacy budget ε")
        ax.set_ylabel("bits")
    fig.tight_layout()
    fig.legend(*left.get_legend_handles_labels(), fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               frameon=False, ncol=2)
    return png(fig)


def _thinner(j: int, first: float = 3.0) -> float:
    """The line width of the j-th curve drawn: each thinner than the one before (down to 0.8)."""
    return max(0.8, first - 0.5 * j)


def release_figure(result: AttackResult, epsilon: float) -> bytes:
    """The users coloured by K-means cluster, the true centroids (×) and the centroids released at ε (○)."""
    data, part, box = result.data, result.partition, result.data.region.frame
    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    colours = plt.get_cmap("tab10" if part.k <= 10 else "tab20")
    ax.scatter(data.lon, data.lat, s=4, c=[colours(c % 20) for c in part.labels], alpha=0.6, lw=0)
    lat, lon = box.denormalise(part.centroids[:, 0], part.centroids[:, 1])
    ax.scatter(lon, lat, marker="x", s=70, color="k", lw=2, label="true centroids")
    noisy = np.clip(result.noisy[epsilon], 0, 1)
    lat, lon = box.denormalise(noisy[:, 0], noisy[:, 1])
    ax.scatter(lon, lat, marker="o", s=70, facecolors="none", edgecolors="k", lw=1.4,
               label=f"released at ε = {epsilon:g} (clipped to the box)")
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude")
    ax.legend(fontsize=9, loc="lower left")
    return png(fig)

