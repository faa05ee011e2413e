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
HI rows of a message), in O(n) for every target at once (`chainpath.py`). The kernel ratio's
extremes are read on the mechanism's own sup-attaining grid (`Mechanism.log_kernel`, DESIGN
§2.1): for Laplace and geometric noise the ratio is monotone between the two values and
constant beyond, so its extremes are attained at the values themselves and every witness
output is finite. Tuples with more values are refused (`continual_reason`): the achievable
likelihood vectors then form a polytope in the simplex whose vertex count can grow with the chain.
"""

from __future__ import annotations

import bisect
import math
import operator
from dataclasses import dataclass

import numpy as np

from ddpbayes.engines.base import AdversaryLeakage, Outputs, Witness
from ddpbayes.engines.structured.chainpath import HI, LO, PRIOR, Path, Side
from ddpbayes.engines.structured.graph import FactorGraph
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Mechanism
from ddpbayes.problem import Adversary, Problem
from ddpbayes.queries import Identity


def continual_reason(problem: Problem, graph: FactorGraph) -> str | None:
    """None when `problem` is a continual release on a chain of two-valued tuples, else why not."""
    if not isinstance(problem.query, Identity):
        return f"the query '{problem.query.spec}' is not identity (continual release perturbs every tuple)"
    if not (problem.mechanism.laplace or problem.mechanism.flips_bits):
        return f"the {problem.mechanism.kind} mechanism is not randomized response, Laplace or geometric noise"
    names = problem.model.names
    if graph.slots > len(names):
        return f"the model has {graph.slots - len(names)} latent slot(s): continual release is solved on chains of tuples only"
    defect = _chain(graph).defect(names)
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
    O(n); each adversary adds O(1), or a bridge from its nearest known tuples (shared by every
    adversary with the same one), and its witness: x_K (the nearest known tuples' maximising
    values, the others completed with positive probability), t, t' and y (finite outputs
    attaining the sup; coordinates that do not matter take the output maximising their kernel
    ratio), y assembled from precomputed traces (`chainpath.Path.trace`)."""
    reason = continual_reason(problem, graph)
    if reason:
        raise InputError(f"continual release cannot be solved on this chain: {reason}")
    return _Release(graph, problem.mechanism).leakages(problem.adversaries)


# --------------------------------------------------------------------------- the chain


@dataclass(frozen=True)
class _Chain:
    """The interaction graph's shape, computed once per factor graph (`_chain`)."""

    wide: tuple[int, ...] | None  # the first factor coupling more than two tuples
    busy: tuple[int, list[int]] | None  # the first slot with more than two neighbours, and them
    order: list[int]  # the slots along the path (`_path_order`)
    slots: int

    def defect(self, names: list[str]) -> str | None:
        """Why the interaction graph is not a path (or a union of paths), or None."""
        if self.wide:
            return f"a factor couples {len(self.wide)} tuples ({', '.join(names[k] for k in self.wide)}): not a chain"
        if self.busy:
            k, others = self.busy
            listed = ", ".join(names[b] for b in others)
            return f"tuple '{names[k]}' interacts with {len(others)} others ({listed}): not a chain"
        if len(self.order) < self.slots:
            return "the tuples' interaction graph has a cycle: not a chain"
        return None


def _chain(graph: FactorGraph) -> _Chain:
    """The chain's shape, cached with the graph's elimination trees (the engine asks for it in
    `supports` and again in `leakage`)."""
    if "continual chain" not in graph.trees and "stacked path" in graph.trees:  # a recognised chain: 0..n-1
        graph.trees["continual chain"] = _Chain(None, None, list(range(graph.slots)), graph.slots)
    if "continual chain" not in graph.trees:
        wide = next((tuple(sorted(set(p.scope))) for p in graph.factors if len(set(p.scope)) > 2), None)
        near = _neighbours(graph)
        busy = next(((k, sorted(others)) for k, others in enumerate(near) if len(others) > 2), None)
        graph.trees["continual chain"] = _Chain(wide, busy, _path_order(near), graph.slots)
    return graph.trees["continual chain"]


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


@dataclass(frozen=True)
class _Tables:
    """The factors multiplied into unary and pairwise log-potentials along the path, (n, 2) and
    (n - 1, 2, 2) (unnormalised: a chain MRF; components of a union of paths are joined by constant
    potentials, i.e. independence; a one-valued tuple's missing value is impossible, -inf), and
    the positions of the tuples sharing each set of values (one kernel each)."""

    unary: np.ndarray
    edges: np.ndarray
    groups: list[tuple[np.ndarray, list[int]]]


def _tables(graph: FactorGraph, order: list[int]) -> _Tables:
    """The chain's tables along `order`, cached with the graph (every audit of it reuses them)."""
    if "continual tables" not in graph.trees:
        graph.trees["continual tables"] = _stacked_tables(graph, order) or _summed_tables(graph, order)
    return graph.trees["continual tables"]


def _stacked_tables(graph: FactorGraph, order: list[int]) -> _Tables | None:
    """A recognised chain's tables (`graph._scalar_chain`: slots 0..n-1 in order, each taking the same two values):
    its path's stacked ones, the same sums of the same factors; else None."""
    stacked = graph.trees.get("stacked path")
    if stacked is None or order != list(range(graph.slots)) or graph.sizes[0] != 2:
        return None
    unary, pair = stacked
    return _Tables(unary.copy(), pair.copy(), [(graph.values[0], list(range(len(order))))])


def _summed_tables(graph: FactorGraph, order: list[int]) -> _Tables:
    """The factors summed into the chain's tables along `order`."""
    n, sizes = len(order), [graph.sizes[s] for s in order]
    at = {slot: k for k, slot in enumerate(order)}
    unary, edges = np.zeros((n, 2)), np.zeros((max(n - 1, 0), 2, 2))
    for k, size in enumerate(sizes):
        unary[k, size:] = -np.inf
        if k + 1 < n:
            edges[k, size:, :] = edges[k, :, sizes[k + 1]:] = -np.inf
    for p in graph.factors:
        table = p.table[..., 0]
        if len(p.scope) == 1:
            k = at[p.scope[0]]
            unary[k, :sizes[k]] += table
        elif len(p.scope) == 2:
            a, b = at[p.scope[0]], at[p.scope[1]]
            if a < b:
                edges[a, :sizes[a], :sizes[b]] += table
            else:
                edges[b, :sizes[b], :sizes[a]] += table.T
    groups: dict[tuple[float, ...], tuple[np.ndarray, list[int]]] = {}
    for k, slot in enumerate(order):
        groups.setdefault(tuple(graph.values[slot].tolist()), (graph.values[slot], []))[1].append(k)
    return _Tables(unary, edges, list(groups.values()))


def _forward_side(graph: FactorGraph, mechanism: Mechanism, order: list[int]) -> Side:
    """The chain along `order` with each tuple's kernel at its LO and HI outputs (`_kernel_ends`)."""
    tables, n = _tables(graph, order), len(order)
    kernels, outputs = np.full((n, 2, 2), -np.inf), [(0.0, 0.0)] * n
    for values, positions in tables.groups:
        kernels[positions, :, :len(values)], ends = _kernel_ends(mechanism, values)
        for k in positions:
            outputs[k] = ends
    unary = tables.unary[:, None, :]
    own = np.concatenate([kernels + unary, np.zeros((n, 1, 2)) + unary], axis=1)
    return Side(order, own, tables.edges, outputs)


def _kernel_ends(mechanism: Mechanism, values: np.ndarray) -> tuple[np.ndarray, tuple[float, float]]:
    """log K(y | x) (2, d) at the outputs minimising and maximising K(y|x_1)/K(y|x_0), and those
    outputs, read on the mechanism's sup-attaining grid (DESIGN §2.1; first on ties: finite)."""
    grid, log_k = mechanism.log_kernel(values)
    ratio = log_k[..., -1] - log_k[..., 0]
    lo, hi = int(np.argmin(ratio)), int(np.argmax(ratio))
    return log_k[[lo, hi]], (float(grid[lo]), float(grid[hi]))


# --------------------------------------------------------------------------- the adversaries


class _Release:
    """A continual release on one chain: both sides' global sweeps, and the bridges from known
    tuples, shared by every adversary."""

    def __init__(self, graph: FactorGraph, mechanism: Mechanism):
        order = _chain(graph).order
        self.n = n = len(order)
        self.at = [0] * n
        for k, slot in enumerate(order):
            self.at[slot] = k
        self.values = _values(graph)
        front = _forward_side(graph, mechanism, order)
        self.sides = (front, front.reversed())
        self.own = front.own_rows
        self.paths = tuple(Path(side, 0, n - 1, side.own[0].reshape(6).tolist(), False) for side in self.sides)
        self.rest = tuple(out[HI] for out in front.outputs)  # y where a coordinate does not matter (forward order)
        self.arrange = _arranger(self.at)
        self.resting = self.arrange(self.rest)
        self.bridges: dict[tuple[int, int, int], Path] = {}
        self.stops: dict[tuple[int, int], int] = {}  # (side, base): the farthest position a bridge from base must reach
        self.reach: list[list[tuple[int, ...]] | None] = [None, None]  # `_reach`, `_alive`: built when first asked
        self.alive: list[list[int] | None] = [None, None]

    def leakages(self, adversaries: tuple[Adversary, ...]) -> list[AdversaryLeakage]:
        """Every adversary's leakage: where each bridge must reach; every candidate (values of the
        nearest known tuples) as one full message, a target's with no known tuple on the global
        sweeps shared (`_alone`); `_best` of all of them at once; each adversary's first best
        candidate and its witness (its y produced when read: `Outputs`)."""
        at = self.at
        cuts = [self._cut(adv) if adv.known else (at[adv.target], [], 0) for adv in adversaries]
        cut_off = [cut for cut in cuts if cut[1]]
        for p, known, split in cut_off:
            for side, base in enumerate(self._bases(p, known, split)):
                if base is not None:
                    key = (side, base)
                    self.stops[key] = max(self.stops.get(key, 0), self._on(side, p))
        rows: list[list[float]] = []
        candidates = iter([self._candidates(p, self._bases(p, known, split), rows) for p, known, split in cut_off])
        front, back = (np.array(path.messages) for path in self.paths)
        alone = (front + self.sides[0].own.reshape(self.n, 6)) + back[::-1]  # each target with no known tuple
        found = _best(np.concatenate([alone, np.array(rows, dtype=float).reshape(-1, 6)]))
        return [self._leakage(adv, *cut, next(candidates), found) if cut[1] else self._alone(adv, cut[0], found)
                for adv, cut in zip(adversaries, cuts)]

    def _cut(self, adv: Adversary) -> tuple[int, list[int], int]:
        """The target's position, the other known tuples' positions (ascending) and how many lie before it."""
        p = self.at[adv.target]
        known = sorted(self.at[k] for k in adv.known if k != adv.target)
        return p, known, bisect.bisect_left(known, p)

    def _alone(self, adv: Adversary, p: int, found: tuple[list, ...]) -> AdversaryLeakage:
        """`_leakage` of a target with no known tuple: its one candidate is row p of the global sweeps."""
        possible, value, t, t_prime = found
        if not possible[p]:
            raise InputError(f"every configuration of the known tuples of {adv} has probability zero")
        values, row_t, row_t_prime = self.values[adv.target], t[p], t_prime[p]
        y = Outputs(self._output, p, self.paths, row_t, row_t_prime)
        return AdversaryLeakage.exact(adv, max(value[p], 0.0), Witness(adv, {}, values[row_t], values[row_t_prime], y))

    def _bases(self, p: int, known: list[int], split: int) -> tuple[int | None, int | None]:
        """The nearest known tuple on each side, as a position of that side (None: none)."""
        return (known[split - 1] if split else None,
                self.n - 1 - known[split] if split < len(known) else None)

    def _candidates(self, p: int, bases: tuple[int | None, int | None], rows: list[list[float]]) -> list[tuple]:
        """(row of the full message, v, w, front path, back path) for every value v, w of positive
        probability of the nearest known tuples (at least one), in order: the message (front + own) +
        back appended to `rows`."""
        out, own, back_p = [], self.own[p], self.n - 1 - p
        for v in self._possible(0, bases[0]):
            front = self._path(0, bases[0], v)
            f = front.messages[p - front.base]
            for w in self._possible(1, bases[1]):
                back = self._path(1, bases[1], w)
                b = back.messages[back_p - back.base]
                rows.append([(x + o) + z for x, o, z in zip(f, own, b)])
                out.append((self.n + len(rows) - 1, v, w, front, back))
        return out

    def _leakage(self, adv: Adversary, p: int, known: list[int], split: int, candidates: list[tuple],
                 found: tuple[list, ...]) -> AdversaryLeakage:
        """The max over the candidates (ties: the first) of the sup over y, t, t' (`_best`)."""
        possible, value, t, t_prime = found
        best = None
        for candidate in candidates:
            row = candidate[0]
            if possible[row] and (best is None or value[row] > value[best[0]]):
                best = candidate
        if best is None:
            raise InputError(f"every configuration of the known tuples of {adv} has probability zero")
        row, v, w, front, back = best
        pinned = self._pinned(known, split, (v, w))
        values, row_t, row_t_prime = self.values, t[row], t_prime[row]
        y = Outputs(self._output, p, (front, back), row_t, row_t_prime)
        witness = Witness(adv, {slot: values[slot][x] for slot, x in sorted(pinned.items())}, values[adv.target][row_t],
                          values[adv.target][row_t_prime], y)
        return AdversaryLeakage(adv, max(value[row], 0.0), witness)

    def _on(self, side: int, k: int) -> int:
        """Forward position k read on `side` (and back: the map is its own inverse)."""
        return k if side == 0 else self.n - 1 - k

    def _possible(self, side: int, base: int | None) -> list[int | None]:
        """The values of the known tuple at `base` with positive probability (None: no known tuple):
        log P(X = x) + const from both sides' noiseless rows and its own factors."""
        if base is None:
            return [None]
        here = self.paths[side].messages[base]
        there = self.paths[1 - side].messages[self.n - 1 - base]
        own = self.sides[side].own[base, PRIOR].tolist()
        return [x for x in (0, 1) if math.isfinite(here[2 * PRIOR + x] + own[x] + there[2 * PRIOR + x])]

    def _path(self, side: int, base: int | None, value: int | None) -> Path:
        """The side's global sweep, or the bridge from the known tuple at `base` pinned to `value`
        (a one-hot message: the side beyond it cancels), swept once to the farthest target."""
        if base is None:
            return self.paths[side]
        key = (side, base, value)
        if key not in self.bridges:
            start = [0.0 if x == value else -math.inf for _ in range(3) for x in (0, 1)]
            self.bridges[key] = Path(self.sides[side], base, self.stops[(side, base)], start, True)
        return self.bridges[key]

    def _output(self, p: int, paths: tuple[Path, Path], t: int, t_prime: int) -> tuple[float, ...]:
        """The witness y: the outputs that put both sides' messages and the target's release on the
        ends that attain the sup; every other coordinate (it does not matter) its HI output."""
        if t == t_prime:
            return self.resting
        end = HI if t > t_prime else LO
        front, back = paths
        y = (self.rest[:front.first] + front.trace(p, end) + (self.sides[0].outputs[p][end],)
             + back.trace(self.n - 1 - p, end, backwards=True) + self.rest[self.n - back.first:])
        return self.arrange(y)

    def _pinned(self, known: list[int], split: int, pins: tuple[int | None, int | None]) -> dict[int, int]:
        """A value index of positive probability for every known tuple (forward positions `known`):
        the nearest ones as pinned, the others found outward from them (`_extend`)."""
        order, out = self.sides[0].order, {}
        if split:
            base = known[split - 1]
            out[order[base]] = pins[0]
            beyond = [self.n - 1 - q for q in reversed(known[:split - 1])]
            out.update(self._extend(1, self.n - 1 - base, pins[0], beyond))
        if split < len(known):
            base = known[split]
            out[order[base]] = pins[1]
            out.update(self._extend(0, base, pins[1], known[split + 1:]))
        return out

    def _extend(self, side: int, base: int, value: int, known: list[int]) -> dict[int, int]:
        """Values of positive probability for the known tuples at positions `known` (ascending, past
        `base` on `side`) given the one at `base`: each the first value reachable from the previous
        one that still has a continuation to the chain's other end (sets of values as bit masks)."""
        reach, alive = self._reach(side), self._alive(1 - side)
        order, out, mask, k = self.sides[side].order, {}, 1 << value, base
        for q in known:
            while k < q:
                mask = reach[k][mask]
                k += 1
            v = 0 if mask & alive[self.n - 1 - q] & 1 else 1
            out[order[q]] = v
            mask = 1 << v
        return out

    def _reach(self, side: int) -> list[tuple[int, ...]]:
        """For each position k of `side`, the values at k + 1 reachable with positive probability
        from each set of values at k (a bit mask: value x is bit x), for the masks 0..3."""
        if self.reach[side] is None:
            chain = self.sides[side]
            link = np.isfinite(chain.edges) & np.isfinite(chain.own[1:, PRIOR])[:, None, :]
            masks = [np.zeros(len(link), dtype=int)]
            masks += [(link[:, 0] if m == 1 else link[:, 1] if m == 2 else link[:, 0] | link[:, 1]) @ [1, 2]
                      for m in (1, 2, 3)]
            self.reach[side] = list(zip(*(m.tolist() for m in masks)))
        return self.reach[side]

    def _alive(self, side: int) -> list[int]:
        """For each position of `side`, the values whose noiseless message from that side's end is
        positive (a bit mask)."""
        if self.alive[side] is None:
            self.alive[side] = [math.isfinite(m[2 * PRIOR]) | math.isfinite(m[2 * PRIOR + 1]) << 1
                                for m in self.paths[side].messages]
        return self.alive[side]


def _values(graph: FactorGraph) -> list[list[float]]:
    """Every slot's values as Python floats (read only), cached with the graph (every audit of it reads them); one
    list per distinct array (a recognised chain's slots share one)."""
    if "continual values" not in graph.trees:
        lists: dict[int, list[float]] = {}
        graph.trees["continual values"] = [lists[id(v)] if id(v) in lists else lists.setdefault(id(v), v.tolist())
                                           for v in graph.values]
    return graph.trees["continual values"]


def _arranger(at: list[int]):
    """Forward-ordered outputs to slot order (`at`: each slot's position; a path of one slot, or
    two or more in slot order, needs nothing)."""
    if at == list(range(len(at))):
        return lambda y: y
    return operator.itemgetter(*at)


def _best(m: np.ndarray) -> tuple[list[bool], list[float], list[int], list[int]]:
    """For full messages m (N, 6) (rows LO, HI, PRIOR of two values, flat: both sides and the
    target's own factors): whether a value is possible (else the known values have probability
    zero), the leakage, t and t' (value indices); 0 when one t is possible. The sup of
    log L(y|1) - log L(y|0) is ratio(m[HI]) - ratio(m[PRIOR]), that of its negative
    ratio(m[PRIOR]) - ratio(m[LO])."""
    finite = np.isfinite(m[:, 2 * PRIOR:])
    both = finite.all(axis=1)
    with np.errstate(invalid="ignore"):
        prior = m[:, 2 * PRIOR + 1] - m[:, 2 * PRIOR]
        up = (m[:, 2 * HI + 1] - m[:, 2 * HI]) - prior
        down = prior - (m[:, 2 * LO + 1] - m[:, 2 * LO])
        rising = up >= down
    single = ~finite[:, 0]  # the one possible value's index
    return (finite.any(axis=1).tolist(), np.where(both, np.where(rising, up, down), 0.0).tolist(),
            np.where(both, rising, single).astype(int).tolist(), np.where(both, ~rising, single).astype(int).tolist())
