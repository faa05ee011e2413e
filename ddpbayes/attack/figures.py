"""The attack report's figures (PNG bytes): seed 002 Fig. 5 (a) the CDF of the inference error and
(b) the leaked information against ε with Theorem 2's bound, and the release itself (Fig. 2)."""

from __future__ import annotations

import numpy as np

from ddpbayes.attack.metrics import theorem2_bound_bits
from ddpbayes.attack.run import AttackResult
from ddpbayes.reports.figures import plt, png

LABEL = {"independent": "w/o social relationships", "dependent": "with social relationships"}
STYLE = {"independent": "--", "dependent": "-"}


def error_cdf_figure(result: AttackResult, epsilons: list[float]) -> bytes:
    """Fig. 5(a): the empirical CDF of the inference error at each ε in `epsilons`, both adversaries,
    with the first known-set size; and the error of guessing the regional mean for reference."""
    everyone = result.meta["n_priors"][0]
    fig, ax = plt.subplots(figsize=(7.2, 4.2))
    for k, e in enumerate(epsilons):
        for a in ("independent", "dependent"):
            km = np.sort(result.errors[(everyone, e, a)])
            ax.step(km, np.arange(1, len(km) + 1) / len(km), where="post", color=f"C{k}", ls=STYLE[a], lw=1.6,
                    label=f"ε = {e:g}, {LABEL[a]}")
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
    """Fig. 5(b): mean leaked information (Eq. 11, bits) against ε for each adversary and known-set
    size, the dependent adversary's release-only part, and Theorem 2's bound ε · log₂ e bits."""
    epsilons = result.meta["epsilons"]
    fig, ax = plt.subplots(figsize=(7.2, 4.2))
    for k, n_prior in enumerate(result.meta["n_priors"]):
        for a in ("dependent", "independent"):
            bits = [result.row(n_prior, e, a)["leaked_bits"] for e in epsilons]
            ax.plot(epsilons, bits, marker="o", color=f"C{k}", ls=STYLE[a], label=f"{LABEL[a]}, N_prior = {n_prior:,}")
        release = [result.row(n_prior, e, "dependent")["release_bits"] for e in epsilons]
        ax.plot(epsilons, release, marker=".", color=f"C{k}", ls=":", lw=1,
                label=f"with social relationships, release only, N_prior = {n_prior:,}")
    grid = np.linspace(0, max(epsilons), 50)
    ax.plot(grid, [theorem2_bound_bits(e) for e in grid], color="k", lw=1.2,
            label="security guarantee by DP: Thm 2, ε nats = ε·log₂e bits")
    ax.set_xlabel("privacy budget ε")
    ax.set_ylabel("leaked information (bits)")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return png(fig)


def release_figure(result: AttackResult, epsilon: float) -> bytes:
    """The users coloured by K-means cluster, the true centroids (×) and the centroids released at ε (○)."""
    data, part, box = result.data, result.partition, result.data.fit.box
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

