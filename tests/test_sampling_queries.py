"""The sampling engine on any query: vector outputs (identity, histograms, several rows) and
expr: queries on continuous tuples (issue #15 parts 3-4; DESIGN §2.3).

Expected values are derived here: by hand in docstrings (Example 1), by scipy quadrature (the
product query), by exact enumeration of a discrete output law (the histogram), by the Gaussian
Schur complement, and, for the sup over y of a ratio of two product-Laplace mixtures, by brute
force over the product of every coordinate's breakpoints and ±inf with a kernel written here.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pymc as pm
import pytest
from conftest import MODELS
from scipy import integrate
from bruteforce import logsumexp  # scipy's, without its per-call overhead

from ddpbayes import DependenceModel, InputError, Interval, audit, load_model
from ddpbayes.composition import compose
from ddpbayes.engines.sampling.vector import pair_sup

EXAMPLE1 = str(MODELS / "ddp_example1.py")
FAST = {"engine": "sampling", "draws": 500, "tune": 500, "chains": 2, "seed": 0}
GRID = (0.0, 0.25, 0.5, 0.75, 1.0)  # the engine's target grid on [0, 1]


# --- the sup over y of two product-Laplace mixtures -----------------------------------------


def uniform(q: np.ndarray) -> np.ndarray:
    """Equal log-weights: plain draws, each 1/S of the estimated law."""
    return np.full(len(q), -math.log(len(q)))


def log_l(q: np.ndarray, y: np.ndarray, b: np.ndarray, logw: np.ndarray | None = None) -> float:
    """log sum_s w_s prod_c k_c with k = exp(-|y_c - q_sc|/b_c), or exp(±q_sc/b_c) at y_c = ±inf
    (the factor exp(∓y_c/b_c) is common to both mixtures and dropped); w_s = 1/S by default."""
    terms = np.zeros(len(q))
    for c, yc in enumerate(y):
        terms += (q[:, c] if yc == math.inf else -q[:, c] if yc == -math.inf else -np.abs(yc - q[:, c])) / b[c]
    return float(logsumexp(terms + (uniform(q) if logw is None else logw)))


def brute_sup(qa, qc, b, wa=None, wc=None) -> tuple[float, float]:
    """max over the product of {every draw's value in c} ∪ {±inf} of log L_a/L_c and log L_c/L_a
    (vectorised log_l over every grid point; wa, wc: the points' log-weights, equal by default)."""
    axes = [sorted(set(qa[:, c]) | set(qc[:, c])) + [math.inf, -math.inf] for c in range(qa.shape[1])]
    ys = np.array(list(itertools.product(*axes)))
    r = log_l_many(qa, ys, b, wa) - log_l_many(qc, ys, b, wc)
    return float(r.max()), float(-r.min())


def log_l_many(q: np.ndarray, ys: np.ndarray, b: np.ndarray, logw: np.ndarray | None = None) -> np.ndarray:
    terms = np.zeros((len(ys), len(q)))
    for c in range(q.shape[1]):
        yc, qc = ys[:, c:c + 1], q[None, :, c]
        finite = -np.abs(np.where(np.isfinite(yc), yc, 0.0) - qc)
        terms += np.where(yc == math.inf, qc, np.where(yc == -math.inf, -qc, finite)) / b[c]
    return logsumexp(terms + (uniform(q) if logw is None else logw)[None, :], axis=1)


@pytest.mark.parametrize("seed", range(6))
def test_pair_sup_is_the_breakpoint_brute_force(seed):
    """Few draws: the engine's grid holds every breakpoint, so it must equal the brute force; and
    no random output y (the theorem's check) beats it. Even seeds: equal weights (plain draws);
    odd seeds: random weights, as a summed law gives each (draw, configuration) (issue #27)."""
    rng = np.random.default_rng(seed)
    m = 2 + seed % 2
    qa, qc = rng.normal(size=(4, m)), rng.normal(0.7, 1.3, size=(3, m))
    b = rng.uniform(0.5, 2.0, size=m)
    if seed % 2:
        wa, wc = (np.log(rng.dirichlet(np.ones(len(q)))) for q in (qa, qc))
    else:
        wa, wc = uniform(qa), uniform(qc)
    (up, y_up), (down, y_down), = (out := pair_sup(qa, wa, qc, wc, b))[0]
    assert out[1] is True
    assert (up, down) == pytest.approx(brute_sup(qa, qc, b, wa, wc), abs=1e-10)
    assert log_l(qa, y_up, b, wa) - log_l(qc, y_up, b, wc) == pytest.approx(up, abs=1e-10)
    assert log_l(qc, y_down, b, wc) - log_l(qa, y_down, b, wa) == pytest.approx(down, abs=1e-10)
    for y in rng.normal(0, 4, size=(300, m)):
        assert log_l(qa, y, b, wa) - log_l(qc, y, b, wc) <= up + 1e-10


def test_pair_sup_merged_points_equal_repeated_draws():
    """A law given as weighted distinct points (what `Draws.mixture` passes: equal draws merged,
    summed configurations weighted) and the same law as repeated equal-weight draws are one
    mixture: the same sup, to rounding."""
    rng = np.random.default_rng(11)
    pa, pc = rng.normal(size=(3, 2)), rng.normal(0.5, 1.0, size=(4, 2))
    ka, kc = np.array([1, 4, 2]), np.array([3, 1, 1, 2])
    b = np.array([1.0, 0.6])
    merged = pair_sup(pa, np.log(ka / ka.sum()), pc, np.log(kc / kc.sum()), b)[0]
    ra, rc = np.repeat(pa, ka, axis=0), np.repeat(pc, kc, axis=0)
    repeated = pair_sup(ra, uniform(ra), rc, uniform(rc), b)[0]
    assert [v for v, _ in merged] == pytest.approx([v for v, _ in repeated], abs=1e-12)


def test_pair_sup_subgrid_is_attained_and_close():
    """Many draws on 3 coordinates: the grid is subsampled (no pass then); the value is still
    one the estimate attains, at most the brute force and at least every corner's."""
    rng = np.random.default_rng(7)
    qa = rng.normal(size=(30, 3)) + np.array([1.0, 0.0, -0.5])
    qc = rng.normal(size=(30, 3))
    b = np.array([1.0, 0.5, 2.0])
    (up, y_up), (down, _) = pair_sup(qa, uniform(qa), qc, uniform(qc), b)[0]
    assert pair_sup(qa, uniform(qa), qc, uniform(qc), b)[1] is False
    assert log_l(qa, y_up, b) - log_l(qc, y_up, b) == pytest.approx(up, abs=1e-10)
    truth_up, truth_down = brute_sup(qa, qc, b)
    corners = [log_l(qa, np.array(y), b) - log_l(qc, np.array(y), b) for y in itertools.product([-math.inf, math.inf], repeat=3)]
    assert max(corners) - 1e-12 <= up <= truth_up + 1e-10
    assert -min(corners) - 1e-12 <= down <= truth_down + 1e-10
    assert up == pytest.approx(truth_up, abs=1e-3) and down == pytest.approx(truth_down, abs=1e-3)


def test_constant_coordinates_factor_out():
    """A coordinate constant under both events (v vs v') contributes exactly |v - v'|/b_c, at
    y_c = ±inf; the rest is the 1-D sup (brute force on that coordinate alone)."""
    rng = np.random.default_rng(3)
    qa = np.column_stack([np.full(50, 2.0), rng.normal(size=50)])
    qc = np.column_stack([np.full(40, -1.0), rng.normal(0.5, 1, size=40)])
    b = np.array([2.0, 0.7])
    ((up, y_up), (down, y_down)), complete = pair_sup(qa, uniform(qa), qc, uniform(qc), b)
    one_up, one_down = brute_sup(qa[:, 1:], qc[:, 1:], b[1:])
    assert complete and up == pytest.approx(1.5 + one_up, abs=1e-10) and down == pytest.approx(1.5 + one_down, abs=1e-10)
    assert (y_up[0], y_down[0]) == (math.inf, -math.inf)


def test_too_many_varying_outputs_refused():
    rng = np.random.default_rng(0)
    with pytest.raises(InputError, match="12 output coordinates"):
        pair_sup(rng.normal(size=(5, 12)), uniform(np.zeros(5)), rng.normal(size=(5, 12)), uniform(np.zeros(5)),
                 np.ones(12))


# --- Example 1 (000): identity, product, histogram -------------------------------------------


@pytest.fixture(scope="module")
def example1():
    return load_model(EXAMPLE1)


def product_truth(b: float = 1.0) -> float:
    """Product D_i D_j, target D_i, on the engine's grid, by quadrature: given D_i = t > 0,
    q = t D_j with D_j ~ U[t/2, t/2 + 1/2], so q ~ U[t²/2, t²/2 + t/2] and
    L(y | t) = ∫ e^{-|y - q|/b} dq / (t/2); given t = 0, q = 0. The sup over y is over a fine grid
    and the tails y -> ±inf, where L ∝ E[e^{±q/b}]."""
    ys = np.linspace(-2, 3, 501)

    def log_ls(t: float) -> np.ndarray:
        if t == 0:
            return np.concatenate([-np.abs(ys) / b, [0.0, 0.0]])
        lo, hi = t * t / 2, t * t / 2 + t / 2
        mean = [integrate.quad(lambda q, y=y: math.exp(-abs(y - q) / b), lo, hi, points=[y] if lo < y < hi else None)[0]
                / (hi - lo) for y in ys]
        tails = [integrate.quad(lambda q, s=s: math.exp(s * q / b), lo, hi)[0] / (hi - lo) for s in (1, -1)]
        return np.log(np.concatenate([mean, tails]))

    table = [log_ls(t) for t in GRID]
    return max(float(np.max(a - c)) for a in table for c in table)


def test_product_truth_closed_form():
    """The maximum is t = 1 against t' = 0 as y -> +inf (or any y >= 1): D_j | D_i = 1 ~ U[1/2, 1]
    against q = 0, so leak = log E[e^{D_j}] = log(2 (e - e^{1/2})) ≈ 0.7604 at b = 1. (For
    y >= 1 the ratio is E[e^{|y| - |y - q|}] = E[e^q]; the triangle inequality caps every y there.)"""
    assert product_truth() == pytest.approx(math.log(2 * (math.e - math.exp(0.5))), abs=1e-6)
    assert math.log(2 * (math.e - math.exp(0.5))) == pytest.approx(0.7604, abs=1e-4)


def test_example1_identity_product_histogram_target_di(example1):
    """Target D_i, Laplace(1) on every output; all three queries share the 5 choosing runs given
    D_i = t (each then bounds its witness on 2 fresh runs: 7 runs, issue #27).

    Identity: the own coordinate y_i = t + noise is constant given t: |t - t'|/b = 1 (t, t' = 0, 1).
    D_j | t ~ U[t/2, t/2 + 1/2] is a location family with shift t/2, so its coordinate adds at most
    0.5/b, reached as y_j -> ±inf: 1.5. Product: 0.7604 (product_truth). Histogram 0, 0.75, 1:
    the counts' law is discrete (hist_truth)."""
    ident = audit(example1, "identity", "laplace", "idp", scale=1.0, targets=[0], **FAST)
    assert ident.engine == "sampling" and ident.ci[0] <= 1.5 <= ident.ci[1], ident.ci
    assert ident.diagnostics["runs"] == 5 + 2 and len(ident.witness.y) == 2
    prod = audit(example1, "expr:d_i*d_j", "laplace", "idp", scale=1.0, targets=[0], **FAST)
    assert prod.ci[0] <= product_truth() <= prod.ci[1], prod.ci
    hist = audit(example1, "histogram:0,0.75,1", "laplace", "idp", scale=1.0, targets=[0], **FAST)
    assert hist.ci[0] <= hist_truth() <= hist.ci[1], (hist.ci, hist_truth())


@pytest.mark.slow  # the default run's budget: ~4 s idle
def test_example1_composition_target_di(example1):
    """Sum with Laplace(1) and identity with Laplace(2) released together (per-coordinate scales
    from `mechanism.coordinate(c)`): given D_i = t the outputs' means are (1.5, 1, 0.5) t plus
    noise free of t ((X/2, 0, X/2)), so every kernel ratio is at most e^{1.5/1 + 1/2 + 0.5/2}
    for t - t' = 1, reached as every y_c -> +inf (or all -inf): 2.25. Two coordinates vary (the
    sum's and D_j's): the grid-and-ascent search on real draws."""
    query, mech = compose(["sum:laplace:1", "identity:laplace:2"], example1)
    r = audit(example1, query, mech, "idp", targets=[0], **FAST)
    assert r.engine == "sampling" and r.ci[0] <= 2.25 <= r.ci[1], r.ci


def hist_truth(b: float = 1.0) -> float:
    """Histogram with bins [0, .75), [.75, 1], target D_i on the engine's grid: D_i's own bin is
    fixed by t; D_j ~ U[t/2, t/2 + 1/2] is in the top bin with p(t) = max(0, t - 1/2). Counts
    (c0, c1) = own + D_j's, a two-point law; sup over y on its breakpoints {0, 1, 2} and ±inf."""
    laws = []
    for t in GRID:
        own = np.array([0.0, 1.0]) if t >= 0.75 else np.array([1.0, 0.0])
        p = max(0.0, t - 0.5)
        laws.append([(own + [1, 0], 1 - p), (own + [0, 1], p)])
    axes = [0.0, 1.0, 2.0, math.inf, -math.inf]

    def log_l_law(law, y) -> float:
        return float(logsumexp([math.log(w) + log_l(q[None], np.array(y), np.array([b, b])) for q, w in law if w > 0]))

    return max(log_l_law(a, y) - log_l_law(c, y) for a in laws for c in laws for y in itertools.product(axes, axes))


@pytest.mark.slow  # the default run's budget: 7 s idle; the target_di version stays
def test_example1_identity_and_product_target_dj(example1):
    """Target D_j = s; D_i | s ~ U[max(0, 2s - 1), min(1, 2s)]. Identity: own coordinate
    |s - s'|/b = 1 plus D_i's coordinate, whose range moves from {0} (s -> 0) to {1} (s -> 1): +1,
    so 2 at b = 1. Product: s D_i ∈ [0, 1] for every s, so at most 1, and s -> 1 (q -> 1) against
    s -> 0 (q -> 0), y -> +inf gives 1. The ends s = 0, 1 are impossible events, nudged inward by
    1e-6: the grid's value lies within 6e-6 (identity) and 3e-6 (product) below 2 and 1."""
    ident = audit(example1, "identity", "laplace", "idp", scale=1.0, targets=[1], **FAST)
    assert ident.ci[0] <= 2.0 and ident.ci[1] >= 2.0 - 6e-6, ident.ci
    assert ident.ci[1] <= 2.0 + 1e-4
    prod = audit(example1, "expr:d_i*d_j", "laplace", "idp", scale=1.0, targets=[1], **FAST)
    assert prod.ci[0] <= 1.0 and prod.ci[1] >= 1.0 - 3e-6, prod.ci
    assert prod.ci[1] <= 1.0 + 1e-4


# --- several varying outputs on real draws (slow) ---------------------------------------------


@pytest.mark.slow
def test_gaussian_identity_sampling_matches_closed_form():
    """Three jointly Gaussian tuples, identity with Laplace(1), target 0 on [0, 1]: the sampling
    engine's sup over two varying coordinates (grid + ascent) against the Gaussian engine's
    formula, here by hand: leak = 1 + |Sigma_10| + |Sigma_20| (Sigma_00 = 1)."""
    cov = np.array([[1.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 1.0]])
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(3), cov=cov)
    model = DependenceModel(m, tuples="x", domains=Interval(0, 1))
    truth = 1 + 0.6 + 0.3
    r = audit(model, "identity", "laplace", "idp", scale=1.0, targets=[0], engine="sampling", draws=2000, tune=1000,
              chains=2, seed=0)
    assert r.ci[0] <= truth <= r.ci[1], r.ci
    assert audit(model, "identity", "laplace", "idp", scale=1.0, targets=[0]).leakage == pytest.approx(truth)
