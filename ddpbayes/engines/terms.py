"""The model's log-density as small tables: one per term, over the slots the term reads.

The log-density of a PyMC model is a sum of terms, one per variable (DESIGN §2.1): a free or
observed variable's log-probability given its parents, or a potential. Each term is built on
its own — its parents cut off by placeholders, so the graph is a handful of nodes whatever the
size of the model — and evaluated, vectorised with `vectorize_graph`, on every combination of
its slots' values, in float64 (`in_float64`). Terms with the same graph up to the names of
their inputs (day k of a chain given day k-1, for every k) share one log-probability graph;
all of them are compiled into one function and evaluated in one call. An element-wise vector
variable (a univariate distribution with a batch of elements) gives one term per element, so
`Bernoulli("x", rate, shape=n)` is n small tables, not one over 2^n configurations; element k
reads only element k of a vector parent it reads element by element (`model.chains`). A chain
written as one vector variable is an initial term and one transition term per day.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.replace import clone_replace, vectorize_graph
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.type import RandomType

from ddpbayes.errors import InputError
from ddpbayes.limits import check_states
from ddpbayes.model import DependenceModel
from ddpbayes.model.chains import aligned_parents, chain, length
from ddpbayes.model.contract import rejected_parameters
from ddpbayes.model.precision import in_float64


@dataclass(frozen=True)
class Slot:
    """One scalar the tables range over: variable `rv`, or its element `index`, taking `values`."""

    rv: object
    index: int | None  # element of a vector variable, None for a scalar one
    values: np.ndarray


def elements(rv) -> int:
    """How many scalar slots a latent variable has (1 for a scalar)."""
    return (length(rv) if rv.ndim == 1 else int(np.prod(rv.type.shape))) if rv.ndim else 1


def model_slots(model: DependenceModel, latent_values: Callable[[object], np.ndarray]) -> list[Slot]:
    """The tuples' slots (their declared domains), then every latent element's, taking the values
    `latent_values(rv)`; a latent must be a scalar or a vector of static length."""
    slots = [Slot(s.rv, s.index, np.asarray(d.values)) for s, d in zip(model.slots, model.domains)]
    for rv in model.latent_rvs:
        if rv.ndim > 1 or (rv.ndim == 1 and length(rv) is None):
            raise InputError(f"latent variable '{rv.name}' must be a scalar or a vector of static length")
        values = np.asarray(latent_values(rv))
        slots += [Slot(rv, k if rv.ndim else None, values) for k in range(elements(rv))]
    return slots


@dataclass(frozen=True)
class _Term:
    """One term: `var`'s log-probability (or a potential), element `element` when split."""

    var: object
    parents: list  # the free variables it reads, besides its own value
    element: int | None  # for an element-wise vector variable or a chain: which element this table is for
    aligned: frozenset = frozenset()  # parents it reads only at `element`
    chain: bool = False  # a chain's term: element 0's initial law, or element k given element k - 1

    @property
    def part(self) -> str:
        """Which graph the term is: the whole variable's, an element's, a chain's initial or step term."""
        if self.element is None:
            return "whole"
        return ("step" if self.element else "init") if self.chain else "element"


def tabulate(model: DependenceModel, slots: list[Slot], limit: int) -> list[tuple[list[int], np.ndarray]]:
    """Every term of `model` as (the slots it reads, its log-table flattened with the first slot
    most significant); each table's size is checked against `limit` before it is built. Cached
    on the model per slot values, so the exact and structured engines build them once."""
    key = (tuple((id(s.rv), s.index, s.values.dtype.str, s.values.tobytes()) for s in slots), limit)
    return model.memo("terms", key, lambda: _tabulate(model, slots, limit))


def _tabulate(model: DependenceModel, slots: list[Slot], limit: int) -> list[tuple[list[int], np.ndarray]]:
    slots_of: dict = {}
    for k, s in enumerate(slots):
        slots_of.setdefault(s.rv, []).append(k)
    terms = _model_terms(model, list(slots_of))
    plans = []
    for term in terms:
        ids = _scope(term, slots_of)
        check_states(math.prod(len(slots[k].values) for k in ids), "a term's table (a variable and its parents)",
                     "cells", limit, ", or use another engine")
        plans.append(ids)
    groups = _groups(model.model, terms)
    outputs, inputs, feeds, evaluated = [], [], [], []
    for members in groups.values():
        graph, own = _graph(model.model, terms[members[0]])
        batched = [pt.tensor(dtype=v.dtype, shape=(None, *v.type.shape)) for v in own]
        out = vectorize_graph(graph, replace=dict(zip(own, batched)))
        outputs.append(out.reshape((out.shape[0], -1)) if out.ndim > 1 else out[:, None])
        inputs += batched
        grids = _distinct_grids(members, plans, slots)  # members with equal value grids share one evaluation
        firsts = list(dict.fromkeys(grids.values()))
        feeds += _feeds([terms[m] for m in firsts], [plans[m] for m in firsts], slots, slots_of, own)
        evaluated.append((grids, firsts))
    # The tables are tiny: C compilation would cost seconds and save nothing.
    fn = pytensor.function(inputs, outputs, on_unused_input="ignore", mode="FAST_COMPILE")
    with rejected_parameters():
        results = fn(*feeds)
    tables: list = [None] * len(terms)
    for (grids, firsts), result in zip(evaluated, results):
        blocks, start = {}, 0
        for m in firsts:
            rows = math.prod(len(slots[k].values) for k in plans[m])
            blocks[m] = np.asarray(result[start:start + rows], dtype=float)
            start += rows
        for m, first in grids.items():
            column = terms[m].element if terms[m].part == "element" else None
            tables[m] = blocks[first][:, column] if column is not None else blocks[first].sum(axis=1)
    return [(ids, table) for ids, table in zip(plans, tables)]


def _distinct_grids(members: list[int], plans: list[list[int]], slots: list[Slot]) -> dict[int, int]:
    """Each member mapped to the first member whose slots take the same values."""
    first: dict = {}
    out = {}
    for m in members:
        key = tuple(slots[k].values.tobytes() + str(slots[k].values.dtype).encode() for k in plans[m])
        out[m] = first.setdefault(key, m)
    return out


def structure(model: DependenceModel, slots: list[Slot]) -> list[tuple[list[int], list[int]]]:
    """The model as a directed graph over the slots: for every term, (its own slots, its parents'
    slots); observed variables and potentials have no own slots (evidence on their parents)."""
    slots_of: dict = {}
    for k, s in enumerate(slots):
        slots_of.setdefault(s.rv, []).append(k)
    out = []
    for term in _model_terms(model, list(slots_of)):
        scope = _scope(term, slots_of)
        own = len(slots_of[term.var]) if term.var in slots_of and term.element is None else int(term.var in slots_of)
        out.append((scope[:own], scope[own:]))
    return out


def _model_terms(model: DependenceModel, free: list) -> list[_Term]:
    """`_terms`, once per model and set of free variables."""
    return model.memo("terms", ("terms", tuple(id(v) for v in free)), lambda: _terms(model.model, free))


def _terms(pm_model: pm.Model, free: list) -> list[_Term]:
    """One term per free variable (per element when element-wise), observed variable and potential."""
    out = []
    free_set, potentials, free_rvs = set(free), set(pm_model.potentials), set(pm_model.free_RVs)
    for var in [*pm_model.free_RVs, *pm_model.observed_RVs, *pm_model.potentials]:
        found = chain(var) if var in free_rvs else None
        if found is not None:
            init, step = ([v for v in ancestors(found.reads(step), blockers=free_set) if v in free_set]
                          for step in (False, True))
            out += [_Term(var, step if k else init, k, chain=True) for k in range(found.length)]
            continue
        reached = ancestors([var] if var in potentials else var.owner.inputs, blockers=free_set)
        parents = [v for v in reached if v in free_set and v is not var]
        aligned = frozenset(aligned_parents(var, parents)) if _elementwise(var) else frozenset()
        if _elementwise(var) and (var in free_rvs or aligned):
            out += [_Term(var, parents, k, aligned) for k in range(var.type.shape[0])]
        else:
            out.append(_Term(var, parents, None))
    return out


def _elementwise(var) -> bool:
    """A vector of independent elements given its parents: a univariate distribution's batch."""
    op = var.owner.op
    return var.ndim == 1 and var.type.shape[0] is not None and getattr(op, "ndim_supp", None) == 0


def _scope(term: _Term, slots_of: dict) -> list[int]:
    own = slots_of.get(term.var, [])
    if term.element is not None:
        own = own[term.element - (term.part == "step"):term.element + 1][::-1]  # a step: (x[k], x[k-1])
    return own + [k for p in term.parents for k in ([slots_of[p][term.element]] if p in term.aligned else slots_of[p])]


def _graph(pm_model: pm.Model, term: _Term) -> tuple[Variable, list[Variable]]:
    """The term's log-probability as a graph of placeholders: (graph, [own value, *parents])."""
    replace = {p: p.type() for p in term.parents}
    replace.update(_observed_data(pm_model, term))
    if term.var in pm_model.potentials:
        return in_float64(clone_replace([term.var], replace))[0], [replace[p] for p in term.parents]
    rv = clone_replace([term.var], replace)[0]
    if term.chain:
        found, value = chain(rv), pt.scalar(dtype=rv.dtype)
        if term.part == "init":
            return in_float64([found.init_logp(value)])[0], [value, *(replace[p] for p in term.parents)]
        previous = pt.scalar(dtype=rv.dtype)
        return in_float64([found.step_logp(value, previous)])[0], [value, previous, *(replace[p] for p in term.parents)]
    if term.var in pm_model.observed_RVs:
        value, own = pm_model.rvs_to_values[term.var], []
    else:
        value = term.var.type()
        own = [value]
    return in_float64([pm.logp(rv, value, warn_rvs=False)])[0], own + [replace[p] for p in term.parents]


def _observed_data(pm_model: pm.Model, term: _Term) -> dict:
    """Observed variables that the term reads are their data, as in the model's log-density."""
    observed = set(pm_model.observed_RVs)
    if not observed or term.var.owner is None:
        return {}
    reached = ancestors(term.var.owner.inputs, blockers=[*term.parents, *observed])
    return {v: pm_model.rvs_to_values[v] for v in reached if v in observed and v is not term.var}


def _groups(pm_model: pm.Model, terms: list[_Term]) -> dict:
    """Terms whose graphs are equal up to their inputs, by a structural signature."""
    groups: dict = {}
    seen: dict = {}
    for k, term in enumerate(terms):
        key = seen.get((id(term.var), term.part))
        if key is None:
            key = _signature(pm_model, term)
            seen[(id(term.var), term.part)] = key
        groups.setdefault(key, []).append(k)
    return groups


def _signature(pm_model: pm.Model, term: _Term) -> tuple:
    """The term's graph with its inputs numbered: equal signatures, equal log-probability graphs."""
    kind = "potential" if term.var in pm_model.potentials else "observed" if term.var in pm_model.observed_RVs else "free"
    leaves = {p: ("parent", k, str(p.type)) for k, p in enumerate(term.parents)}
    memo: dict = {}

    def sig(v: Variable):
        if v in leaves:
            return leaves[v]
        if v in memo:
            return memo[v]
        if v.owner is None:
            if isinstance(v, Constant):
                data = np.asarray(v.data)
                s = ("constant", str(v.type), data.shape, data.tobytes())
            elif isinstance(v.type, RandomType):
                s = ("rng",)
            elif isinstance(v, SharedVariable):
                s = ("shared", id(v))
            else:
                s = ("input", id(v))
        else:
            s = (v.owner.op, tuple(sig(i) for i in v.owner.inputs), v.owner.outputs.index(v))
        memo[v] = s
        return s

    own = (str(term.var.type), term.part, tuple(p in term.aligned for p in term.parents))
    data = tuple(("data", id(v)) for v in _observed_data(pm_model, term).values())
    value = ("value", id(pm_model.rvs_to_values[term.var])) if kind == "observed" else ()
    return kind, own, sig(term.var), data, value


def _feeds(terms: list[_Term], plans: list[list[int]], slots: list[Slot], slots_of: dict,
           own: list[Variable]) -> list[np.ndarray]:
    """The batched inputs of one group: every member's grid of (own value, parents) stacked."""
    columns: list[list[np.ndarray]] = [[] for _ in own]
    for term, ids in zip(terms, plans):
        grid = _grid([slots[k].values for k in ids])
        at = 0
        variables = ([term.var] * (len(own) - len(term.parents))) + term.parents
        for c, var in enumerate(variables):
            one = term.element is not None and (var is term.var or var in term.aligned)  # one element read
            width = 1 if one else len(slots_of[var])
            block = grid[:, at:at + width]
            at += width
            if own[c].ndim == 0:
                columns[c].append(block[:, 0])
            elif one:
                columns[c].append(np.repeat(block, term.var.type.shape[0], axis=1))  # every element the same value
            else:
                columns[c].append(block)
    return [np.concatenate(cols).astype(v.dtype) for cols, v in zip(columns, own)]


def _grid(columns: Sequence[np.ndarray]) -> np.ndarray:
    """Every combination of the columns' values, first column most significant: (B, len(columns))."""
    if not columns:
        return np.zeros((1, 0))
    mesh = np.meshgrid(*columns, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1)
