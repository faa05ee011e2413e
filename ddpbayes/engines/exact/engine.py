"""Exact engine for finite discrete models (DESIGN §2.1).

For an adversary A(i, K), group the enumerated joint by (x_K, X_i = t, query output) to get
the weights of the mixture L(y | t, x_K) = Σ_r W[x_K, t, r] p_M(y | q_r) / P(t, x_K). The
mechanism names the finite set of outputs on which sup_y of the log-ratio is attained (every
breakpoint and both limits for Laplace/geometric, coordinate-wise for a vector; every output
for randomized response), so the supremum is a maximum over a finite grid, taken in log space.
Output coordinates fixed by x_K scale L equally for every t and are dropped.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
from scipy import special

from ddpbayes.engines.base import AdversaryLeakage, Curve, DependenceProfile, Engine, Mixtures, Witness
from ddpbayes.engines.curves import check_drawable, mixture_curve
from ddpbayes.engines.exact.grouping import answer_rows, grouping, weight_table
from ddpbayes.engines.exact.joint import JointTable, joint_table, oversized_reason, unsupported_reason
from ddpbayes.engines.exact.mixtures import exact_mixtures
from ddpbayes.engines.exact.profile import dependence_profile
from ddpbayes.engines.hockey import learns_nothing, mixture_profile
from ddpbayes.numerics import law_changes, logsumexp
from ddpbayes.errors import InputError
from ddpbayes.limits import check_states, count_text
from ddpbayes.problem import Adversary, Problem

_CHUNK = 1 << 22  # elements of the (groups, t, rows, outputs) array evaluated at once


class ExactEngine(Engine):
    name = "exact"

    def supports(self, problem: Problem) -> str | None:
        if problem.mechanism.black_box:
            return "the mechanism is a program, whose output law is unknown (the program engine bounds it)"
        model, limit = problem.model, problem.settings.max_states
        return model.memo("exact", ("reason", limit),  # asked on every audit under auto
                          lambda: unsupported_reason(model) or oversized_reason(model, limit))

    def leakage(self, problem: Problem) -> list[AdversaryLeakage]:
        table = self._table(problem)
        outputs = _Outputs(problem, table)
        if problem.mechanism.profile:  # (ε, δ) noise: the privacy profile of the mixtures (DESIGN §3.5)
            return [_profile_leakage(adv, table, outputs, problem.mechanism, problem.settings.max_states)
                    for adv in problem.adversaries]
        return [_adversary_leakage(adv, table, outputs, problem.settings.max_states) for adv in problem.adversaries]

    def seconds_per_adversary(self, problem: Problem) -> float | None:
        """About 1 ms plus 0.5 us per enumerated configuration (measured: household n = 20,
        2^20 configurations, 0.45 s per adversary; n = 10, 2.7 ms)."""
        configurations = math.prod(len(d.values) for d in problem.model.domains)
        return 1e-3 + 5e-7 * configurations

    def notes(self, problem: Problem) -> list[str]:
        mass = self._table(problem).mass
        if mass < 1 - 1e-9:
            return [f"the enumerated domains cover {mass:.6g} of the prior mass: leakage is for the model conditioned "
                    "on them"]
        return []

    def witness_curve(self, problem: Problem, notion: str, witness: Witness | None) -> Curve:
        check_drawable(problem, witness)
        table = self._table(problem)

        def mixture(problem: Problem, witness: Witness, t: float) -> tuple[np.ndarray, np.ndarray]:
            rows = table.x[:, witness.adversary.target] == t
            for k, v in (witness.known_values or {}).items():
                rows &= table.x[:, k] == v
            logw = table.logp[rows]
            return logw - special.logsumexp(logw), problem.query.values(table.x[rows])[:, 0]

        return mixture_curve(problem, notion, witness, mixture, "exact: enumerated joint", every_break=True)

    def mixtures(self, problem: Problem, adversary: Adversary, shift_invariant: bool) -> Mixtures:
        table = self._table(problem)
        out = _Outputs(problem, table)
        return exact_mixtures(adversary, table, out.levels, out.level_of, shift_invariant)

    def dependence_profile(self, problem: Problem, dependence_sets: list[frozenset[int]]) -> DependenceProfile:
        return dependence_profile(self._table(problem), problem.model.names, dependence_sets)

    def dependence_sets(self, problem: Problem) -> list[frozenset[int]]:
        model = problem.model
        table = self._table(problem)
        p = np.exp(table.logp)
        sets = []
        for i in range(model.n):
            dep = set()
            for j in range(model.n):
                if j == i:
                    continue
                ni, nj = len(table.values[i]), len(table.values[j])
                joint = np.bincount(table.codes[:, i] * nj + table.codes[:, j], p, ni * nj).reshape(ni, nj)
                if law_changes(joint):
                    dep.add(j)
            sets.append(frozenset(dep))
        return sets

    @staticmethod
    def _table(problem: Problem) -> JointTable:
        return joint_table(problem.model, problem.settings.max_states)


class _Outputs:
    """Query outputs of every state and each coordinate's kernel on its sup-attaining grid."""

    def __init__(self, problem: Problem, table: JointTable):
        with np.errstate(over="ignore", invalid="ignore"):
            q = problem.query.values(table.x)
        if not np.all(np.isfinite(q)):
            raise InputError("the query's values overflow double precision: rescale its weights")
        self.levels, self.level_of, self.grid, self.log_kernel = [], [], [], []
        self.joint = problem.mechanism if problem.mechanism.joint else None
        for c in range(q.shape[1]):
            levels, inverse = np.unique(q[:, c], return_inverse=True)
            self.levels.append(levels)
            self.level_of.append(inverse)
            mechanism = problem.mechanism.coordinate(c)
            if mechanism.profile or self.joint:  # a profile, or one law over every coordinate (`_joint_kernel`)  # no sup over outputs: the mixtures' profile instead (`_profile_leakage`)
                continue
            size = mechanism.grid_size(len(levels)) * len(levels)
            check_states(size, f"the mechanism's kernel ({len(levels):,} query values)", "cells",
                         problem.settings.max_states)
            grid, logk = mechanism.log_kernel(levels)
            self.grid.append(grid)
            self.log_kernel.append(logk)

    @property
    def coordinates(self) -> int:
        return len(self.levels)


def _adversary_leakage(adv: Adversary, table: JointTable, out: _Outputs, limit: int) -> AdversaryLeakage:
    if out.joint is not None and out.joint.continuous:
        return _continuous_leakage(adv, table, out, limit)
    grouped = grouping(adv, table, out.levels, out.level_of, every=out.joint is not None)
    group, n_groups, active, row_levels = grouped.group, grouped.n_groups, grouped.active, grouped.row_levels
    n_rows, n_t = grouped.n_rows, len(table.values[adv.target])
    if out.joint is not None:
        outputs, log_k = _joint_kernel(adv, out, grouped, limit)
        shape, n_grid = (len(outputs),), len(outputs)
    else:
        shape = tuple(len(out.grid[c]) for c in active)
        n_grid = math.prod(shape)  # counted, never listed: the grid is refused before it is built (DESIGN §2.4)
        check_states(n_rows * n_grid, f"the output grid for {adv} ({n_rows:,} rows x {count_text(n_grid)} grid "
                     "points)", "cells", limit)
    _check_weights(adv, n_groups, n_t, n_rows, limit)
    if out.joint is None:
        points = np.unravel_index(np.arange(n_grid), shape) if active else ()  # itertools.product's order
        log_k = np.zeros((n_rows, n_grid))
        for a, c in enumerate(active):
            log_k += out.log_kernel[c][points[a]][:, row_levels[:, a]].T

    log_w = weight_table(grouped, table, adv.target)
    log_pt = logsumexp(log_w, axis=2)  # log P(t, x_K)

    best = (-1.0, 0, 0, 0, 0)  # value, group, grid point, t, t'
    per_grid = max(1, min(n_grid, _CHUNK // max(1, n_t * n_rows)))  # a group larger than a chunk: split its grid
    per_group = max(1, _CHUNK // (n_t * n_rows * per_grid))
    for g0, p0 in itertools.product(range(0, n_groups, per_group), range(0, n_grid, per_grid)):
        sl, ps = slice(g0, min(n_groups, g0 + per_group)), slice(p0, min(n_grid, p0 + per_grid))
        possible = log_pt[sl] > -np.inf  # (g, t)
        with np.errstate(invalid="ignore"):
            log_l = logsumexp(log_w[sl][:, :, :, None] + log_k[None, None, :, ps], axis=2) - log_pt[sl][:, :, None]
        hi = np.where(possible[:, :, None], log_l, -np.inf)
        lo = np.where(possible[:, :, None], log_l, np.inf)
        with np.errstate(invalid="ignore"):
            ratio = hi.max(axis=1) - lo.min(axis=1)  # (g, grid points of the chunk)
        ratio[np.isnan(ratio)] = -np.inf  # an output no possible t gives (a joint law's zeros): no ratio there
        ratio[possible.sum(axis=1) < 2] = 0.0
        g, p = np.unravel_index(np.argmax(ratio), ratio.shape)
        if ratio[g, p] > best[0]:
            best = (float(ratio[g, p]), g0 + g, p0 + p, *_pair(hi[g, :, p], lo[g, :, p]))
    value, g, p, t, t_prime = best
    if out.joint is not None:
        witness = _witness(adv, table, out, group, g, [], (), t, t_prime)
        return AdversaryLeakage(adv, max(value, 0.0), replace(witness, y=tuple(float(v) for v in outputs[p])))
    grid_point = tuple(int(i) for i in np.unravel_index(p, shape)) if active else ()
    return AdversaryLeakage(adv, max(value, 0.0), _witness(adv, table, out, group, g, active, grid_point, t, t_prime))


def _continuous_leakage(adv: Adversary, table: JointTable, out: _Outputs, limit: int) -> AdversaryLeakage:
    """A joint law with a continuous output (the noisy maximum, DESIGN §5.2): the mechanism takes the supremum
    over outputs from each x_K group's mixture weights (`Mechanism.sup_log_ratio`)."""
    grouped = grouping(adv, table, out.levels, out.level_of, every=True)
    n_t = len(table.values[adv.target])
    _check_weights(adv, grouped.n_groups, n_t, grouped.n_rows, limit)
    answers = answer_rows(grouped, out.levels)
    log_w = weight_table(grouped, table, adv.target)
    log_pt = logsumexp(log_w, axis=2)
    best = (-1.0, 0, 0, 0, ())
    for g in range(grouped.n_groups):
        possible = np.flatnonzero(log_pt[g] > -np.inf)
        if len(possible) < 2:
            continue
        value, t, t_prime, y = out.joint.sup_log_ratio(log_w[g, possible] - log_pt[g, possible, None], answers)
        if value > best[0]:
            best = (value, g, int(possible[t]), int(possible[t_prime]), y)
    value, g, t, t_prime, y = best
    if value < 0:  # no x_K leaves two target values: nothing to learn
        possible = np.flatnonzero(log_pt[0] > -np.inf)
        t = t_prime = int(possible[0])
    witness = _witness(adv, table, out, grouped.group, g, [], (), t, t_prime)
    return AdversaryLeakage(adv, max(value, 0.0), replace(witness, y=tuple(float(v) for v in y) or None))


def _joint_kernel(adv: Adversary, out: _Outputs, grouped, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """A joint output law (report-noisy-max, sparse vector, ...; DESIGN §5.2): the outputs (G, d) on which the sup
    is attained for the distinct answer vectors of the rows, and log p(y_g | answers_r) as (rows, G)."""
    answers = answer_rows(grouped, out.levels)
    mechanism = out.joint
    n_outputs = mechanism.output_count(answers)
    check_states(grouped.n_rows * n_outputs, f"the {mechanism.kind} law for {adv} ({grouped.n_rows:,} answer vectors "
                 f"x {count_text(n_outputs)} outputs)", "cells", limit)
    outputs = mechanism.output_space(answers)
    return outputs, mechanism.log_prob(outputs, answers).T


def _check_weights(adv: Adversary, n_groups: int, n_t: int, n_rows: int, limit: int) -> None:
    """Refuse the dense (known values, t, rows) weight table of `adv` above the state limit, before it is built."""
    check_states(n_groups * n_t * n_rows, f"the mixture weights of {adv} ({n_groups:,} known-value groups x {n_t:,} "
                 f"target values x {n_rows:,} output rows)", "cells", limit)


def _profile_leakage(adv: Adversary, table: JointTable, out: _Outputs, mechanism, limit: int) -> AdversaryLeakage:
    """The adversary's privacy profile under (ε, δ) noise on one varying output coordinate
    (`engines.hockey`); several varying coordinates would need a multi-dimensional integral."""
    grouped = grouping(adv, table, out.levels, out.level_of)
    if len(grouped.active) > 1:
        raise InputError(f"{mechanism.kind} noise on {len(grouped.active)} output coordinates that vary given the "
                         f"known tuples of {adv}: the privacy profile is then a multi-dimensional integral, not "
                         "computed (release one coordinate, or a jointly Gaussian model on the gaussian engine)")
    n_t = len(table.values[adv.target])
    _check_weights(adv, grouped.n_groups, n_t, grouped.n_rows, limit)
    log_w = weight_table(grouped, table, adv.target)
    found = None
    if grouped.active:
        c = grouped.active[0]
        found = mixture_profile(log_w, out.levels[c][grouped.row_levels[:, 0]], mechanism.coordinate(c))
    if found is None:
        possible = np.isfinite(logsumexp(log_w, axis=2))
        g = int(np.argmax(possible.sum(axis=1)))
        t, t_prime = _pair(np.where(possible[g], 0.0, -np.inf), np.where(possible[g], 0.0, np.inf))
        return learns_nothing(adv, _witness(adv, table, out, grouped.group, g, [], (), t, t_prime, y=False), mechanism)
    witness = _witness(adv, table, out, grouped.group, found.group, [], (), found.t, found.t_prime, y=False)
    return found.leakage(adv, witness, mechanism)


def _pair(hi: np.ndarray, lo: np.ndarray) -> tuple[int, int]:
    """The target values t, t' attaining the largest log-ratio at one output (hi: log L, -inf where
    t is impossible; lo: the same with +inf); two different values whenever two are possible,
    even when every log-ratio is 0."""
    t = int(hi.argmax())
    rest = lo.copy()
    rest[t] = np.inf
    t_prime = int(lo.argmin())
    if t_prime == t and np.isfinite(rest).any():
        t_prime = int(rest.argmin())
    return t, t_prime


def _witness(adv, table, out, group, g, active, grid_point, t, t_prime, y: bool = True) -> Witness:
    """The witness of group `g` (y on the grid; none for a privacy profile, whose witness is a set of outputs)."""
    member = int(np.flatnonzero(group == g)[0])
    known_values = {k: float(table.x[member, k]) for k in sorted(adv.known)}
    values = table.values[adv.target]
    if not y:
        return Witness(adv, known_values, float(values[t]), float(values[t_prime]), None)
    y = []
    for c in range(out.coordinates):
        if c in active:
            y.append(float(out.grid[c][grid_point[active.index(c)]]))
        else:  # fixed by x_K: every output of this coordinate gives the same ratio
            y.append(float(out.levels[c][out.level_of[c][member]]))
    return Witness(adv, known_values, float(values[t]), float(values[t_prime]), tuple(y))

