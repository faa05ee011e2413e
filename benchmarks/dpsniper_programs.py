"""DP-Sniper's 20 benchmark mechanisms (Bichsel et al., IEEE S&P 2021; github.com/eth-sri/dp-sniper,
MIT licence) at eps = 0.1, written here as VECTORISED programs for `ddpbayes.mechanisms.program`:
`fn(answers (S, K), rng) -> (S, ...)`, with `vectorized = True`. Parameters are those of DP-Sniper's
`dpsniper/experiments/exp_default.py` (SVT1 c=1 t=0.5; SVT2-6 c=1 t=1; SVT34Parallel and
NumericalSVT their defaults c=2 t=1; LaplaceParallel eps=0.005 twenty times; RAPPOR and one-time
RAPPOR with their murmur3 Bloom filter: 4 hashes, 20 bits, f=0.75 p=0.45 q=0.55 / f=0.95), and so are
the input pairs (`patterns`: StatDP's patterns as DP-Sniper's PatternGenerator yields them; a pair
and its swap are one candidate here, since the event search tries both directions).

`BENCHMARK` lists them with DP-Sniper's certified lower bound (logistic regression, confidence 0.9,
eval_sp2021/reference-results/dd_search_reg_data.log) and its time in seconds there
(time_dd_search + time_final_estimate_eps of the same log; their machine, all its cores)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

EPS = 0.1


# ----------------------------------------------------------------------------------------- murmur3

def murmur3_32(data: bytes | str, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit, as a SIGNED int32 (what `mmh3.hash(data, seed)` returns; str as UTF-8)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed & mask
    n = len(data)
    for i in range(0, n - n % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    tail, k = data[n - n % 4:], 0
    for j in reversed(range(len(tail))):
        k = (k << 8) | tail[j]
    if tail:
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


# ----------------------------------------------------------------------------------------- noise

_SIGN_SHIFT = np.uint64(63)


def laplace_noise(rng: np.random.Generator, scale: float, size) -> np.ndarray:
    """Laplace(0, scale) noise of shape `size`: scale times a standard exponential (NumPy's
    ziggurat) with an independent fair random sign, one random bit each (set as the float's sign
    bit) — the Laplace law exactly, at about half the CPU of `rng.laplace` (one logarithm per
    value there)."""
    shape = (size,) if np.isscalar(size) else tuple(size)
    n = math.prod(shape)
    e = rng.standard_exponential(n)
    e *= scale
    signs = np.unpackbits(np.frombuffer(rng.bytes((n + 7) // 8), dtype=np.uint8), count=n).astype(np.uint64)
    np.left_shift(signs, _SIGN_SHIFT, out=signs)
    bits = e.view(np.uint64)
    np.bitwise_xor(bits, signs, out=bits)
    return e.reshape(shape)


# ----------------------------------------------------------------------------------------- mechanisms

def vectorized(fn):
    fn.vectorized = True
    return fn


def aligned(fn):
    """Declares fn's randomness drawn by shape, not by value (`Program.aligned`): every draw's size is
    fixed by the batch's shape, so row i reads the same part of the stream whatever the answers
    (every program here)."""
    fn.aligned = True
    return fn


@aligned
@vectorized
def laplace(a, rng):
    return a[:, 0] + laplace_noise(rng, 1 / EPS, len(a))


_GEO_N = 5
_GEO_K = math.ceil(math.log(2.0 / EPS))
_GEO_D = int((2 ** (_GEO_K + 1) + 1) * (2 ** _GEO_K + 1) ** (_GEO_N - 1))


@lru_cache(maxsize=None)
def _geo_cdf(c: int) -> np.ndarray:
    """F(z), z = 0..n, of Balcer & Vadhan's GeoSample (their Alg. 4.8), in units of 1 / D."""
    n, k, d = _GEO_N, _GEO_K, _GEO_D
    f = np.empty(n + 1, dtype=np.int64)
    for z in range(c):
        f[z] = 2 ** (k * (c - z)) * (2 ** k + 1) ** (n - (c - z))
    for z in range(c, n):
        f[z] = d - 2 ** (k * (z - c + 1)) * (2 ** k + 1) ** (n - 1 - (z - c))
    f[n] = d
    return f


@aligned
@vectorized
def truncated_geometric(a, rng):
    """GeoSample(eps, n=5) on a count c in 0..5: smallest z with F_c(z) >= u, u uniform on 1..D."""
    c = np.rint(a[:, 0]).astype(int)
    u = rng.integers(1, _GEO_D + 1, size=len(a))
    if len(c) and c.min() == c.max():  # one count (a batch of one input): a binary search in its F
        return np.searchsorted(_geo_cdf(int(c[0])), u)
    table = np.stack([_geo_cdf(int(v)) for v in range(_GEO_N + 1)])
    return np.argmax(table[c] >= u[:, None], axis=1)


@aligned
@vectorized
def noisy_hist1(a, rng):
    return a + laplace_noise(rng, 1 / EPS, a.shape)


@aligned
@vectorized
def noisy_hist2(a, rng):
    return a + laplace_noise(rng, EPS, a.shape)


def _noisy_queries(a, noise) -> np.ndarray:
    """a + noise.T with noise (K, S), laid out (K, S): query j's noisy answers as the contiguous row
    j (a max over the queries is then K - 1 elementwise passes, not S reductions of K values)."""
    m = noise
    m += a.T
    return m


@aligned
@vectorized
def report_noisy_max1(a, rng):
    return np.argmax(a + laplace_noise(rng, 2 / EPS, a.shape), axis=1)


@aligned
@vectorized
def report_noisy_max2(a, rng):
    return np.argmax(a + rng.exponential(scale=2 / EPS, size=a.shape), axis=1)


@aligned
@vectorized
def report_noisy_max3(a, rng):
    return np.max(_noisy_queries(a, laplace_noise(rng, 2 / EPS, a.shape[::-1])), axis=0)


@aligned
@vectorized
def report_noisy_max4(a, rng):
    return np.max(_noisy_queries(a, rng.exponential(scale=2 / EPS, size=a.shape[::-1])), axis=0)


def _aborted(cmp: np.ndarray, c: int) -> np.ndarray:
    """(K, S) bool, query-major: the queries Lyu et al.'s loop, as DP-Sniper writes it, marks
    aborted — those after c earlier queries answered above (counting every query's comparison)."""
    out = np.zeros(cmp.shape, dtype=bool)
    np.greater_equal(np.cumsum(cmp[:-1], axis=0, dtype=np.int32), c, out=out[1:])
    return out


def _abort_after(cmp: np.ndarray, c: int, res: np.ndarray, aborted_value: float) -> np.ndarray:
    """res (K, S) with the aborted queries (`_aborted`) set to aborted_value, returned as the
    outputs (S, K) (a transposed view: each query's column stays contiguous for the events)."""
    res[_aborted(cmp, c)] = aborted_value
    return res.T


# The sparse-vector programs work query-major, (K, S): query j's noisy answers, comparisons and
# outputs for every run are one contiguous row j; 0/1/-1 outputs as int8 or bool (the program's
# caller makes them floats in one pass).

def svt1(a, rng, c=1, t=0.5):
    """Lyu et al. 2017 Alg. 1 (private): 1 above, 0 below, -1 aborted."""
    e1 = EPS / 2
    e2 = EPS - e1
    return _compared(a, rng, laplace_noise(rng, 1 / e1, len(a)), 2 * c / e2, c, t)


def _compared(a, rng, rho, scale, c, t, redraw=None) -> np.ndarray:
    """The 0/1/-1 sparse vector (1 above, 0 below, -1 aborted) of threshold rho + t: query noise
    Laplace(scale) drawn for every run and query, (K, S) query-major, and read only while a run
    compares (fewer than c aboves so far), so that each run's noise sits at the same place in the
    stream whatever the answers (`aligned`) and the law is the algorithm's (a noise never read
    changes nothing). `redraw` (Alg. 2, c > 1): a threshold noise Laplace(redraw) drawn for every
    run after each query but the last, (K - 1, S), read by the runs that were above and will
    compare again (at c = 1 an above ends the run: none is drawn). Outputs (S, K), a transposed
    view of (K, S) int8."""
    s, k = a.shape
    m = _noisy_queries(a, laplace_noise(rng, scale, (k, s)))
    if redraw is None or c == 1:
        cmp = m >= rho + t
        return _abort_after(cmp, c, cmp.astype(np.int8), -1)
    fresh = laplace_noise(rng, redraw, (k - 1, s))
    out = np.empty((k, s), dtype=np.int8)
    bar = rho + t
    count = np.zeros(s, dtype=np.int32)
    for j in range(k):
        live = count < c
        above = (m[j] >= bar) & live
        out[j] = np.where(live, above, -1)
        count += above
        if j < k - 1:
            bar = np.where(above & (count < c), fresh[j] + t, bar)
    return out.T


def svt2(a, rng, c=1, t=1.0):
    """Alg. 2 (private): the threshold's noise drawn again after each above that leaves the run
    comparing (fewer than c aboves, counting this one; `_compared`)."""
    e1 = EPS / 2
    e2 = EPS - e1
    return _compared(a, rng, laplace_noise(rng, c / e1, len(a)), 2 * c / e2, c, t, redraw=c / e1)


def svt3(a, rng, c=1, t=1.0):
    """Alg. 3 (not private): the noisy value when above, -1000 below, -2000 aborted."""
    e1 = EPS / 2
    e2 = EPS - e1
    rho = laplace_noise(rng, 1 / e1, len(a))
    m = _noisy_queries(a, laplace_noise(rng, c / e2, a.shape[::-1]))
    cmp = m >= rho + t
    m[~cmp] = -1000.0
    return _abort_after(cmp, c, m, -2000.0)


def svt4(a, rng, c=1, t=1.0):
    """Alg. 4 (not eps-private: eps/4 on the threshold, noise 1/eps2 on each query whatever c)."""
    e1 = EPS / 4
    e2 = EPS - e1
    return _compared(a, rng, laplace_noise(rng, 1 / e1, len(a)), 1 / e2, c, t)


def svt5(a, rng, c=1, t=1.0):
    """Alg. 5 (not private): no noise on the queries, no abort."""
    rho = laplace_noise(rng, 1 / (EPS / 2), len(a))
    return (a.T >= rho + t).T


def svt6(a, rng, c=1, t=1.0):
    """Alg. 6 (not private): no abort."""
    e1 = EPS / 2
    e2 = EPS - e1
    rho = laplace_noise(rng, 1 / e1, len(a))
    return (_noisy_queries(a, laplace_noise(rng, 1 / e2, a.shape[::-1])) >= rho + t).T


@aligned
@vectorized
def sparse_vector1(a, rng):
    return svt1(a, rng, c=1, t=0.5)


@aligned
@vectorized
def sparse_vector2(a, rng):
    return svt2(a, rng, c=1, t=1.0)


@aligned
@vectorized
def sparse_vector3(a, rng):
    return svt3(a, rng, c=1, t=1.0)


@aligned
@vectorized
def sparse_vector4(a, rng):
    return svt4(a, rng, c=1, t=1.0)


@aligned
@vectorized
def sparse_vector5(a, rng):
    return svt5(a, rng, c=1, t=1.0)


@aligned
@vectorized
def sparse_vector6(a, rng):
    return svt6(a, rng, c=1, t=1.0)


RAPPOR_HASHES, RAPPOR_BITS = 4, 20


@lru_cache(maxsize=None)
def bloom(value: int) -> np.ndarray:
    """RAPPOR's Bloom filter of the integer value (its decimal string): bit mmh3(str, seed i) % 20."""
    bits = np.zeros(RAPPOR_BITS)
    for i in range(RAPPOR_HASHES):
        bits[murmur3_32(str(value), i) % RAPPOR_BITS] = 1
    return bits


PERMANENT_GRID = 40  # f on a 1/40 grid (RAPPOR's 0.75, one-time RAPPOR's 0.95): one 16-bit word a bit decides it
ACCEPTED = (1 << 16) // PERMANENT_GRID * PERMANENT_GRID  # 65,520: words below it fall 1,638 to each grid step


def _permanent(filt: np.ndarray, f: float, rng) -> np.ndarray:
    """Each bit of the filters (0/1, int8) set to 1 with probability f/2, to 0 with probability f/2, else kept. Where
    f·PERMANENT_GRID/2 is a whole number h (f = 0.75: 15/40; 0.95: 19/40) a word w uniform below ACCEPTED decides it
    exactly (`_grid_words`): 1 below h·1,638, 0 below 2h·1,638, else kept; a word and three comparisons a bit, a
    fifth of the CPU of a bounded byte and two `np.where`s. Else a uniform float (the same law)."""
    half = 0.5 * f * PERMANENT_GRID
    if abs(half - round(half)) < 1e-9:
        return _decided(_grid_words(filt.shape, rng), filt, int(round(half)))
    u = rng.random(filt.shape)
    return np.where(u < 0.5 * f, np.int8(1), np.where(u < f, np.int8(0), filt))


def _decided(w: np.ndarray, filt: np.ndarray, half: int) -> np.ndarray:
    """The permanent response of filt's bits (0/1 int8) by words below ACCEPTED: 1 below half grid steps of 1,638
    words, 0 below twice that, else the bit (int8)."""
    step = ACCEPTED // PERMANENT_GRID
    return ((w < half * step) | ((w >= 2 * half * step) & filt.view(bool))).view(np.int8)


def _grid_words(shape: tuple[int, ...], rng) -> np.ndarray:
    """16-bit words uniform on [0, ACCEPTED): the generator's raw 64-bit outputs read as four words each (half the
    CPU of `integers` by word), those at or above ACCEPTED (1 in 4,096) drawn again until none is. What is drawn
    depends on the generator alone, never on the answers: the program stays aligned."""
    size = math.prod(shape)
    flat = rng.bit_generator.random_raw(-(-size // 4)).view("<u2")[:size]
    redo = np.flatnonzero(flat >= ACCEPTED)
    while len(redo):
        flat[redo] = rng.integers(0, 1 << 16, len(redo), dtype=np.uint16)
        redo = redo[flat[redo] >= ACCEPTED]
    return flat.reshape(shape)


def _filters(a) -> np.ndarray:
    """Each run's Bloom filter (int8); one value for every run: its filter repeated, not copied (a view)."""
    values = np.rint(a[:, 0]).astype(int)
    lo, hi = values.min(), values.max()
    if lo == hi:
        return np.broadcast_to(bloom(int(lo)).astype(np.int8), (len(values), RAPPOR_BITS))
    distinct = np.stack([bloom(int(v)) for v in range(lo, hi + 1)]).astype(np.int8)
    return distinct[values - lo]


@aligned
@vectorized
def rappor(a, rng, f=0.75, p=0.45, q=0.55):
    """Steps 1-3 of Erlingsson et al. 2014: Bloom filter, permanent then instantaneous randomised response."""
    prr = _permanent(_filters(a), f, rng)
    u = rng.random(prr.shape)
    return np.where(prr == 1, u < q, u < p)


@aligned
@vectorized
def one_time_rappor(a, rng, f=0.95):
    """Steps 1-2: Bloom filter and permanent randomised response."""
    return _permanent(_filters(a), f, rng)


@aligned
@vectorized
def laplace_parallel(a, rng, n=20, eps=0.005):
    return a[:, :1] + laplace_noise(rng, 1 / eps, (len(a), n))


@aligned
@vectorized
def svt34_parallel(a, rng):
    """SVT3 and SVT4 (c=2, t=1) run on the same answers with their own noise: 20 outputs."""
    return np.concatenate([svt3(a, rng, c=2, t=1.0).T, svt4(a, rng, c=2, t=1.0).T]).T


@aligned
@vectorized
def prefix_sum(a, rng):
    return np.cumsum(a + laplace_noise(rng, 1 / EPS, a.shape), axis=1)


@aligned
@vectorized
def numerical_svt(a, rng, c=2, t=1.0):
    """Wang et al. 2019: the noisy answer (fresh noise) when above, 0 below, -1000 aborted."""
    s, k = a.shape
    rho1 = laplace_noise(rng, 3 / EPS, s)
    rho2 = laplace_noise(rng, 6 * c / EPS, (k, s))
    rho3 = laplace_noise(rng, 3 * c / EPS, (k, s))
    cmp = _noisy_queries(a, rho2) >= t + rho1
    return _abort_after(cmp, c, np.where(cmp, _noisy_queries(a, rho3), 0.0), -1000.0)


# ----------------------------------------------------------------------------------------- inputs

def patterns(dim: int, component_wise: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """StatDP's input patterns as DP-Sniper's PatternGenerator builds them (a1, a2), without the
    swapped copies (the search tries both directions). Every value is 0, 1 or 2, inside all the
    domains DP-Sniper uses, so its clipping changes nothing."""
    ones = np.ones(dim)
    half = dim // 2
    out = [(ones, np.array([0.0] + [1.0] * (dim - 1))), (ones, np.array([2.0] + [1.0] * (dim - 1)))]
    if component_wise:
        out += [(ones, np.array([2.0] + [0.0] * (dim - 1))), (ones, np.array([0.0] + [2.0] * (dim - 1))),
                (ones, np.array([2.0] * half + [0.0] * (dim - half))), (ones, np.full(dim, 2.0)),
                (ones, np.zeros(dim)),
                (np.array([1.0] * half + [0.0] * (dim - half)), np.array([0.0] * half + [1.0] * (dim - half)))]
    return out


@dataclass(frozen=True)
class Benchmark:
    name: str  # DP-Sniper's class name
    program: object  # the vectorised function
    pairs: list  # candidate input pairs (a1, a2)
    dpsniper_eps_lcb: float
    dpsniper_seconds: float


def _b(name, program, dim, component_wise, lcb, seconds):
    return Benchmark(name, program, patterns(dim, component_wise), lcb, seconds)


# DP-Sniper's seconds: time_dd_search + time_final_estimate_eps, dd_search_reg_data.log.
BENCHMARK = [
    _b("LaplaceMechanism", laplace, 1, False, 0.0968, 19.555 + 1.851),
    _b("TruncatedGeometricMechanism", truncated_geometric, 1, False, 0.1156, 17.931 + 1.538),
    _b("NoisyHist1", noisy_hist1, 5, False, 0.0978, 34.755 + 2.909),
    _b("NoisyHist2", noisy_hist2, 5, False, 4.602, 37.825 + 2.794),
    _b("ReportNoisyMax1", report_noisy_max1, 5, True, 0.0923, 58.822 + 2.995),
    _b("ReportNoisyMax2", report_noisy_max2, 5, True, 0.0975, 55.722 + 2.693),
    _b("ReportNoisyMax3", report_noisy_max3, 5, True, 0.2478, 59.356 + 3.039),
    _b("ReportNoisyMax4", report_noisy_max4, 5, True, 0.3463, 59.821 + 3.072),
    _b("SparseVectorTechnique1", sparse_vector1, 10, True, 0.0858, 117.968 + 8.013),
    _b("SparseVectorTechnique2", sparse_vector2, 10, True, 0.0859, 148.098 + 11.824),
    _b("SparseVectorTechnique3", sparse_vector3, 10, True, 0.1716, 149.825 + 10.515),
    _b("SparseVectorTechnique4", sparse_vector4, 10, True, 0.1687, 122.697 + 7.793),
    _b("SparseVectorTechnique5", sparse_vector5, 10, True, 1.761, 56.253 + 2.640),
    _b("SparseVectorTechnique6", sparse_vector6, 10, True, 0.2720, 90.684 + 4.832),
    _b("Rappor", rappor, 1, False, 0.2930, 130.638 + 14.214),
    _b("OneTimeRappor", one_time_rappor, 1, False, 0.5978, 79.879 + 9.232),
    _b("LaplaceParallel", laplace_parallel, 1, False, 0.0350, 96.468 + 7.977),
    _b("SVT34Parallel", svt34_parallel, 10, True, 0.2610, 341.258 + 22.664),
    _b("PrefixSum", prefix_sum, 10, True, 0.5040, 92.127 + 4.850),
    _b("NumericalSVT", numerical_svt, 10, True, 0.0343, 142.222 + 9.468),
]
