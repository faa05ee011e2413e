"""Continual release on chains: every tuple released with its own noise (issue 13, DESIGN §2.1c).

The identity query with randomized response, Laplace or two-sided geometric noise on every
coordinate is the continual release of Cao, Yoshikawa, Xiao and Xiong, "Quantifying
Differential Privacy under Temporal Correlations" (ICDE 2017); their temporal privacy leakage
TPL_t = BPL_t + FPL_t - eps_t is leak(t, {}) here. On a chain (a Markov random field whose
interaction graph is a path, in any slot order), X_i = t separates the past from the future:

    L(y | t, x_K) ∝ f(y_before | t) · K(y_i | t) · f(y_after | t),

so for a fixed ordered pair (t, t') the sup over y of the log-ratio is the sum of three sups
over disjoint coordinates: the backward part (Cao's L^B(BPL_{i-1})), the release at i (eps)
and the forward part (L^F(FPL_{i+1})). A known tuple cuts its side: the nearest one on each side
pins the end of a bridge, and the tuples past it no longer matter (Markov property).

Exact for tuples with at most two values: a side's likelihood vector g enters only through the
ratio g(1)/g(0), each day maps the achievable ratios by a monotone Möbius map times the kernel
ratio K(y|1)/K(y|0), so the ratio-minimising and -maximising ends propagate alone (the LO and
HI rows of a message), in O(n) for every target at once. The kernel ratio's extremes are read
on the mechanism's own sup-attaining grid (`Mechanism.log_kernel`, DESIGN §2.1): for
Laplace and geometric noise the ratio is monotone between the two values and constant beyond,
so its extremes are attained at the values themselves and every witness output is finite.
Tuples with more values are refused (`continual_reason`): the achievable likelihood vectors
then form a polytope in the simplex whose vertex count can grow with the chain.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ddpbayes.engines.base import AdversaryLeakage, Witness
from ddpbayes.engines.structured.graph import FactorGraph
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Mechanism
from ddpbayes.problem import Adversary, Problem
from ddpbayes.queries import Identity

LO, HI, PRIOR = 0, 1, 2  # rows of a message: the ratio-minimising end, the -maximising end, no noise


def continual_reason(problem: Problem, graph: FactorGraph) -> str | None:
    """None when `problem` is a continual release on a chain of two-valued tuples, else why not."""
    if not isinstance(problem.query, Identity):
        return f"the query '{problem.query.spec}' is not identity (continual release perturbs every tuple)"
    if not (problem.mechanism.laplace or problem.mechanism.flips_bits):
        return f"the {problem.mechanism.kind} mechanism is not randomized response, Laplace or geometric noise"
    names = problem.model.names
    if graph.slots > len(names):
        return f"the model has {graph.slots - len(names)} latent slot(s): continual release is solved on chains of tuples only"
    defect = _chain_defect(graph, names)
    if defect:
        return defect
    wide = next((k for k, size in enumerate(graph.sizes) if size > 2), None)
    if wide is not None:
        return (f"tuple '{names[wide]}' takes {graph.sizes[wide]} values: continual release is solved exactly for "
                "two-valued tuples only")
    return None


def continual_leakage(problem: Problem, graph: FactorGraph) -> list[AdversaryLeakage]:
    """leak(i, K) (DESIGN §1) for every adversary of `problem`, in order: exact on a chain of
    two-valued tuples (else InputError with `continual_reason`). Both sides' recursions run once,
    O(n); each adversary adds O(1), or a bridge from its nearest known tuples, and O(n) for its
    witness: x_K (the nearest known tuples' maximising values, the others completed with positive
    probability), t, t' and y (finite outputs attaining the sup; coordinates that do not matter
    take the output maximising their kernel ratio)."""
    reason = continual_reason(problem, graph)
    if reason:
        raise InputError(f"continual release cannot be solved on this chain: {reason}")
    release = _Release(graph, problem.mechanism, _path_order(_neighbours(graph)))
    return [release.leakage(adv) for adv in problem.adversaries]


# --------------------------------------------------------------------------- the chain


def _neighbours(graph: FactorGraph) -> list[set[int]]:
    """The interaction graph: slots sharing a factor."""
    near: list[set[int]] = [set() for _ in range(graph.slots)]
    for p in graph.factors:
        for a in p.scope:
            near[a].update(b for b in p.scope if b != a)
    return near


def _path_order(near: list[set[int]]) -> list[int]:
    """The slots along the path, each component walked from its lowest endpoint and the
    components in the order of those endpoints (slots on a cycle are never reached)."""
    order: list[int] = []
    seen: set[int] = set()
    for start in range(len(near)):
        if start in seen or len(near[start]) > 1:
            continue
        slot: int | None = start
        while slot is not None:
            order.append(slot)
            seen.add(slot)
            slot = next((b for b in near[slot] if b not in seen), None)
    return order


def _chain_defect(graph: FactorGraph, names: list[str]) -> str | None:
    """Why the interaction graph is not a path (or a union of paths), or None."""
    for p in graph.factors:
        scope = sorted(set(p.scope))
        if len(scope) > 2:
            return f"a factor couples {len(scope)} tuples ({', '.join(names[k] for k in scope)}): not a chain"
    near = _neighbours(graph)
    for k, others in enumerate(near):
        if len(others) > 2:
            listed = ", ".join(names[b] for b in sorted(others))
            return f"tuple '{names[k]}' interacts with {len(others)} others ({listed}): not a chain"
    if len(_path_order(near)) < graph.slots:
        return "the tuples' interaction graph has a cycle: not a chain"
    return None


@dataclass(frozen=True)
class _Side:
    """The chain read in one direction: position k holds slot order[k]."""

    order: list[int]
    own: list[np.ndarray]  # (3, d): log u_k plus log K at the LO and HI outputs; log u_k alone (PRIOR)
    edges: list[np.ndarray]  # (d_k, d_{k+1}): log ψ between positions k and k + 1
    outputs: list[tuple[float, float]]  # the LO and HI outputs of every position

    def reversed(self) -> _Side:
        return _Side(self.order[::-1], self.own[::-1], [e.T for e in self.edges[::-1]], self.outputs[::-1])


def _forward_side(graph: FactorGraph, mechanism: Mechanism, order: list[int]) -> _Side:
    """The factors multiplied into unary and pairwise log-potentials along `order` (unnormalised: a
    chain MRF; components of a union of paths are joined by constant potentials, i.e. independence)."""
    at = {slot: k for k, slot in enumerate(order)}
    unary = [np.zeros(graph.sizes[s]) for s in order]
    edges = [np.zeros((graph.sizes[a], graph.sizes[b])) for a, b in itertools.pairwise(order)]
    for p in graph.factors:
        table = p.table[..., 0]
        if len(p.scope) == 1:
            unary[at[p.scope[0]]] += table
        elif len(p.scope) == 2:
            a, b = at[p.scope[0]], at[p.scope[1]]
            if a < b:
                edges[a] += table
            else:
                edges[b] += table.T
    kernels: dict[tuple[float, ...], tuple[np.ndarray, tuple[float, float]]] = {}
    own, outputs = [], []
    for k, slot in enumerate(order):
        key = tuple(graph.values[slot].tolist())
        if key not in kernels:
            kernels[key] = _kernel_ends(mechanism, graph.values[slot])
        log_k, ends = kernels[key]
        own.append(np.vstack([log_k, np.zeros((1, len(key)))]) + unary[k])
        outputs.append(ends)
    return _Side(order, own, edges, outputs)


def _kernel_ends(mechanism: Mechanism, values: np.ndarray) -> tuple[np.ndarray, tuple[float, float]]:
    """log K(y | x) (2, d) at the outputs minimising and maximising K(y|x_1)/K(y|x_0), and those
    outputs, read on the mechanism's sup-attaining grid (DESIGN §2.1; first on ties: finite)."""
    grid, log_k = mechanism.log_kernel(values)
    ratio = _ratio(log_k)
    lo, hi = int(np.argmin(ratio)), int(np.argmax(ratio))
    return log_k[[lo, hi]], (float(grid[lo]), float(grid[hi]))


def _ratio(m: np.ndarray) -> np.ndarray:
    """log g(x_1) - log g(x_0) along the last axis (0 for a one-valued tuple)."""
    return m[..., -1] - m[..., 0]


# --------------------------------------------------------------------------- the interval recursion


def _step(inclusive: np.ndarray, edge: np.ndarray) -> tuple[np.ndarray, tuple[int, int]]:
    """One day of Cao's L^B (or L^F): the message through ψ, g'(x') = Σ_x g(x) ψ(x, x'). The map
    of ratios is a monotone Möbius map, so the extreme ends of g' come from extreme ends of g:
    which ones (LO or HI, for LO and HI) is returned with the message (rows normalised)."""
    mapped = np.logaddexp.reduce(inclusive[:, :, None] + edge[None], axis=1)
    ratio = _ratio(mapped[:2])
    choice = (int(np.argmin(ratio)), int(np.argmax(ratio)))
    mapped = mapped[[choice[0], choice[1], PRIOR]]
    return mapped - mapped.max(axis=1, keepdims=True), choice


def _sweep(side: _Side, inclusive: np.ndarray, base: int, stop: int) -> tuple[list[np.ndarray], list[tuple[int, int]]]:
    """The messages at positions base+1..stop from everything on this side from `base` on
    (`inclusive`: the message at `base` with its own factors), and each one's choices."""
    messages, choices = [], []
    for k in range(base, stop):
        message, choice = _step(inclusive, side.edges[k])
        messages.append(message)
        choices.append(choice)
        inclusive = message + side.own[k + 1]
    return messages, choices


@dataclass(frozen=True)
class _Run:
    """One side's message at a target (exclusive: the target's own factors left out) and how its
    ends were reached: choices[j] for position base + 1 + j."""

    message: np.ndarray
    choices: list[tuple[int, int]]
    base: int
    pinned: bool  # the base is a known tuple: its output does not matter


class _Release:
    """A continual release on one chain: both sides' global sweeps, shared by every adversary."""

    def __init__(self, graph: FactorGraph, mechanism: Mechanism, order: list[int]):
        self.values = graph.values
        self.n = len(order)
        self.at = {slot: k for k, slot in enumerate(order)}
        front = _forward_side(graph, mechanism, order)
        self.sides = (front, front.reversed())
        self.runs = tuple(self._global(side) for side in self.sides)
        self.resting = [0.0] * self.n  # every slot's HI output: y where a coordinate does not matter
        for k, slot in enumerate(order):
            self.resting[slot] = front.outputs[k][HI]

    @staticmethod
    def _global(side: _Side) -> tuple[list[np.ndarray], list[tuple[int, int]]]:
        messages, choices = _sweep(side, side.own[0], 0, len(side.order) - 1)
        return [np.zeros_like(side.own[0])] + messages, choices

    def leakage(self, adv: Adversary) -> AdversaryLeakage:
        """max over the values of the nearest known tuple on each side with positive probability
        (ties: the first) of the sup over y, t, t' (`_best`)."""
        p = self.at[adv.target]
        known = [self.at[k] for k in adv.known]
        bases = tuple(max((q for q in (self._on(side, k) for k in known) if q < self._on(side, p)), default=None)
                      for side in (0, 1))
        best = None
        for v in self._possible(0, bases[0]):
            front = self._run(0, p, bases[0], v)
            for w in self._possible(1, bases[1]):
                back = self._run(1, self._on(1, p), bases[1], w)
                found = _best(front.message + self.sides[0].own[p] + back.message)
                if found is not None and (best is None or found[0] > best[0]):
                    best = (*found, (v, w), (front, back))
        if best is None:
            raise InputError(f"every configuration of the known tuples of {adv} has probability zero")
        value, t, t_prime, pins, runs = best
        pinned = self._pinned(known, bases, pins)
        values = self.values
        witness = Witness(adv, {slot: float(values[slot][v]) for slot, v in sorted(pinned.items())},
                          float(values[adv.target][t]), float(values[adv.target][t_prime]), self._output(p, runs, t, t_prime))
        return AdversaryLeakage(adv, max(value, 0.0), witness)

    def _on(self, side: int, k: int) -> int:
        """Forward position k read on `side` (and back: the map is its own inverse)."""
        return k if side == 0 else self.n - 1 - k

    def _possible(self, side: int, base: int | None) -> list[int | None]:
        """The values of the known tuple at `base` with positive probability (None: no known tuple)."""
        if base is None:
            return [None]
        return np.flatnonzero(np.isfinite(self._prior(side, base))).tolist()

    def _prior(self, side: int, k: int) -> np.ndarray:
        """log P(X = x) + const for the tuple at position k of `side`."""
        other = self.runs[1 - side][0][self._on(1, k)]
        return self.runs[side][0][k][PRIOR] + self.sides[side].own[k][PRIOR] + other[PRIOR]

    def _run(self, side: int, p: int, base: int | None, value: int | None) -> _Run:
        """The side's message at position p: from the chain's end, or bridged from the known tuple
        at `base` pinned to `value` (a one-hot message: the side beyond it cancels)."""
        if base is None:
            messages, choices = self.runs[side]
            return _Run(messages[p], choices, 0, False)
        start = np.full_like(self.sides[side].own[base], -np.inf)
        start[:, value] = 0.0
        messages, choices = _sweep(self.sides[side], start, base, p)
        return _Run(messages[-1], choices, base, True)

    def _output(self, p: int, runs: tuple[_Run, _Run], t: int, t_prime: int) -> tuple[float, ...]:
        """The witness y: the outputs that put both sides' messages and the target's release on the
        ends that attain the sup; every other coordinate (it does not matter) its HI output."""
        front, back = self.sides
        y = list(self.resting)
        if t != t_prime:
            end = HI if t > t_prime else LO
            y[front.order[p]] = front.outputs[p][end]
            _trace(front, runs[0], p, end, y)
            _trace(back, runs[1], self._on(1, p), end, y)
        return tuple(y)

    def _pinned(self, known: list[int], bases: tuple, pins: tuple) -> dict[int, int]:
        """A value index of positive probability for every known tuple (forward positions `known`):
        the nearest ones as pinned, the others found outward from them (`_extend`)."""
        out: dict[int, int] = {}
        for side, base, value in zip((0, 1), bases, pins):
            if base is not None:
                out[self.sides[side].order[base]] = value
                outward, start = 1 - side, self.n - 1 - base
                beyond = sorted(q for q in (self._on(outward, k) for k in known) if q > start)
                out.update(self._extend(outward, start, value, beyond))
        return out

    def _extend(self, side: int, base: int, value: int, known: list[int]) -> dict[int, int]:
        """Values of positive probability for the known tuples at positions `known` (ascending, past
        `base` on `side`) given the one at `base`: each the first value reachable from the previous
        one that still has a continuation to the chain's other end."""
        chain, ahead = self.sides[side], self.runs[1 - side][0]
        out: dict[int, int] = {}
        message = _one_hot(len(chain.own[base][PRIOR]), value)
        k = base
        for q in known:
            while k < q:
                message = np.logaddexp.reduce(message[:, None] + chain.edges[k], axis=0) + chain.own[k + 1][PRIOR]
                message = message - message.max()
                k += 1
            v = int(np.flatnonzero(np.isfinite(message + ahead[self.n - 1 - q][PRIOR]))[0])
            out[chain.order[q]] = v
            message = _one_hot(len(message), v)
        return out


def _one_hot(size: int, index: int) -> np.ndarray:
    out = np.full(size, -np.inf)
    out[index] = 0.0
    return out


def _best(m: np.ndarray) -> tuple[float, int, int] | None:
    """For a target's full message m (3, d) (both sides and its own factors): the leakage, t and t'
    (value indices); None when the known values have probability zero; 0 when one t is possible.
    The sup of log L(y|1) - log L(y|0) is ratio(m[HI]) - ratio(m[PRIOR]), that of its negative
    ratio(m[PRIOR]) - ratio(m[LO])."""
    possible = np.flatnonzero(np.isfinite(m[PRIOR]))
    if possible.size == 0:
        return None
    if possible.size == 1:
        return 0.0, int(possible[0]), int(possible[0])
    up = float(_ratio(m[HI]) - _ratio(m[PRIOR]))
    down = float(_ratio(m[PRIOR]) - _ratio(m[LO]))
    return (up, 1, 0) if up >= down else (down, 0, 1)


def _trace(side: _Side, run: _Run, p: int, end: int, y: list[float]) -> None:
    """Write into y the outputs that put `run`'s message at position p on its `end` row."""
    for k in range(p, run.base, -1):
        end = run.choices[k - run.base - 1][end]
        if not (run.pinned and k - 1 == run.base):
            y[side.order[k - 1]] = side.outputs[k - 1][end]
