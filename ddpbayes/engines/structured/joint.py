"""Joint output laws over every answer of a chain (issue #43 item 4, DESIGN §5.2): the sparse vector technique
(Lyu, Su & Li 2017, Alg. 1 with cutoff c = 1) and report-noisy-max (Laplace noise, the index) over the n
answers of the identity query, each day's record an answer, exact on a chain of any length.

Both outputs are an index j (SVT: the first TRUE, or none; RNM: the noisy argmax), and given one real v (SVT:
the threshold noise ρ; RNM: the noisy maximum) the days are independent given their records:

    SVT: P(y = j | x) = ∫ f_ρ(ρ) Π_{m<j} F_ν(T + ρ − x_m) · S_ν(T + ρ − x_j) dρ     (none: every day FALSE)
    RNM: P(y = j | x) = ∫ f(v − x_j) Π_{m≠j} F(v − x_m) dv

so, for each node v of a quadrature rule, P(y = j, X_i = t, x_K | v) is a forward–backward along the chain
whose day m emits e_B (m before j), e_A (m = j) or e_C (m after j). Every (target i, output j) comes from four
plain messages and two passes carrying one row per output (`joint_tables`): O(n² k²) per node, every target at
once. The law is not shift-invariant, so a known set's values are enumerated, each clamped into the unary
tables (`_known_set`), and the leakage is the exact engine's: the largest log-ratio over x_K, the outputs and
the possible t ≠ t'. Past ENUMERATE_UP_TO configurations, an adversary who knows every day outside one run around
the target (ddp's on a chain) has its known days reduced to their value counts (`_counted`, `joint_counts`).

The rule (`rule`) cuts v at the integrand's kinks (the answers, T and 0). On each tail, mapped by
u = exp(∓(v − end)/b) at the answers' noise scale b, every factor is a polynomial in u (the scales are 2s and
4s for SVT), so Gauss–Legendre with ⌈(degree + 1)/2⌉ nodes is exact: degree n + 1 (SVT), n − 1 (RNM). On a
finite piece [lo, hi] the integrand g is entire; Gauss–Legendre's error is at most (64/15) M r^{−2N} / (r² − 1)
times the half-width, M = max |g| on the Bernstein ellipse E_r (Trefethen, Approximation Theory and
Approximation Practice, Thm 19.3), and g ≥ Σ_x P(x) Π_m min e_m(x_m) on the piece, so the relative error is at
most (32/15) R r^{−2N} / (r² − 1) with log R = Σ_m max over the day's values and roles of
log(max_{E_r} |e| / min_{[lo, hi]} e) (`_log_excess`). N is the smallest over a grid of r giving LAW_BOUND: the
stated bound on each log-probability, which the notes report.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from threadpoolctl import threadpool_limits

from ddpbayes.engines.base import AdversaryLeakage, Witness
from ddpbayes.engines.structured.graph import FactorGraph
from ddpbayes.engines.structured.joint_counts import (
    Best,
    Kernels,
    Window,
    WindowLaw,
    best_by_total,
    configuration_count,
    counts_reason,
    window_law,
    window_of,
    witness_values,
)
from ddpbayes.engines.structured.pathsum import path_of
from ddpbayes.errors import InputError
from ddpbayes.limits import check_states
from ddpbayes.mechanisms.quadrature import gauss_legendre
from ddpbayes.problem import Adversary, Problem
from ddpbayes.queries import Identity

ENUMERATE_UP_TO = 1 << 10  # known-value configurations enumerated; more go by their counts when they reduce
LAW_BOUND = 1e-13  # the relative error bound each finite piece's rule is chosen for
MOST_NODES = 1 << 14  # per piece
BATCH_ROWS = 256  # window table rows per product with a count total's kernels (`JointSolver._batched`)
_ELLIPSES = (1.02, 1.05, 1.1, 1.2, 1.35, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0, 12.0)


# --------------------------------------------------------------------------- what is solved


def joint_reason(problem: Problem, graph: FactorGraph) -> str | None:
    """None when `problem` is a law that is a product over the answers given one real (`Mechanism.day_law`: SVT
    Alg. 1 with c = 1, report-noisy-max with Laplace noise releasing the index) over the identity of a chain of
    tuples in their own order, with every known set's values enumerable, else why not."""
    mech = problem.mechanism
    if not isinstance(problem.query, Identity):
        return f"a joint law over several answers is solved for the identity query only, not '{problem.query.spec}'"
    if mech.day_law is None:
        return (f"the {mech.kind} mechanism's joint law over every day is not solved here (sparse_vector variant 1 "
                "with cutoff 1, report_noisy_max with Laplace noise releasing the index are)")
    path = path_of(graph)
    n = problem.model.n
    if path is None or path.order not in (list(range(n)), list(range(n))[::-1]):
        return ("the model is not a chain of its tuples in their own order (no latent slots, pairwise factors "
                "joining day k to day k + 1)")
    return _enumeration_reason(problem, graph)


def _enumeration_reason(problem: Problem, graph: FactorGraph) -> str | None:
    """Why some adversary's known values can be neither enumerated (configurations × n² over --max-states) nor
    reduced to counts (`joint_counts`), or None."""
    n = problem.model.n
    for adv in problem.adversaries:
        count = math.prod(graph.sizes[k] for k in adv.known)
        if count * n * n <= problem.settings.max_states:
            continue
        why = _counts_reason(problem, graph, adv)
        if why:
            return (f"the joint law is not shift-invariant, so every known tuple is enumerated: the adversary of "
                    f"{problem.model.names[adv.target]} knows {len(adv.known)} tuples ({count:.3g} value combinations, "
                    f"each an O(n²) pass over {n} days), over --max-states {problem.settings.max_states:,}, and "
                    f"{why}")
    return None


def _counts_reason(problem: Problem, graph: FactorGraph, adv: Adversary) -> str | None:
    """Why the known days of `adv` do not reduce to their value counts (`joint_counts`), or None."""
    n = problem.model.n
    window = window_of(adv, n)
    if window is None:
        return ("its known days are not every day outside one run around the target, which is what reduces them to "
                "their value counts")
    chain = _chain(graph, n)
    if "joint one value list" not in graph.trees:
        graph.trees["joint one value list"] = all(np.array_equal(graph.values[s], graph.values[chain.slots[0]])
                                                   for s in chain.slots)
    why = counts_reason(chain, window, graph.trees["joint one value list"])
    if why:
        return f"its known days do not reduce to their value counts: {why}"
    k = chain.unary.shape[1]
    total = window.outer_left + window.outer_right
    cells = configuration_count(total, k) * k ** 4 * (window.hi - window.lo + 2)  # the widest class's ratios
    if cells > problem.settings.max_states:
        return (f"their value counts ({configuration_count(total, k):,} vectors of {total} days over {k} values) "
                f"times the window's {window.hi - window.lo + 1} days pass --max-states "
                f"{problem.settings.max_states:,}")
    return None


# --------------------------------------------------------------------------- the law


@dataclass(frozen=True)
class _Law:
    """Each day's emissions given v: e_B (before the output's index), e_A (at it), e_C (after), and the weight
    of v (SVT: the threshold noise's density; RNM: 1), from the mechanism's `DayLaw`."""

    first: bool  # SVT: the first TRUE (days after it emit 1; an output "none")
    threshold: float
    scale: float  # the answers' Laplace scale (RNM: b; SVT: b_ν)
    rho_scale: float  # SVT: b_ρ

    @classmethod
    def of(cls, mech) -> _Law:
        day = mech.day_law
        return cls(day.first, float(day.threshold), float(day.scale), float(day.weight_scale))

    @property
    def outputs_none(self) -> bool:
        """SVT has an output beyond the indices: every answer FALSE."""
        return self.first

    def breaks(self, answers: np.ndarray) -> np.ndarray:
        """The integrand's kinks in v: SVT at ρ = a − T and 0; RNM at v = a."""
        if self.first:
            return np.unique(np.append(answers - self.threshold, 0.0))
        return np.unique(answers)

    def arguments(self, v: np.ndarray, a: np.ndarray) -> np.ndarray:
        """The noise CDF's argument (N, k): T + ρ − a (SVT), v − a (RNM)."""
        return self.threshold + v[:, None] - a[None, :]

    def emissions(self, v: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(e_B, e_A, e_C), each (N, k), at nodes v for answers a."""
        z = self.arguments(v, a)
        below = _cdf(z, self.scale)
        if self.first:
            return below, _cdf(-z, self.scale), np.ones_like(z)
        return below, np.exp(-np.abs(z) / self.scale) / (2 * self.scale), below

    def log_weight(self, v: np.ndarray) -> np.ndarray:
        if self.first:
            return -np.abs(v) / self.rho_scale - math.log(2 * self.rho_scale)
        return np.zeros_like(v)

    def tail_degree(self, n: int) -> int:
        """The integrand's degree in u on either tail: n − 1 (RNM), n + q − 1 (SVT, f_ρ ∝ u^q with q = b_ν/b_ρ, 2 at
        c = 1); a ratio q that is not an integer is refused (the tail is then no polynomial)."""
        if not self.first:
            return n - 1
        q = self.scale / self.rho_scale
        if abs(q - round(q)) > 1e-12 * q:
            raise InputError(f"the threshold noise's scale {self.rho_scale:g} does not divide the query noise's "
                             f"{self.scale:g}: the quadrature's tails are not polynomials")
        return n + round(q) - 1


def _cdf(z: np.ndarray, b: float) -> np.ndarray:
    """P(Lap(b) ≤ z), without cancellation in either tail."""
    e = 0.5 * np.exp(-np.abs(z) / b)
    return np.where(z < 0, e, 1.0 - e)


# --------------------------------------------------------------------------- the rule and its bound


@dataclass(frozen=True)
class Rule:
    """Nodes v and log-weights (Lebesgue measure, the law's weight not included), the nodes per piece, and the
    bound on each log-probability's relative quadrature error (the tails are exact)."""

    v: np.ndarray
    log_w: np.ndarray
    per_piece: tuple[int, ...]
    bound: float


def rule(law: _Law, values: list[np.ndarray]) -> Rule:
    """The quadrature over v for a chain whose day m takes `values[m]` (module docstring): tails exact, each finite
    piece's node count from its Bernstein-ellipse bound."""
    n = len(values)
    cuts = law.breaks(np.unique(np.concatenate(values)))
    tail = max(1, -(-(law.tail_degree(n) + 1) // 2))
    x, w = gauss_legendre(tail)
    u = (x + 1) / 2
    tail_lw = np.log(w / 2) + math.log(law.scale) - np.log(u)
    vs = [cuts[0] + law.scale * np.log(u), cuts[-1] - law.scale * np.log(u)]
    lws, counts, worst = [tail_lw, tail_lw], [tail, tail], 0.0
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        nodes, bound = _piece_nodes(law, values, float(lo), float(hi))
        x, w = gauss_legendre(nodes)
        half = (hi - lo) / 2
        vs.append((lo + hi) / 2 + half * x)
        lws.append(np.log(half * w))
        counts.append(nodes)
        worst = max(worst, bound)
    return Rule(np.concatenate(vs), np.concatenate(lws), tuple(counts), -math.log1p(-worst))


def _piece_nodes(law: _Law, values: list[np.ndarray], lo: float, hi: float) -> tuple[int, float]:
    """The fewest Gauss–Legendre nodes on [lo, hi] whose relative error bound is at most LAW_BOUND, and that bound."""
    best = None
    for r in _ELLIPSES:
        log_r = _log_excess(law, values, lo, hi, r) + math.log(32 / 15) - math.log(r * r - 1)
        nodes = max(1, math.ceil((log_r - math.log(LAW_BOUND)) / (2 * math.log(r))))
        if best is None or nodes < best[0]:
            best = (nodes, math.exp(log_r - 2 * nodes * math.log(r)))
    if best[0] > MOST_NODES:
        raise InputError(f"the joint law's quadrature on [{lo:g}, {hi:g}] would need {best[0]:,} nodes for its error "
                         f"bound (over {MOST_NODES:,}): too many days for these noise scales")
    return best


def _log_excess(law: _Law, values: list[np.ndarray], lo: float, hi: float, r: float) -> float:
    """log R: Σ over days of the largest log(max over the ellipse E_r of |e| / min over [lo, hi] of e) over the
    day's values and its three roles, plus the weight's (SVT's f_ρ)."""
    c, h = (lo + hi) / 2, (hi - lo) / 2
    a_r, b_r = (r + 1 / r) / 2, (r - 1 / r) / 2
    re = np.array([c - h * a_r, c + h * a_r])
    total = 0.0
    if law.first:
        total += float(_density_excess(re, 0.0, law.rho_scale, lo, hi).max())
    distinct: dict[bytes, tuple[np.ndarray, int]] = {}
    for vals in values:
        key = np.asarray(vals, dtype=float).tobytes()
        distinct[key] = (np.asarray(vals, dtype=float), distinct.get(key, (None, 0))[1] + 1)
    for vals, days in distinct.values():
        if law.first:
            m = vals - law.threshold  # the CDF's argument is ρ − m; S_ν's is m − ρ
            day = np.maximum(_cdf_excess(re, m, 1.0, law.scale, h * b_r, lo, hi),
                             _cdf_excess(re, m, -1.0, law.scale, h * b_r, lo, hi)).max()
        else:
            day = np.maximum(_cdf_excess(re, vals, 1.0, law.scale, h * b_r, lo, hi),
                             _density_excess(re, vals, law.scale, lo, hi)).max()
        total += days * max(float(day), 0.0)
    return total


def _cdf_excess(re: np.ndarray, m: np.ndarray, sign: float, b: float, imag: float, lo: float,
                hi: float) -> np.ndarray:
    """log(max |F_b(z)| / min F_b) for z = sign·(v − m), v on the rectangle Re ∈ `re`, |Im| ≤ `imag`, against v
    real in [lo, hi] (one branch of F there): ½e^{z/b} below 0, 1 − ½e^{−z/b} above (|1 − E e^{iθ}|² =
    (1 − E)² + 2E(1 − cos θ), convex in E)."""
    m = np.atleast_1d(m)[:, None]
    z_rect = np.sort(sign * (re[None, :] - m), axis=1)  # (k, 2): Re z's range
    z_real = sign * (np.array([lo, hi])[None, :] - m)
    low = np.log(_cdf(z_real, b).min(axis=1))
    negative = sign * ((lo + hi) / 2 - m[:, 0]) < 0
    theta = min(math.pi, imag / b)
    e = 0.5 * np.exp(-z_rect / b)
    above = 0.5 * np.log(np.max((1 - e) ** 2 + 2 * e * (1 - math.cos(theta)), axis=1))
    below = z_rect[:, 1] / b - math.log(2)
    return np.where(negative, below, above) - low


def _density_excess(re: np.ndarray, m, b: float, lo: float, hi: float) -> np.ndarray:
    """log(max |f_b(v − m)| over the rectangle / min f_b over [lo, hi]): |e^{∓z/b}| = e^{∓Re z/b}."""
    m = np.atleast_1d(np.asarray(m, dtype=float))[:, None]
    negative = (lo + hi) / 2 - m[:, 0] < 0
    z = re[None, :] - m
    top = np.where(negative, z[:, 1], -z[:, 0]) / b
    real = -np.abs(np.array([lo, hi])[None, :] - m) / b
    return top - real.min(axis=1)


# --------------------------------------------------------------------------- the chain pass


@dataclass(frozen=True)
class _Chain:
    """The chain in linear space along its days: unary (n, k) and pairwise (n − 1, k, k) tables scaled to their
    maxima (constants common to every t cancel), each day's answers (n, k), padded values impossible."""

    unary: np.ndarray
    pair: np.ndarray
    answers: np.ndarray
    slots: list[int]


def _chain(graph: FactorGraph, n: int) -> _Chain:
    """The chain's tables, cached with the graph's trees."""
    if "joint chain" not in graph.trees:
        graph.trees["joint chain"] = _chain_of(graph, n)
    return graph.trees["joint chain"]


def _chain_of(graph: FactorGraph, n: int) -> _Chain:
    path = path_of(graph)
    order = list(path.order)
    unary, pair = list(path.unary), list(path.pair)
    if order[0] != 0:  # walked from the last day: reverse
        order, unary, pair = order[::-1], unary[::-1], [p.T for p in pair[::-1]]
    k = max(graph.sizes[s] for s in order)
    u = np.zeros((n, k))
    a = np.zeros((n, k))
    for m, (slot, table) in enumerate(zip(order, unary)):
        u[m, :len(table)] = np.exp(table - table.max())
        a[m, :len(table)] = graph.values[slot]
    psi = np.zeros((max(n - 1, 0), k, k))
    for m, table in enumerate(pair):
        psi[m, :table.shape[0], :table.shape[1]] = np.exp(table - table.max())
    return _Chain(u, psi, a, order)


def _normalise(msg: np.ndarray, scale: np.ndarray) -> None:
    """Divide each row of `msg` (..., k) by its maximum, adding its log to `scale` (-inf for a zero row)."""
    top = msg[..., 0].copy()
    for c in range(1, msg.shape[-1]):  # k slices: far cheaper than a reduction over a short last axis
        np.maximum(top, msg[..., c], out=top)
    alive = top > 0
    msg /= np.where(alive, top, 1.0)[..., None]
    with np.errstate(divide="ignore"):
        scale += np.where(alive, np.log(np.where(alive, top, 1.0)), -np.inf)


def _plain(unary: np.ndarray, pair: np.ndarray, emit: np.ndarray, forward: bool) -> tuple[np.ndarray, np.ndarray]:
    """Messages into each day with every day emitting `emit` (N, n, k): forward (from day 0) or backward, scaled
    per node and day; (N, n, k) and log scales (N, n)."""
    big, n, k = emit.shape
    msg, scale = np.ones((big, n, k)), np.zeros((big, n))
    steps = range(n - 1) if forward else range(n - 1, 0, -1)
    for m in steps:
        nxt = m + 1 if forward else m - 1
        carried = msg[:, m] * unary[m] * emit[:, m]
        msg[:, nxt] = carried @ pair[m] if forward else carried @ pair[m - 1].T
        scale[:, nxt] = scale[:, m]
        _normalise(msg[:, nxt], scale[:, nxt])
    return msg, scale


def _collect(values: np.ndarray, scales: np.ndarray, log_w: np.ndarray) -> np.ndarray:
    """log Σ_ν exp(log_w_ν + scale_j,ν) values_j,ν,t: (J, k) from (J, N, k) and (J, N)."""
    s = log_w[None, :] + scales
    top = s.max(axis=1)
    finite = np.isfinite(top)
    with np.errstate(invalid="ignore", under="ignore"):
        weights = np.where(finite[:, None], np.exp(s - np.where(finite, top, 0.0)[:, None]), 0.0)
        total = np.einsum("jn,jnt->jt", weights, values)
    with np.errstate(divide="ignore"):
        return np.where(finite[:, None], np.log(total) + np.where(finite, top, 0.0)[:, None], -np.inf)


def _every(own: list[np.ndarray], pair: np.ndarray) -> int:
    """How many days the row passes may run between normalisations: each day shrinks a row by at least the
    smallest positive day factor times the smallest positive pairwise entry, kept above e^-300 in all."""
    smallest = min(float(e[e > 0].min()) for e in own if (e > 0).any())
    if pair.size and (pair > 0).any():
        smallest *= float(pair[pair > 0].min())
    return int(max(1, min(64, 300 // max(1.0, -math.log(smallest)))))


def joint_tables(chain: _Chain, unary: np.ndarray, law: _Law, quad: Rule) -> np.ndarray:
    """log P(y = j, X_i = t, x_K) (n, J, k) for every day i, output j (J = n, or n + 1 with SVT's none last) and
    value t, `unary` holding the known days' clamps (module docstring). The row passes hold (rows, nodes, k), so
    that each day's step on every row is one matrix product, and normalise every `_every` days."""
    n, k = unary.shape
    pair, a = chain.pair, chain.answers
    e_b, e_a, e_c = (np.stack(e, axis=1) for e in zip(*(law.emissions(quad.v, a[m]) for m in range(n))))
    log_w = quad.log_w + law.log_weight(quad.v)
    fb, sfb = _plain(unary, pair, e_b, True)
    bb, sbb = _plain(unary, pair, e_b, False)
    bc, sbc = (bb, sbb) if not law.first else _plain(unary, pair, e_c, False)
    day_first = [np.ascontiguousarray(np.swapaxes(x, 0, 1)) for x in (fb, sfb, bb, sbb, bc, sbc)]
    fb, sfb, bb, sbb, bc, sbc = day_first  # (n, N, k) and (n, N)
    own_b, own_a, own_c = (np.ascontiguousarray(np.swapaxes(unary[None] * e, 0, 1)) for e in (e_b, e_a, e_c))
    every = _every([own_b, own_a, own_c], pair)
    out = np.full((n, n + law.outputs_none, k), -np.inf)
    out[np.arange(n), np.arange(n)] = _collect(fb * own_a * bc, sfb + sbc, log_w)  # the output at the target
    if law.outputs_none:
        out[:, n] = _collect(fb * own_b * bb, sfb + sbb, log_w)
    big = len(quad.v)
    rows, scale = np.zeros((n, big, k)), np.full((n, big), -np.inf)  # forward: row j < i, day j emitted e_A
    for i in range(n):
        if i:
            out[i, :i] = _collect(rows[:i] * (own_c[i] * bc[i])[None], scale[:i] + sbc[i][None], log_w)
        if i + 1 < n:
            rows[:i] = ((rows[:i] * own_c[i][None]).reshape(-1, k) @ pair[i]).reshape(i, big, k)
            rows[i] = (fb[i] * own_a[i]) @ pair[i]
            scale[i] = sfb[i]
            if (i + 1) % every == 0 or i + 2 == n:
                _normalise(rows[:i + 1], scale[:i + 1])
    rows, scale = np.zeros((n, big, k)), np.full((n, big), -np.inf)  # backward: row j > i, day j emitted e_A
    for i in range(n - 1, -1, -1):
        if i < n - 1:
            out[i, i + 1:n] = _collect(rows[i + 1:] * (fb[i] * own_b[i])[None], scale[i + 1:] + sfb[i][None], log_w)
        if i:
            rows[i + 1:] = ((rows[i + 1:] * own_b[i][None]).reshape(-1, k) @ pair[i - 1].T).reshape(n - i - 1, big, k)
            rows[i] = (own_a[i] * bc[i]) @ pair[i - 1].T
            scale[i] = sbc[i]
            if (n - i) % every == 0 or i == 1:
                _normalise(rows[i:], scale[i:])
    return out


def _marginals(unary: np.ndarray, pair: np.ndarray) -> np.ndarray:
    """log P(X_i = t, x_K) (n, k) by one forward–backward without emissions (the same constants as the tables)."""
    ones = np.ones((1,) + unary.shape)
    f, sf = _plain(unary, pair, ones, True)
    b, sb = _plain(unary, pair, ones, False)
    with np.errstate(divide="ignore"):
        return np.log(f[0] * unary * b[0]) + (sf[0] + sb[0])[:, None]


# --------------------------------------------------------------------------- the adversaries


def joint_leakage(problem: Problem, graph: FactorGraph) -> tuple[list[AdversaryLeakage], Rule]:
    """leak(i, K) of every adversary, in order, and the quadrature rule (its bound for the notes): for each known
    set, every configuration x_K of positive probability clamped, the tables of every target at once, the largest
    log-ratio over x_K, the possible t ≠ t' and the outputs (first on ties, x_K in mixed-radix order)."""
    reason = joint_reason(problem, graph)
    if reason:
        raise InputError(f"the structured engine cannot solve this joint law: {reason}")
    solver = JointSolver.of(problem, graph)
    found = solver.solve(problem, problem.adversaries)
    return [found[adv] for adv in problem.adversaries], solver.quad


@dataclass
class JointSolver:
    """The chain's tables, the law, its rule, the count route's memo and its kernels (by whether x_j's e_A is in
    them), kept across calls (`joint_runs` solves runs in rounds)."""

    graph: FactorGraph
    chain: _Chain
    law: _Law
    quad: Rule
    memo: dict
    kernels: dict = field(default_factory=dict)

    @classmethod
    def of(cls, problem: Problem, graph: FactorGraph) -> JointSolver:
        n = problem.model.n
        chain = _chain(graph, n)
        law = _Law.of(problem.mechanism)
        quad = rule(law, [graph.values[s] for s in chain.slots])
        check_states(len(quad.v) * n * chain.unary.shape[1] * 8,
                     "the joint law's messages (nodes x days x values x 8)", "cells", problem.settings.max_states)
        return cls(graph, chain, law, quad, {})

    @threadpool_limits.wrap(limits=1, user_api="blas")  # small products (k x k steps, kernels x 8 rows): threads
    # only contend (a count total's product 0.5 ms on one thread, 4-7 ms on two at load 3)
    def solve(self, problem: Problem, adversaries, counts_first: bool = False,
              late: dict[Adversary, float] | None = None) -> dict[Adversary, AdversaryLeakage]:
        """leak(i, K) of each adversary: each known set's configurations enumerated, or by their counts when there
        are more than ENUMERATE_UP_TO (or `counts_first`: whenever) and they reduce (`_counted`). `late`, when given,
        receives each counted adversary's largest ratio over the outputs whose law depends on the days after the
        target (`_Class.late`)."""
        graph, chain = self.graph, self.chain
        by_known: dict[frozenset[int], list[Adversary]] = {}
        for adv in adversaries:
            by_known.setdefault(adv.known, []).append(adv)
        found: dict[Adversary, AdversaryLeakage] = {}
        counted: list[Adversary] = []
        for known, advs in by_known.items():
            if ((counts_first or math.prod(graph.sizes[k] for k in known) > ENUMERATE_UP_TO)
                    and not _counts_reason(problem, graph, advs[0])):
                counted += advs
            else:
                found.update(_known_set(chain, self.law, self.quad, graph, sorted(known), advs))
        self._batched(counted, problem.settings.max_states)
        for adv in counted:
            found[adv], late_value = _counted(adv, self, problem.settings.max_states)
            if late is not None:
                late[adv] = late_value
        return found

    def window(self, win: Window) -> tuple[tuple, WindowLaw]:
        """The window's memo key (its tables, answers, target offset and borders) and its law, made once."""
        chain = self.chain
        key = (chain.unary[win.lo:win.hi + 1].tobytes(), chain.pair[win.lo:win.hi].tobytes(),
               chain.answers[win.lo:win.hi + 1].tobytes(), win.target, win.left, win.right)
        if key not in self.memo:
            self.memo[key] = _window_law(chain, self.law, self.quad, win)
        return key, self.memo[key]

    def kernels_of(self, with_a: bool) -> Kernels:
        """The count route's kernels (`joint_counts.Kernels`), with x_j's e_A or without: the law's, made once."""
        if not self.kernels:
            e_b, e_a, _ = self.law.emissions(self.quad.v, self.graph.values[self.chain.slots[0]])
            with np.errstate(divide="ignore"):
                log_b, log_a = np.log(e_b), np.log(e_a)
            base = self.quad.log_w + self.law.log_weight(self.quad.v)
            self.kernels.update({False: Kernels(log_b, None, base), True: Kernels(log_b, log_a, base)})
        return self.kernels[with_a]

    def _batched(self, advs: list[Adversary], limit: int) -> None:
        """Every class of the windows of `advs` with several count totals missing (SVT's outputs after the window),
        solved before the adversaries one by one: windows in groups of about BATCH_ROWS table rows, each total's
        kernels in one product with the tables of the group's windows missing it (a pass over the kernels per
        group, not per window)."""
        n = len(self.chain.slots)
        wanted: dict[tuple, tuple[set[int], bool, np.ndarray, np.ndarray]] = {}
        for adv in advs:
            win = window_of(adv, n)
            key, table = self.window(win)
            for cls in _classes(self.law, win, n, table):
                solved = self.memo.setdefault((key, cls.name), {})
                missing = [m for m in cls.totals if m not in solved]
                if len(missing) > 1:
                    wanted.setdefault((key, cls.name), (set(), cls.with_a, cls.cols, table.marginal))[0].update(missing)
        for with_a in (False, True):
            slots = sorted((slot for slot in wanted if wanted[slot][1] == with_a), key=lambda s: min(wanted[s][0]))
            group, rows = [], 0
            for slot in slots:
                group.append(slot)
                rows += math.prod(wanted[slot][2].shape[:-1])
                if rows >= BATCH_ROWS or slot == slots[-1]:
                    self._solve_group(group, wanted, with_a, limit)
                    group, rows = [], 0

    def _solve_group(self, group: list[tuple], wanted: dict, with_a: bool, limit: int) -> None:
        k, big = self.chain.unary.shape[1], len(self.quad.v)
        check_states(configuration_count(max(max(wanted[slot][0]) for slot in group), k) * k * big,
                     "the known days' count vectors times the quadrature nodes", "cells", limit)
        found = best_by_total(self.kernels_of(with_a), [(sorted(wanted[slot][0]), *wanted[slot][2:])
                                                        for slot in group])
        for slot, by_total in zip(group, found):
            self.memo[slot].update(by_total)


def _known_set(chain: _Chain, law: _Law, quad: Rule, graph: FactorGraph, known: list[int],
               advs: list[Adversary]) -> dict[Adversary, AdversaryLeakage]:
    n = len(chain.slots)
    best: dict[Adversary, tuple] = {}
    for codes in itertools.product(*[range(graph.sizes[s]) for s in known]):
        unary = chain.unary.copy()
        for slot, code in zip(known, codes):
            keep = np.zeros(unary.shape[1])
            keep[code] = 1.0
            unary[slot] *= keep
        marg = _marginals(unary, chain.pair)
        if not np.isfinite(marg).any():
            continue
        tables = joint_tables(chain, unary, law, quad)
        for adv in advs:
            found = _sup(tables[adv.target], marg[adv.target])
            if found is not None and (adv not in best or found[0] > best[adv][0]):
                best[adv] = (*found, dict(zip(known, codes)))
    out = {}
    for adv in advs:
        if adv not in best:
            raise InputError(f"every configuration of the known tuples of {adv} has probability zero")
        value, t, t_prime, j, codes = best[adv]
        values = graph.values[adv.target]
        known_values = {s: float(graph.values[s][c]) for s, c in codes.items()}
        witness = Witness(adv, known_values, float(values[t]), float(values[t_prime]), _output(law, j, n))
        out[adv] = AdversaryLeakage(adv, max(value, 0.0), witness)
    return out


def _sup(table: np.ndarray, marg: np.ndarray) -> tuple[float, int, int, int] | None:
    """max over outputs j and possible t ≠ t' of log P(j | t, x_K) − log P(j | t', x_K): (value, t, t', j), or
    None when fewer than one value is possible (0 with one)."""
    possible = np.flatnonzero(np.isfinite(marg))
    if possible.size == 0:
        return None
    if possible.size == 1:
        return 0.0, int(possible[0]), int(possible[0]), 0
    log_l = table[:, possible] - marg[possible]  # (J, t)
    with np.errstate(invalid="ignore"):
        ratio = log_l.max(axis=1) - log_l.min(axis=1)
    ratio[np.isnan(ratio)] = -np.inf
    j = int(np.argmax(ratio))
    return float(ratio[j]), int(possible[log_l[j].argmax()]), int(possible[log_l[j].argmin()]), j


def _output(law: _Law, j: int, n: int) -> tuple[float, ...]:
    """The output as the mechanism writes it: SVT's pattern (FALSE before the first TRUE, −1 after it), RNM's index."""
    if not law.first:
        return (float(j),)
    return tuple([0.0] * min(j, n) + ([1.0] + [-1.0] * (n - j - 1) if j < n else []))


# --------------------------------------------------------------------------- known days by their counts


class _Class(NamedTuple):
    """A window's class of outputs (module docstring of `joint_counts`): its count totals, whether the kernels carry
    x_j's e_A, the window's columns, for a total and a column the output j, the counted days and x_j's day or None;
    and whether its outputs' law given the target and the known days depends on the days after the target (`late`:
    SVT's outputs after the target and none, every RNM output; `joint_runs` bounds only these past the box)."""

    name: str
    totals: list[int]
    with_a: bool
    cols: np.ndarray
    place: Callable[[int, int], tuple]
    late: bool


def _classes(law: _Law, win: Window, n: int, table: WindowLaw) -> list[_Class]:
    """The window's classes of outputs. SVT's inside outputs are split at the target: those up to it see no day after
    it (every later day emits e_C = 1, and given X_i the days after it are independent of those before)."""
    left = list(range(win.lo if win.left else 0))
    right = list(range(win.hi + 1, n)) if win.right else []
    outer = left + right
    all_b = table.all_b[..., None, :]
    if law.first:
        p = win.target
        split = [_Class("inside", [len(left)], False, table.inside[..., :p + 1, :],
                        lambda m, c: (win.lo + c, left, None), False)]
        if p + 1 < table.inside.shape[-2]:
            split.append(_Class("inside after", [len(left)], False, table.inside[..., p + 1:, :],
                                lambda m, c: (win.lo + p + 1 + c, left, None), True))
        return split + [
            _Class("none", [len(outer)], False, all_b, lambda m, c: (n, outer, None), True),
            _Class("after", list(range(len(left), len(outer))), True, all_b,
                   lambda m, c: (right[m - len(left)], outer[:m], right[m - len(left)]), True)]
    return [_Class("inside", [len(outer)], False, table.inside, lambda m, c: (win.lo + c, outer, None), True),
            _Class("known", [len(outer) - 1] if outer else [], True, all_b,
                   lambda m, c: (outer[0], outer[1:], outer[0]), True)]


def _counted(adv: Adversary, solver: JointSolver, limit: int) -> tuple[AdversaryLeakage, float]:
    """leak(i, K) of an adversary who knows every day outside one window around the target, the interior known days
    by their value counts (`joint_counts`): the largest ratio over the classes of outputs, each (window, class,
    count total) solved once, each count total's kernels built once (`JointSolver.kernels_of`); and the largest over
    the late classes' outputs only (`_Class.late`)."""
    n = len(solver.chain.slots)
    values = solver.graph.values[solver.chain.slots[0]]
    win = window_of(adv, n)
    key, table = solver.window(win)
    best, witness, late = None, None, 0.0
    for cls in _classes(solver.law, win, n, table):
        solved = solver.memo.setdefault((key, cls.name), {})
        missing = [m for m in cls.totals if m not in solved]
        if missing:
            check_states(configuration_count(missing[-1], len(values)) * len(values) * len(solver.quad.v),
                         "the known days' count vectors times the quadrature nodes", "cells", limit)
            solved.update(best_by_total(solver.kernels_of(cls.with_a), [(missing, cls.cols, table.marginal)])[0])
        for m in cls.totals:
            found: Best | None = solved[m]
            if found is not None and cls.late:
                late = max(late, found.value)
            if found is not None and (best is None or found.value > best.value):
                best, witness = found, (m, cls.place(m, found.column))
    if best is None:
        raise InputError(f"every configuration of the known tuples of {adv} has probability zero")
    _, (j, counted, day) = witness
    chosen = None if day is None else (day, best.chosen)
    known = witness_values(win, n, best.borders, best.counts, counted, chosen, values)
    found = AdversaryLeakage(adv, max(best.value, 0.0), Witness(adv, known, float(values[best.t]),
                                                                float(values[best.t_prime]), _output(solver.law, j, n)))
    return found, late


def _window_law(chain: _Chain, law: _Law, quad: Rule, win: Window) -> WindowLaw:
    days = range(win.lo, win.hi + 1)
    emit = tuple(np.stack(e, axis=1) for e in zip(*(law.emissions(quad.v, chain.answers[m]) for m in days)))
    return window_law(chain.unary[win.lo:win.hi + 1], chain.pair[win.lo:win.hi], emit, win)
