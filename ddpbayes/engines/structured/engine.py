"""Structured exact engine: integer linear queries on factor graphs of small treewidth (issue 13).

For a linear query with integer weights on integer-valued tuples released with Laplace or
two-sided geometric noise, L(y | t, x_K) = Σ_s P(q = s | X_i = t, x_K) p_M(y | s), and the sup
over y is a maximum over the breakpoints s and the limits y -> ±inf (DESIGN §2.1; 004 Lemma 1).
So each adversary needs only log P(q = s, X_i = t, X_K = x_K) for every s and t, which variable
elimination with a partial-sum axis gives without enumerating the joint: the cost grows with
the model's treewidth and the query's range, not with the number of states.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ddpbayes.engines.base import AdversaryLeakage, Engine, Witness
from ddpbayes.engines.exact.joint import unsupported_reason
from ddpbayes.engines.logspace import law_changes, logsumexp
from ddpbayes.engines.structured.graph import FactorGraph, eliminate, factor_graph
from ddpbayes.engines.structured.potential import Potential
from ddpbayes.errors import InputError
from ddpbayes.limits import check_states
from ddpbayes.mechanisms import Laplace, Mechanism
from ddpbayes.model.domains import Finite
from ddpbayes.problem import Adversary, Problem
from ddpbayes.queries import Linear


class StructuredEngine(Engine):
    name = "structured"

    def supports(self, problem: Problem) -> str | None:
        reason = unsupported_reason(problem.model)
        if reason:
            return reason
        if not isinstance(problem.query, Linear):
            return f"the query '{problem.query.spec}' is not linear (use count, sum or linear: with integer weights)"
        w = problem.query.weights(problem.model.n)
        if len(w) != problem.model.n or not np.all(np.isfinite(w)) or np.any(np.mod(w, 1) != 0):
            return f"the query '{problem.query.spec}' needs integer weights, one per tuple"
        for k, d in enumerate(problem.model.domains):
            if not (isinstance(d, Finite) and all(float(v).is_integer() for v in d.values)):
                return f"tuple '{problem.model.names[k]}' is not integer-valued (domain {d})"
        if not (isinstance(problem.mechanism, Laplace) and problem.mechanism.kind in ("laplace", "geometric")):
            return f"the {problem.mechanism.kind} mechanism is not Laplace or geometric noise"
        return None

    def leakage(self, problem: Problem) -> list[AdversaryLeakage]:
        self._check(problem)
        limit = problem.settings.max_states
        graph = factor_graph(problem.model, limit)
        contribution = _contributions(problem, graph)
        return [_adversary_leakage(adv, graph, contribution, problem.mechanism, limit) for adv in problem.adversaries]

    def notes(self, problem: Problem) -> list[str]:
        graph = factor_graph(problem.model, problem.settings.max_states)
        zero = [np.zeros(s, dtype=np.int64) for s in graph.sizes]
        mass = math.exp(float(eliminate(graph, zero, {}, (), problem.settings.max_states).table[0]))
        if mass < 1 - 1e-9:
            note = f"the enumerated domains cover {mass:.6g} of the prior mass: leakage is for the model conditioned on them"
            return [note]
        return []

    def dependence_sets(self, problem: Problem) -> list[frozenset[int]]:
        """N(i) = {j : P(X_j | X_i = t) changes with t}, from each pair's marginal P(X_i, X_j)
        (tolerance 1e-10, as the exact engine); tuples in different components of the
        interaction graph are independent and skipped."""
        limit = problem.settings.max_states
        graph = factor_graph(problem.model, limit)
        zero = [np.zeros(s, dtype=np.int64) for s in graph.sizes]
        component = _components(graph)
        n = problem.model.n
        sets: list[set[int]] = [set() for _ in range(n)]
        for i, j in itertools.combinations(range(n), 2):
            if component[i] != component[j]:
                continue
            joint = eliminate(graph, zero, {}, (i, j), limit).table[..., 0]
            if law_changes(np.exp(joint)):
                sets[j].add(i)
            if law_changes(np.exp(joint.T)):
                sets[i].add(j)
        return [frozenset(s) for s in sets]

    def _check(self, problem: Problem) -> None:
        reason = self.supports(problem)
        if reason:
            raise InputError(f"the structured engine cannot solve this problem: {reason}")


def _contributions(problem: Problem, graph: FactorGraph) -> list[np.ndarray]:
    """w_k · value for every value of every slot (0 for latents), as integers."""
    w = problem.query.weights(problem.model.n)
    out = [np.rint(w[k] * graph.values[k]).astype(np.int64) for k in range(problem.model.n)]
    return out + [np.zeros(s, dtype=np.int64) for s in graph.sizes[problem.model.n:]]


def _adversary_leakage(adv: Adversary, graph: FactorGraph, contribution: list[np.ndarray], mechanism: Mechanism,
                       limit: int) -> AdversaryLeakage:
    """max over x_K of P(x_K) > 0 (in mixed-radix order; ties: the first) of the sup for x_K."""
    known = sorted(adv.known)
    check_states(math.prod(graph.sizes[k] for k in known), f"the known values of {adv}", "configurations", limit)
    best = None
    for codes in itertools.product(*[range(graph.sizes[k]) for k in known]):
        clamped = dict(zip(known, codes))
        pot = eliminate(graph, contribution, clamped, (adv.target,), limit)
        shift = sum(int(contribution[k][c]) for k, c in clamped.items())
        weights = _mixture(pot, contribution[adv.target], shift)
        if weights is None:  # P(x_K) = 0
            continue
        found = _sup(*weights, mechanism, limit)
        if best is None or found[0] > best[0]:
            best = (*found, clamped)
    if best is None:
        raise InputError(f"every configuration of the known tuples of {adv} has probability zero")
    value, t, t_prime, y, clamped = best
    values = graph.values[adv.target]
    known_values = {k: float(graph.values[k][c]) for k, c in clamped.items()}
    return AdversaryLeakage(adv, max(value, 0.0), Witness(adv, known_values, float(values[t]), float(values[t_prime]), (y,)))


def _mixture(pot: Potential, target: np.ndarray, shift: int) -> tuple[np.ndarray, np.ndarray] | None:
    """log P(q = s, X_i = t, x_K) as (values of t, levels s of positive probability) and the levels."""
    low, high = int(target.min()), int(target.max())
    width = pot.length + high - low
    logw = np.full((len(target), width), -np.inf)
    for t, c in enumerate(target):
        logw[t, int(c) - low:int(c) - low + pot.length] = pot.table[t]
    alive = np.flatnonzero(np.any(logw > -np.inf, axis=0))
    if alive.size == 0:
        return None
    return logw[:, alive], (pot.offset + low + shift + alive).astype(float)


def _sup(logw: np.ndarray, levels: np.ndarray, mechanism: Mechanism, limit: int) -> tuple[float, int, int, float]:
    """max over t, t' with P(t, x_K) > 0 and y on the mechanism's grid of log L(y|t) - log L(y|t')
    (DESIGN §2.1): the value, t, t' (indices) and y; 0 when one value of t is possible."""
    check_states(mechanism.grid_size(len(levels)) * len(levels) * len(logw),
                 f"the mechanism's kernel ({len(levels):,} query values)", "cells", limit)
    grid, log_k = mechanism.log_kernel(levels)
    log_pt = logsumexp(logw, axis=1)
    possible = np.flatnonzero(log_pt > -np.inf)
    if possible.size < 2:
        return 0.0, int(possible[0]), int(possible[0]), float(grid[0])
    log_l = logsumexp(logw[possible][:, None, :] + log_k[None], axis=2) - log_pt[possible][:, None]  # (t, y)
    ratio = log_l.max(axis=0) - log_l.min(axis=0)
    g = int(np.argmax(ratio))
    return float(ratio[g]), int(possible[log_l[:, g].argmax()]), int(possible[log_l[:, g].argmin()]), float(grid[g])


def _components(graph: FactorGraph) -> list[int]:
    """Connected component of every slot in the interaction graph (union-find)."""
    parent = list(range(graph.slots))

    def root(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for p in graph.factors:
        for u, v in zip(p.scope, p.scope[1:]):
            parent[root(u)] = root(v)
    return [root(v) for v in range(graph.slots)]
