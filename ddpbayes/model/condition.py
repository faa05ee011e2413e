"""Conditioning as one operation, as NumPyro's `condition` handler: fix some tuples' values.

`condition(model, {k: value})` returns a PyMC model of the remaining free variables, with
density proportional to the original joint at the fixed values (DESIGN §2.3). Fixed variables
lose their value transforms (their Jacobian must not enter) and become shared variables, so one
conditioned model (and everything compiled from it) serves every value of the same fixed
tuples: `pin` moves them. Free continuous variables are
`Flat` in PyMC's unconstrained space (the original transforms and Jacobians stay inside the
joint), free discrete ones are uniform proxies over their finite support (PyMC's Gibbs steps
sample them). The original joint log-density enters as one `Potential`; the tuple values of
every draw are the `Deterministic` named `TUPLES`. The same handler serves every model:
scalar tuples, elements of a vector tuple, latents continuous or discrete. (The free elements
of a partly fixed constrained vector live in its natural space, where its support has hard
boundaries; `starting_points` reports that, and the engine then samples with Slice.)
"""

from __future__ import annotations

import math

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.initial_point import make_initial_point_expression
from pymc.model.transform.conditioning import remove_value_transforms
from pymc.pytensorf import compile as compile_pymc
from pymc.pytensorf import find_rng_nodes, replace_rng_nodes
from pytensor.graph.basic import equal_computations
from pytensor.graph.replace import graph_replace, vectorize_graph
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.basic import NormalRV
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.type import TensorType

from ddpbayes.errors import InputError
from ddpbayes.model.batched import checks_per_point, simplified, unblock_indexing
from ddpbayes.model.contract import DependenceModel, rejected_parameters
from ddpbayes.model.domains import Finite
from ddpbayes.model.supports import depends_on_random, is_discrete, support
from ddpbayes.model.usercode import untraced

TUPLES = "ddp_tuples"
WEIGHTS = "ddp_summed_logp"  # summed: log P(configuration c | continuous values, event), shape (C,)
MAX_SUMMED = 4096  # joint configurations of the free discrete variables summed out at most (else Gibbs)
BATCH_CELLS = 1 << 22  # values one batched evaluation holds at most (`Conditioned.evaluate` splits the points)


class ImpossibleEvent(InputError):
    """The conditioning event has (numerically) zero probability under the model."""


@dataclass(frozen=True)
class _Free:
    """A free variable of the conditioned model and where its value sits in the original one."""

    name: str
    source: str  # value-variable name in the (transform-stripped) original model
    index: list[int] | None  # the free elements of a partly fixed vector
    levels: np.ndarray | None  # support of a Categorical proxy (its value is an index into it)
    discrete: bool
    standardise: Callable[[dict], np.ndarray] | None = field(default=None, compare=False)  # non-centred: u of a point


@dataclass(frozen=True)
class _Pin:
    """Where fixed tuple `slot` lives: a shared variable, and its element (None: the whole)."""

    slot: int
    var: pytensor.compile.SharedVariable
    element: int | None


@dataclass(frozen=True, eq=False)
class Table:
    """The summed configurations as tuple values, kept once (the same at every draw): `values`
    (C, n) holds configuration c's value of every tuple it sets, where `summed` (n,) is True; the
    other tuples (pinned, continuous) take a draw's own value (`TUPLES`)."""

    values: np.ndarray
    summed: np.ndarray

    def expand(self, x: np.ndarray) -> np.ndarray:
        """Every configuration's tuples at draws x (..., n): (..., C, n); a read-only broadcast
        view, with no copy per draw, when x is the same at every draw."""
        lead = x.shape[:-1]
        flat = x.reshape(-1, x.shape[-1])
        if np.all(flat == flat[:1]) or not np.any(~self.summed):
            one = np.where(self.summed, self.values, flat[0])
            return np.broadcast_to(one, (*lead, *one.shape))
        return np.where(self.summed, self.values, x[..., None, :])


@dataclass(frozen=True)
class Conditioned:
    model: pm.Model
    base: pm.Model
    free: tuple[_Free, ...]
    pins: tuple[_Pin, ...]
    table: Table | None = None  # summed: the free discrete variables' joint values, as tuple values
    cells: int = 1  # values the evaluation of one point holds at most (its batched intermediates)
    _candidates: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def configurations(self) -> int:
        """C, the joint values of the free discrete variables summed out (1 when none is)."""
        return 1 if self.table is None else len(self.table.values)

    @property
    def summed(self) -> bool:
        """True when the free discrete variables are summed out (`WEIGHTS` holds their law)."""
        return WEIGHTS in self.model.named_vars

    @property
    def fixed(self) -> frozenset[int]:
        return frozenset(p.slot for p in self.pins)

    def pin(self, values: Mapping[int, float]) -> None:
        """Fix the same tuples at new values (compiled functions read them at call time)."""
        if set(values) != self.fixed:
            raise ValueError(f"pin the tuples {sorted(self.fixed)}, got {sorted(values)}")
        arrays = {}
        for p in self.pins:
            a = arrays.setdefault(p.var, (p.var, np.array(p.var.get_value(), copy=True)))[1]
            a[() if p.element is None else p.element] = values[p.slot]
        for var, a in arrays.values():
            var.set_value(a)

    def logp(self, point: dict) -> float:
        """The joint log-density at one point (free values by name)."""
        return float(self.evaluate([point])[0][0])

    def evaluate(self, points: Sequence[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """At each of S >= 1 points (free values by name): the joint log-density (S,), the tuple values
        (S, n) and, summed, the configurations' log-probabilities given the point (S, C), else None.
        Summed, in calls of at most BATCH_CELLS values (`_compiled`); otherwise a call per point."""
        step = self.batch_points if self.summed else 1
        with rejected_parameters():
            parts = [self._evaluate(points[start:start + step]) for start in range(0, len(points), step)]
        logp, x, *logw = (np.concatenate([p[k] for p in parts]) for k in range(len(parts[0])))
        return logp, x, (logw[0] if logw else None)

    @property
    def batch_points(self) -> int:
        """Points one summed call holds at most: BATCH_CELLS values over the `cells` one point holds."""
        return max(1, BATCH_CELLS // self.cells)

    def _evaluate(self, chunk: Sequence[dict]) -> list[np.ndarray]:
        values = self.model.value_vars
        if not self.summed:
            return [np.asarray(o, dtype=float)[None] for o in self._compiled(*(chunk[0][v.name] for v in values))]
        return self.evaluate_batch([np.stack([np.asarray(p[v.name], dtype=v.dtype) for p in chunk]) for v in values])

    def evaluate_batch(self, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Summed only: `evaluate` at S points given as one array (S, *shape) of its dtype per value
        variable (`model.value_vars`' order; not checked), in one call (the caller keeps S small):
        [logp (S,), x (S, n), logw (S, C)]. Each point's values depend on that point alone
        (`batched.checks_per_point`)."""
        out = self._compiled(*values)
        size = len(values[0]) if values else 1
        return [np.asarray(o if o.ndim > core else np.broadcast_to(o, (size, *o.shape)), dtype=float)
                for o, core in zip(out, (0, 1, 1))]  # what no free value enters is not batched

    def logp_batch(self, values: Sequence[np.ndarray]) -> list[float]:
        """Summed only: the joint log-density at S points given as `evaluate_batch` takes them, as S
        floats, no other output converted (a sampler's steps read only this). PyTensor's virtual
        machine is run directly, not through its `Function` call (~9 of ~90 µs a call; the 3-state
        chain's audit makes ~24,000): the floats are copied out before a later call can reuse the
        output's buffer."""
        fn = self._compiled
        for storage, value in zip(fn.input_storage, values):
            storage.storage[0] = value
        fn.vm()
        return fn.output_storage[0].storage[0].tolist()

    @cached_property
    def _compiled(self) -> Callable[..., list]:
        """The joint log-density, the tuples and (summed) the configurations' log-probabilities as one
        compiled function of the free values (compiled once; it reads the pinned values at call time).
        Summed, every free value has a leading batch axis (`vectorize_graph`): a chain's draws, or the
        candidate starting points, are one call, not one per point (14,000 calls of 30-60 µs for the
        3-state chain's audit). Built untraced (`usercode.untraced`: no creation stack per node)."""
        with untraced():
            return self._compile()

    def _compile(self) -> Callable[..., list]:
        model = self.model
        outputs = [model.logp(), model[TUPLES]] + ([model[WEIGHTS]] if self.summed else [])
        outputs = model.replace_rvs_by_values(outputs)
        batch = {v: v.type.clone(shape=(None, *v.type.shape))(name=v.name) for v in model.value_vars}
        if self.summed and batch:
            outputs = unblock_indexing(vectorize_graph(simplified(checks_per_point(outputs)), batch))
        inputs = list(batch.values()) if self.summed else model.value_vars
        fn = model.compile_fn(outputs, inputs=inputs, point_fn=False, on_unused_input="ignore")
        fn.trust_input = self.summed  # `evaluate_batch`'s callers pass arrays of the value variables' dtypes
        return fn

    @cached_property
    def _prior_point(self) -> Callable[[int], dict]:
        """A prior draw per seed of the values the candidates read (`_prior_candidates`: the free
        variables' sources; every value when one is standardised, which reads the whole point)."""
        reads = None if any(f.standardise for f in self.free) else {f.source for f in self.free}
        with untraced():
            return _prior_draw(self.base, reads)

    def starting_points(self, chains: int, seed: int, candidates: int = 256) -> tuple[list[dict], bool]:
        """Starting points for `chains` chains, and whether the event confines the free variables.

        Candidates are prior draws (drawn once per seed: they do not depend on the pinned
        values), scored under the current event; the best feasible ones start the chains.
        When fewer than `chains` are feasible, sweeps of each free continuous coordinate across
        its unconstrained line from a few of them are added (an event such as D_j = 0.9 may
        allow only a thin slice of a parent's range, which prior draws rarely hit).
        `confined` is True when some prior draws were infeasible: the event confines the free
        variables to a region with hard boundaries, where NUTS diverges. (Infeasible sweep
        points do not count: far out on the unconstrained line a density can underflow without
        any boundary.) Raises ImpossibleEvent when no candidate is feasible: the event has
        (numerically) zero probability."""
        with rejected_parameters():
            points = self._prior_candidates(seed, candidates)
            scored = self._score(points)
        confined = len(scored) < len(points)
        if len(scored) < chains:
            scored += self._score(_sweeps(points[:16], self.free), offset=len(points))
        if not scored:
            raise ImpossibleEvent("the conditioning event is impossible under the model (no start satisfies it)")
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [scored[k % len(scored)][2] for k in range(chains)], confined

    def prior_draws(self, seed: int, candidates: int = 256, feasible: bool = False) -> list[dict]:
        """The prior draws starting points are chosen from (free variables' values, seeded); with
        `feasible`, only those the current event allows, best-scoring first."""
        with rejected_parameters():
            points = self._prior_candidates(seed, candidates)
            if not feasible:
                return points
            return [p for _, _, p in sorted(self._score(points), key=lambda s: (-s[0], s[1]))]

    def _prior_candidates(self, seed: int, candidates: int) -> list[dict]:
        key = (seed, candidates)
        if key not in self._candidates:
            draw = self._prior_point
            points = [draw((seed * 7919 + c) % 2**32) for c in range(candidates)]
            self._candidates[key] = [{f.name: f.standardise(p) if f.standardise else _project(p[f.source], f)
                                      for f in self.free} for p in points]
        return self._candidates[key]

    def _score(self, points: list[dict], offset: int = 0) -> list[tuple[float, int, dict]]:
        if not points:
            return []
        values = zip(self.evaluate(points)[0], range(offset, offset + len(points)), points)
        return [(float(v), c, p) for v, c, p in values if np.isfinite(v)]


def _prior_draw(base: pm.Model, reads: set[str] | None) -> Callable[[int], dict]:
    """PyMC's prior draw of a model's free values (`make_initial_point_fn(default_strategy="prior")`:
    per seed, a generator per random variable, spawned from the seed in the order PyMC finds them),
    computing only the values named in `reads` (None: all), by value-variable name. The values are
    PyMC's bit for bit (the same generators, the same graph); a variable none of them reads is not
    drawn (the 3-state chain's four summed days: 256 candidates 0.45 -> 0.08 CPU s, Categorical draws
    being a Python loop in PyTensor)."""
    values = make_initial_point_expression(free_rvs=base.free_RVs, rvs_to_transforms=base.rvs_to_transforms,
                                           initval_strategies=base.rvs_to_initial_values, default_strategy="prior",
                                           return_transformed=True)
    names = [base.rvs_to_values[rv].name for rv in base.free_RVs]
    kept = [k for k, name in enumerate(names) if reads is None or name in reads]
    values = replace_rng_nodes(values)
    rngs = find_rng_nodes(values)  # generator k: the seed's k-th child, in PyMC's order (tested)
    fn = compile_pymc(inputs=[], outputs=[values[k] for k in kept], mode=pytensor.compile.mode.FAST_COMPILE)
    used = [k for k, rng in enumerate(rngs) if rng in set(find_rng_nodes(fn.maker.fgraph.outputs))]

    def draw(seed: int) -> dict:
        children = np.random.SeedSequence(seed).spawn(len(rngs))
        for k in used:
            rngs[k].set_value(np.random.Generator(np.random.PCG64(children[k])), borrow=True)
        return dict(zip((names[k] for k in kept), fn()))

    return draw


def _sweeps(points: list[dict], free: tuple[_Free, ...]) -> list[dict]:
    out = []
    for point in points:
        for f in free:
            if f.discrete:
                continue
            for k in range(np.asarray(point[f.name]).size):
                for u in _SWEEP:
                    moved = {**point, f.name: np.array(point[f.name], dtype=float, copy=True)}
                    moved[f.name].flat[k] = u
                    out.append(moved)
    return out


_SWEEP = (-30.0, -20.0, -12.0, -8.0, -5.0, -3.0, -1.5, 0.0, 1.5, 3.0, 5.0, 8.0, 12.0, 20.0, 30.0)


def condition(model: DependenceModel, fixed: Mapping[int, float], summed: bool = False) -> Conditioned:
    """A PyMC model of p(free variables | X_k = fixed[k] for k in fixed).

    With `summed`, the free discrete variables are summed out exactly when their joint values
    number at most MAX_SUMMED (issue #27: MCMC only over what cannot be summed): every
    configuration c is enumerated, the joint log-density is vectorised over c
    (`pytensor.graph.replace.vectorize_graph`, its batched indexing rewritten by
    `batched.unblock_indexing`), the Potential is its log-sum-exp (the marginal density of the
    continuous variables), `WEIGHTS` holds the configurations' conditional log-probabilities
    given the continuous values and `Conditioned.table` their tuple values, once (`TUPLES` keeps
    a draw's own n values): each draw carries the exact law of the discrete variables. Built
    untraced (`usercode.untraced`: PyTensor records no creation stack per node)."""
    with untraced():
        return _condition(model, fixed, summed)


def _condition(model: DependenceModel, fixed: Mapping[int, float], summed: bool) -> Conditioned:
    fixed = {int(k): float(v) for k, v in fixed.items()}
    fixed_rvs = {model.slots[k].rv.name for k in fixed}
    transformed = [rv for rv in model.model.free_RVs if rv.name in fixed_rvs and model.model.rvs_to_transforms.get(rv)]
    base = remove_value_transforms(model.model, transformed) if transformed else model.model
    terms = base.logp(jacobian=True, sum=False)
    tuple_values = base.replace_rvs_by_values([base[rv.name] for rv in model.tuple_rvs])
    init = base.initial_point()

    slots_of: dict[str, list[tuple[int, int | None]]] = {}
    for k, s in enumerate(model.slots):
        slots_of.setdefault(s.rv.name, []).append((k, s.index))

    configurations = _configurations(model, base, slots_of, fixed) if summed else None
    replace, free, pins, enumerated, jacobians, cells = {}, [], [], {}, [], 1
    with pm.Model() as conditioned:
        for rv in base.free_RVs:
            value = base.rvs_to_values[rv]
            pinned = {idx: k for k, idx in slots_of.get(rv.name, []) if k in fixed}
            size = int(np.prod(rv.type.shape)) if rv.ndim else 1
            if pinned and len(pinned) < size and rv.ndim != 1:
                raise InputError(f"cannot condition on elements of '{rv.name}': only vector tuples can be split")
            if pinned:
                filled = np.zeros(value.type.shape, dtype=value.dtype)
                var = pytensor.shared(filled, name=f"{value.name}_pinned")
                pins += [_Pin(k, var, i) for i, k in pinned.items()]
            if pinned and len(pinned) == size:
                replace[value] = var
                continue
            index = [i for i in range(size) if i not in pinned] if pinned else None
            shape = (len(index),) if pinned else value.type.shape
            if configurations is not None and is_discrete(rv):
                stand_in = enumerated[rv.name] = pt.tensor(dtype=value.dtype, shape=shape, name=f"{value.name}_summed")
            elif not pinned and (scaled := _random_scale(rv)) is not None:
                stand_in, spec, jacobian = _non_centred(base, rv, value, scaled, replace)
                jacobians.append(jacobian)
                free.append(spec)
            else:
                stand_in, spec = _stand_in(rv, value, shape, index, init)
                free.append(spec)
            replace[value] = pt.set_subtensor(var[index], stand_in) if pinned else stand_in
        terms = [pt.sum(t) for t in graph_replace(terms, replace, strict=False)] + jacobians
        tuples = _stack(model, graph_replace(tuple_values, replace, strict=False))
        if configurations is None:
            joint = pt.add(*terms) if len(terms) > 1 else terms[0]
        else:
            shared, joint, factors = _summed_terms(terms, enumerated, configurations)
            cells = joint.type.shape[0] * (factors + model.n + sum(v[0].size for v in configurations.values()))
            tuples = graph_replace(tuples, {enumerated[n]: pt.as_tensor(v[0]) for n, v in configurations.items()},
                                   strict=False)
            marginal = pt.logsumexp(joint)
            pm.Deterministic(WEIGHTS, joint - marginal)
            joint = shared + marginal
        pm.Potential("ddp_joint", joint)
        pm.Deterministic(TUPLES, tuples)
    table = _table(model, slots_of, fixed, configurations) if configurations else None
    cond = Conditioned(conditioned, base, tuple(free), tuple(pins), table, cells)
    cond.pin(fixed)
    return cond


def _configurations(model: DependenceModel, base: pm.Model, slots_of: dict, fixed: dict[int, float]
                    ) -> dict[str, np.ndarray] | None:
    """Every joint value of the free discrete variables, by variable name (C, *free shape), or
    None when they number more than MAX_SUMMED (or none is free): those are then sampled."""
    axes: list[tuple[str, int, np.ndarray, tuple]] = []  # (name, free elements, levels, stand-in shape)
    for rv in base.free_RVs:
        if not is_discrete(rv):
            continue
        size = int(np.prod(rv.type.shape)) if rv.ndim else 1
        pinned = sum(1 for k, _ in slots_of.get(rv.name, []) if k in fixed)
        if pinned == size:
            continue
        dom = support(rv)
        if not isinstance(dom, Finite):
            return None
        axes.append((rv.name, size - pinned, np.asarray(dom.values, dtype=float), (size - pinned,) if pinned
                     else tuple(rv.type.shape)))
    if not axes or math.prod(len(levels) ** m for _, m, levels, _ in axes) > MAX_SUMMED:
        return None
    columns = [levels for _, m, levels, _ in axes for _ in range(m)]
    grid = np.stack([g.ravel() for g in np.meshgrid(*columns, indexing="ij")], axis=1)
    out, at = {}, 0
    for name, m, _, shape in axes:
        out[name] = grid[:, at:at + m].astype(base[name].dtype).reshape(len(grid), *shape)
        at += m
    return out


def _summed_terms(terms: list, enumerated: dict[str, pt.TensorVariable], configurations: dict[str, np.ndarray]
                  ) -> tuple[pt.TensorVariable, pt.TensorVariable, int]:
    """The joint log-density as the terms no summed variable enters (a scalar), the others' sum at
    every configuration (C,), and how many terms that is. Each such term is a table over the
    distinct values of the summed variables it reads (its own and its discrete parents': 9 for a
    3-state chain's day given the day before, not the 81 configurations), vectorised over them
    (`vectorize_graph`, indexing as one-hot products, and each row's parameter checks its own:
    `batched`, so that a configuration whose parameters are invalid is -inf alone, as PyMC's
    log-density of that point is, not every configuration); terms with the same table (day
    k given day k - 1, for every k) share one; the configurations' values are then one gather
    from the tables and a sum (a term equal to an earlier one up to which summed variables it
    reads is not vectorised again: `_same_term`)."""
    size = len(next(iter(configurations.values())))
    shared, tables, columns, seen = [], [], [], []
    for term in terms:
        reads = [n for n, v in enumerated.items() if v in set(ancestors([term]))]
        if not reads:
            shared.append(term)
            continue
        rows, where = np.unique(np.concatenate([configurations[n].reshape(size, -1) for n in reads], axis=1), axis=0,
                                return_inverse=True)
        ins = [enumerated[n] for n in reads]
        same = next((k for t, t_ins, t_rows, k in seen if _same_term(term, ins, rows, t, t_ins, t_rows)), None)
        if same is None:  # not a term seen before with other summed variables in the same places
            batched, at = {}, 0
            for n in reads:
                width = configurations[n][0].size
                values = rows[:, at:at + width].astype(configurations[n].dtype)
                batched[enumerated[n]] = pt.as_tensor(values.reshape(len(rows), *configurations[n].shape[1:]))
                at += width
            table = vectorize_graph(_checks_per_row(term), batched)
            same = next((k for k, t in enumerate(tables) if equal_computations([table], [t])), len(tables))
            tables += [table] if same == len(tables) else []
            seen.append((term, ins, rows, same))
        columns.append((same, np.ravel(where)))
    tables = unblock_indexing(tables)
    offsets = np.cumsum([0] + [t.type.shape[0] for t in tables])
    index = np.stack([offsets[k] + where for k, where in columns], axis=1)
    values = tables[0] if len(tables) == 1 else pt.concatenate(tables)
    joint = pt.specify_shape(values[index.ravel()].reshape(index.shape).sum(axis=1), (size,))
    return (pt.add(*shared) if shared else pt.zeros(())), joint, index.shape[1]


def _same_term(term, ins: list, rows: np.ndarray, other, other_ins: list, other_rows: np.ndarray) -> bool:
    """Whether `term` over the summed variables `ins` is `other` over `other_ins` (the same graph with
    each variable in the other's place, the same distinct values): its table would be the other's
    (day k given day k - 1 is day 2 given day 1 with k - 1, k in the places of 1, 2), so it is not
    built again (`_summed_terms`: the table of equal terms, vectorised and checked once)."""
    return (len(ins) == len(other_ins) and all(a.type == b.type for a, b in zip(ins, other_ins))
            and rows.shape == other_rows.shape and np.array_equal(rows, other_rows)
            and equal_computations([term], [other], in_xs=ins, in_ys=other_ins))


def _checks_per_row(term: pt.TensorVariable) -> pt.TensorVariable:
    """`term` with PyMC's parameter checks as their -inf switches (`batched.checks_per_point`), so
    that its table checks each row's parameters alone; the model's random variables in it stay
    themselves (a clone of one would be a new variable, sampled where PyMC expects a value)."""
    rvs = [v for v in ancestors([term])
           if v.owner is not None and isinstance(v.owner.op, RandomVariable) and isinstance(v.type, TensorType)]
    stand = {v: v.type() for v in rvs}
    checked = checks_per_point([graph_replace(term, stand, strict=False)])[0]
    return graph_replace(checked, {s: v for v, s in stand.items()}, strict=False)


def _table(model: DependenceModel, slots_of: dict, fixed: dict[int, float],
           configurations: dict[str, np.ndarray]) -> Table:
    """Each configuration's value of every tuple it sets (`Table`): a scalar tuple's variable's
    value, or the element of a vector's free elements (those not pinned, in order)."""
    size = len(next(iter(configurations.values())))
    values, summed = np.zeros((size, model.n)), np.zeros(model.n, dtype=bool)
    for name, config in configurations.items():
        pinned = {idx for k, idx in slots_of.get(name, []) if k in fixed}
        flat = config.reshape(size, -1)
        order = [i for i in range(flat.shape[1] + len(pinned)) if i not in pinned]
        for k, idx in slots_of.get(name, []):
            if k not in fixed:
                values[:, k] = flat[:, 0] if idx is None else flat[:, order.index(idx) if pinned else idx]
                summed[k] = True
    return Table(values, summed)


def _random_scale(rv) -> tuple | None:
    """(mu, sigma) of a Normal whose sigma depends on another random variable, else None."""
    if not isinstance(rv.owner.op, NormalRV):
        return None
    mu, sigma = rv.owner.op.dist_params(rv.owner)[:2]
    return (mu, sigma) if depends_on_random(sigma) else None


def _non_centred(base: pm.Model, rv, value, scaled: tuple, replace: dict) -> tuple:
    """A Normal(mu, sigma) whose sigma is random, sampled non-centred (Papaspiliopoulos, Roberts
    & Sköld 2007): a Flat u with value = mu + sigma·u and the Jacobian log |sigma| per element, so
    that the sampler does not meet the funnel of a centred scale (r ~ Normal(0, s) with
    s ~ HalfNormal: 1,368 divergences in 2,000 draws centred). The density is the same joint."""
    mu, sigma = base.replace_rvs_by_values(list(scaled))
    name = f"{value.name}_free"
    u = pm.Flat(name, shape=value.type.shape, initval=np.zeros(value.type.shape))
    mu_now, sigma_now = graph_replace([mu, sigma], replace, strict=False)
    replace[value] = mu_now + sigma_now * u
    jacobian = pt.sum(pt.log(pt.abs(sigma_now)) * pt.ones_like(u))  # |dvalue/du|: an invalid sigma is -inf by its check
    standardise = base.compile_fn((value - mu) / sigma, inputs=base.value_vars, on_unused_input="ignore")
    return replace[value], _Free(name, value.name, None, None, False, standardise), jacobian


def _stand_in(rv, value, shape, index, init) -> tuple[pt.TensorVariable, _Free]:
    """A free stand-in for `value`: Flat (continuous, unconstrained space) or a uniform proxy."""
    name = f"{value.name}_free"
    if not is_discrete(rv):
        start = np.asarray(init[value.name])
        flat = pm.Flat(name, shape=shape, initval=start[index] if index is not None else start)
        return flat, _Free(name, value.name, index, None, False)
    dom = support(rv)
    if not isinstance(dom, Finite):
        raise InputError(f"discrete variable '{rv.name}' has unbounded support; give the tuple a Finite domain")
    levels = np.asarray(dom.values)
    if tuple(levels) == (0.0, 1.0):
        return pm.Bernoulli(name, 0.5, shape=shape).astype(value.dtype), _Free(name, value.name, index, None, True)
    proxy = pm.Categorical(name, p=np.full(len(levels), 1 / len(levels)), shape=shape)
    return pt.as_tensor(levels.astype(value.dtype))[proxy], _Free(name, value.name, index, levels, True)


def _project(value: np.ndarray, free: _Free) -> np.ndarray:
    value = np.asarray(value)
    if free.index is not None:
        value = value[free.index]
    if free.levels is not None:
        value = np.searchsorted(free.levels, value)
    return value


def _stack(model: DependenceModel, exprs) -> pt.TensorVariable:
    by_name = {rv.name: e for rv, e in zip(model.tuple_rvs, exprs)}
    items = [by_name[s.rv.name] if s.index is None else by_name[s.rv.name][s.index] for s in model.slots]
    return pt.stack([pt.cast(e, "float64") for e in items])
