"""Lyu, Su & Li 2017 Alg. 3 (DP-Sniper's SparseVectorTechnique3; issue #43 item 3, DESIGN §5.2): the sparse vector
technique that releases the noisy answer a_i + ν_i of each TRUE query. With ρ ~ Lap(b_ρ), ν_i ~ Lap(b_ν) and the
threshold T, an output whose TRUE queries S carry the values v_i and whose FALSE queries are F has the density

    p(y | a) = Π_{i∈S} f(v_i − a_i) · H(min_S v; a),   H(u; a) = ∫_{−∞}^{u−T} f_ρ(ρ) Π_{j∈F} F_ν(T + ρ − a_j) dρ

(every TRUE query needs ρ ≤ v_i − T; given ρ the queries are independent); with no TRUE query it is the
probability H(∞; a). H is an integral of Laplace densities and CDFs (`quadrature.log_integral`, to LAW_ERROR).

The supremum over the values of log Σ_r w_r p(y | a_r) − log Σ_r w'_r p(y | a_r) is found per pattern by a
Lipschitz branch and bound on one variable: v itself when one query is TRUE (any weights), or u = min_S v when
several are and each side is one answer vector a, a' (the ratio then splits into log H(u; a)/H(u; a') plus, per
TRUE query, r_i(v_i) = log f(v_i − a_i) − log f(v_i − a'_i), monotone in v_i, whose sup over v_i ≥ u is
M_i(u) = max(r_i(u), r_i(∞)); one query attains the minimum, so the sup given u is
Σ_i M_i(u) + max_j (r_j(u) − M_j(u))). Several TRUE queries under mixtures are refused.

Slopes. f_ρ and the Laplace CDFs are log-concave, so H(·; a) is (Prékopa), and κ(u) = d log H/du =
h(u − T)/H(u) decreases in u. On an interval [x, y] holding no kink (an answer, T) a row's log-density has slope in
[s + κ(y), s + κ(x)], s = ±1/b_ν its Laplace kernel's, a mixture's in the hull of its rows', and the log-ratio's
|slope| is at most L = (largest upper) − (smallest lower end); there its maximum is at most (Φ(x) + Φ(y) + L(y − x))/2.
Intervals are halved until none can pass the best value found by more than SUP_ERROR (the value reported is
attained: a real output, or the limit v → ∞). Below every kink every density is C_r e^{(1/b_ν + λ)v},
λ = 1/b_ρ + |F|/b_ν: the ratio is constant there. Above the largest kink β, in z = e^{−(v − β)/b_ρ} ∈ (0, 1],
|dΦ/dz| ≤ e^{−(β − T)/b_ρ} / (2 min_r H(β; a_r)) (κ ≤ f_ρ(v − T)/H(β) there, dv/dz = −b_ρ/z), and z → 0 is the
limit v → ∞, where the ratio is that of Σ_r w_r e^{a_rk/b_ν} H(∞; a_r).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
from scipy.special import logsumexp

from ddpbayes.errors import InputError
from ddpbayes.mechanisms.quadrature import LAW_ERROR, laplace_log_cdf, laplace_log_pdf, log_integral

SUP_ERROR = 1e-9  # the branch and bound stops when no interval can pass the best value by more than this
MOST = 200_000  # evaluations of the log-ratio per pattern before the search is refused
SPLIT = 8  # each piece between kinks starts as this many intervals
CELLS = 1 << 22  # quadrature cells per batch of integrals H(u; a_r), at up to NODES nodes per piece
NODES = 256


class Law:
    """Alg. 3's law for the answer vectors `a` (R, K): log H and its slope κ for each FALSE set."""

    def __init__(self, a: np.ndarray, threshold: float, b_rho: float, b_nu: float):
        self.a, self.threshold, self.b_rho, self.b_nu = a, threshold, b_rho, b_nu

    def _cuts(self, false: np.ndarray) -> np.ndarray:
        """The kinks a_j − T of H's integrand in ρ (R, |F|), and 0 (f_ρ's)."""
        return np.concatenate([self.a[:, false] - self.threshold, np.zeros((len(self.a), 1))], axis=1)

    def _integrand(self, cuts: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """ρ (rows, N) -> log f_ρ(ρ) + Σ_F log F_ν(ρ − (a_j − T)) (rows, N, 1), `cuts` (rows, |F| + 1)."""
        def log_f(rho):
            x = rho[:, :, None] - cuts[:, None, :-1]
            return (laplace_log_pdf(rho, self.b_rho) + laplace_log_cdf(x, self.b_nu).sum(axis=2))[:, :, None]
        return log_f

    def _integral(self, cuts: np.ndarray, top: np.ndarray | None) -> np.ndarray:
        breaks = cuts if top is None else np.concatenate([np.minimum(cuts, top[:, None]), top[:, None]], axis=1)
        values, _ = log_integral(self._integrand(cuts), breaks, max(self.b_rho, self.b_nu), right=top is None,
                                 width=cuts.shape[1], narrow=min(self.b_rho, self.b_nu))
        return values[:, 0]

    def log_h(self, u: np.ndarray, false: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """log H(u; a_r) and log κ_r(u) for u (N,) finite: (N, R) each (in batches of at most CELLS cells)."""
        u = np.asarray(u, dtype=float)
        width = int(false.sum()) + 2
        step = max(1, CELLS // (NODES * width * width * len(self.a)))
        parts = [self._log_h(u[i:i + step], false) for i in range(0, len(u), step)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def _log_h(self, u: np.ndarray, false: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n, r = len(u), len(self.a)
        cuts = np.broadcast_to(self._cuts(false)[None], (n, r, int(false.sum()) + 1)).reshape(n * r, -1)
        rho = np.repeat(u - self.threshold, r)
        log_h = self._integral(cuts, rho).reshape(n, r)
        log_top = self._integrand(cuts)(rho[:, None])[:, 0, 0].reshape(n, r)
        return log_h, log_top - log_h

    def log_h_inf(self, false: np.ndarray) -> np.ndarray:
        """log H(∞; a_r) (R,): the probability that every query of F is FALSE (and none other asked)."""
        return self._integral(self._cuts(false), None)

    def kinks(self, true: np.ndarray, false: np.ndarray) -> np.ndarray:
        """Where some row's density changes form: its TRUE and FALSE answers, and T."""
        return np.unique(np.concatenate([self.a[:, true | false].ravel(), [self.threshold]]))


Upper = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def lipschitz_upper(lipschitz: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]) -> Upper:
    """The bound (Φ(x) + Φ(y) + L(y − x))/2 on [x, y] from a bound L = `lipschitz(x, y, data_x, data_y)` on |Φ'|."""
    def upper(lo, hi, flo, fhi, dlo, dhi):
        return (flo + fhi) / 2 + lipschitz(lo, hi, dlo, dhi) * (hi - lo) / 2
    return upper


def _maximise(evaluate: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], upper: Upper, edges: np.ndarray,
              what: str) -> tuple[float, float]:
    """max of Φ over [edges[0], edges[-1]] by branch and bound: `evaluate(x)` gives Φ(x) (N,) and per-point data
    (N, d), `upper(x, y, Φ(x), Φ(y), data_x, data_y)` a bound on Φ over each [x, y] (inside one piece of `edges`).
    Returns (value, argmax), the value within SUP_ERROR of the maximum (and attained)."""
    edges = np.unique(edges)
    if len(edges) == 1:
        value, _ = evaluate(edges)
        return float(value[0]), float(edges[0])
    x = np.unique(np.concatenate([np.linspace(lo, hi, SPLIT + 1) for lo, hi in zip(edges[:-1], edges[1:])]))
    f, data = evaluate(x)
    count = len(x)
    g = int(np.argmax(f))
    best, arg = float(f[g]), float(x[g])
    lo, hi, flo, fhi, dlo, dhi = x[:-1], x[1:], f[:-1], f[1:], data[:-1], data[1:]
    while True:
        bound = upper(lo, hi, flo, fhi, dlo, dhi)
        keep = bound > best + SUP_ERROR
        if not keep.any():
            return best, arg
        lo, hi, flo, fhi, dlo, dhi = lo[keep], hi[keep], flo[keep], fhi[keep], dlo[keep], dhi[keep]
        mid = (lo + hi) / 2
        if np.any((mid <= lo) | (mid >= hi)) or count + len(mid) > MOST:
            raise InputError(f"the supremum over {what} did not settle to {SUP_ERROR:g} within {MOST:,} evaluations")
        fm, dm = evaluate(mid)
        count += len(mid)
        g = int(np.argmax(fm))
        if fm[g] > best:
            best, arg = float(fm[g]), float(mid[g])
        lo, hi = np.concatenate([lo, mid]), np.concatenate([mid, hi])
        flo, fhi = np.concatenate([flo, fm]), np.concatenate([fm, fhi])
        dlo, dhi = np.concatenate([dlo, dm]), np.concatenate([dm, dhi])


def _tail(evaluate_v: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
          lipschitz_v: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray], limit: float,
          beta: float, slope: float, b_rho: float, what: str) -> tuple[float, float]:
    """max of Φ over [beta, ∞] in z = e^{−(v − beta)/b_rho} ∈ [0, 1], z = 0 the limit: |dΦ/dz| ≤ `slope` everywhere,
    and ≤ L_v·b_rho/z_lo on [z_lo, z_hi] from the slope bound L_v in v (`lipschitz_v`, tighter away from 0).
    Returns (value, argmax v, inf for the limit)."""
    def to_v(z):
        with np.errstate(divide="ignore"):
            return beta - b_rho * np.log(z)

    def evaluate(z):
        f, data = np.full(len(z), limit), None
        inner = z > 0
        if inner.any():
            f_in, d_in = evaluate_v(to_v(z[inner]))
            f[inner] = f_in
            data = np.zeros((len(z), d_in.shape[1]))
            data[inner] = d_in
        return f, (np.zeros((len(z), 0)) if data is None else data)

    def lipschitz(lo, hi, dlo, dhi):
        out = np.full(len(lo), slope)
        inner = lo > 0
        if inner.any() and dlo.shape[1]:
            local = lipschitz_v(to_v(hi[inner]), to_v(lo[inner]), dhi[inner], dlo[inner]) * b_rho / lo[inner]
            out[inner] = np.minimum(out[inner], local)
        return out

    value, z = _maximise(evaluate, lipschitz_upper(lipschitz), np.array([0.0, 1.0]), what)
    return value, (math.inf if z == 0 else float(to_v(np.array([z]))[0]))


def _spread(table: np.ndarray, directed: bool) -> np.ndarray:
    """max_t − min_t over the rows (T, N) of log-likelihoods, or row 0 − row 1 when `directed`."""
    return table[0] - table[1] if directed else table.max(axis=0) - table.min(axis=0)


def one_value(law: Law, log_w: np.ndarray, k: int, false: np.ndarray, directed: bool) -> tuple[float, float]:
    """sup over v of max_t log L_t(v) − min_t log L_t(v) (`directed`: log L_0 − log L_1), L_t = Σ_r w_tr f(v − a_rk)
    H(v; a_r), for the pattern whose one TRUE query is k: (value, v), v = inf for the limit."""
    a, b = law.a, law.b_nu
    true = np.zeros(a.shape[1], dtype=bool)
    true[k] = True

    def log_l(v):
        log_h, log_kappa = law.log_h(v, false)
        log_g = laplace_log_pdf(v[:, None] - a[None, :, k], b) + log_h  # (N, R)
        table = logsumexp(log_w[:, None, :] + log_g[None], axis=2)  # (T, N)
        return _spread(table, directed), np.exp(log_kappa)

    same = np.unique(a[:, false], axis=0, return_inverse=True)[1].reshape(-1)  # rows sharing H(·; a_r)

    def lipschitz(lo, hi, kappa_lo, kappa_hi):
        """max over rows r, r' of slope_r − slope_r' on [lo, hi]: Φ' is a difference of two weighted means of the
        rows' slopes; the κ terms cancel between rows that share H."""
        s = np.where(((lo + hi) / 2)[:, None] < a[None, :, k], 1.0 / b, -1.0 / b)  # (N, R)
        kappa = kappa_lo[:, :, None] - kappa_hi[:, None, :]  # (N, R, R): κ_r(lo) − κ_r'(hi) bounds κ_r − κ_r'
        kappa = np.where(same[:, None] == same[None, :], 0.0, kappa)
        return (s[:, :, None] - s[:, None, :] + kappa).max(axis=(1, 2))

    kinks = law.kinks(true, false)
    inner, v_in = _maximise(log_l, lipschitz_upper(lipschitz), kinks, "the released value")
    log_inf = a[:, k] / b + law.log_h_inf(false)
    ends = logsumexp(log_w + log_inf[None], axis=1)
    log_h_beta, _ = law.log_h(kinks[-1:], false)
    slope = math.exp(-(kinks[-1] - law.threshold) / law.b_rho - float(log_h_beta.min())) / 2
    outer, v_out = _tail(log_l, lipschitz, float(_spread(ends[:, None], directed)[0]), kinks[-1], slope, law.b_rho,
                         "the released value")
    return (inner, v_in) if inner >= outer else (outer, v_out)


def several_values(law: Law, true: np.ndarray, false: np.ndarray) -> tuple[float, float, np.ndarray]:
    """sup over the TRUE queries' values of log p(y | a_0) − log p(y | a_1) (law.a two rows): through u = min v
    (module docstring), Φ(u) = P(u) + D(u), P = Σ_i M_i + max_j (r_j − M_j) convex between kinks (a sum of linear
    functions and a max of them: at most its larger end there), D = log H(u; a_0)/H(u; a_1) with slope in
    [κ_0(y) − κ_1(x), κ_0(x) − κ_1(y)] on [x, y]. Returns (value, u, which queries sit at u rather than at +inf)."""
    a, b = law.a, law.b_nu
    idx = np.flatnonzero(true)
    gap = (a[0, idx] - a[1, idx]) / b  # r_i(∞)
    shared = bool(np.all(a[0, false] == a[1, false]))  # the same H on both sides: D = 0

    def parts(u):
        r = (np.abs(u[:, None] - a[1, idx]) - np.abs(u[:, None] - a[0, idx])) / b  # (N, m)
        m = np.maximum(r, gap)
        return m.sum(axis=1) + (r - m).max(axis=1), r - m

    def evaluate(u):
        p, _ = parts(u)
        if shared:
            return p, np.column_stack([p, np.zeros((len(u), 3))])
        log_h, log_kappa = law.log_h(u, false)
        d = log_h[:, 0] - log_h[:, 1]
        return p + d, np.column_stack([p, d, np.exp(log_kappa)])

    def lipschitz_d(lo, hi, dlo, dhi):
        return np.maximum(np.abs(dhi[:, 2] - dlo[:, 3]), np.abs(dlo[:, 2] - dhi[:, 3]))

    def upper(lo, hi, flo, fhi, dlo, dhi):
        bound_d = (dlo[:, 1] + dhi[:, 1]) / 2 + lipschitz_d(lo, hi, dlo, dhi) * (hi - lo) / 2
        return np.maximum(dlo[:, 0], dhi[:, 0]) + bound_d

    kinks = law.kinks(true, false)
    inner, u_in = _maximise(evaluate, upper, kinks, "the released values")
    log_inf = law.log_h_inf(false)
    limit = float(gap.sum() + log_inf[0] - log_inf[1])
    log_h_beta, _ = law.log_h(kinks[-1:], false)
    slope = 0.0 if shared else math.exp(-(kinks[-1] - law.threshold) / law.b_rho - float(log_h_beta.min())) / 2
    outer, u_out = _tail(evaluate, lipschitz_d, limit, kinks[-1], slope, law.b_rho, "the released values")
    u = u_in if inner >= outer else u_out
    if math.isinf(u):
        return outer, u, np.zeros(len(idx), dtype=bool)
    _, diff = parts(np.array([u]))
    at_u = diff[0] == 0.0  # M_i = r_i(u): v_i = u; else v_i → ∞
    at_u[int(np.argmax(diff[0]))] = True  # the query that attains the minimum
    return max(inner, outer), u, at_u


def sup_log_ratio(patterns: np.ndarray, log_w: np.ndarray, answers: np.ndarray, threshold: float, b_rho: float,
                  b_nu: float, directed: bool = False) -> tuple[float, int, int, tuple[float, ...]]:
    """max over ordered pairs (t, t') of the rows of `log_w` (T, R) (`directed`: (0, 1) only) and over outputs y
    (pattern and values) of log L(y | t) − log L(y | t'), L(y | t) = Σ_r w_tr p(y | a_r): (value, t, t', y), y the
    pattern then the values (inf for a limit)."""
    live = np.isfinite(log_w).any(axis=0)
    log_w, a = log_w[:, live], answers[live]
    k = a.shape[1]
    law = Law(a, threshold, b_rho, b_nu)
    single = bool(np.all(np.isfinite(log_w).sum(axis=1) == 1))
    best = (-math.inf, 0, 1 if len(log_w) > 1 else 0, ())
    for pattern in patterns:
        true, false = pattern == 1, pattern == 0
        values = np.zeros(k)
        if true.sum() == 0:
            ends = logsumexp(log_w + law.log_h_inf(false)[None], axis=1)
            found = [(float(_spread(ends[:, None], directed)[0]), *_pair(ends, directed), values)]
        elif true.sum() == 1:
            i = int(np.flatnonzero(true)[0])
            value, v = one_value(law, log_w, i, false, directed)
            values[i] = v
            found = [(value, *_pair(_log_likelihoods(law, log_w, i, false, v), directed), values)]
        elif single:
            found = []
            for t, t_prime in ([(0, 1)] if directed else itertools.permutations(range(len(log_w)), 2)):
                rows = [int(np.flatnonzero(np.isfinite(log_w[t]))[0]), int(np.flatnonzero(np.isfinite(log_w[t_prime]))[0])]
                value, u, at_u = several_values(Law(a[rows], threshold, b_rho, b_nu), true, false)
                vals = values.copy()
                vals[true] = np.where(at_u, u, math.inf)
                found.append((value, t, t_prime, vals))
        else:
            raise InputError(f"sparse_vector variant 3 with {int(true.sum())} TRUE answers under a mixture of answer "
                             "vectors: the supremum over several released values is computed for one answer vector "
                             "on each side only (give cutoff=1, or classic DP)")
        for value, t, t_prime, vals in found:
            if value > best[0]:
                best = (value, t, t_prime, tuple(float(x) for x in np.concatenate([pattern, vals])))
    return best


def _pair(table: np.ndarray, directed: bool) -> tuple[int, int]:
    """The rows (t, t') whose log-likelihoods `table` (T,) give `_spread`."""
    return (0, 1) if directed else (int(table.argmax()), int(table.argmin()))


def _log_likelihoods(law: Law, log_w: np.ndarray, k: int, false: np.ndarray, v: float) -> np.ndarray:
    """log L_t (T,) at the value v of query k (v = inf: the limit, up to a constant common to every row)."""
    if math.isinf(v):
        log_g = law.a[:, k] / law.b_nu + law.log_h_inf(false)
    else:
        log_g = laplace_log_pdf(v - law.a[:, k], law.b_nu) + law.log_h(np.array([v]), false)[0][0]
    return logsumexp(log_w + log_g[None], axis=1)


def log_density(outputs: np.ndarray, a: np.ndarray, threshold: float, b_rho: float, b_nu: float) -> np.ndarray:
    """log p(y | a_r) for valid outputs (G, 2K) (the pattern, then each TRUE query's value): (G, R)."""
    k = a.shape[1]
    law = Law(a, threshold, b_rho, b_nu)
    out = np.empty((len(outputs), len(a)))
    for g, y in enumerate(outputs):
        true, false = y[:k] == 1, y[:k] == 0
        if not true.any():
            out[g] = law.log_h_inf(false)
            continue
        v = y[k:][true]
        kernel = laplace_log_pdf(v[None, :] - a[:, true], b_nu).sum(axis=1)
        out[g] = kernel + (law.log_h(np.array([v.min()]), false)[0][0] if np.isfinite(v.min()) else -math.inf)
    return out


__all__ = ["LAW_ERROR", "SUP_ERROR", "Law", "log_density", "sup_log_ratio"]
