"""The joint output laws of issue #28 (report-noisy-max, exponential mechanism, sparse vector, RAPPOR,
truncated geometric): every expected value here comes from mathematics written in the test (closed forms,
scipy quad, brute-force sampling written independently), never from the code under test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from ddpbayes.errors import InputError
from ddpbayes.mechanisms import (REGISTRY, ExponentialMechanism, OneTimeRappor, Rappor, ReportNoisyMax,
                                 SparseVector, TruncatedGeometric, lookup)
from ddpbayes.mechanisms.quadrature import LAW_ERROR, laplace_log_pdf, log_integral
from ddpbayes.mechanisms.rappor import murmur3_32
from ddpbayes.model.domains import Finite, Interval
from ddpbayes.queries import parse_query

EPS = 0.1
K = 10


def laws():
    """(id, mechanism, answer rows) for every mechanism and variant (DP-Sniper's ε = 0.1 scales)."""
    rng = np.random.default_rng(7)
    five = np.vstack([np.ones(5), rng.uniform(-3, 3, (2, 5))])
    ten = np.vstack([np.ones(K), rng.uniform(-2, 4, (2, K))])
    out = [("rnm_laplace", ReportNoisyMax(2 / EPS), five),
           ("rnm_exponential", ReportNoisyMax(2 / EPS, "exponential"), five),
           ("rnm_small_scale", ReportNoisyMax(0.3), five), ("exponential", ExponentialMechanism(2.0), five),
           ("exponential_monotone", ExponentialMechanism(0.5, True), five)]
    for v in (1, 2, 4, 5, 6):
        out.append((f"svt{v}", SparseVector(1 / EPS, v, 1.0, 1), ten))
    out += [("svt1_c2", SparseVector(1.0, 1, 0.5, 2), ten[:, :6]),
            ("svt2_c2", SparseVector(1.0, 2, 0.5, 2), ten[:, :6]),
            ("svt4_c3", SparseVector(0.7, 4, 0.0, 3), ten[:, :6])]
    out += [("tgeo_ghosh", TruncatedGeometric(1 / EPS), np.array([[0.0], [2.0], [5.0]])),
            ("tgeo_ghosh_sharp", TruncatedGeometric(0.8, 7), np.array([[3.0], [7.0]])),
            ("tgeo_bv", TruncatedGeometric(1 / EPS, 5, "balcer_vadhan"), np.array([[0.0], [2.0], [5.0]])),
            ("tgeo_bv_coarse", TruncatedGeometric(1.0, 4, "balcer_vadhan"), np.array([[1.0], [4.0]]))]
    return out


LAWS = laws()
IDS = [name for name, _, _ in LAWS]


def test_every_new_kind_is_registered_and_joint():
    kinds = ("report_noisy_max", "exponential", "sparse_vector", "rappor", "one_time_rappor", "truncated_geometric")
    for kind in kinds:
        cls = REGISTRY[kind]
        assert cls.joint and cls.kind == kind and all(lookup(a) is cls for a in cls.aliases)
        assert set(cls.parameters) and all(len(v) == 3 for v in cls.parameters.values())


# ---- the shared quadrature
def test_quadrature_integrates_known_functions():
    breaks = np.array([[0.3, 1.0], [-2.0, 0.3]])
    values, err = log_integral(lambda v: laplace_log_pdf(v[..., None] - 0.3, 2.0), breaks, 2.0)
    assert np.allclose(values, 0.0, atol=1e-13) and err <= 1e-13
    # a Gaussian: its tails are not polynomials in u, the doubling still converges
    normal = lambda v: (-v ** 2 / 2 - 0.5 * np.log(2 * np.pi))[..., None]  # noqa: E731
    values, _ = log_integral(normal, np.array([[-1.0, 0.0, 1.0]]), 1.0)
    assert abs(values[0, 0]) < 1e-12
    # ∫_1^∞ e^{-3(v-1)} dv = 1/3 (right tail only), and two integrands at once
    values, _ = log_integral(lambda v: np.stack([-3 * (v - 1), -(v - 1)], axis=-1), np.array([[1.0]]), 1.0, left=False)
    assert np.allclose(values, [[math.log(1 / 3), 0.0]], atol=1e-13)
    # ∫ Φ'(v) Φ(v)^3 dv = 1/4 for Laplace(1), cut at 0
    lap = stats.laplace()
    values, _ = log_integral(lambda v: (lap.logpdf(v) + 3 * lap.logcdf(v))[..., None], np.array([[0.0]]), 1.0)
    assert abs(values[0, 0] - math.log(0.25)) < 1e-12


def test_quadrature_refuses_what_does_not_converge():
    with pytest.raises(InputError, match="did not converge"):  # a kink in the middle of a piece
        log_integral(lambda v: -np.abs(v - 0.123)[..., None] * 1e4, np.array([[-1.0, 1.0]]), 1.0, most=64)


# ---- every law is a probability distribution over its output space
@pytest.mark.parametrize("name,mech,answers", LAWS, ids=IDS)
def test_law_sums_to_one(name, mech, answers):
    outputs = mech.output_space(answers)
    assert outputs.ndim == 2 and len(outputs) == mech.output_count(answers)
    total = np.exp(mech.log_prob(outputs, answers)).sum(axis=0)
    assert mech.law_error in (0.0, LAW_ERROR)
    assert np.all(np.abs(total - 1) <= 1e-11 + 10 * mech.law_error), total


def distinct_rows(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(draws, axis=0, return_counts=True), by one integer per row: each column's values numbered
    (np.unique of the column), the numbers read as the digits of a mixed-radix code. np.unique on rows sorts
    them as bytes, ~1 s for 2e5 rows of SVT's outputs."""
    levels, digits = zip(*(np.unique(column, return_inverse=True) for column in draws.T))
    assert math.prod(len(v) for v in levels) < 2**62
    code = np.zeros(len(draws), dtype=np.int64)
    for values, digit in zip(levels, digits):
        code = code * len(values) + digit
    codes, counts = np.unique(code, return_counts=True)
    rows = np.empty((len(codes), draws.shape[1]))
    for j in reversed(range(draws.shape[1])):
        codes, digit = np.divmod(codes, len(levels[j]))
        rows[:, j] = levels[j][digit]
    return rows, counts


def test_distinct_rows_is_numpys_unique_on_rows():
    rng = np.random.default_rng(3)
    draws = rng.integers(-1, 3, size=(5000, 4)).astype(float) / 2
    want_rows, want_counts = np.unique(draws, axis=0, return_counts=True)
    rows, counts = distinct_rows(draws)
    assert np.array_equal(rows, want_rows) and np.array_equal(counts, want_counts)


@pytest.mark.parametrize("name,mech,answers", LAWS, ids=IDS)
def test_law_matches_brute_force_sampling(name, mech, answers):
    """2e5 draws from `sample` at one answer row: every output's frequency within 5 binomial sigmas."""
    n = 200_000
    a = answers[1:2]
    draws = mech.sample(np.repeat(a, n, axis=0), np.random.default_rng(2024))
    outputs = mech.output_space(a)
    p = np.exp(mech.log_prob(outputs, a))[:, 0]
    seen, counts = distinct_rows(draws)
    index = {tuple(y): g for g, y in enumerate(outputs)}
    assert all(tuple(y) in index for y in seen), "a draw outside the output space"
    freq = np.zeros(len(outputs))
    freq[[index[tuple(y)] for y in seen]] = counts / n
    band = 5 * np.sqrt(p * (1 - p) / n) + 2 / n
    assert np.all(np.abs(freq - p) <= band), np.max(np.abs(freq - p) / band)


# ---- report-noisy-max against independent integrals
@pytest.mark.parametrize("a0,a1,b", [(1.0, 0.0, 20.0), (0.0, 2.0, 20.0), (3.0, -1.5, 0.7), (0.2, 0.2, 1.0)])
def test_report_noisy_max_two_candidates_by_quad(a0, a1, b):
    lap = stats.laplace(scale=b)
    p0 = integrate.quad(lambda v: lap.pdf(v - a0) * lap.cdf(v - a1), -np.inf, np.inf, epsabs=1e-14, epsrel=1e-13,
                        points=None, limit=200)[0]
    got = np.exp(ReportNoisyMax(b).log_prob(np.array([[0.0], [1.0]]), np.array([[a0, a1]])))[:, 0]
    assert abs(got[0] - p0) < 1e-10 and abs(got.sum() - 1) < 1e-12


@pytest.mark.parametrize("a0,a1,b", [(1.0, 0.0, 20.0), (0.0, 2.0, 20.0), (3.0, -1.5, 0.7)])
def test_report_noisy_max_exponential_noise_closed_form(a0, a1, b):
    # E1 − E0 is Laplace(b): argmax = 0 iff E1 − E0 < a0 − a1 = d, so P = 1 − e^{−d/b}/2 (d ≥ 0), e^{d/b}/2 (d < 0)
    d = a0 - a1
    p0 = 1 - 0.5 * math.exp(-d / b) if d >= 0 else 0.5 * math.exp(d / b)
    got = np.exp(ReportNoisyMax(b, "exponential").log_prob(np.array([[0.0], [1.0]]), np.array([[a0, a1]])))[:, 0]
    assert abs(got[0] - p0) < 1e-12 and abs(got[1] - (1 - p0)) < 1e-12


def test_report_noisy_max_at_dp_snipers_pairs():
    """ReportNoisyMax1/2 (b = 2/ε) at DP-Sniper's 5-answer patterns: the exact leakage is at most ε, and at
    least DP-Sniper's certified lower bounds (0.0923, 0.0975)."""
    for noise, lower in (("laplace", 0.0923), ("exponential", 0.0975)):
        mech = ReportNoisyMax(2 / EPS, noise)
        worst = worst_ratio(mech, 5)
        assert lower <= worst <= EPS + 1e-9, (noise, worst)


# ---- the exponential mechanism
def test_exponential_mechanism_is_the_softmax_and_gumbel_argmax():
    a = np.array([[0.0, 1.0, 3.0, -2.0], [5.0, 5.0, 4.0, 0.0]])
    for mech, s in ((ExponentialMechanism(2.0), 2.0), (ExponentialMechanism(0.5, True), 0.5)):
        got = np.exp(mech.log_prob(np.arange(4.0)[:, None], a))
        want = np.exp(a / s) / np.exp(a / s).sum(axis=1, keepdims=True)
        assert np.allclose(got, want.T, rtol=1e-14, atol=0)
    n = 200_000
    gumbel = np.argmax(a[0] / 2.0 + np.random.default_rng(3).gumbel(size=(n, 4)), axis=1)
    freq = np.bincount(gumbel, minlength=4) / n
    p = np.exp(ExponentialMechanism(2.0).log_prob(np.arange(4.0)[:, None], a[:1]))[:, 0]
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n))
    assert ExponentialMechanism(2.0).dp_leakage(1.0) == 1.0 and ExponentialMechanism(2.0, True).dp_leakage(1.0) == 0.5


# ---- the sparse vector technique
def test_svt5_against_the_laplace_cdf_closed_form():
    a = np.array([[1.0, 3.0, -0.5, 2.0]])
    mech = SparseVector(1.5, 5, 0.7)
    b = 2 * 1.5
    rho = stats.laplace(scale=b)
    outputs = ((np.arange(16)[:, None] >> np.arange(4)) & 1).astype(float)
    got = np.exp(mech.log_prob(outputs, a))[:, 0]
    cut = a[0] - 0.7
    for y, p in zip(outputs, got):  # TRUE iff ρ ≤ a_i − T: ρ in (max over FALSE, min over TRUE]
        hi = min([c for c, t in zip(cut, y) if t == 1], default=np.inf)
        lo = max([c for c, t in zip(cut, y) if t == 0], default=-np.inf)
        assert abs(p - max(rho.cdf(hi) - rho.cdf(lo), 0.0)) < 1e-15
    assert len(mech.output_space(a)) == 5 and abs(got.sum() - 1) < 1e-14


@pytest.mark.parametrize("variant", [1, 4, 6])
def test_svt_one_query_by_quad(variant):
    mech = SparseVector(1.3, variant, 0.4, 1)
    b_rho, b_nu = {1: (2.6, 5.2), 4: (5.2, 5.2 / 3), 6: (2.6, 2.6)}[variant]
    rho, nu = stats.laplace(scale=b_rho), stats.laplace(scale=b_nu)
    for a in (0.0, 2.5, -4.0):
        # P(a + ν ≥ T + ρ) = ∫ f_ρ(r) P(ν ≥ T + r − a) dr
        p = integrate.quad(lambda r: rho.pdf(r) * nu.sf(0.4 + r - a), -np.inf, np.inf, points=None, limit=200,
                           epsabs=1e-14, epsrel=1e-13)[0]
        got = np.exp(mech.log_prob(np.array([[1.0], [0.0]]), np.array([[a]])))[:, 0]
        assert abs(got[0] - p) < 1e-10 and abs(got.sum() - 1) < 1e-12


def test_svt2_redraws_the_threshold_noise_after_each_true():
    """Alg. 2 with c = 2 (s = 1: ρ ~ Lap(4), ν ~ Lap(8)), two queries: y = (1, 1) is a product of two one-ρ
    integrals (ρ redrawn after the first TRUE), y = (0, 1) one integral over a shared ρ."""
    mech = SparseVector(1.0, 2, 0.5, 2)
    rho, nu = stats.laplace(scale=4.0), stats.laplace(scale=8.0)
    a = np.array([[1.0, -0.5]])

    def quad(g):
        return integrate.quad(lambda r: rho.pdf(r) * g(r), -np.inf, np.inf, limit=200, epsabs=1e-14, epsrel=1e-13)[0]

    p11 = quad(lambda r: nu.sf(0.5 + r - 1.0)) * quad(lambda r: nu.sf(0.5 + r + 0.5))
    p01 = quad(lambda r: nu.cdf(0.5 + r - 1.0) * nu.sf(0.5 + r + 0.5))
    p10 = quad(lambda r: nu.sf(0.5 + r - 1.0)) * quad(lambda r: nu.cdf(0.5 + r + 0.5))
    got = np.exp(mech.log_prob(np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]]), a))[:, 0]
    assert np.allclose(got, [p11, p01, p10], rtol=1e-9, atol=0)


def patterns(k):
    """DP-Sniper's (StatDP's) input pairs (a1, a2) for k answers: a1 = [1]*k against each a2, and the X shape."""
    h = k // 2
    rows = [[0] + [1] * (k - 1), [2] + [1] * (k - 1), [2] + [0] * (k - 1), [0] + [2] * (k - 1),
            [2] * h + [0] * (k - h), [2] * k, [0] * k]
    pairs = [(np.ones(k), np.array(r, float)) for r in rows]
    return pairs + [(np.array([1.0] * h + [0.0] * (k - h)), np.array([0.0] * h + [1.0] * (k - h)))]


def worst_ratio(mech, k) -> float:
    """max over DP-Sniper's pairs and the outputs of |log p(y|a1) − log p(y|a2)| (inf where one is 0)."""
    worst = 0.0
    for a1, a2 in patterns(k):
        a = np.vstack([a1, a2])
        lp = mech.log_prob(mech.output_space(a), a)
        with np.errstate(invalid="ignore"):
            worst = max(worst, float(np.nanmax(np.abs(lp[:, 0] - lp[:, 1]))))
    return worst


@pytest.mark.parametrize("variant,threshold", [(1, 1.0), (1, 0.5), (2, 1.0), (4, 1.0), (5, 1.0), (6, 1.0)])
def test_svt_at_dp_snipers_pairs(variant, threshold):
    """K = 10, ε = 0.1, c = 1 (DP-Sniper's exp_default; its SVT1 uses T = 0.5): the private variants stay within
    their ε, the non-private ones exceed it (5 without bound)."""
    mech = SparseVector(1 / EPS, variant, threshold, 1)
    worst = worst_ratio(mech, K)
    if variant in (1, 2):
        assert worst <= EPS + 1e-9
    elif variant == 4:
        assert worst <= (1 + 6) / 4 * EPS + 1e-9
    elif variant == 5:
        assert worst == np.inf
    else:
        assert worst > EPS
    assert (mech.dp_leakage(1.0) == np.inf) == (variant in (5, 6))


def test_svt_output_counts():
    a = np.zeros((1, K))
    assert SparseVector(1.0, 1, cutoff=1).output_count(a) == 11
    assert SparseVector(1.0, 2, cutoff=2).output_count(a) == 1 + 10 + 45
    assert SparseVector(1.0, 6).output_count(a) == 1024
    with pytest.raises(InputError, match="max-states"):
        SparseVector(1.0, 6).output_space(np.zeros((1, 23)))


# ---- RAPPOR
def test_murmur3_test_vectors():
    assert murmur3_32(b"foo", 0) == -156908512 and murmur3_32(b"hello", 0) == 613153351
    assert murmur3_32(b"", 0) == 0 and murmur3_32(b"", 1) == 0x514E28B7
    assert murmur3_32(b"The quick brown fox jumps over the lazy dog", 0x9747B28C) == 0x2FA826CD
    assert murmur3_32(b"aaaa", 0x9747B28C) == 0x5A97808A
    assert murmur3_32(b"abc", 0) == -1277324294  # 0xB3DD93FA as a signed int32


def test_rappor_bloom_bits():
    """Bits mmh3.hash(str(v), seed=i) % 20, i < 4 (values checked against mmh3 5.3.1)."""
    bloom = Rappor().bloom(np.array([0, 1, 2]))
    assert [sorted(np.flatnonzero(row)) for row in bloom] == [[0, 11, 18], [3, 10, 13], [7, 10, 11, 19]]


@pytest.mark.parametrize("mech", [Rappor(), OneTimeRappor(), Rappor(3, 12, 0.5, 0.25, 0.8)],
                         ids=["full", "one_time", "other"])
def test_rappor_bits_are_independent(mech):
    a = np.array([[1.0], [2.0], [-7.0]])
    f, p, q = mech.f, mech.p, mech.q
    one_time = isinstance(mech, OneTimeRappor)
    p_one = {1: 1 - f / 2, 0: f / 2} if one_time else {1: (1 - f / 2) * q + f / 2 * p, 0: f / 2 * q + (1 - f / 2) * p}
    rng = np.random.default_rng(5)
    y = (rng.random((50, mech.filter_size)) < 0.5).astype(float)
    got = mech.log_prob(y, a)
    for r, v in enumerate((1, 2, -7)):
        bits = {murmur3_32(str(v).encode(), i) % mech.filter_size for i in range(mech.hashes)}
        prob = [[p_one[j in bits] if yj else 1 - p_one[j in bits] for j, yj in enumerate(row)] for row in y]
        assert np.allclose(got[:, r], np.log(prob).sum(axis=1), rtol=1e-13)
    # the output space: the varying bits enumerated, the others fixed, so the law sums to the constant bits' factor
    space = mech.output_space(a)
    total = np.exp(mech.log_prob(space, a)).sum(axis=0)
    assert np.allclose(total, total[0], rtol=1e-12) and len(space) == mech.output_count(a)
    # sampling: every bit's frequency
    n = 200_000
    draws = mech.sample(np.full((n, 1), 2.0), np.random.default_rng(9))
    bits = {murmur3_32(b"2", i) % mech.filter_size for i in range(mech.hashes)}
    want = np.array([p_one[j in bits] for j in range(mech.filter_size)])
    assert np.all(np.abs(draws.mean(axis=0) - want) <= 5 * np.sqrt(want * (1 - want) / n))
    # and one pair of bits jointly (independence)
    both = np.mean(draws[:, 0] * draws[:, 3])
    assert abs(both - want[0] * want[3]) <= 5 * math.sqrt(want[0] * want[3] / n)


def test_rappor_epsilons():
    f, p, q, h = 0.75, 0.45, 0.55, 4
    qs, ps = 0.5 * f * (p + q) + (1 - f) * q, 0.5 * f * (p + q) + (1 - f) * p
    assert abs(Rappor().dp_leakage(1.0) - h * math.log(qs * (1 - ps) / (ps * (1 - qs)))) < 1e-12
    assert abs(OneTimeRappor().dp_leakage(1.0) - 2 * h * math.log((1 - 0.95 / 2) / (0.95 / 2))) < 1e-12
    assert abs(OneTimeRappor.build(parse_query("sum"), [Finite(range(5))], epsilon=0.8).dp_leakage(1.0) - 0.8) < 1e-12


# ---- truncated geometric
def test_truncated_geometric_ghosh_closed_form():
    alpha, n = math.exp(-0.5), 4
    mech = TruncatedGeometric(2.0, n)
    for a in range(n + 1):
        want = [alpha ** a / (1 + alpha)] + [(1 - alpha) / (1 + alpha) * alpha ** abs(y - a) for y in range(1, n)] \
            + [alpha ** (n - a) / (1 + alpha)]
        assert np.allclose(np.exp(mech.log_prob(np.arange(n + 1.0)[:, None], np.array([[a]])))[:, 0], want, rtol=1e-14)


def test_truncated_geometric_balcer_vadhan_integers():
    """DP-Sniper's parameters (ε = 0.1, n = 5: k = 3, d = 17·9^4): pmf in exact fractions, and the leakage
    between neighbouring counts is ln(1 + 2^-3) as Thm 4.7 states."""
    from fractions import Fraction
    mech = TruncatedGeometric(1 / EPS, 5, "balcer_vadhan")
    k, n = 3, 5
    d = (2 ** (k + 1) + 1) * (2 ** k + 1) ** (n - 1)
    for c in range(n + 1):
        big_f = [2 ** (k * (c - z)) * (2 ** k + 1) ** (n - (c - z)) if z < c else
                 (d - 2 ** (k * (z - c + 1)) * (2 ** k + 1) ** (n - 1 - (z - c)) if z < n else d) for z in range(n + 1)]
        pmf = [Fraction(big_f[0], d)] + [Fraction(big_f[z] - big_f[z - 1], d) for z in range(1, n + 1)]
        got = np.exp(mech.log_prob(np.arange(6.0)[:, None], np.array([[c]])))[:, 0]
        assert np.allclose(got, [float(x) for x in pmf], rtol=1e-14)
    table = mech.log_prob(np.arange(6.0)[:, None], np.arange(6.0)[:, None])
    worst = np.abs(np.diff(table, axis=1)).max()
    assert abs(worst - math.log1p(2 ** -3)) < 1e-12 and mech.dp_leakage(1.0) == math.log1p(2 ** -3)
    assert worst >= 0.1156  # DP-Sniper's certified lower bound


def test_truncated_geometric_refuses_answers_outside_0_n():
    for bad in (6.0, -1.0, 2.5):
        with pytest.raises(InputError, match="count in 0..5"):
            TruncatedGeometric(1.0).log_prob(np.array([[0.0]]), np.array([[bad]]))


# ---- building from flags
IDENTITY, BITS = parse_query("identity"), [Finite([0, 1])] * 4


def test_build_from_epsilon_and_params():
    m = ReportNoisyMax.build(IDENTITY, BITS, epsilon=0.5, params={"noise": "exponential"})
    assert (m.scale, m.noise) == (4.0, "exponential") and m.describe()["epsilon"] == 0.5
    assert ReportNoisyMax.build(IDENTITY, BITS, epsilon=0.5, params={"sensitivity": "3"}).scale == 12.0
    assert ExponentialMechanism.build(IDENTITY, BITS, epsilon=1.0, params={"monotone": "true"}).scale == 1.0
    s = SparseVector.build(IDENTITY, BITS, epsilon=0.1, params={"variant": "2", "cutoff": "2", "threshold": "0.5"})
    assert (s.variant, s.cutoff, s.threshold, s.rho_scale, s.nu_scale) == (2, 2, 0.5, 40.0, 80.0)
    t = TruncatedGeometric.build(parse_query("sum"), BITS, scale=2.0, params={"n": "4"})
    assert t.n == 4 and t.scale == 2.0 and t.describe()["kind"] == "truncated_geometric"
    r = Rappor.build(parse_query("sum"), [Finite(range(10))], params={"f": "0.5", "hashes": "2"})
    assert (r.f, r.hashes) == (0.5, 2)


@pytest.mark.parametrize("build,match", [
    (lambda: ReportNoisyMax.build(parse_query("sum"), BITS, epsilon=0.1), "at least 2 answers"),
    (lambda: ReportNoisyMax.build(IDENTITY, BITS, epsilon=0.1, params={"nois": "x"}), "no parameter 'nois'"),
    (lambda: ReportNoisyMax.build(IDENTITY, BITS, epsilon=0.1, params={"noise": "gauss"}), "laplace or exponential"),
    (lambda: ReportNoisyMax.build(IDENTITY, BITS, epsilon=0.1, scale=2.0), "not both"),
    (lambda: ReportNoisyMax.build(IDENTITY, [Interval(0, math.inf)] * 3, epsilon=0.1), "--mechanism-param sensitivity="),
    (lambda: ReportNoisyMax.build(IDENTITY, BITS, epsilon=-1.0), "epsilon"),
    (lambda: ReportNoisyMax.build(IDENTITY, BITS, scale=math.inf), "scale"),
    (lambda: SparseVector.build(IDENTITY, BITS, scale=1.0, params={"cutoff": "0"}), "positive integer"),
    (lambda: SparseVector.build(IDENTITY, BITS, scale=1.0, params={"variant": "7"}), "1, 2, 3, 4, 5, 6"),
    (lambda: SparseVector.build(IDENTITY, BITS, scale=1.0, params={"threshold": "nan"}), "finite number"),
    (lambda: SparseVector.build(IDENTITY, BITS, scale=1.0, params={"cutoff": "1.5"}), "an integer"),
    (lambda: ExponentialMechanism.build(IDENTITY, BITS, scale=1.0, params={"monotone": "maybe"}), "true or false"),
    (lambda: Rappor.build(parse_query("sum"), BITS, epsilon=1.0), "not by --scale or --epsilon"),
    (lambda: Rappor.build(IDENTITY, BITS, params={"f": "1.5"}), r"\[0, 1\]"),
    (lambda: Rappor.build(IDENTITY, BITS), "exactly 1 answer"),
    (lambda: OneTimeRappor.build(parse_query("sum"), BITS, epsilon=1.0, params={"f": "0.5"}), "not both"),
    (lambda: TruncatedGeometric.build(parse_query("sum"), BITS, scale=1.0, params={"variant": "x"}), "ghosh"),
    (lambda: TruncatedGeometric.build(parse_query("sum"), BITS, scale=1.0, params={"n": "-2"}), "positive integer"),
    (lambda: TruncatedGeometric.build(parse_query("sum"), BITS, scale=1.0, params={"n": "3"}), "ranges over 0..4"),
    (lambda: TruncatedGeometric.build(parse_query("mean"), BITS, scale=1.0), "integer count"),
    (lambda: Rappor.build(parse_query("sum"), [Interval(0, 3)]), "integer value"),
])
def test_bad_parameters_are_one_line_input_errors(build, match):
    with pytest.raises(InputError, match=match) as err:
        build()
    assert "\n" not in str(err.value)


def test_joint_mechanisms_refuse_a_per_coordinate_kernel_and_describe_themselves():
    for _, mech, answers in LAWS:
        with pytest.raises(InputError, match="joint output law"):
            mech.log_kernel(np.array([0.0]))
        d = mech.describe()
        assert d["kind"] == mech.kind and mech.dp_leakage(1.0) > 0 and mech.dp_leakage(0.0) == 0.0
    value, reason = SparseVector(10.0, 6).dp_bound(IDENTITY, 0, BITS)
    assert value == 4 * 1 / 20.0 and "K" in reason
    exact, why = SparseVector(10.0, 6).tuple_dp_leakage(IDENTITY, 0, BITS)  # finite domains: computed exactly
    assert 0 < exact <= value and why is None
