"""Gaussian noise through `audit` on finite models: privacy profiles under every notion (DESIGN §3.5).

Expected values come from a reference written here from the definition: for a pair of mixtures
P = Σ_s p_s N(q_s, σ²), Q = Σ_s r_s N(q_s, σ²), δ(ε) = ∫ max(0, P − e^ε Q) is summed in closed
form (normal CDFs) over the intervals where P > e^ε Q, whose ends are sign changes of
log P − log Q − ε found on a dense grid and refined by brentq; ε(δ) by brentq in ε. Discrete
Gaussian: a direct sum over a wide range of integers. Classic Gaussian DP: Balle & Wang's formula.
"""

from __future__ import annotations

import functools
import itertools
import json
import math

import numpy as np
import pytest
from chains import chain_model, random_chain
from scipy import optimize, special, stats

from ddpbayes.auditing import audit
from ddpbayes.cli.main import main
from ddpbayes.mechanisms import DiscreteGaussian, Gaussian
from ddpbayes.model.loading import load_model

# ----------------------------------------------------------------------------- reference


def gdp_delta(eps: float, mu: float) -> float:
    """Balle & Wang 2018, Thm. 8: δ(ε) of N(0, 1) against N(μ, 1)."""
    return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


def invert(delta_of, delta: float) -> float:
    """inf{ε >= 0 : δ(ε) <= δ} for a decreasing δ(ε)."""
    if delta_of(0.0) <= delta:
        return 0.0
    hi = 1.0
    while delta_of(hi) > delta:
        hi *= 2
    return optimize.brentq(lambda e: delta_of(e) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14)


def logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    """log Σ exp(a) along `axis`, shifted by the finite maximum (scipy's, without its per-call overhead,
    which was most of this reference's time)."""
    top = np.max(a, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return np.log(np.sum(np.exp(a - top), axis=axis)) + np.squeeze(top, axis=axis)


def log_ratio(p, r, q, sigma, y) -> np.ndarray:
    """log P(y) − log Q(y) for P = Σ p_s N(q_s, σ²), Q = Σ r_s N(q_s, σ²) (the common 1/√(2π)σ cancels)."""
    y = np.atleast_1d(y)[:, None]
    dens = -((y - q) ** 2) / (2 * sigma**2)
    with np.errstate(divide="ignore"):
        return logsumexp(dens + np.log(p), axis=1) - logsumexp(dens + np.log(r), axis=1)


def log_ratio_at(p, r, q, sigma, v: float) -> float:
    """`log_ratio` at one point, in plain floats: brentq calls it thousands of times per test."""
    dens = [-((v - qs) ** 2) / (2 * sigma**2) for qs in q]
    return _log_mixture(dens, p) - _log_mixture(dens, r)


def _log_mixture(dens: list[float], weights) -> float:
    """log Σ w_s e^{dens_s} over the nonzero weights, shifted by the largest term."""
    terms = [d + math.log(w) for d, w in zip(dens, weights) if w > 0]
    top = max(terms)
    return top + math.log(sum(math.exp(t - top) for t in terms))


@functools.lru_cache(maxsize=16)
def ratio_on_grid(p: tuple, r: tuple, q: tuple, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """A dense grid over the mixtures' support and the log ratio on it: the same for every ε, so computed
    once per pair (`invert` asks for δ at ~20 values of ε)."""
    y = np.linspace(min(q) - 14 * sigma, max(q) + 14 * sigma, 8001)
    return y, log_ratio(np.array(p), np.array(r), np.array(q), sigma, y)


def mixture_delta(p, r, q, sigma, eps) -> float:
    """∫ max(0, P − e^ε Q) for P = Σ p_s N(q_s, σ²), Q = Σ r_s N(q_s, σ²)."""
    p, r, q = (np.asarray(a, dtype=float) for a in (p, r, q))

    def loss(v: float) -> float:
        return log_ratio_at(p, r, q, sigma, v) - eps

    y, ratio = ratio_on_grid(tuple(p), tuple(r), tuple(q), float(sigma))
    positive = ratio - eps > 0
    roots = [optimize.brentq(loss, y[k], y[k + 1], xtol=1e-15) for k in np.flatnonzero(positive[:-1] != positive[1:])]
    ends = [-np.inf, *roots, np.inf]
    total = 0.0
    for a, b in zip(ends[:-1], ends[1:]):
        mid = (a + b) / 2 if np.isfinite(a) and np.isfinite(b) else (b - 1 if np.isfinite(b) else a + 1)
        if not np.isfinite(a) and not np.isfinite(b):
            mid = 0.0
        if loss(mid) <= 0:
            continue
        lo, hi = (a - q) / sigma, (b - q) / sigma  # from the nearer tail: no 1 - Φ cancellation (Φ = ndtr)
        mass = np.where(lo > 0, special.ndtr(-lo) - special.ndtr(-hi), special.ndtr(hi) - special.ndtr(lo))
        total += float(p @ mass - math.exp(eps) * (r @ mass))
    return max(total, 0.0)


def discrete_delta(p, r, q, sigma, eps) -> float:
    """Σ_y max(0, P(y) − e^ε Q(y)) for mixtures of discrete Gaussians on the integers."""
    p, r, q = (np.asarray(a, dtype=float) for a in (p, r, q))
    y = np.arange(int(q.min()) - int(30 * sigma) - 5, int(q.max()) + int(30 * sigma) + 6)
    k = np.arange(-int(40 * sigma) - 5, int(40 * sigma) + 6)
    norm = np.exp(-(k**2) / (2 * sigma**2)).sum()
    kern = np.exp(-((y[:, None] - q[None]) ** 2) / (2 * sigma**2)) / norm
    return float(np.maximum(0.0, kern @ p - math.exp(eps) * (kern @ r)).sum())


def pair_epsilons(xs, probs, query, target, known, sigma, delta, discrete=False):
    """The adversary's ε(δ): the max over x_K and ordered pairs t ≠ t' of the pair's ε(δ)."""
    values = query(xs)
    best = 0.0
    keys = {tuple(x[list(known)]) for x in xs} if known else {()}
    for key in keys:
        rows = np.all(xs[:, list(known)] == key, axis=1) if known else np.ones(len(xs), bool)
        levels = np.unique(values[rows])
        mix = {}
        for t in np.unique(xs[rows, target]):
            sel = rows & (xs[:, target] == t) & (probs > 0)
            if probs[sel].sum() <= 0:
                continue
            w = np.array([probs[sel & (values == v)].sum() for v in levels])
            mix[t] = w / w.sum()
        for t, u in itertools.permutations(mix, 2):
            h = discrete_delta if discrete else mixture_delta
            best = max(best, invert(lambda e, t=t, u=u: h(mix[t], mix[u], levels, sigma, e), delta))
    return best


def random_states(rng, sizes):
    """A random chain's tables, every state x (S, n) and its probability, by numpy."""
    tables, joint = random_chain(rng, sizes)
    xs = np.array(list(itertools.product(*[range(s) for s in sizes])), dtype=float)
    return tables, xs, joint.reshape(-1)


# ----------------------------------------------------------------------------- tests


def test_dp_is_classic_gaussian_dp(models_dir):
    """dp: the analytic Gaussian mechanism's δ(ε) at μ = Δ₂/σ, and ε at δ its inverse."""
    model = load_model(str(models_dir / "independent.py"), {"n": 3})
    r = audit(model, "linear:1,2,0", Gaussian(1.5, delta=1e-5), "dp")
    assert r.per_target[1] == pytest.approx(invert(lambda e: gdp_delta(e, 2 / 1.5), 1e-5), rel=1e-10)
    assert r.per_target[2] == 0.0
    out = r.to_dict()
    assert out["gdp_mu"] == pytest.approx(2 / 1.5, rel=1e-14)
    assert out["zcdp_rho"] == pytest.approx((2 / 1.5) ** 2 / 2, rel=1e-14)
    for eps, delta in out["profile"]:
        assert gdp_delta(eps, 2 / 1.5) == pytest.approx(delta, rel=1e-7, abs=1e-15)


def test_independent_tuples_ddp_pdp_equal_dp_but_idp_is_smaller(models_dir):
    """Independent tuples: ddp and pdp (K = all others) are classic Gaussian DP; idp is not (a
    finding): unknown tuples add their own variance to the noise, L(y|t) = Σ_s P(S=s) N(t+s, σ²)."""
    model = load_model(str(models_dir / "independent.py"), {"n": 3, "p": 0.3})
    sigma, delta = 0.8, 1e-4
    classic = invert(lambda e: gdp_delta(e, 1 / sigma), delta)
    for notion in ("dp", "ddp", "pdp"):
        r = audit(model, "sum", Gaussian(sigma, delta=delta), notion)
        assert r.leakage == pytest.approx(classic, rel=1e-8), notion
    rest = stats.binom.pmf(np.arange(3), 2, 0.3)
    p = np.r_[0.0, rest]  # levels 0..3: t = 1 shifts the rest by one
    r0 = np.r_[rest, 0.0]
    expected = max(invert(lambda e: mixture_delta(p, r0, np.arange(4), sigma, e), delta),
                   invert(lambda e: mixture_delta(r0, p, np.arange(4), sigma, e), delta))
    idp = audit(model, "sum", Gaussian(sigma, delta=delta), "idp")
    assert idp.leakage == pytest.approx(expected, rel=1e-8)
    assert idp.leakage < classic - 0.1


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])  # 1: slow (issue #29 budget)
def test_random_chain_pdp_lattice_against_reference(seed):
    rng = np.random.default_rng(seed)
    sizes = [2, 3, 2]
    tables, xs, probs = random_states(rng, sizes)
    model = chain_model(tables)
    weights = rng.integers(-2, 3, size=3).astype(float)
    weights[0] = 1.0
    sigma, delta = float(rng.uniform(0.4, 1.5)), 1e-3
    spec = "linear:" + ",".join(f"{w:g}" for w in weights)
    r = audit(model, spec, Gaussian(sigma, delta=delta), "pdp", lattice=True)
    for a in r.lattice:
        expected = pair_epsilons(xs, probs, lambda x: x @ weights, a.adversary.target, sorted(a.adversary.known),
                                 sigma, delta)
        assert a.value == pytest.approx(expected, rel=1e-8, abs=1e-10), a.adversary
        assert a.profile.epsilon_at(delta) == a.value


def test_discrete_gaussian_against_integer_sums():
    rng = np.random.default_rng(7)
    tables, xs, probs = random_states(rng, [2, 2, 3])
    model = chain_model(tables)
    weights = np.array([2.0, 1.0, -1.0])
    sigma, delta = 1.3, 1e-3
    r = audit(model, "linear:2,1,-1", DiscreteGaussian(sigma, delta=delta), "idp")
    for i in range(3):
        expected = pair_epsilons(xs, probs, lambda x: x @ weights, i, [], sigma, delta, discrete=True)
        assert r.per_target[i] == pytest.approx(expected, rel=1e-8, abs=1e-10), i


def test_structured_equals_exact_on_a_chain(models_dir):
    model = load_model(str(models_dir / "markov_chain.py"), {"n": 6})
    mech = Gaussian(0.9, delta=1e-6)
    for notion in ("idp", "ddp"):
        exact = audit(model, "sum", mech, notion, engine="exact")
        structured = audit(model, "sum", mech, notion, engine="structured")
        assert structured.engine == "structured"
        np.testing.assert_allclose(structured.per_target, exact.per_target, rtol=1e-10)
        np.testing.assert_allclose(structured.profile.epsilons, exact.profile.epsilons, rtol=1e-10, atol=1e-12)


def test_json_keys_profile_shape_and_reproducible(models_dir):
    model = load_model(str(models_dir / "household.py"), {"n": 3})
    runs = [audit(model, "count", "gaussian", "idp", epsilon=1.0, delta=1e-6).to_dict() for _ in range(2)]
    for run in runs:
        run.pop("seconds")
    assert json.dumps(runs[0]) == json.dumps(runs[1])
    out = runs[0]
    assert out["delta"] == 1e-6 and out["epsilon_at_delta"] == out["leakage"]
    assert out["gdp_mu"] is None and out["zcdp_rho"] > 0
    assert out["witness"]["y"] is None and out["witness"]["t"] != out["witness"]["t_prime"]
    eps = [e for e, _ in out["profile"]]
    deltas = [d for _, d in out["profile"]]
    assert eps == sorted(eps) and deltas == sorted(deltas, reverse=True)
    assert out["mechanism"]["epsilon"] == 1.0 and out["mechanism"]["delta"] == 1e-6


def test_vector_output_varying_is_refused(models_dir):
    model = load_model(str(models_dir / "household.py"), {"n": 3})
    with pytest.raises(Exception, match="multi-dimensional integral"):
        audit(model, "linear:1,1,0;0,1,1", Gaussian(1.0), "idp")


@pytest.mark.parametrize("flags, message", [
    (["--mechanism", "laplace", "--scale", "1", "--delta", "1e-5"], "meaningless for laplace"),
    (["--mechanism", "gaussian", "--epsilon", "1"], "only with --delta"),
    (["--mechanism", "gaussian", "--sigma", "0"], "sigma must be"),
    (["--mechanism", "gaussian", "--sigma", "-2"], "sigma must be"),
    (["--mechanism", "gaussian", "--sigma", "1", "--delta", "0"], "strictly between 0 and 1"),
    (["--mechanism", "gaussian", "--sigma", "1", "--delta", "1.5"], "strictly between 0 and 1"),
    (["--mechanism", "gaussian", "--rho", "0.5", "--delta", "1"], "strictly between 0 and 1"),
    (["--mechanism", "laplace", "--sigma", "1"], "takes --scale"),
    (["--mechanism", "laplace", "--rho", "1"], "sets Gaussian noise"),
])
def test_bad_input_is_one_line(capsys, models_dir, flags, message):
    code = main(["audit", str(models_dir / "independent.py"), "--query", "sum", *flags, "--notion", "idp"])
    out, err = capsys.readouterr()
    assert code == 2 and message in err and err.strip().count("\n") == 0 and "Traceback" not in err
    assert out == ""
