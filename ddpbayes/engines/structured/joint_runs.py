"""pdp over every known set for a joint law on a chain (issue #43 item 4, DESIGN §2.1b): each target's worst
adversary knows every day outside one run [s, e] ∋ i (a run adversary), and the runs far from the target are
pruned by a certified bound, so the maximum over all (i + 1)(n − i) runs is exact while only a box of them is
solved.

The bound (DESIGN §2.1b): for s < s' ≤ i ≤ e, leak(s, e) ≤ leak(s', e) + Δ(G_{s'−1}), where
G_m = ψ_m D_{m+1} ψ_{m+1} ··· D_{i−1} ψ_{i−1} is the chain's kernel from day m to the target (ψ the pairwise
tables, D the diagonal of the unary ones) and Δ(G) = max log G[x, t] G[x', t'] / (G[x, t'] G[x', t]) its
projective diameter (Birkhoff), ∞ with a zero entry; on the right, for e > e' ≥ i, leak(s, e) ≤ leak(s, e') +
Δ(H_{e'+1}) with H_m = ψ_i D_{i+1} ··· D_{m−1} ψ_{m−1}. Each target's box [lo, i] × [i, hi] of runs is solved
(rounds share the count route's memo), and the runs outside it are bounded by the box's edge plus the diameters;
a side whose bound exceeds the box's best is widened (its depth doubled) until none does. The bound holds output by
output, and the outputs whose law is free of the days after the target (SVT's first TRUE at or before it) leak the
same at every e, so past the box's right edge only the late outputs' largest ratio (`joint._Class.late`) is bounded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ddpbayes.engines.base import AdversaryLeakage
from ddpbayes.engines.structured.graph import FactorGraph
from ddpbayes.engines.structured.joint import JointSolver, _enumeration_reason, joint_reason
from ddpbayes.errors import InputError
from ddpbayes.problem import Adversary, Problem

FIRST_DEPTH = 2  # days each side of the target in the first box
CHUNK = 1 << 12  # run adversaries solved at a time (each holds its known set and witness, n values each)
ROUNDING = 1e-10  # added to each diameter: a kernel of d products of k x k tables (each scaled) is off by about
# (d + 1) k 2^-53 relatively per entry, Δ adds four logs of entries: 5e-13 at d = 365, k = 3, far below


@dataclass
class RunSearch:
    """What the search did, for the notes: runs in the lattice's reduction, runs solved, boxes' largest depths."""

    runs: int = 0
    solved: int = 0
    deepest: int = 0


def diameter(g: np.ndarray) -> float:
    """Birkhoff's projective diameter max over x, x', t, t' of log g[x,t] g[x',t'] / (g[x,t'] g[x',t]); ∞ when g has a
    zero entry (then no run is pruned)."""
    if (g <= 0).any():
        return math.inf
    log_g = np.log(g)
    diff = log_g[:, :, None] - log_g[:, None, :]  # (x, t, t')
    return float((diff.max(axis=0) - diff.min(axis=0)).max())


def side_diameters(unary: np.ndarray, pair: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Δ(G_m) for m = i − 1, i − 2, .., 0 (left[d] is m = i − 1 − d) and Δ(H_m) for m = i + 1, .., n − 1
    (right[d] is m = i + 1 + d), each plus ROUNDING; the kernels scaled to their maxima as they are multiplied
    (Δ is free of the scale)."""
    n = unary.shape[0]
    left, right = [], []
    g = None
    for m in range(i - 1, -1, -1):
        g = pair[m] if g is None else pair[m] @ (unary[m + 1][:, None] * g)
        g = g / g.max()
        left.append(diameter(g) + ROUNDING)
    h = None
    for m in range(i + 1, n):
        h = pair[i] if h is None else (h * unary[m - 1][None, :]) @ pair[m - 1]
        h = h / h.max()
        right.append(diameter(h) + ROUNDING)
    return np.array(left), np.array(right)


@dataclass
class _Box:
    """One target's solved runs [lo, i] × [i, hi], their leaks (s − lo, e − i) and the diameters."""

    target: int
    lo: int
    hi: int
    left: np.ndarray
    right: np.ndarray

    def runs(self) -> list[tuple[int, int]]:
        return [(s, e) for s in range(self.lo, self.target + 1) for e in range(self.target, self.hi + 1)]

    def outside_bounds(self, leak: dict[tuple[int, int], float], late: dict[tuple[int, int], float],
                       ) -> tuple[float, float]:
        """The bound on the runs reaching past lo (left) and past hi (right), both past counted on each side (−∞ for a
        side at the chain's end). Past hi only the late outputs (`late`: their largest ratio) are bounded: the others'
        law is free of the days after the target, so a run past hi leaks on them what (s, hi) does (≤ the best)."""
        i, lo, hi = self.target, self.lo, self.hi
        d_left = self.left[i - lo] if lo > 0 else None  # Δ(G_{lo−1})
        d_right = self.right[hi - i] if hi < len(self.right) + i else None  # Δ(H_{hi+1})
        left = right = -math.inf
        if d_left is not None:
            left = max(leak[(lo, e)] for e in range(i, hi + 1)) + d_left
        if d_right is not None:
            right = max(late[(s, hi)] for s in range(lo, i + 1)) + d_right
        if d_left is not None and d_right is not None:
            both = late[(lo, hi)] + d_left + d_right
            left, right = max(left, both), max(right, both)
        return left, right


def run_known(n: int, s: int, e: int) -> frozenset[int]:
    return frozenset(range(s)) | frozenset(range(e + 1, n))


def pdp_over_runs(problem: Problem, graph: FactorGraph, targets, first_depth: int = FIRST_DEPTH,
                  ) -> tuple[list[AdversaryLeakage], RunSearch, JointSolver]:
    """Each target's worst run adversary (pdp over every known set, DESIGN §2.1b), ties to the longest run among
    those solved; boxes widened in rounds, each round's new runs solved together."""
    reason = joint_reason(problem, graph)
    if reason:
        raise InputError(f"the structured engine cannot solve this joint law: {reason}")
    n = problem.model.n
    solver = JointSolver.of(problem, graph)
    boxes = {i: _Box(i, max(0, i - first_depth), min(n - 1, i + first_depth),
                     *side_diameters(solver.chain.unary, solver.chain.pair, i)) for i in targets}
    leaks: dict[int, dict[tuple[int, int], float]] = {i: {} for i in targets}
    lates: dict[int, dict[tuple[int, int], float]] = {i: {} for i in targets}
    worst: dict[int, tuple[tuple, AdversaryLeakage]] = {}
    open_ = list(boxes)
    while open_:
        _solve_round(problem, graph, solver, [boxes[i] for i in open_], leaks, lates, worst)
        open_ = [i for i in open_ if _widen(boxes[i], leaks[i], lates[i], n)]
    search = RunSearch(runs=sum((i + 1) * (n - i) for i in targets), solved=sum(len(leaks[i]) for i in targets),
                       deepest=max(max(i - boxes[i].lo, boxes[i].hi - i) for i in targets))
    return [worst[i][1] for i in targets], search, solver


def _solve_round(problem: Problem, graph: FactorGraph, solver: JointSolver, boxes: list[_Box],
                 leaks: dict[int, dict[tuple[int, int], float]], lates: dict[int, dict[tuple[int, int], float]],
                 worst: dict[int, tuple[tuple, AdversaryLeakage]]) -> None:
    """Solve every box's runs not yet solved, CHUNK at a time (`JointSolver.solve`; its memo kept across them), by
    their counts wherever they reduce (`joint_counts`: one window pass, not one whole-chain pass per known
    configuration); keep each run's leak, its late outputs' (the leak itself for a run not counted) and each target's worst adversary (largest leak, ties to the longest run,
    then the earliest). Only the worst adversaries are held, not every run's known set and witness (n values each)."""
    n = problem.model.n
    runs = [(b.target, (s, e)) for b in boxes for s, e in b.runs() if (s, e) not in leaks[b.target]]
    for first in range(0, len(runs), CHUNK):
        wanted = {Adversary(i, run_known(n, s, e)): (i, (s, e)) for i, (s, e) in runs[first:first + CHUNK]}
        batch = problem.with_adversaries(list(wanted))
        why = _enumeration_reason(batch, graph)
        if why:
            raise InputError(f"the structured engine cannot search pdp's run adversaries: {why}")
        late: dict[Adversary, float] = {}
        for adv, found in solver.solve(batch, batch.adversaries, counts_first=True, late=late).items():
            i, (s, e) = wanted[adv]
            leaks[i][(s, e)] = found.value
            lates[i][(s, e)] = late.get(adv, found.value)
            rank = (found.value, e - s, -s)
            if i not in worst or rank > worst[i][0]:
                worst[i] = (rank, found)


def _widen(box: _Box, value: dict[tuple[int, int], float], late: dict[tuple[int, int], float], n: int) -> bool:
    """Widen each side whose outside bound exceeds the box's best; False when neither does."""
    best = max(value.values())
    left, right = box.outside_bounds(value, late)
    i = box.target
    if left > best:
        box.lo = i - _deeper(box.left, i - box.lo, left - best, i)
    if right > best:
        box.hi = i + _deeper(box.right, box.hi - i, right - best, n - 1 - i)
    return left > best or right > best


def _deeper(diameters: np.ndarray, depth: int, excess: float, most: int) -> int:
    """The next depth of a side whose bound, Δ at `depth` plus the edge's leak, exceeds the best by `excess`: the
    first depth whose Δ is smaller by that much (the edge's leak taken as it is now), at least one more and at most
    double (a guess only: the bound is checked again on the new edge)."""
    wanted = diameters[depth] - excess
    below = np.flatnonzero(diameters[depth + 1:] <= wanted)
    step = int(below[0]) + 1 if below.size else depth
    return min(most, depth + max(1, min(step, depth)))
