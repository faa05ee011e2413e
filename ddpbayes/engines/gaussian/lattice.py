"""The pdp lattice of a Gaussian model without listing it: each target's worst known set.

For target i and known set K (S = the other tuples and i, U = S - {i}), DESIGN §2.2 gives
leak(i, K) = width_i / b * ||c(i, K)||_1 for the query A x (A^T is `a`, (n, m): one column per
output coordinate, m = 1 for w·x) with

    c(i, K) = a_i + sum_{j in U} a_j C_ji / C_ii = (C a_S)_i / C_ii,   C = Cov(X_S | X_K),

so each target's worst adversary is the known set with the largest ||c(i, K)||_1. Everything
for one S at once: keep M = Cov(X_S | X_K), v = M a_S (s, m) and d = diag(M); then
c(i, K) = v_i / d_i for every i in S. Knowing one more tuple, the one at position p of S, is a
Schur complement on a 1x1 block (a rank-one downdate, `condition`):

    M' = M_{-p,-p} - m m^T / M_pp,   v' = v_{-p} - m v_p / M_pp,   d' = d_{-p} - m^2 / M_pp,

with m = M_{-p,p}. The search walks the lattice by layers |K| = 0, 1, ..., n-1 from
M = Sigma (003's weighted hierarchical graph, top down). Every S is reached exactly once,
from its canonical parent S + {j} with j the smallest tuple outside S: as S then holds
0..j-1, j sits at position j of the parent, so a layer is built by one vectorised downdate per
position p over the parents that hold 0..p. Keeping each layer sorted by the length of that
prefix (descending) makes those parents a leading slice of the layer: no copies, no ranking.
Cost: sum_s C(n, s) s^2 = O(n^2 2^n) flops in numpy arrays (n = 20: about 3 s of CPU, layers
up to 0.3 GB), exact up to rounding (the downdates are the steps of a Cholesky factorisation
of an SPD matrix, which is stable).

`greedy` is seed 003's fast search: per target, keep the `top_k` known sets of largest |c|
per layer and expand only those; a child's c needs just the parent's M (O(m) per child).

Ties: a larger layer replaces the best only when larger by a relative 1e-12, so among equal
values the smallest known set (the weakest adversary) is reported.

Gaussian noise (`exhaustive(..., gaussian=True)`, DESIGN §3.5): the score is μ² / width² =
c^T W^{-1} c (`noise.loss_scale`) with the rows scaled by 1/σ_c (unit noise), which also needs
T = Cov(A X | X_K) per S, downdated with M: T' = T - v_p v_p^T / M_pp.
"""

from __future__ import annotations

from math import comb

import numpy as np

from ddpbayes.engines.gaussian.noise import loss_scale
from ddpbayes.errors import InputError

TIE = 1e-12  # relative margin to replace a best value (favours smaller known sets)
ZERO = 1e-12  # |c| below ZERO times its Cauchy–Schwarz scale is rounding: c = 0
MAX_LAYER_BYTES = 1 << 29  # refuse an exhaustive search whose widest layer exceeds this
CHUNK = 4096  # parents conditioned at once (keeps temporaries in cache)

Best = tuple[np.ndarray, frozenset[int], float]  # (c (m,) with its signs, known set, score) for one target


def snap(c: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """c, with values below the rounding of its terms set to 0. Each term |a_jc C_ji / C_ii| is
    at most |a_jc| sqrt(C_jj / C_ii) (Cauchy–Schwarz); `scale` is the sum of those bounds."""
    return np.where(np.abs(c) <= ZERO * scale, 0.0, c)


def condition(m: np.ndarray, v: np.ndarray, d: np.ndarray, p: int, out=None):
    """Condition a batch (M (B,s,s), v (B,s,m), d (B,s)) on the element at position p; written
    into `out` (three arrays of shapes (B,s-1,s-1), (B,s-1,m), (B,s-1)) when given."""
    col = np.concatenate([m[:, :p, p], m[:, p + 1 :, p]], axis=1)
    f = col / m[:, p, p][:, None]
    s = m.shape[1] - 1
    if out is None:
        out = np.empty((m.shape[0], s, s)), np.empty((m.shape[0], s, v.shape[2])), np.empty((m.shape[0], s))
    m_out, v_out, d_out = out
    m_out[:, :p, :p] = m[:, :p, :p]
    m_out[:, :p, p:] = m[:, :p, p + 1 :]
    m_out[:, p:, :p] = m[:, p + 1 :, :p]
    m_out[:, p:, p:] = m[:, p + 1 :, p + 1 :]
    m_out -= f[:, :, None] * col[:, None, :]
    v_out[:, :p], v_out[:, p:] = v[:, :p], v[:, p + 1 :]
    v_out -= f[:, :, None] * v[:, p : p + 1, :]
    d_out[:, :p], d_out[:, p:] = d[:, :p], d[:, p + 1 :]
    d_out -= f * col
    return m_out, v_out, d_out


def _coefficients(v: np.ndarray, d: np.ndarray, idx: np.ndarray, a: np.ndarray) -> np.ndarray:
    """c = v / d for a batch (v (B,s,m), d (B,s), tuples idx (B,s)): (B,s,m), rounding set to 0."""
    root = np.sqrt(d)[:, :, None]
    scale = (np.abs(a[idx]) * root).sum(axis=1, keepdims=True) / root
    return snap(v / d[:, :, None], scale)


def exhaustive(cov: np.ndarray, a: np.ndarray, gaussian: bool = False) -> list[Best]:
    """For every target, the c(i, K) of largest score over every known set K, that K and the
    score; `a` (n, m) holds the query's rows as columns. The score is ||c||_1 (Laplace noise,
    rows scaled by 1/b), or with `gaussian` (rows scaled by 1/σ, so the noise is N(0, I))
    c^T W^{-1} c = μ² / width² (`noise.loss_scale`), which needs T = Cov(A X | X_K) (m, m) per S:
    knowing the tuple at position p downdates it as M, T' = T - v_p v_p^T / M_pp."""
    n, width = a.shape
    extra = width * width if gaussian else 0
    widest = max(comb(n, s) * (s * (s + width) + extra) * 8 for s in range(1, n + 1))
    if widest > MAX_LAYER_BYTES:
        raise InputError(
            f"the pdp lattice of {n} tuples has {n * 2 ** (n - 1):,} adversaries, too many for the exhaustive "
            "search (fix the known set with --known)"
        )
    everyone = np.arange(n)
    m, v, d = cov[None].copy(), (cov @ a)[None], np.diag(cov)[None].copy()
    t = (a.T @ cov @ a)[None] if gaussian else None
    idx, run = everyone[None], np.array([n])  # run: S holds 0..run-1 but not run; descending
    best: list[Best] = [(np.zeros(width), frozenset(), 0.0)] * n
    for s in range(n, 0, -1):
        c = _coefficients(v, d, idx, a)
        _update(best, c, _scores(c, d, t), idx, everyone)
        if s == 1:
            return best
        size = comb(n, s - 1)
        child = np.empty((size, s - 1, s - 1)), np.empty((size, s - 1, width)), np.empty((size, s - 1))
        child_t = np.empty((size, width, width)) if gaussian else None
        child_idx, child_run = np.empty((size, s - 1), dtype=np.int64), np.empty(size, dtype=np.int64)
        at = 0
        for p in range(int(run[0]) - 1, -1, -1):  # parents holding 0..p are a prefix of the layer
            rows = int(np.searchsorted(-run, -p, side="left"))
            for lo in range(0, rows, CHUNK):
                hi = min(rows, lo + CHUNK)
                dest = slice(at + lo, at + hi)
                if gaussian:
                    vp = v[lo:hi, p]
                    child_t[dest] = t[lo:hi] - vp[:, :, None] * vp[:, None, :] / m[lo:hi, p, p][:, None, None]
                condition(m[lo:hi], v[lo:hi], d[lo:hi], p, out=tuple(a[dest] for a in child))
                child_idx[dest] = np.delete(idx[lo:hi], p, axis=1)
            child_run[at : at + rows] = p
            at += rows
        m, v, d = child
        t, idx, run = child_t, child_idx, child_run


def _scores(c: np.ndarray, d: np.ndarray, t: np.ndarray | None) -> np.ndarray:
    """(B, s): ||c||_1 (Laplace), or c^T W^{-1} c with M = T + I (Gaussian, unit noise)."""
    if t is None:
        return np.abs(c).sum(axis=2)
    return loss_scale(t + np.eye(t.shape[1]), c, d, 1.0)


def _update(best: list[Best], c: np.ndarray, score: np.ndarray, idx: np.ndarray, everyone: np.ndarray) -> None:
    """Fold one layer into each target's best (first hit within a layer), by score."""
    layer = np.zeros(len(best))
    np.maximum.at(layer, idx.ravel(), score.ravel())
    for i in np.flatnonzero(layer > np.array([b[2] for b in best]) * (1 + TIE)):
        r, p = np.argwhere((idx == i) & (score == layer[i]))[0]
        best[i] = (c[r, p].copy(), frozenset(np.setdiff1d(everyone, idx[r]).tolist()), float(layer[i]))


def greedy(cov: np.ndarray, a: np.ndarray, top_k: int) -> list[Best]:
    """Seed 003's fast search: per target, expand only the `top_k` best known sets per layer
    (by ||c||_1; `a` (n, m) holds the query's rows as columns)."""
    n = len(a)
    best: list[Best] = []
    for i in range(n):
        first = _coefficients((cov @ a)[None], np.diag(cov)[None], np.arange(n)[None], a)[0, i]
        target_best: Best = (first, frozenset(), float(np.abs(first).sum()))
        frontier = [(cov, cov @ a, np.diag(cov).copy(), np.arange(n))]
        while frontier and len(frontier[0][3]) > 1:
            children = {}
            for m, v, d, idx in frontier:
                t = int(np.flatnonzero(idx == i)[0])
                col, piv = m[t], np.diag(m)
                vi = v[t] - (col / piv)[:, None] * v  # v_i and d_i after conditioning on each position
                di = d[t] - col**2 / piv
                for p in np.flatnonzero(idx != i):
                    known = frozenset(range(n)) - frozenset(idx.tolist()) | {int(idx[p])}
                    if known not in children:
                        children[known] = (np.abs(vi[p]).sum() / di[p], m, v, d, idx, p)
            ranked = sorted(children.items(), key=lambda kv: -kv[1][0])[:top_k]
            frontier = []
            for known, (_, m, v, d, idx, p) in ranked:
                cm, cv, cd = condition(m[None], v[None], d[None], int(p))
                kept = np.delete(idx, p)
                c = _coefficients(cv, cd, kept[None], a)[0, int(np.flatnonzero(kept == i)[0])]
                if np.abs(c).sum() > target_best[2] * (1 + TIE):
                    target_best = (c, known, float(np.abs(c).sum()))
                frontier.append((cm[0], cv[0], cd[0], kept))
        best.append(target_best)
    return best
