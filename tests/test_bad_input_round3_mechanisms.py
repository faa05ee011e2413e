"""Issue #40, "Bad input, round three", items 17, 18 and 21 on the mechanisms: degenerate RAPPOR bit
probabilities give the exact answer (inf, or the large finite value), overflowing parameters are refused on
one line (exit 2), and the listed commands leave stderr empty. Every expected number is derived here (exact
rational arithmetic, or an enumeration written here), never by the engine under test."""

from __future__ import annotations

import itertools
import json
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

import ddpbayes
from ddpbayes.cli.main import main
from ddpbayes.mechanisms.rappor import murmur3_32  # the hash itself: checked against mmh3's test vectors elsewhere

# ----------------------------------------------------------------------------- RAPPOR: brute force


def household_law(n: int) -> dict[tuple[int, ...], Fraction]:
    """models/household.py (exposure 1/5, infection 4/5 if exposed else 1/10) enumerated exactly."""
    law = {}
    for x in itertools.product((0, 1), repeat=n):
        law[x] = sum(ph * math.prod(rate if v else 1 - rate for v in x)
                     for ph, rate in ((Fraction(1, 5), Fraction(4, 5)), (Fraction(4, 5), Fraction(1, 10))))
    return law


def bloom(value: int, hashes: int, size: int) -> set[int]:
    """RAPPOR step 1: the bits murmur3_32(str(v), seed=i) mod m, i < h."""
    return {murmur3_32(str(value).encode(), i) % size for i in range(hashes)}


def bit_one(set_bit: bool, f: Fraction, p: Fraction, q: Fraction) -> Fraction:
    """P(report bit 1 | Bloom bit): the permanent response (keep w.p. 1 − f, else a fair coin) then the
    instantaneous one (1 w.p. q from a 1, p from a 0), written from the paper's steps 2–3."""
    permanent_one = (1 - f) * (1 if set_bit else 0) + f / 2
    return permanent_one * q + (1 - permanent_one) * p


def rappor_idp(n: int, f: float, p: float, q: float, hashes: int, size: int) -> float:
    """leak(0, ∅) of the count of the household under RAPPOR, by exact rational arithmetic over every state
    and every one of the 2^m reports: max over y and t ≠ t' of log L(y | t) / L(y | t'), inf when only t
    can give y. One-time RAPPOR is p = 0, q = 1."""
    f, p, q = Fraction(f), Fraction(p), Fraction(q)
    law = household_law(n)
    p_t = [sum(w for x, w in law.items() if x[0] == t) for t in (0, 1)]
    ones = {c: [bit_one(j in bloom(c, hashes, size), f, p, q) for j in range(size)] for c in range(n + 1)}
    best = -math.inf
    for y in itertools.product((0, 1), repeat=size):
        given = {c: math.prod(o if yj else 1 - o for o, yj in zip(one, y)) for c, one in ones.items()}  # p(y | c)
        like = [Fraction(0), Fraction(0)]
        for x, w in law.items():
            like[x[0]] += w * given[sum(x)]
        for t, u in ((0, 1), (1, 0)):
            a, b = like[t] / p_t[t], like[u] / p_t[u]
            if a > 0:
                best = max(best, math.inf if b == 0 else _log(a / b))
    return best


def _log(r: Fraction) -> float:
    return math.log(r.numerator) - math.log(r.denominator)


def one_time_f(epsilon: float, hashes: int) -> float:
    """The f whose ε_∞ = 2h ln((1 − f/2)/(f/2)) is ε (the paper's ε_∞ solved for f)."""
    return 2 / (1 + math.exp(epsilon / (2 * hashes)))


SMALL = {"hashes": "2", "filter_size": "6"}
RAPPOR_CASES = [  # (kind, params, epsilon, f, p, q): the degenerate cases on a 6-bit filter
    ("one_time_rappor", {"f": "0"}, None, 0.0, 0.0, 1.0),
    ("one_time_rappor", {"f": "1e-17"}, None, 1e-17, 0.0, 1.0),
    ("one_time_rappor", {}, 300.0, one_time_f(300.0, 2), 0.0, 1.0),
    ("rappor", {"f": "0", "p": "0", "q": "1"}, None, 0.0, 0.0, 1.0),
    ("rappor", {"f": "1e-17", "p": "0", "q": "1"}, None, 1e-17, 0.0, 1.0),
    ("rappor", {"f": "0", "p": "1e-300", "q": "0.5"}, None, 0.0, 1e-300, 0.5),
]


@pytest.mark.parametrize("engine", ["exact", "structured"])
@pytest.mark.parametrize("kind,params,epsilon,f,p,q", RAPPOR_CASES)
def test_degenerate_rappor_bits_are_exact(household, engine, kind, params, epsilon, f, p, q):
    """Before: 1 − f/2 rounded to 1, 0 · log 0 = nan in the bit likelihoods, leakage 0 and PASS."""
    want = rappor_idp(4, f, p, q, 2, 6)
    assert want > 30  # the cases are the degenerate ones: a report bit (nearly) certain
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = ddpbayes.audit(household(), "count", kind, "idp", epsilon=epsilon, params={**SMALL, **params},
                           targets=[0], engine=engine, information=None)
    assert r.leakage == want if math.isinf(want) else r.leakage == pytest.approx(want, rel=1e-12)


def test_one_time_rappor_classic_epsilon_at_tiny_f():
    """ε_∞ = 2h ln((1 − f/2)/(f/2)) stays finite and exact when 1 − f/2 rounds to 1."""
    from ddpbayes.mechanisms import OneTimeRappor, Rappor

    f = Fraction(1e-17)
    want = 2 * 4 * _log((1 - f / 2) / (f / 2))
    assert OneTimeRappor(f=1e-17).dp_leakage(1.0) == pytest.approx(want, rel=1e-14)
    p, q = Fraction(1, 4), Fraction(3, 4)  # ε_1 = h ln(q*(1 − p*) / (p*(1 − q*))), q* = P(1 | B = 1), p* = P(1 | B = 0)
    q_star, p_star = bit_one(True, f, p, q), bit_one(False, f, p, q)
    want_1 = 4 * _log(q_star * (1 - p_star) / (p_star * (1 - q_star)))
    assert Rappor(f=1e-17, p=0.25, q=0.75).dp_leakage(1.0) == pytest.approx(want_1, rel=1e-14)
    assert Rappor(f=1e-17, p=0.0, q=1.0).dp_leakage(1.0) == pytest.approx(want, rel=1e-14)  # one-time RAPPOR's
    assert math.isinf(OneTimeRappor(f=0.0).dp_leakage(1.0)) and math.isinf(Rappor(f=0.0, p=0, q=1).dp_leakage(1.0))


def household_idp_default_filter(f: float) -> float:
    """leak(0, ∅) of models/household.py (n = 4) under one-time RAPPOR with the default filter (h = 4,
    m = 20), enumerating all 2^20 reports: log P(y | count c) = d log(f/2) + (m − d) log(1 − f/2), d the
    number of bits where y and the Bloom filter of c differ (d = 0 only, at f = 0)."""
    law = household_law(4)
    counts = np.arange(5)
    masks = np.array([sum(1 << j for j in bloom(c, 4, 20)) for c in counts], dtype=np.int64)
    diff = np.bitwise_count(np.arange(1 << 20, dtype=np.int64)[:, None] ^ masks[None, :]).astype(float)  # (Y, 5)
    flip = math.log(f / 2) if f > 0 else -math.inf
    with np.errstate(invalid="ignore"):
        log_y = np.where(diff > 0, diff * flip, 0.0) + (20 - diff) * math.log1p(-f / 2)
    top = log_y.max(axis=1, keepdims=True)  # log Σ_c w_c e^{log_y} = top + log Σ_c w_c e^{log_y − top}
    with np.errstate(invalid="ignore"):  # a report no count gives: −inf − (−inf), nan, dropped below
        kernel = np.exp(log_y - top)
    log_l = []
    for t in (0, 1):
        w = np.array([float(sum(v for x, v in law.items() if x[0] == t and sum(x) == c)) for c in counts])
        with np.errstate(divide="ignore"):
            log_l.append(np.log(kernel @ (w / w.sum())))
    with np.errstate(invalid="ignore"):
        ratio = np.abs(log_l[1] - log_l[0])  # the common e^{top} cancels; nan where neither t gives y
    return float(np.nanmax(ratio))


@pytest.mark.parametrize("flag,want_f", [
    (["--mechanism-param", "f=0"], 0.0),
    (["--epsilon", "300"], one_time_f(300.0, 4)),
    pytest.param(["--epsilon", "400"], one_time_f(400.0, 4), marks=pytest.mark.slow),
    pytest.param(["--mechanism-param", "f=1e-17"], 1e-17, marks=pytest.mark.slow)])
def test_cli_one_time_rappor_degenerate(capsys, models_dir, flag, want_f):
    """The issue's commands: the truth (∞, 187.4, 249.9, ...) and FAIL against claim 1, stderr empty."""
    want = household_idp_default_filter(want_f)
    code = main(["audit", str(models_dir / "household.py"), "--query", "count", "--mechanism", "one_time_rappor",
                 *flag, "--notion", "idp", "--target", "0", "--claim", "1", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 1 and err == ""
    data = json.loads(out)
    assert data["verdict"] == "fail"
    got = float(data["leakage"])
    assert got == want if math.isinf(want) else got == pytest.approx(want, rel=1e-12)
    if flag[0] == "--epsilon":
        assert got == pytest.approx({"300": 187.4, "400": 249.9}[flag[1]], abs=0.05)


def test_report_on_degenerate_rappor(tmp_path, models_dir):
    """A mechanisms report runs the same code path: f = 0 leaks inf, --epsilon 300 its exact value."""
    from ddpbayes.reports import build_report

    cases = "".join(f"""
[[case]]
label = "{label}"
model = "{models_dir / 'household.py'}"
query = "count"
mechanism = "one_time_rappor"
{setting}
mechanism_params = {{ hashes = 2, filter_size = 6{extra} }}
notions = ["idp"]
""" for label, setting, extra in (("f0", "", ", f = 0"), ("eps300", "epsilon = 300.0", "")))
    path = tmp_path / "spec.toml"
    path.write_text('notions = ["idp"]\n' + cases, encoding="utf-8")
    data = build_report(path, tmp_path / "out", progress=False)
    leak = [case["leakage"]["idp"] for case in data["cases"]]
    assert math.isinf(float(leak[0]))
    assert float(leak[1]) == pytest.approx(rappor_idp(4, one_time_f(300.0, 2), 0.0, 1.0, 2, 6), rel=1e-12)


def test_one_time_rappor_epsilon_beyond_a_double(capsys, models_dir):
    """--epsilon 1e300: f = 2/(1 + e^{ε/2h}) is below every double. Before: OverflowError, exit 3."""
    code = main(["audit", str(models_dir / "household.py"), "--query", "count", "--mechanism", "one_time_rappor",
                 "--epsilon", "1e300", "--notion", "idp", "--claim", "1"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and "ε is at most" in err
    # the largest ε that is taken: f at the smallest normal double
    most = 2 * 4 * math.log(2 / np.finfo(float).tiny - 1)
    assert f"{most:.6g}" in err


# ----------------------------------------------------------------------------- Balcer & Vadhan at large n


def balcer_vadhan_law(k: int, n: int, c: int) -> list[Fraction]:
    """Balcer & Vadhan 2018 Alg. 4.8 written from the paper: P(z | c) = (F(z) − F(z − 1))/d in exact integers,
    d = (2^{k+1} + 1)(2^k + 1)^{n−1}."""
    d = (2 ** (k + 1) + 1) * (2 ** k + 1) ** (n - 1)
    big_f = [2 ** (k * (c - z)) * (2 ** k + 1) ** (n - (c - z)) if z < c else
             (d - 2 ** (k * (z - c + 1)) * (2 ** k + 1) ** (n - 1 - (z - c)) if z < n else d) for z in range(n + 1)]
    return [Fraction(big_f[0], d)] + [Fraction(big_f[z] - big_f[z - 1], d) for z in range(1, n + 1)]


@pytest.mark.parametrize("scale,k", [(1.0, 1), (100.0, 6), (0.2, 0)])
def test_balcer_vadhan_law_at_n_40(scale, k):
    """Before: OverflowError (a numpy int64 count mixed with the big integers), exit 3."""
    from ddpbayes.mechanisms import TruncatedGeometric

    mech = TruncatedGeometric(scale, 40, "balcer_vadhan")
    assert mech.k == k == max(0, math.ceil(math.log(2 * scale)))
    counts = np.array([[0.0], [3.0], [20.0], [39.0], [40.0]])
    got = mech.log_prob(np.arange(41.0)[:, None], counts)
    for r, c in enumerate((0, 3, 20, 39, 40)):
        assert np.allclose(got[:, r], [_log(p) for p in balcer_vadhan_law(k, 40, c)], rtol=0, atol=1e-12)


def test_cli_balcer_vadhan_n_40(capsys, models_dir):
    """The issue's command: leak(0, ∅) of the household's count (n = 4 members, counts 0..4) released in
    0..40, from the integer law and the household enumerated exactly."""
    law = household_law(4)
    p_t = [sum(w for x, w in law.items() if x[0] == t) for t in (0, 1)]
    table = {c: balcer_vadhan_law(1, 40, c) for c in range(5)}  # --epsilon 1, Δ = 1: scale 1, k = ⌈ln 2⌉ = 1
    like = [[sum(w * table[sum(x)][z] for x, w in law.items() if x[0] == t) / p_t[t] for z in range(41)]
            for t in (0, 1)]
    want = max(abs(_log(a / b)) for a, b in zip(*like))
    code = main(["audit", str(models_dir / "household.py"), "--query", "count", "--mechanism", "truncated_geometric",
                 "--mechanism-param", "variant=balcer_vadhan", "--mechanism-param", "n=40", "--epsilon", "1",
                 "--notion", "idp", "--target", "0", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert json.loads(out)["leakage"] == pytest.approx(want, rel=1e-12)


# ----------------------------------------------------------------------------- quadrature: memory, reasons, warnings


def household_cli(*args: str) -> list[str]:
    return ["audit", "household", "--query", "identity", *args, "--notion", "idp", "--target", "0"]


def test_numerical_svt_quadrature_is_bounded_before_allocating(capsys):
    """cutoff = 80 built a (16, 12288, 625) quadrature array (938 MiB; 3.3 GB in all): the 625 outputs share 16
    patterns, whose integrals are now computed once each, and the nodes' cells are checked against --max-states
    before each doubling."""
    code = main([*household_cli("--mechanism", "numerical_sparse_vector", "--mechanism-param", "cutoff=80",
                                "--epsilon", "1"), "--max-states", "20000"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "the output law's quadrature" in err and "over the limit of 20,000" in err


def test_numerical_svt_law_at_cutoff_80():
    """P(pattern | a) = ∫ Lap_{3s}(ρ) Π_TRUE P(ν > T + ρ − a_i) Π_FALSE P(ν ≤ T + ρ − a_i) dρ, ν ~ Lap(6cs) (Wang
    et al. 2019), by scipy's adaptive quadrature, against the mechanism's law with the TRUE values' Laplace(3cs)
    densities taken off. The noise scales are 160 times apart: the Gauss-Legendre sums reach their round-off
    floor (a few 1e-13) before 1e-13, which is now taken as converged within the stated 1e-12."""
    from scipy import integrate, stats

    from ddpbayes.mechanisms.numerical_svt import NumericalSparseVector

    c, s, thr = 80, 1.0, 1.0
    mech = NumericalSparseVector(s, 1, thr, c)
    a = np.array([[0.0, 1.0, 1.0, 0.0]])
    rho, nu = stats.laplace(scale=3 * s), stats.laplace(scale=6 * c * s)
    patterns = np.array([(0.0, 0.0, 0.0, 0.0), (1.0, 0.0, 1.0, 0.0), (0.0, 1.0, 1.0, 1.0)])
    values = np.where(patterns == 1, a, 0.0)  # each TRUE value at its answer: Lap(3cs) density 1/(6cs) there
    got = mech.log_prob(np.concatenate([patterns, values], axis=1), a)[:, 0] - patterns.sum(axis=1) * math.log(
        1 / (6 * c * s))
    for pattern, value in zip(patterns, got):
        def f(r, pattern=pattern):
            x = thr + r - a[0]
            return rho.pdf(r) * math.prod(nu.sf(xi) if p else nu.cdf(xi) for p, xi in zip(pattern, x))
        pieces = [(-np.inf, -1.0), (-1.0, 0.0), (0.0, np.inf)]  # the kinks: ρ = a_i − T and 0
        want = sum(integrate.quad(f, lo, hi, epsabs=0, epsrel=1e-11, limit=200)[0] for lo, hi in pieces)
        assert value == pytest.approx(math.log(want), abs=1e-9)


@pytest.mark.slow
def test_cli_numerical_svt_cutoff_80(capsys):
    code = main(household_cli("--mechanism", "numerical_sparse_vector", "--mechanism-param", "cutoff=80",
                              "--epsilon", "1"))
    out, err = capsys.readouterr()
    assert code == 0 and err == "" and "leakage" in out


@pytest.mark.parametrize("args,reason", [
    (("--mechanism", "sparse_vector", "--mechanism-param", "cutoff=1000000000", "--epsilon", "1"),
     "mixes noise scales 2 and 4e+09"),
    (("--mechanism", "report_noisy_max", "--mechanism-param", "noise=exponential", "--scale", "1e-300"),
     "the noise scale 1e-300 is below the spacing of doubles at the answers"),
])
def test_quadrature_refusals_say_what_is_not_resolved(capsys, args, reason):
    """Before: "the noise scale is too small for the spread of the answers" after minutes (the sparse vector's
    comparison noise Lap(4cs) is 2c = 2e9 times its threshold noise Lap(2s): the tails' polynomials have that
    degree), with RuntimeWarnings for the exponential noise below the answers' resolution. Now at once, one line."""
    code = main(household_cli(*args))
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and reason in err and "Warning" not in err


def test_quadrature_refusal_names_the_answers_spread():
    """A Laplace(1e-3) kernel between answers 1 apart (report-noisy-max at --scale 1e-3): 1,000 noise scales."""
    from ddpbayes.errors import InputError
    from ddpbayes.mechanisms.quadrature import laplace_log_pdf, log_integral

    with pytest.raises(InputError, match="the answers are 1,000 noise scales apart"):
        log_integral(lambda v: laplace_log_pdf(v[..., None] - 0.5, 1e-3), np.array([[0.0, 1.0]]), 1e-3, most=64)


@pytest.mark.parametrize("noise", ["laplace", "exponential"])
def test_noisy_max_value_at_a_tiny_scale_warns_nothing(capsys, noise):
    """returns=value at b = 1e-200 (Before: 'invalid value encountered in subtract': the Laurent coefficients
    ~1/b overflowed in P'Q − PQ'). By hand: the all-zero answers (t = 0) put the maximum within O(b) of 0, every
    vector with x0 = 1 has its maximum at least 1, so near v = 0 its density is e^{−1/b} times powers of 1/b:
    the log-ratio is 1/b up to O(log 1/b), 1e200 to double precision (Laplace); exponential noise has no mass
    below the largest answer, so the ratio is infinite."""
    code = main([*household_cli("--mechanism", "report_noisy_max", "--mechanism-param", f"noise={noise}",
                                "--mechanism-param", "returns=value", "--scale", "1e-200"), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    leak = float(json.loads(out)["leakage"])
    assert leak == (math.inf if noise == "exponential" else pytest.approx(1e200, rel=1e-12))


# ----------------------------------------------------------------------------- attack --grid 1000


def test_histogram_counts_build_no_users_by_cells_table():
    """attack --grid 1000 built a (users, 10^6) float32 one-hot table (8.9 GiB on the shipped users): the counts
    are now one bincount per target, (T, cells) float64 in all. Counted here by hand, and the peak traced."""
    import tracemalloc

    from ddpbayes.attack import adversary

    rng = np.random.default_rng(40)
    users, n_cells = 5000, 1_000_000
    cells = rng.integers(0, n_cells, users)
    mask = rng.random((2, users)) < 0.5
    tracemalloc.start()
    got = adversary.histogram_counts(cells, mask, n_cells)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 3 * 2 * n_cells * 8  # the (2, cells) result and one row's bincount; the one-hot was 20 GB here
    for r in range(2):
        want = np.zeros(n_cells)
        for c in cells[mask[r]]:
            want[c] += 1
        assert np.array_equal(got[r], want)


@pytest.mark.slow
def test_cli_attack_grid_1000_runs_in_bounded_memory():
    """The issue's command at two targets under a 2 GB address-space limit (before: 8.9 GiB, exit 3 here)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(__import__("pathlib").Path(ddpbayes.__file__).parents[1])}
    run = subprocess.run(["bash", "-c", f"ulimit -v 2000000; exec {sys.executable} -m ddpbayes attack --grid 1000 "
                          "--targets 2 --epsilons 1 --workers 1 --format json"], capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert json.loads(run.stdout)["grid"] == 1000


# ----------------------------------------------------------------------------- parameters that do nothing


@pytest.mark.parametrize("kind", ["report_noisy_max", "sparse_vector", "truncated_geometric"])
def test_sensitivity_beside_scale_is_refused_as_unused(capsys, kind):
    """--mechanism-param sensitivity= only sets the scale from --epsilon; beside --scale it was ignored silently."""
    query = "count" if kind == "truncated_geometric" else "identity"
    code = main(["audit", "household", "--query", query, "--mechanism", kind, "--scale", "1",
                 "--mechanism-param", "sensitivity=2", "--notion", "idp", "--target", "0"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "sensitivity= is unused beside --scale" in err


def test_stale_diffprivlib_exponential_is_refused(household):
    """diffprivlib's Exponential caches its selection probabilities at construction; an epsilon set afterwards
    does not reach `randomise`. Its cumulative probabilities at ε = 1 over utilities [0, 1] are [1/(1 + e^{1/2}), 1]
    (scale ε/(2Δ)), which ε = 5 would make [1/(1 + e^{5/2}), 1]."""
    from diffprivlib.mechanisms import Exponential

    from ddpbayes.errors import InputError

    obj = Exponential(epsilon=1.0, sensitivity=1.0, utility=[0.0, 1.0])
    assert np.allclose(obj._probabilities, [1 / (1 + math.exp(0.5)), 1.0])
    ddpbayes.audit(household(), "identity", obj, "idp", targets=[0], information=None)  # fresh: taken
    obj.epsilon = 5.0
    with pytest.raises(InputError, match="was an attribute changed after it was built"):
        ddpbayes.audit(household(), "identity", obj, "idp", targets=[0], information=None)
    obj.epsilon = 1.0  # back to what it was built with: fresh again
    ddpbayes.audit(household(), "identity", obj, "idp", targets=[0], information=None)
