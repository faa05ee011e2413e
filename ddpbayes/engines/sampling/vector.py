"""The sup over y of the estimated log-ratio when the release has several output coordinates
(identity, histograms, several linear rows, expr:/fn: with several outputs, compositions;
DESIGN §2.3).

With Laplace(b_c) noise on coordinate c, L(y | t, x_K) ≈ Σ_s w_s Π_c exp(-|y_c - q_sc| / b_c) over the
estimated law's points q_s and weights w_s (`estimate.Draws.mixture`).
- A coordinate constant over the draws of both events (e.g. the target's own coordinate under
  identity: y_i = t + noise) is a separate factor of both mixtures: its log-ratio sup is
  exactly |v - v'| / b_c, attained as y_c -> ±inf.
- One varying coordinate: the exact 1-D sup (`mixture`).
- m >= 2 varying coordinates: for fixed other coordinates the ratio in y_c is a ratio of two
  positive 1-D Laplace mixtures, which peaks at a draw's value or at ±inf (004 Lemma 1), so the
  sup lies on the product of the coordinates' breakpoints and ±inf (DESIGN §2.1's vector
  proof) — draws^m points. Searched: every corner (±inf)^m plus, per coordinate, its pooled
  draw values (all of them when few, as for histogram counts; else k quantiles) with the
  product at most GRID_MAX points; then coordinate ascent, each step a 1-D sup over that
  coordinate's draws (thinned to 400 quantiles, as for one output) with the others fixed.
  When the grid held every breakpoint the result is the sup of the estimated mixture;
  otherwise it is a value the estimate reaches (`complete` False: the engine then earns no
  pass).
"""

from __future__ import annotations

import math

import numpy as np

from ddpbayes.engines.sampling.mixture import candidate_outputs
from ddpbayes.errors import InputError

GRID_MAX = 2048  # output points searched jointly over the varying coordinates
ASCENT_ROUNDS = 5
_CHUNK = 1 << 22  # kernel cells evaluated at once


def log_kernels(q: np.ndarray, y: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Σ_c log k(y_gc, q_sc) of shape (G, S) for draws q (S, C) and outputs y (G, C): k =
    exp(-|y - q|/b) for finite y, exp(q/b) at +inf and exp(-q/b) at -inf (the factor that
    depends on y alone cancels in every ratio of two mixtures at the same y)."""
    out = np.zeros((len(y), len(q)))
    step = np.empty_like(out)  # each coordinate's term, in place (no temporaries of the (G, S) size)
    for c in range(q.shape[1]):
        yc, qc = y[:, c], q[:, c] / b[c]
        up, down = np.isposinf(yc), np.isneginf(yc)
        np.subtract(yc[:, None] / b[c], qc[None, :], out=step)
        np.abs(step, out=step)
        step[up], step[down] = -qc, qc  # at ±inf: ±q/b (the rows' finite terms above are overwritten)
        out -= step
    return out


def log_mixture_nd(q: np.ndarray, wq: np.ndarray, y: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log Σ_s w_s Π_c k(y_gc, q_sc) for every row of y (G, C); wq: the points' log-weights."""
    rows = max(1, _CHUNK // max(1, len(q)))
    parts = []
    for g in range(0, len(y), rows):
        z = log_kernels(q, y[g:g + rows], b)
        z += wq[None, :]
        top = z.max(axis=1, keepdims=True)
        z -= top
        parts.append(np.log(np.exp(z, out=z).sum(axis=1)) + top[:, 0])
    return np.concatenate(parts)


def pair_sup(qa: np.ndarray, wa: np.ndarray, qc: np.ndarray, wc: np.ndarray,
             b: np.ndarray) -> tuple[list[tuple[float, np.ndarray]], bool]:
    """For the estimated law of the query given t (points qa (M_a, C), log-weights wa) and given
    t' (qc, wc): [(sup_y log L_a/L_c, its y), (sup_y log L_c/L_a, its y)] and whether the search
    was exhaustive over the breakpoints."""
    const = np.ptp(qa, axis=0) == 0
    const &= np.ptp(qc, axis=0) == 0
    delta = np.where(const, qa[0] - qc[0], 0.0)
    fixed = float(np.sum(np.abs(delta) / b))
    varying = np.flatnonzero(~const)
    both, complete = _varying_sup(qa[:, varying], wa, qc[:, varying], wc, b[varying]) if varying.size else (None, True)
    out = []
    for d, sign in enumerate((1.0, -1.0)):
        y = np.where(delta * sign > 0, math.inf, np.where(delta * sign < 0, -math.inf, qa[0]))
        value = fixed
        if both is not None:
            value += both[d][0]
            y[varying] = both[d][1]
        out.append((value, y))
    return out, complete


def _varying_sup(qa: np.ndarray, wa: np.ndarray, qc: np.ndarray, wc: np.ndarray,
                 b: np.ndarray) -> tuple[list[tuple[float, np.ndarray]], bool]:
    """sup over y of ±(log L_a(y) - log L_c(y)) on the varying coordinates, each with its y."""
    if qa.shape[1] == 1:
        ys = candidate_outputs(qa, qc)
        r = log_mixture_nd(qa, wa, ys[:, None], b) - log_mixture_nd(qc, wc, ys[:, None], b)
        return [(float(sign * r[k]), ys[k:k + 1]) for sign, k in ((1, np.argmax(r)), (-1, np.argmin(r)))], True
    grid, complete = _grid(qa, qc)
    r = log_mixture_nd(qa, wa, grid, b) - log_mixture_nd(qc, wc, grid, b)
    starts = [(float(sign * r[k]), grid[k].copy()) for sign, k in ((1, np.argmax(r)), (-1, np.argmin(r)))]
    if complete:
        return starts, True
    return [_ascent(qa, wa, qc, wc, b, sign, *start) for sign, start in zip((1.0, -1.0), starts)], False


def _ascent(qa: np.ndarray, wa: np.ndarray, qc: np.ndarray, wc: np.ndarray, b: np.ndarray, sign: float, best: float,
            y: np.ndarray) -> tuple[float, np.ndarray]:
    """Coordinate ascent from y: each step the best of one coordinate's candidate outputs."""
    for _ in range(ASCENT_ROUNDS):
        moved = False
        for c in range(qa.shape[1]):
            cands = candidate_outputs(qa[:, c], qc[:, c])
            trial = np.repeat(y[None], len(cands), axis=0)
            trial[:, c] = cands
            rc = sign * (log_mixture_nd(qa, wa, trial, b) - log_mixture_nd(qc, wc, trial, b))
            j = int(np.argmax(rc))
            if rc[j] > best + 1e-12:
                best, y, moved = float(rc[j]), trial[j].copy(), True
        if not moved:
            break
    return best, y


def _grid(qa: np.ndarray, qc: np.ndarray) -> tuple[np.ndarray, bool]:
    """Every corner (±inf)^m and up to k pooled draw values per coordinate (k as large as
    GRID_MAX allows); True when no coordinate's values were subsampled."""
    m = qa.shape[1]
    if 2 ** m > GRID_MAX:
        raise InputError(f"the release has {m} output coordinates that vary given the target: the sampling engine "
                         f"searches the output space jointly up to {int(math.log2(GRID_MAX))} of them "
                         f"({2 ** m:,} corners alone, over {GRID_MAX:,}); release fewer outputs")
    levels = [np.unique(np.concatenate([qa[:, c], qc[:, c]])) for c in range(m)]
    k = 0
    while k < max(len(v) for v in levels) and math.prod(min(len(v), k + 1) + 2 for v in levels) <= GRID_MAX:
        k += 1
    axes = [np.concatenate([_thin(v, k), [math.inf, -math.inf]]) for v in levels]
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([g.ravel() for g in mesh], axis=1), all(len(v) <= k for v in levels)


def _thin(values: np.ndarray, k: int) -> np.ndarray:
    if len(values) <= k:
        return values
    if k == 0:
        return values[:0]
    return np.unique(np.quantile(values, np.linspace(0, 1, k), method="nearest"))
