"""idp (and pdp within the target's cluster) under a clustered fit by per-cluster factors, every posterior
draw at once (DESIGN §9.6): each draw's leakage (`--parameters draws:S`) and the Bayesian adversary's
over their mixture (`integrated:S`).

Given draw j's parameters a clustered fit factorises over its clusters: y_r ~ Bernoulli(expit(η_jr +
u_c(r))), u_c ~ Normal(0, σ_j) independent. For a one-row release q = Σ_r w_r y_r with w_r in {0, 1}
and shift-invariant noise (Laplace, geometric), idp of target i needs only P_j(q = s, X_i = t)
(DESIGN §2.1), a convolution over the clusters of one-dimensional integrals:

    P_j(q = s, X_i = t) = [T_j(·, t) ⊛ ⊛_{c ≠ c(i), c read} F_jc](s),
    F_jc(m) = Σ_k W_k [z^m] Π_{r in c} (1 − p_jr(u_k) + p_jr(u_k) z^{w_r}),

T_j the same for the target's cluster with X_i = t fixed, on the Gauss–Hermite rule the structured
engine uses (u_k = √2 σ_j x_k, W_k = w_k / √π; rows with equal covariates grouped into binomials,
rows of weight 0 summing to 1). The node count doubles from the engine's start until a draw's
leakage moves by less than the engine's SETTLED (`engines.structured.engine`), so each draw's value
is the structured engine's on build(parameters="draw:K") up to rounding, without a model, a factor
graph or a compiled table per draw. All in linear space, every draw of a chunk at once: every
coefficient is a sum of positive terms, exact to relative rounding while it stays above GUARD; a
draw whose coefficients fall below it is left to the engine (NaN).

pdp knowing records K of the one target's cluster (the rest of its village): the target's cluster's
factor takes P(x_K | u_k) = Π_{r∈K} P(x_r | u_k) inside the node sum, K's records leave its polynomial
(their shift of q is a constant the shift-invariant noise does not see), and the leakage is the max over
x_K, which depends only on how many known records of each covariate group are positive (exchangeable
given the draw; DESIGN §2.1b): Π_g (m_g + 1) configurations, the other clusters unchanged.

The Bayesian adversary's law is the mixture (1/S) Σ_j P_j(q = s, X_i = t) (the latent draw index J
of `fitting.posterior.integrated_model`, whose cluster effects u_c = σ_J z_c sit on the same nodes
z = √2 x_k), settled on the node count as one leakage: S × clusters one-dimensional tables, never
J inside a clique.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, roots_hermite

from ddpbayes.engines.base import AdversaryLeakage, Witness
from ddpbayes.engines.structured.engine import QUADRATURE_MAX, SETTLED, mixture_sups
from ddpbayes.engines.structured.graph import QUADRATURE_START
from ddpbayes.fitting.fitted import FixedClustered
from ddpbayes.fitting.posterior import PosteriorDraws
from ddpbayes.mechanisms import Mechanism
from ddpbayes.problem import Adversary, Problem

GUARD = 1e-280  # smallest coefficient trusted in linear space (float64's normal range ends near 2e-308)
CELLS = 1 << 22  # (draws, nodes, coefficients) cells held at once: draws are taken in chunks under it
MAX_TARGET_CLUSTERS = 4  # targets in more clusters than this: the engine, draw by draw


@dataclass(frozen=True)
class ClusterRelease:
    """idp of `targets` under the one-row release of `weights` (0 or 1 per row) with `mechanism`."""

    weights: np.ndarray
    mechanism: Mechanism
    targets: list[int]
    limit: int  # --max-states, for the mechanism's mixtures
    known: tuple[int, ...] = ()  # pdp: the known records, all in the one target's cluster


def plausible_leakages(problem: Problem, fixed: FixedClustered, draws: PosteriorDraws,
                       targets: list[int]) -> np.ndarray | None:
    """Each draw's idp per target (S, targets; NaN where the engine must decide) for `problem`, one draw's
    audit problem, when the per-cluster factors give it (a one-row 0/1 release, Laplace or geometric noise,
    the targets in few clusters); else None."""
    weights = problem.query.weights(problem.model.n)
    known = known_records(problem, fixed, targets)
    if release_reason(weights, problem.mechanism, targets, fixed) or known is None:
        return None
    release = ClusterRelease(np.asarray(weights, dtype=float), problem.mechanism, targets, problem.settings.max_states,
                             known)
    return draws_leakages(fixed, draws, release)[0]


def known_records(problem: Problem, fixed: FixedClustered, targets: list[int]) -> tuple[int, ...] | None:
    """The records every adversary knows when the per-cluster path takes them (none: idp, also when the problem
    lists no adversary; or, for one target, records of its own cluster: pdp with the rest of the village known),
    else None."""
    sets = {adv.known for adv in problem.adversaries} or {frozenset()}
    if len(sets) != 1:
        return None
    known = tuple(sorted(sets.pop()))
    if known and (len(targets) != 1 or np.any(fixed.cluster_index[list(known)] != fixed.cluster_index[targets[0]])):
        return None
    return known


def integrated_leakages(problem: Problem, fixed: FixedClustered, draws: PosteriorDraws,
                        targets: list[int]) -> tuple[list[AdversaryLeakage], int, float] | None:
    """idp per target under the mixture of the draws' laws, with its witness, the node count it settled at
    and how much it moved from half as many; None when the per-cluster factors do not apply or a coefficient
    falls below GUARD (the engine then audits the integrated model)."""
    weights = problem.query.weights(problem.model.n)
    if release_reason(weights, problem.mechanism, targets, fixed) or known_records(problem, fixed, targets) != ():
        return None
    release = ClusterRelease(np.asarray(weights, dtype=float), problem.mechanism, targets, problem.settings.max_states)
    nodes, previous = QUADRATURE_START, _mixed(fixed, draws, release, QUADRATURE_START)
    while previous is not None and nodes < QUADRATURE_MAX:
        nodes *= 2
        found = _mixed(fixed, draws, release, nodes)
        if found is None:
            return None
        change = max(0.0 if a[0] == b[0] else abs(a[0] - b[0]) for a, b in zip(found, previous))
        if change < SETTLED:
            return [_leakage(problem, t, f) for t, f in zip(targets, found)], nodes, change
        previous = found
    return None


def _mixed(fixed: FixedClustered, draws: PosteriorDraws, release: ClusterRelease,
           nodes: int) -> list[tuple[float, int, int, tuple[float, ...]]] | None:
    """Per target, the sup (`mixture_sups`: value, t, t', y) of the draws' mixed law on `nodes` nodes; None
    when a coefficient fell below GUARD."""
    out = []
    for target in release.targets:
        mixed = np.zeros((1, 2, int(release.weights.sum()) + 1))  # levels 0..Σ w
        for chunk in _chunks(len(draws.sigma), fixed, release):
            laws, ok = draw_laws(fixed, _subset(draws, chunk), release, target, nodes)
            if not ok.all():
                return None
            mixed += laws.sum(axis=0) / len(draws.sigma)
        out.append(_sups(mixed, release, target)[0])
    return out


def _leakage(problem: Problem, target: int, found: tuple[float, int, int, tuple[float, ...]]) -> AdversaryLeakage:
    """The sup as the engine reports it: at least 0, its witness with the target's values."""
    value, t, t_prime, y = found
    values = problem.model.domains[target].values
    adversary = Adversary(target)
    return AdversaryLeakage(adversary, max(value, 0.0), Witness(adversary, {}, float(values[t]),
                                                               float(values[t_prime]), y))


def release_reason(weights: np.ndarray | None, mechanism: Mechanism, targets: list[int],
                   fixed: FixedClustered) -> str | None:
    """Why the per-cluster path does not apply (then the engine audits each draw), or None."""
    if weights is None or not np.isin(weights, (0.0, 1.0)).all():
        return "the release is not one row of 0/1 weights"
    if mechanism.joint or mechanism.profile or not mechanism.shift_invariant:
        return "the noise is not Laplace or geometric"
    if len(np.unique(fixed.cluster_index[targets])) > MAX_TARGET_CLUSTERS:
        return f"the targets lie in more than {MAX_TARGET_CLUSTERS} clusters"
    return None


@dataclass(frozen=True)
class _Rule:
    """Gauss–Hermite nodes x_k and weights W_k = w_k / √π: E f(u) ≈ Σ_k W_k f(√2 σ x_k) for u ~ Normal(0, σ)."""

    x: np.ndarray
    weights: np.ndarray


def _rule(nodes: int) -> _Rule:
    x, w = roots_hermite(nodes)
    return _Rule(x, w / math.sqrt(math.pi))


def draw_laws(fixed: FixedClustered, draws: PosteriorDraws, release: ClusterRelease, target: int,
              nodes: int, orbit: tuple[int, ...] = ()) -> tuple[np.ndarray, bool]:
    """P_j(q = s, X_target = t, x_K) for every draw j (S, 2, levels 0..Σ w) on `nodes` nodes, x_K the known
    records with `orbit[g]` positives in their covariate group g (`known_groups`; the known records' shift of
    q left out: the noise is shift-invariant), and whether every reachable coefficient of every cluster and of
    the total stayed above GUARD (per draw, (S,))."""
    rule, w = _rule(nodes), release.weights
    eta = draws.intercept[:, None] + draws.beta @ fixed.x.T + draws.field[:, fixed.cluster_index]  # (S, n)
    spatial = bool(np.any(draws.field))  # a field at the clusters: no two clusters share a factor
    u = np.sqrt(2.0) * draws.sigma[:, None] * rule.x[None, :]  # (S, N)
    home = fixed.cluster_index[target]
    others, ok = [], np.ones(len(draws.sigma), dtype=bool)
    made: dict[tuple, np.ndarray] = {}  # clusters of the same covariate rows (and field) have the same factor
    for c in range(fixed.n_clusters):
        rows = [r for r in np.flatnonzero(fixed.cluster_index == c) if w[r] and r != target and r not in release.known]
        groups = _groups(fixed.x, rows)
        if c == home:
            given = _known_factor(eta, u, known_groups(fixed, release.known), orbit)
            own = _home(_product(eta, u, groups) * given[..., None], _log_p(eta[:, target, None] + u),
                        int(w[target]), rule)
            ok &= _above(own, int(w[target]))
        elif groups:  # a cluster the release does not read sums to 1 given u: no factor
            key = (tuple((k, len(v)) for k, v in groups.items()), c if spatial else -1)
            if key not in made:
                made[key] = np.einsum("skm,k->sm", _product(eta, u, groups), rule.weights)
                ok &= (made[key] >= GUARD).all(axis=1)
            others.append(made[key])
    total = np.stack([_times(own[j], [f[j] for f in others]) for j in range(len(draws.sigma))])
    return total, ok & _above(total, int(w[target]))


def known_groups(fixed: FixedClustered, known: tuple[int, ...]) -> list[list[int]]:
    """The known records by their covariates (exchangeable given the draw: equal η, the same effect)."""
    return list(_groups(fixed.x, list(known)).values())


def orbits(groups: list[list[int]]) -> list[tuple[int, ...]]:
    """Every configuration of the known records up to exchange within a group: positives per group
    (DESIGN §2.1b, exchangeable known tuples); the one empty configuration when none is known."""
    return list(itertools.product(*[range(len(g) + 1) for g in groups]))


def _known_factor(eta: np.ndarray, u: np.ndarray, groups: list[list[int]], orbit: tuple[int, ...]) -> np.ndarray:
    """P(x_K | u) at every draw and node (S, N): in group g, `orbit[g]` of its records positive."""
    log = np.zeros(u.shape)
    for rows, positive in zip(groups, orbit):
        log_p, log_q = _log_p(eta[:, rows[0], None] + u)
        log += positive * log_p + (len(rows) - positive) * log_q
    return np.exp(log)


def _above(law: np.ndarray, shift: int) -> np.ndarray:
    """Per draw, whether every reachable coefficient of a (S, 2, levels) law is at least GUARD: t = 0 reaches
    levels 0..L − 1 − shift, t = 1 levels shift..L − 1."""
    width = law.shape[2]
    return (law[:, 0, :width - shift] >= GUARD).all(axis=1) & (law[:, 1, shift:] >= GUARD).all(axis=1)


def _home(coefficients: np.ndarray, log_p: tuple[np.ndarray, np.ndarray], shift: int, rule: _Rule) -> np.ndarray:
    """The target's cluster with X_i = t: Σ_k W_k P(X_i = t | u_k) z^(t w_i) Π_{others} (S, 2, m + shift)."""
    own = np.zeros(coefficients.shape[:2] + (2, coefficients.shape[2] + shift))
    own[:, :, 0, :coefficients.shape[2]] = np.exp(log_p[1])[..., None] * coefficients
    own[:, :, 1, shift:] = np.exp(log_p[0])[..., None] * coefficients
    return np.einsum("skta,k->sta", own, rule.weights)


def _times(own: np.ndarray, factors: list[np.ndarray]) -> np.ndarray:
    """One draw's (2, m) target-cluster rows times the other clusters' polynomials (np.convolve: direct sums)."""
    rest = np.ones(1)
    for f in factors:
        rest = np.convolve(rest, f)
    return np.stack([np.convolve(row, rest) for row in own])


def _log_p(logit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log p, log(1 − p)) for p = expit(logit)."""
    return -np.logaddexp(0.0, -logit), -np.logaddexp(0.0, logit)


def _groups(x: np.ndarray, rows: list[int]) -> dict[bytes, list[int]]:
    """The rows by their covariates (equal covariates, equal η in every draw), in the covariates' order."""
    groups: dict[bytes, list[int]] = {}
    for r in rows:
        groups.setdefault(x[r].tobytes(), []).append(r)
    return dict(sorted(groups.items()))


def _product(eta: np.ndarray, u: np.ndarray, groups: dict[bytes, list[int]]) -> np.ndarray:
    """[z^m] Π_{r in rows} (1 − p_r + p_r z) at every draw and node (S, N, rows + 1): each group of rows of
    equal covariates one binomial, the binomials convolved."""
    out = np.ones(u.shape + (1,))
    for members in groups.values():
        out = _convolve(out, _binomial(*_log_p(eta[:, members[0], None] + u), len(members)))
    return out


def _binomial(log_p: np.ndarray, log_q: np.ndarray, m: int) -> np.ndarray:
    """C(m, k) p^k (1 − p)^(m − k) for k = 0..m, along a last axis."""
    k = np.arange(m + 1)
    log_c = gammaln(m + 1) - gammaln(k + 1) - gammaln(m - k + 1)
    return np.exp(log_c + k * log_p[..., None] + (m - k) * log_q[..., None])


def _convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The polynomials along the last axis multiplied, batched over the others (broadcast)."""
    if a.shape[-1] < b.shape[-1]:
        a, b = b, a
    shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-1]) + (a.shape[-1] + b.shape[-1] - 1,)
    out = np.zeros(shape)
    for m in range(b.shape[-1]):
        out[..., m:m + a.shape[-1]] += b[..., m:m + 1] * a
    return out


def leakages(laws: np.ndarray, release: ClusterRelease, target: int) -> np.ndarray:
    """idp of `target` from each law P(q = s, X_target = t) (S, 2, levels): the sup, at least 0."""
    return np.array([max(f[0], 0.0) for f in _sups(laws, release, target)])


def _sups(laws: np.ndarray, release: ClusterRelease, target: int) -> list[tuple[float, int, int, tuple[float, ...]]]:
    """The structured engine's sup (`mixture_sups`: value, t, t', y) of each law (S, 2, levels) over its
    reachable levels."""
    shift = int(release.weights[target])
    levels = np.arange(laws.shape[2], dtype=float)
    with np.errstate(divide="ignore"):
        logw = np.log(laws)
    logw[:, 0, laws.shape[2] - shift:] = -np.inf  # unreachable: t = 0 cannot reach the top level, t = 1 the bottom
    logw[:, 1, :shift] = -np.inf
    return mixture_sups([(row, levels) for row in logw], release.mechanism, release.limit)


def draws_leakages(fixed: FixedClustered, draws: PosteriorDraws,
                   release: ClusterRelease) -> tuple[np.ndarray, np.ndarray]:
    """Each draw's settled idp per target (S, targets), NaN where the engine must decide (a coefficient
    below GUARD, or not settled by QUADRATURE_MAX nodes), and each draw's node count (S,)."""
    count = len(draws.sigma)
    values, settled_at = np.full((count, len(release.targets)), np.nan), np.zeros(count, dtype=int)
    for chunk in _chunks(count, fixed, release):
        part = _subset(draws, chunk)
        nodes, previous, ok = QUADRATURE_START, *_at(fixed, part, release, QUADRATURE_START)
        active = np.arange(len(chunk))
        while nodes < QUADRATURE_MAX and active.size:
            nodes *= 2
            found, ok_now = _at(fixed, _subset(part, active), release, nodes)
            ok_now &= ok[active]
            change = np.where(found == previous[active], 0.0, np.abs(found - previous[active])).max(axis=1)
            done = (change < SETTLED) & ok_now
            values[chunk[active[done]]], settled_at[chunk[active[done]]] = found[done], nodes
            keep = ~done & ok_now
            previous[active[keep]] = found[keep]
            active = active[keep]
    return values, settled_at


def _at(fixed: FixedClustered, draws: PosteriorDraws, release: ClusterRelease,
        nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Every draw's leakage per target on `nodes` nodes (S, targets), and whether all stayed above GUARD."""
    out, ok = np.full((len(draws.sigma), len(release.targets)), -np.inf), np.ones(len(draws.sigma), dtype=bool)
    for a, target in enumerate(release.targets):
        for orbit in orbits(known_groups(fixed, release.known)):  # pdp: the max over x_K (each positive)
            laws, fine = draw_laws(fixed, draws, release, target, nodes, orbit)
            ok &= fine
            out[:, a] = np.maximum(out[:, a], leakages(laws, release, target))
    return out, ok


def _subset(draws: PosteriorDraws, pick: np.ndarray) -> PosteriorDraws:
    return PosteriorDraws(draws.indices[pick], draws.intercept[pick], draws.beta[pick], draws.sigma[pick],
                          draws.field[pick])


def _chunks(count: int, fixed: FixedClustered, release: ClusterRelease) -> list[np.ndarray]:
    """Draws in chunks whose largest array, (draws, QUADRATURE_MAX nodes, 2 × widest cluster) or the
    total law (draws, 2, levels), stays under CELLS."""
    widest = int(np.bincount(fixed.cluster_index).max()) + 2
    per_draw = max(QUADRATURE_MAX * 2 * widest, 2 * (int(release.weights.sum()) + 1))
    size = max(1, CELLS // per_draw)
    return [np.arange(start, min(start + size, count)) for start in range(0, count, size)]
