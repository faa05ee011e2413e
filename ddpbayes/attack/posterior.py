"""The adversary's posterior over the cells of a `Grid` (seed 002 Eq. 6–9).

    P(d̂ | μ̃, D_−i) ∝ exp(−‖μ̃ − μ̂(d̂)‖₁ / b) · P(d̂ | D_−i)          (Eq. 6)

The likelihood and the CAR prior factor over the two coordinates, so both are built as (targets, G)
tables per coordinate and box and added into (targets, cells) (`Grid.assemble`); the histogram
priors (Eq. 8, Eq. 9) are full (targets, cells) tables. Everything is in natural logs; entropies
are in bits.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erfcx, log_ndtr, logsumexp

from ddpbayes.attack.grid import Grid


def laplace_normal_logpdf(r: np.ndarray, b: float, sigma: np.ndarray) -> np.ndarray:
    """log of the density at r of Laplace(0, b) + Normal(0, σ²) (σ = 0: the Laplace density):

        f(r) = e^{σ²/2b²} / 2b · [e^{−r/b} Φ(r/σ − σ/b) + e^{r/b} Φ(−r/σ − σ/b)].

    The Normal part is the adversary's uncertainty about the unknown members of the target's
    cluster (`adversary.ClusterView`). Each bracketed term is `_log_term`, finite for every b from
    the smallest to the largest double (ε = Δ/b from 1e-300 to 1e300)."""
    sigma = np.broadcast_to(sigma, r.shape)
    log_2b = np.log(2.0) + np.log(b)
    with np.errstate(over="ignore"):  # |r|/b beyond double precision: a log-density of -inf, as it is
        exact = -np.abs(r) / b - log_2b
    s = np.where(sigma > 0, sigma, 1.0)
    u, v = s / b, r / s
    mixed = np.logaddexp(_log_term(u, v), _log_term(u, -v)) - log_2b
    return np.where(sigma > 0, mixed, exact)


def _log_term(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """log(e^{u²/2 − uv} Φ(v − u)) for u = σ/b > 0: with x = u − v, as −v²/2 + log(erfcx(x/√2)/2) when
    x >= 0 (Φ(−x) = e^{−x²/2} erfcx(x/√2)/2: u² never formed) and as u(u/2 − v) + log Φ(−x) when x < 0
    (then u < v and the exponent is negative)."""
    x = u - v
    with np.errstate(over="ignore", invalid="ignore"):  # each branch overflows only where the other is taken
        upper = -0.5 * v * v + np.log(0.5 * erfcx(np.maximum(x, 0.0) / np.sqrt(2.0)))
        lower = u * (0.5 * u - v) + log_ndtr(-x)
    return np.where(x >= 0, upper, lower)


def log_likelihood(noisy: np.ndarray, expected_others: np.ndarray, sigma: np.ndarray, size: np.ndarray,
                   b: float, grid: Grid) -> np.ndarray:
    """log P(μ̃_c | target at the cell centre) for each target's cluster c (Eq. 6), (T, cells):
    μ̂_c(d̂) = (S + d̂)/n_c, S the (expected) sum of the other members; the other clusters' centroids
    do not depend on d̂ and cancel. `noisy`, `expected_others`, `sigma`: (T, 2); `size`: (T,)."""
    def per_box(box: int) -> tuple[np.ndarray, np.ndarray]:
        out = []
        for a, c in enumerate(grid.axis_centres(box)):
            r = noisy[:, a, None] - (expected_others[:, a, None] + c[None, :]) / size[:, None]
            out.append(laplace_normal_logpdf(r, b, sigma[:, a, None]))
        return out[0], out[1]

    return grid.assemble(per_box)


def histogram_log_prior(counts: np.ndarray) -> np.ndarray:
    """Eq. 8 (and Eq. 9 with weighted counts): each cell's share of the (weighted) count (log;
    −inf for empty cells)."""
    with np.errstate(divide="ignore"):
        return np.log(counts) - np.log(counts.sum(axis=1, keepdims=True))


def gaussian_log_prior(mean: np.ndarray, sd: np.ndarray, grid: Grid) -> np.ndarray:
    """The mass of N(mean, diag(sd²)) in each cell, normalised over the cells (log): the CAR
    conditional integrated over the cells (the CAR adversary's prior). `mean`, `sd`: (T, 2), in the
    grid's normalised coordinates."""
    def per_box(box: int) -> tuple[np.ndarray, np.ndarray]:
        return tuple(_log_interval_mass((e[None, :-1] - mean[:, a, None]) / sd[:, a, None],
                                        (e[None, 1:] - mean[:, a, None]) / sd[:, a, None])
                     for a, e in enumerate(grid.edges(box)))

    return normalise(grid.assemble(per_box))


def _log_interval_mass(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """log(Φ(hi) − Φ(lo)) for lo < hi, accurate in both tails (by symmetry, the upper tail is
    computed as the lower one)."""
    flip = lo > 0
    a, z = np.where(flip, -hi, lo), np.where(flip, -lo, hi)  # Φ(z) − Φ(a), a < z, a <= 0
    log_z, log_a = log_ndtr(z), log_ndtr(a)
    with np.errstate(divide="ignore"):
        return log_z + np.log1p(-np.exp(log_a - log_z))


def normalise(log_p: np.ndarray) -> np.ndarray:
    """Rows of log weights → rows of log probabilities."""
    return log_p - logsumexp(log_p, axis=1, keepdims=True)


def entropy_bits(log_p: np.ndarray) -> np.ndarray:
    """H = −Σ p log₂ p of each row of log probabilities (empty cells contribute 0)."""
    p = np.exp(log_p)
    return -(p * np.where(p > 0, log_p, 0.0)).sum(axis=1) / np.log(2)
