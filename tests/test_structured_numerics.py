"""The structured engine's arithmetic against direct log-space sums written here (issue #29): the linear-space
fast paths (one band) and the banded or log-space fallbacks must give the same numbers, at any dynamic range."""

from __future__ import annotations

import numpy as np
import pytest
from bruteforce import logsumexp  # scipy's, without its per-call overhead

import ddpbayes
from ddpbayes.engines.structured.potential import Potential, log_convolve, multiply, sum_out
from ddpbayes.mechanisms.laplace import laplace_sums

LIMIT = 1 << 24


def _random_log_vector(rng, n: int, spread: float, zeros: float) -> np.ndarray:
    v = rng.normal(size=n) * spread
    v[rng.random(n) < zeros] = -np.inf
    return v


def _close(a: np.ndarray, b: np.ndarray, tol: float = 1e-11) -> bool:
    """Equal -inf patterns, and finite entries equal to `tol` relative to their magnitude (log space)."""
    if not np.array_equal(np.isfinite(a), np.isfinite(b)):
        return False
    f = np.isfinite(a)
    return bool(np.all(np.abs(a[f] - b[f]) <= tol * np.maximum(1.0, np.abs(b[f]))))


@pytest.mark.parametrize("spread", [0.5, 50.0, 400.0, 3000.0])
def test_log_convolve_equals_pairwise_sums(spread):
    rng = np.random.default_rng(int(spread))
    for _ in range(20):
        a = _random_log_vector(rng, int(rng.integers(1, 60)), spread, rng.choice([0.0, 0.3]))
        b = _random_log_vector(rng, int(rng.integers(1, 60)), spread, rng.choice([0.0, 0.3]))
        want = np.full(len(a) + len(b) - 1, -np.inf)
        for k in range(len(want)):
            terms = [a[j] + b[k - j] for j in range(len(a)) if 0 <= k - j < len(b)]
            want[k] = logsumexp(terms)
        assert _close(log_convolve(a, b), want)


def _concave_log_vector(rng, n: int, span: float) -> np.ndarray:
    """A random bump of n log-values from 0 down to about -span at its ends (a law of a sum's shape), noise on it."""
    x = np.linspace(-1.0, 1.0, n) - rng.uniform(-0.3, 0.3)
    v = -span * x ** 2 / np.max(x ** 2) + rng.normal(size=n) * 3.0
    v[rng.random(n) < 0.05] = -np.inf
    return v


@pytest.mark.parametrize("seed", range(4))
def test_log_convolve_wide_spans_equal_pairwise_sums(seed):
    """Spans adding up to 600-1,400 nats, balanced or one-sided (one np.convolve scaled apart, `_wide_scales`),
    and past that (runs), against the pairwise sums written out."""
    from ddpbayes.engines.structured.potential import _RANGE, _span, _wide_scales

    rng = np.random.default_rng(40 + seed)
    taken = set()
    for span_a, span_b in [(250.0, 250.0), (650.0, 600.0), (1250.0, 20.0), (15.0, 1300.0), (900.0, 900.0)]:
        a = _concave_log_vector(rng, int(rng.integers(2, 150)), span_a)
        b = _concave_log_vector(rng, int(rng.integers(2, 150)), span_b) + rng.normal() * 500
        spans = _span(a, a.max()) + _span(b, b.max())
        taken.add("narrow" if spans <= _RANGE else "runs" if _wide_scales(_span(a, a.max()), _span(b, b.max()),
                                                                         min(len(a), len(b))) is None else "wide")
        want = np.full(len(a) + len(b) - 1, -np.inf)
        for k in range(len(want)):
            want[k] = logsumexp([a[j] + b[k - j] for j in range(len(a)) if 0 <= k - j < len(b)])
        assert _close(log_convolve(a, b), want, 1e-12)
    assert taken == {"narrow", "wide", "runs"}


def _dense(p: Potential, sizes: dict[int, int], scope: tuple[int, ...], length: int, offset: int) -> np.ndarray:
    """p as a (values of `scope`..., partial sums offset..offset+length-1) log-array, looped entry by entry."""
    out = np.full((*[sizes[v] for v in scope], length), -np.inf)
    for index in np.ndindex(*[sizes[v] for v in scope]):
        values = dict(zip(scope, index))
        row = p.table[tuple(values[v] for v in p.scope)]
        out[index][p.offset - offset:p.offset - offset + p.length] = row
    return out


@pytest.mark.parametrize("spread", [0.3, 80.0, 500.0])
def test_multiply_and_sum_out_equal_direct_sums(spread):
    rng = np.random.default_rng(7 + int(spread))
    sizes = {0: 2, 1: 3, 2: 2}
    size_list = [2, 3, 2]
    for _ in range(15):
        la, lb = int(rng.integers(1, 12)), int(rng.integers(1, 12))
        a = Potential((0, 1), rng.normal(size=(2, 3, la)) * spread, int(rng.integers(-3, 3)))
        b = Potential((2, 1), rng.normal(size=(2, 3, lb)) * spread, int(rng.integers(-3, 3)))
        if rng.random() < 0.5:
            a.table[rng.random(a.table.shape) < 0.3] = -np.inf
        product = multiply(a, b, size_list, LIMIT)
        scope, length, offset = (0, 1, 2), la + lb - 1, a.offset + b.offset
        want = np.full((2, 3, 2, length), -np.inf)
        for x0, x1, x2 in np.ndindex(2, 3, 2):
            for s in range(length):
                terms = [a.table[x0, x1, j] + b.table[x2, x1, s - j] for j in range(la) if 0 <= s - j < lb]
                want[x0, x1, x2, s] = logsumexp(terms)
        got = _dense(product, sizes, scope, length, offset)
        assert _close(got, want)
        contribution = rng.integers(-2, 4, size=3)
        summed = sum_out(product, 1, contribution, LIMIT)
        low = int(contribution.min())
        width = length + int(contribution.max()) - low
        direct = np.full((2, 2, width), -np.inf)
        for x0, x2 in np.ndindex(2, 2):
            for s in range(width):
                terms = [want[x0, a1, x2, s - (c - low)] for a1, c in enumerate(contribution) if 0 <= s - (c - low) < length]
                direct[x0, x2, s] = logsumexp(terms) if terms else -np.inf
        assert _close(_dense(summed, {0: 2, 2: 2}, (0, 2), width, offset + low), direct)


@pytest.mark.parametrize("zeros", [0.0, 0.2, 0.8])
def test_laplace_sums_equal_direct_sums(zeros):
    rng = np.random.default_rng(int(zeros * 10))
    for _ in range(40):
        m = int(rng.integers(2, 80))
        gap = float(rng.choice([1.0, 2.0, 0.25]))
        q = np.sort(rng.choice([np.arange(m) * gap, np.cumsum(rng.uniform(0.1, 3.0, size=m))]), axis=None)[:m]
        b = float(rng.choice([0.2, 1.0, 7.0]))
        logw = rng.normal(size=(3, m)) * float(rng.choice([1.0, 40.0, 400.0]))
        logw[rng.random(logw.shape) < zeros] = -np.inf
        logw[:, int(rng.integers(m))] = 0.0  # every row has a weight
        left, right, plus, minus = laplace_sums(logw, q, b)
        for t in range(3):
            for k in range(m):
                want_left = logsumexp(logw[t, :k + 1] - (q[k] - q[:k + 1]) / b)
                want_right = logsumexp(logw[t, k + 1:] - (q[k + 1:] - q[k]) / b) if k + 1 < m else -np.inf
                assert _close(np.array([left[t, k], right[t, k]]), np.array([want_left, want_right]), 1e-10)
            assert plus[t] == pytest.approx(logsumexp(logw[t] + (q - q[-1]) / b), abs=1e-10)
            assert minus[t] == pytest.approx(logsumexp(logw[t] + (q[0] - q) / b), abs=1e-10)


def test_laplace_mixtures_equal_direct_sums():
    """Rows within 600 nats (bit for bit the sums of `laplace_sums` added by logaddexp, as before), rows spanning
    600-1,400 nats with runs of zeros (the recursions scaled to e^(700 - log m), added in linear space), and rows
    past both (running log-sums), in one call, against the sums written out."""
    from ddpbayes.mechanisms.laplace.mixture import _recursive_rows, laplace_mixtures

    rng = np.random.default_rng(5)
    for m, gap, b in [(120, 1.0, 1.0), (90, 2.0, 0.5), (200, 1.0, 3.0)]:
        q = np.arange(m) * gap + 3.0
        rows = [_concave_log_vector(rng, m, span) for span in (40.0, 500.0, 800.0, 1200.0, 1300.0, 3000.0)]
        logw = np.stack(rows)
        logw[3, :4] = -np.inf  # zeros before the first weight: the right sums decay over them
        logw[4, 50:53] = -np.inf
        shift = _recursive_rows(logw, q, b)
        assert shift[0] == 0 and shift[2] > 0 and np.isnan(shift[5])
        levels, plus, minus = laplace_mixtures(logw, q, b)
        left, right, plus_sums, minus_sums = laplace_sums(logw, q, b)
        narrow = shift == 0
        assert np.array_equal(levels[narrow], np.logaddexp(left, right)[narrow])
        kernel = -np.abs(q[:, None] - q[None, :]) / b
        for t in range(len(logw)):
            assert _close(levels[t], logsumexp(logw[t][None, :] + kernel, axis=1), 1e-12)
            assert plus[t] == pytest.approx(logsumexp(logw[t] + (q - q[-1]) / b), abs=1e-12)
            assert minus[t] == pytest.approx(logsumexp(logw[t] + (q[0] - q) / b), abs=1e-12)
        assert np.array_equal(plus[narrow], plus_sums[narrow]) and np.array_equal(minus[narrow], minus_sums[narrow])


def test_laplace_sums_and_mixtures_at_steep_scales():
    """A level's decay gap/b of 50 to 800 nats on rows spanning over 600 (a reviewer's cases): past about 708
    nats r = e^{-gap/b} is subnormal, and a wide row's neighbour term, which may dominate a level's own, must not
    be lost (such rows take the running log-sums); the right sums' factor r is kept in log space where r times a
    sum leaves the normal doubles. Against the sums written out."""
    from ddpbayes.mechanisms.laplace.mixture import laplace_mixtures

    q = np.arange(3.0)
    for inverse_b in (50.0, 200.0, 700.0, 740.0, 800.0):
        b = 1 / inverse_b
        for row in ([0.0, -1300.0, -1350.0], [0.0, -1395.0, -1395.0], [-700.0, 0.0, -650.0]):
            logw = np.array([row])
            kernel = -np.abs(q[:, None] - q[None, :]) / b
            levels, plus, minus = laplace_mixtures(logw, q, b)
            assert _close(levels[0], logsumexp(logw[0][None, :] + kernel, axis=1), 1e-12)
            left, right, _, _ = laplace_sums(logw, q, b)
            for k in range(3):
                want_left = logsumexp(logw[0, :k + 1] - (q[k] - q[:k + 1]) / b)
                want_right = logsumexp(logw[0, k + 1:] - (q[k + 1:] - q[k]) / b) if k < 2 else -np.inf
                assert _close(np.array([left[0, k], right[0, k]]), np.array([want_left, want_right]), 1e-12)


def _log_count_law(n: int, stay: float, i: int) -> np.ndarray:
    """log P(X_i = t, count = s) of a symmetric binary chain (uniform start), by a forward-backward
    recursion in log space written here (the tails of this law reach far below 1e-308)."""
    log_p = np.log(np.array([[stay, 1 - stay], [1 - stay, stay]]))
    alpha = np.full((2, n + 1), -np.inf)  # log P(X_0..X_k, X_k = x, count so far = s)
    alpha[0, 0], alpha[1, 1] = np.log(0.5), np.log(0.5)
    for _ in range(1, i + 1):
        nxt = np.full((2, n + 1), -np.inf)
        for x in (0, 1):
            moved = np.logaddexp(alpha[0] + log_p[0, x], alpha[1] + log_p[1, x])
            nxt[x] = np.concatenate([[-np.inf], moved[:-1]]) if x else moved
        alpha = nxt
    beta = np.full((2, n + 1), -np.inf)  # log P(count of the days after k = s | X_k = x)
    beta[:, 0] = 0.0
    for _ in range(n - 1, i, -1):
        shifted = np.concatenate([[-np.inf], beta[1, :-1]])
        beta = np.stack([np.logaddexp(log_p[x, 0] + beta[0], log_p[x, 1] + shifted) for x in (0, 1)])
    out = np.full((2, n + 1), -np.inf)
    for t in (0, 1):
        for s in range(n + 1):
            out[t, s] = logsumexp(alpha[t, :s + 1] + beta[t, s::-1])
    return out


def _idp(log_law: np.ndarray, b: float) -> float:
    logw = log_law - logsumexp(log_law, axis=1, keepdims=True)
    s = np.arange(log_law.shape[1])
    kernel = np.concatenate([-np.abs(s[:, None] - s[None, :]) / b, [s / b], [-s / b]])
    log_l = logsumexp(logw[:, None, :] + kernel[None], axis=2)
    return float(np.abs(log_l[1] - log_l[0]).max())


@pytest.mark.parametrize("stay", [0.3, 0.5])
def test_chain_whose_tails_underflow(models_dir, stay):
    """n = 700 days with stay probability <= 0.5: P(count = 0) is below e^-700, past double precision's
    linear range; the sup sits at the extreme breakpoints, which depend on those tails."""
    n, b = 700, 1.0
    model = ddpbayes.load_model(models_dir / "markov_chain.py", {"n": n, "p_stay": stay})
    result = ddpbayes.audit(model, "count", "laplace", "idp", epsilon=1 / b, targets=[0, 350], information=None,
                            engine="structured")
    for target, got in zip([0, 350], [result.per_target[0], result.per_target[350]]):
        assert got == pytest.approx(_idp(_log_count_law(n, stay, target), b), abs=1e-9)


@pytest.mark.parametrize("spread", [0.3, 80.0, 500.0])
def test_weighted_sum_out_equals_direct_sums(spread):
    """A factor without partial sums times a message, summed over a slot (the chain's step), with the slot in
    both, in the factor alone, or in the message alone."""
    from ddpbayes.engines.structured.potential import weighted_sum_out

    rng = np.random.default_rng(11 + int(spread))
    sizes = [3, 2, 2]
    for factor_scope, message_scope in [((1, 0), (0,)), ((0, 1), (1, 2)), ((1, 2), (0, 1)), ((1,), (0,))]:
        for _ in range(5):
            length = int(rng.integers(1, 9))
            factor = Potential(factor_scope, rng.normal(size=(*[sizes[u] for u in factor_scope], 1)), 0)
            message = Potential(message_scope, rng.normal(size=(*[sizes[u] for u in message_scope], length)) * spread,
                                int(rng.integers(-2, 3)))
            if rng.random() < 0.4:
                message.table[rng.random(message.table.shape) < 0.3] = -np.inf
            v = 1
            contribution = rng.integers(-2, 3, size=sizes[v])
            got = weighted_sum_out(factor, message, v, contribution, sizes, LIMIT)
            kept = tuple(u for u in dict.fromkeys(message_scope + factor_scope) if u != v)
            low = int(contribution.min())
            width = length + int(contribution.max()) - low
            want = np.full((*[sizes[u] for u in kept], width), -np.inf)
            for index in np.ndindex(*[sizes[u] for u in kept]):
                values = dict(zip(kept, index))
                for s in range(width):
                    terms = []
                    for a in range(sizes[v]):
                        values[v] = a
                        j = s - (int(contribution[a]) - low)
                        if 0 <= j < length:
                            terms.append(factor.table[tuple(values[u] for u in factor_scope)][0]
                                         + message.table[tuple(values[u] for u in message_scope)][j])
                    want[index][s] = logsumexp(terms) if terms else -np.inf
            assert _close(_dense(got, dict(enumerate(sizes)), kept, width, message.offset + low), want)
