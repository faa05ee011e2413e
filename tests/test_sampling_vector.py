"""The vector witness search's fast evaluations (`engines/sampling/vector.py`, issue #42.1; DESIGN
§2.3) against sums written here: the Laplace product mixture
L(y) = Σ_s w_s Π_c k_c(y_c, q_sc), k = exp(-|y_c - q_sc|/b_c), exp(q_sc/b_c) at y_c = +inf and
exp(-q_sc/b_c) at -inf (the factor of y alone dropped, as the engine does), evaluated point by
point with loops over the draws; and `pair_sup` against the search as it was written before it
tabulated terms (every candidate's full product kernel), kept plainly below.

Random draws on 2-5 coordinates, with ties (draws rounded to a few levels, outputs equal to
draws), a constant coordinate, random log-weights, ±inf outputs and outputs outside the draws.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from bruteforce import logsumexp

from ddpbayes.engines.sampling import vector
from ddpbayes.engines.sampling.mixture import candidate_outputs


def log_kernel(yc: float, qc: float, b: float) -> float:
    """log k(y_c, q_sc): -|y - q|/b, or ±q/b at y = ±inf."""
    if yc == math.inf:
        return qc / b
    if yc == -math.inf:
        return -qc / b
    return -abs(yc - qc) / b


def log_l(q: np.ndarray, w: np.ndarray, y, b) -> float:
    """log Σ_s exp(w_s + Σ_c log k(y_c, q_sc)), draw by draw."""
    return float(logsumexp([w[s] + sum(log_kernel(y[c], q[s, c], b[c]) for c in range(q.shape[1]))
                            for s in range(len(q))]))


def draws(rng: np.random.Generator, size: int, m: int, constant: bool = True) -> np.ndarray:
    """Continuous draws, or draws on a few levels (ties), with a constant column now and then."""
    q = rng.normal(size=(size, m)) * rng.uniform(0.5, 3.0, size=m)
    if rng.random() < 0.5:
        q = np.round(q)
    if constant and rng.random() < 0.3:
        q[:, rng.integers(m)] = rng.normal()
    return q


def outputs(rng: np.random.Generator, q: np.ndarray, n: int) -> np.ndarray:
    """Outputs on one coordinate: some draws' values (ties), random values inside and beyond the
    draws' range, both infinities, in random order."""
    picked = rng.choice(q, size=min(n, len(q)))
    free = rng.uniform(q.min() - 3, q.max() + 3, size=n)
    ys = np.unique(np.concatenate([picked, free]))[:n]
    return rng.permutation(np.concatenate([ys, [math.inf, -math.inf]]))


def close(fast: np.ndarray, slow: np.ndarray, scale: float) -> bool:
    """Equal to rounding: 1e-12 relative to the terms' magnitude (|q|/b, the sums' exponents)."""
    return bool(np.all(np.abs(fast - slow) <= 1e-12 * (1.0 + scale + np.abs(slow))))


@pytest.mark.parametrize("seed", range(12))
def test_lines_are_the_direct_sums(seed):
    """`log_mixture_lines` (points carried to their neighbouring outputs) equals Σ_s over the
    draws at every output, for several weight rows; fewer and more outputs than draws."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 40))
    q = draws(rng, size, 1)[:, 0]
    w = rng.normal(0, 2, size=(int(rng.integers(1, 4)), size))
    ys = outputs(rng, q, int(rng.integers(1, 60)))
    b = float(rng.uniform(0.2, 3.0))
    fast = vector.log_mixture_lines(q, w, ys, b)
    slow = np.array([[log_l(q[:, None], row, [y], [b]) for y in ys] for row in w])
    assert fast.shape == slow.shape and close(fast, slow, float(np.abs(q).max() / b))


def test_lines_far_from_zero():
    """Draws near 10^4 with b = 0.7: the carried sums add same-signed distances, so they keep the
    direct sums' digits where a split into exp(±q/b) prefix sums would lose them."""
    rng = np.random.default_rng(5)
    q = 1e4 + rng.normal(size=300)
    w = np.full((1, 300), -math.log(300))
    ys = outputs(rng, q, 80)
    slow = np.array([log_l(q[:, None], w[0], [y], [0.7]) for y in ys])
    fast = vector.log_mixture_lines(q, w, ys, 0.7)[0]
    finite = np.isfinite(ys)
    assert np.all(np.abs(fast[finite] - slow[finite]) <= 1e-12 * (1 + np.abs(slow[finite])))
    assert close(fast, slow, 1e4 / 0.7)


@pytest.mark.parametrize("seed", range(10))
def test_grid_is_the_direct_sum(seed):
    """`log_mixture_grid` at every point of a product of axes, in meshgrid "ij" order, equals the
    sum written here point by point; _CHUNK shrunk so that the leading rows come in blocks."""
    rng = np.random.default_rng(100 + seed)
    m = int(rng.integers(2, 6))
    q = draws(rng, int(rng.integers(2, 12)), m)
    w = np.log(rng.dirichlet(np.ones(len(q))))
    b = rng.uniform(0.3, 2.0, size=m)
    axes = [outputs(rng, q[:, c], int(rng.integers(0, 4))) for c in range(m)]
    slow = np.array([log_l(q, w, y, b) for y in itertools.product(*axes)])
    for chunk in (1, 3 * len(q), 40 * len(q), vector._CHUNK):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(vector, "_CHUNK", chunk)
            fast = vector.log_mixture_grid(q, w, axes, b)
        assert close(fast, slow, float(np.max(np.abs(q) / b)))


@pytest.mark.parametrize("seed", range(10))
def test_ascent_step_is_the_direct_sum(seed):
    """One ascent step's values (`_along`: the other coordinates' terms summed once) equal the
    full product kernel at y with coordinate c set to each candidate; y's other coordinates may
    be ±inf."""
    rng = np.random.default_rng(200 + seed)
    m = int(rng.integers(2, 6))
    q = draws(rng, int(rng.integers(1, 50)), m)
    w = np.log(rng.dirichlet(np.ones(len(q))))
    b = rng.uniform(0.3, 2.0, size=m)
    y = np.array([rng.choice([math.inf, -math.inf, rng.normal(), q[0, c]]) for c in range(m)])
    c = int(rng.integers(m))
    ys = candidate_outputs(q[:, c], rng.normal(size=7), limit=int(rng.integers(3, 30)))
    slow = np.array([log_l(q, w, np.where(np.arange(m) == c, v, y), b) for v in ys])
    assert close(vector._along(q, w, y, c, ys, b), slow, float(np.max(np.abs(q) / b)))


# --- the search as it was: every candidate's full product kernel ---------------------------


def old_log_mixture(q: np.ndarray, w: np.ndarray, ys: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log L at each row of ys (G, C): the (G, S, C) kernel terms summed over C, then over S."""
    finite = -np.abs(np.where(np.isfinite(ys), ys, 0.0)[:, None, :] - q[None, :, :])
    terms = np.where(ys[:, None, :] == math.inf, q[None], np.where(ys[:, None, :] == -math.inf, -q[None], finite))
    return logsumexp((terms / b).sum(axis=2) + w[None, :], axis=1)


def old_grid(qa: np.ndarray, qc: np.ndarray) -> tuple[np.ndarray, bool]:
    """The grid's points, as `vector._grid` built them before it returned its axes."""
    m = qa.shape[1]
    levels = [np.unique(np.concatenate([qa[:, c], qc[:, c]])) for c in range(m)]
    k = 0
    while k < max(len(v) for v in levels) and math.prod(min(len(v), k + 1) + 2 for v in levels) <= vector.GRID_MAX:
        k += 1
    axes = [np.concatenate([vector._thin(v, k), [math.inf, -math.inf]]) for v in levels]
    return np.array(list(itertools.product(*axes))), all(len(v) <= k for v in levels)


def old_ascent(qa, wa, qc, wc, b, sign, best, y):
    for _ in range(vector.ASCENT_ROUNDS):
        moved = False
        for c in range(qa.shape[1]):
            trial = np.repeat(y[None], len(cands := candidate_outputs(qa[:, c], qc[:, c])), axis=0)
            trial[:, c] = cands
            rc = sign * (old_log_mixture(qa, wa, trial, b) - old_log_mixture(qc, wc, trial, b))
            j = int(np.argmax(rc))
            if rc[j] > best + 1e-12:
                best, y, moved = float(rc[j]), trial[j].copy(), True
        if not moved:
            break
    return best, y


def old_pair_sup(qa, wa, qc, wc, b):
    """`pair_sup` before: constant coordinates factored out, the grid, then the ascent."""
    const = (np.ptp(qa, axis=0) == 0) & (np.ptp(qc, axis=0) == 0)
    fixed = float(np.sum(np.abs(np.where(const, qa[0] - qc[0], 0.0)) / b))
    v = np.flatnonzero(~const)
    if len(v) == 1:
        grid, complete = candidate_outputs(qa[:, v], qc[:, v])[:, None], True
    else:
        grid, complete = old_grid(qa[:, v], qc[:, v])
    r = old_log_mixture(qa[:, v], wa, grid, b[v]) - old_log_mixture(qc[:, v], wc, grid, b[v])
    starts = [(float(s * r[k]), grid[k].copy()) for s, k in ((1, np.argmax(r)), (-1, np.argmin(r)))]
    if not complete:
        starts = [old_ascent(qa[:, v], wa, qc[:, v], wc, b[v], s, *start) for s, start in zip((1.0, -1.0), starts)]
    return [fixed + value for value, _ in starts], complete


@pytest.mark.parametrize("seed", range(8))
def test_pair_sup_equals_the_old_search(seed):
    """Same values (to rounding) and completeness as the search before; each witness attains its
    value (a tie, e.g. a coordinate beyond every draw against its ±inf, may pick another y)."""
    rng = np.random.default_rng(300 + seed)
    m = 2 + seed % 4
    qa, qc = (draws(rng, int(rng.integers(20, 120)), m, constant=False) + shift for shift in (0.0, 0.4))
    if seed % 3 == 0:
        qc[:, 0], qa[:, 0] = 1.0, -0.5  # constant under both events: factored out
    wa, wc = (np.log(rng.dirichlet(np.ones(len(q)))) for q in (qa, qc))
    b = rng.uniform(0.3, 2.0, size=m)
    (up, y_up), (down, y_down) = (new := vector.pair_sup(qa, wa, qc, wc, b))[0]
    (old_up, old_down), old_complete = old_pair_sup(qa, wa, qc, wc, b)
    assert new[1] == old_complete
    assert (up, down) == pytest.approx((old_up, old_down), rel=1e-12, abs=1e-12)
    assert log_l(qa, wa, y_up, b) - log_l(qc, wc, y_up, b) == pytest.approx(up, abs=1e-10)
    assert log_l(qc, wc, y_down, b) - log_l(qa, wa, y_down, b) == pytest.approx(down, abs=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_one_varying_coordinate_equals_the_old_search(seed):
    """One varying coordinate beside a constant one, 300 and 500 draws (pooled values thinned to
    400 candidates): the 1-D sup as before, to rounding."""
    rng = np.random.default_rng(400 + seed)
    qa = np.column_stack([np.full(300, 2.0), rng.standard_t(4, size=300)])
    qc = np.column_stack([np.full(500, -1.0), rng.standard_t(4, size=500) * 1.3 + 0.2])
    wa, wc = np.full(300, -math.log(300)), np.log(rng.dirichlet(np.ones(500)))
    b = rng.uniform(0.3, 2.0, size=2)
    new, complete = vector.pair_sup(qa, wa, qc, wc, b)
    old, old_complete = old_pair_sup(qa, wa, qc, wc, b)
    assert complete and old_complete
    assert [value for value, _ in new] == pytest.approx(old, rel=1e-12, abs=1e-12)
