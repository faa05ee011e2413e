"""The model's log-density as small tables: one per term, over the slots the term reads.

The log-density of a PyMC model is a sum of terms, one per variable (DESIGN §2.1): a free or
observed variable's log-probability given its parents, or a potential. Each term is built on
its own — its parents cut off by placeholders, so the graph is a handful of nodes whatever the
size of the model — and evaluated, vectorised with `vectorize_graph`, on every combination of
its slots' values, in float64 (`in_float64`). Terms with the same graph up to the names of
their inputs and their small float constants read as data (day k of a chain given day k-1, for
every k, even when each day has its own transition probabilities) share one log-probability
graph, the constants fed as inputs; all of them are compiled into one function and evaluated in
one call. An element-wise vector
variable (a univariate distribution with a batch of elements) gives one term per element, so
`Bernoulli("x", rate, shape=n)` is n small tables, not one over 2^n configurations; element k
reads only element k of a vector parent it reads element by element (`model.chains`). A chain
written as one vector variable is an initial term and one transition term per day.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.replace import clone_replace, vectorize_graph
from pytensor.graph.rewriting.basic import in2out, node_rewriter
from pytensor.graph.rewriting.utils import rewrite_graph
from pytensor.graph.traversal import ancestors
from pytensor.tensor.basic import Alloc, Join, MakeVector
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.math import Dot
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.random.type import RandomType
from pytensor.tensor.shape import SpecifyShape
from pytensor.tensor.subtensor import (AdvancedIncSubtensor, AdvancedIncSubtensor1, AdvancedSubtensor,
                                       AdvancedSubtensor1, IncSubtensor, Subtensor)
from pytensor.tensor.variable import TensorConstant

from ddpbayes.engines.direct import Direct, chain_init, chain_step, scalar_term
from ddpbayes.errors import InputError
from ddpbayes.limits import check_states
from ddpbayes.model import DependenceModel
from ddpbayes.model.chains import MarkovChain, aligned_parents, chain, length
from ddpbayes.model.contract import rejected_parameters
from ddpbayes.model.precision import in_float64, python_mode


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
    aligned: Mapping = field(default_factory=dict)  # parents it reads at one element: parent -> element read, by `element`
    chain: bool = False  # a chain's term: element 0's initial law, or element k given element k - 1
    direct: Direct | None = None  # its table read off the model's constants (`engines.direct`), when it can be

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
    tables = _direct_tables(terms, plans, slots)
    rest = [m for m, table in enumerate(tables) if table is None]
    if rest:
        compiled = _compiled_tables(model, [terms[m] for m in rest], [plans[m] for m in rest], slots, slots_of)
        for m, table in zip(rest, compiled):
            tables[m] = table
    return [(ids, table) for ids, table in zip(plans, tables)]


def _direct_tables(terms: list[_Term], plans: list[list[int]], slots: list[Slot]) -> list[np.ndarray | None]:
    """The tables of the terms read off the model's constants (`engines.direct`), each distinct one computed
    once; None for the others (and for numbers the model's checks would refuse: the compiled route says so)."""
    done: dict = {}
    out: list = []
    for term, ids in zip(terms, plans):
        if term.direct is None:
            out.append(None)
            continue
        values = [slots[k].values for k in ids]
        key = (term.direct.key, tuple((v.dtype.str, v.tobytes()) for v in values))
        if key not in done:
            table = term.direct.table(*values)
            done[key] = None if table is None else table.ravel()
        out.append(done[key])
    return out


def _compiled_tables(model: DependenceModel, terms: list[_Term], plans: list[list[int]], slots: list[Slot],
                     slots_of: dict) -> list[np.ndarray]:
    """The terms' tables from their log-probability graphs, compiled into one function (DESIGN §2.1b)."""
    groups, lifted = _groups(model.model, terms)
    batches = _batches(groups, lifted, plans, slots)
    key = ("compiled", tuple(id(v) for v in slots_of), tuple((tuple(members), lift) for members, lift in batches))
    fn, holders = model.memo("terms", key, lambda: _compile(model.model, terms, lifted, batches))
    feeds, evaluated = [], []
    for (members, lift), (own, constants) in zip(batches, holders):
        # members with equal value grids and equal lifted constants share one evaluation
        grids = _distinct_grids(members, plans, slots, lifted if lift else None)
        firsts = list(dict.fromkeys(grids.values()))
        feeds += _feeds([terms[m] for m in firsts], [plans[m] for m in firsts], slots, slots_of, own)
        feeds += _constant_feeds([lifted[m] for m in firsts], [_rows(plans[m], slots) for m in firsts], constants)
        evaluated.append((grids, firsts))
    with rejected_parameters():
        results = fn(*feeds)
    tables: list = [None] * len(terms)
    for (grids, firsts), result in zip(evaluated, results):
        blocks, start = {}, 0
        for m in firsts:
            rows = _rows(plans[m], slots)
            blocks[m] = np.asarray(result[start:start + rows], dtype=float)
            start += rows
        for m, first in grids.items():
            column = terms[m].element if terms[m].part == "element" else None
            tables[m] = blocks[first][:, column] if column is not None else blocks[first].sum(axis=1)
    return tables


def _compile(pm_model: pm.Model, terms: list[_Term], lifted: list[list[Constant]],
             batches: list[tuple[list[int], bool]]) -> tuple[Callable, list[tuple[list[Variable], list[Variable]]]]:
    """One function evaluating every batch's log-probability graph on its members' stacked grids, and each batch's
    placeholders (own value and parents, lifted constants). It depends on the terms, not on the slots' values:
    the quadrature's finer rules reuse it (cached by `_tabulate`)."""
    outputs, inputs, holders = [], [], []
    for members, lift in batches:
        graph, own, constants = _graph(pm_model, terms[members[0]], lifted[members[0]] if lift else [])
        batched = [pt.tensor(dtype=v.dtype, shape=(None, *v.type.shape)) for v in own + constants]
        out = _gathers(vectorize_graph(graph, replace=dict(zip(own + constants, batched))))
        outputs.append(out.reshape((out.shape[0], -1)) if out.ndim > 1 else out[:, None])
        inputs += batched
        holders.append((own, constants))
    # The tables are tiny: C compilation would cost seconds and save nothing.
    return pytensor.function(inputs, outputs, on_unused_input="ignore", mode=python_mode()), holders


@node_rewriter([Blockwise])
def _gather(fgraph, node) -> list[Variable] | None:
    """Blockwise indexing with every index batched, `y[b] = x[b][i[b], j[b], ...]`, as one advanced
    index `x[b, i, j, ...]` instead of a Python loop over the rows (PyTensor vectorises a
    Subtensor only when its indices are not batched: a fed transition matrix indexed by the parent)."""
    core = node.op.core_op
    if not isinstance(core, (Subtensor, AdvancedSubtensor)) or node.op.batch_ndim(node) != 1:
        return None
    if isinstance(core, Subtensor) and any(isinstance(i, slice) for i in core.idx_list):
        return None
    x, *idxs = node.inputs
    if not idxs or any(not i.dtype.startswith(("int", "uint")) or i.type.broadcastable[0] for i in idxs):
        return None
    if any(i.ndim != len(sig) + 1 for i, sig in zip(idxs, node.op.inputs_sig[1:])) or len({i.ndim for i in idxs}) > 1:
        return None
    if x.ndim == len(node.op.inputs_sig[0]):
        return [x[tuple(idxs)]]
    if x.type.broadcastable[0]:
        return None
    rows = pt.arange(idxs[0].shape[0]).reshape((-1,) + (1,) * (idxs[0].ndim - 1))
    return [x[(rows, *idxs)]]


def _gathers(graph: Variable) -> Variable:
    """`graph` with `_gather` applied wherever it can be."""
    return rewrite_graph(graph, include=(), custom_rewrite=in2out(_gather))


def _rows(plan: list[int], slots: list[Slot]) -> int:
    return math.prod(len(slots[k].values) for k in plan)


LIFT_BUDGET = 1 << 22  # elements of a group's repeated constants; above it the group is split by constant values


def _batches(groups: dict, lifted: list[list[Constant]], plans: list[list[int]],
             slots: list[Slot]) -> list[tuple[list[int], bool]]:
    """The groups to compile, each with whether its constants are fed as inputs (DESIGN §2.1b):
    when repeating them over the members' rows would exceed `LIFT_BUDGET`, the group is split
    into members with equal constants, each compiled with its constants in the graph."""
    out = []
    for members in groups.values():
        size = sum(np.size(c.data) for c in lifted[members[0]])
        if not size or size * sum(_rows(plans[m], slots) for m in members) <= LIFT_BUDGET:
            out.append((members, bool(size)))
            continue
        split: dict = {}
        for m in members:
            split.setdefault(_constants_key(lifted[m]), []).append(m)
        out += [(same, False) for same in split.values()]
    return out


def _distinct_grids(members: list[int], plans: list[list[int]], slots: list[Slot],
                    lifted: list[list[Constant]] | None) -> dict[int, int]:
    """Each member mapped to the first member whose slots take the same values (and whose
    lifted constants, when they are fed, are equal)."""
    first: dict = {}
    out = {}
    for m in members:
        key = tuple(slots[k].values.tobytes() + str(slots[k].values.dtype).encode() for k in plans[m])
        out[m] = first.setdefault((key, _constants_key(lifted[m]) if lifted else ()), m)
    return out


def _constants_key(constants: list[Constant]) -> tuple:
    return tuple((str(c.type), np.asarray(c.data).tobytes()) for c in constants)


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
            direct = (chain_init(found.init), chain_step(found.transition)) if isinstance(found, MarkovChain) \
                else (None, None)
            out += [_Term(var, step if k else init, k, chain=True, direct=direct[k > 0]) for k in range(found.length)]
            continue
        direct = scalar_term(var, free_set) if var in free_rvs else None
        if direct is not None:
            out.append(_Term(var, direct.parents, None, direct=direct))
            continue
        reached = ancestors([var] if var in potentials else var.owner.inputs, blockers=free_set)
        parents = [v for v in reached if v in free_set and v is not var]
        aligned = aligned_parents(var, parents) if _elementwise(var) else {}
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
    return own + [k for p in term.parents
                  for k in ([slots_of[p][term.aligned[p][term.element]]] if p in term.aligned else slots_of[p])]


def _graph(pm_model: pm.Model, term: _Term, lifted: list[Constant]) -> tuple[Variable, list[Variable], list[Variable]]:
    """The term's log-probability as a graph of placeholders: (graph, [own value, *parents], the
    placeholders of the `lifted` constants); a lifted float constant is fed in float64 (`in_float64`)."""
    holders = {c: pt.tensor(dtype=_fed_dtype(c), shape=np.shape(c.data)) for c in lifted}
    replace = {p: p.type() for p in term.parents}
    replace.update({v: holders.get(d, d) for v, d in _observed_data(pm_model, term).items()})
    replace.update(holders)
    if term.var in pm_model.potentials:
        graph = clone_replace([term.var], replace, rebuild_strict=False)
        return in_float64(graph)[0], [replace[p] for p in term.parents], list(holders.values())
    rv = clone_replace([term.var], replace, rebuild_strict=False)[0]
    if term.chain:
        found, value = chain(rv), pt.scalar(dtype=rv.dtype)
        parents = [replace[p] for p in term.parents]
        if term.part == "init":
            return in_float64([found.init_logp(value)])[0], [value, *parents], list(holders.values())
        previous = pt.scalar(dtype=rv.dtype)
        return in_float64([found.step_logp(value, previous)])[0], [value, previous, *parents], list(holders.values())
    if term.var in pm_model.observed_RVs:
        value, own = pm_model.rvs_to_values[term.var], []
        value = holders.get(value, value)
    else:
        value = term.var.type()
        own = [value]
    graph = in_float64([pm.logp(rv, value, warn_rvs=False)])[0]
    return graph, own + [replace[p] for p in term.parents], list(holders.values())


def _observed_data(pm_model: pm.Model, term: _Term) -> dict:
    """Observed variables that the term reads are their data, as in the model's log-density."""
    observed = set(pm_model.observed_RVs)
    if not observed or term.var.owner is None:
        return {}
    reached = ancestors(term.var.owner.inputs, blockers=[*term.parents, *observed])
    return {v: pm_model.rvs_to_values[v] for v in reached if v in observed and v is not term.var}


def _groups(pm_model: pm.Model, terms: list[_Term]) -> tuple[dict, list[list[Constant]]]:
    """Terms whose graphs are equal up to their inputs and lifted constants, by a structural
    signature; and each term's lifted constants."""
    groups: dict = {}
    seen: dict = {}
    lifted = []
    for k, term in enumerate(terms):
        at = (id(term.var), term.part)
        if at not in seen:
            seen[at] = _signature(pm_model, term)
        groups.setdefault(seen[at][0], []).append(k)
        lifted.append(seen[at][1])
    return groups, lifted


LIFT_SIZE = 256  # elements: a larger constant stays in the signature


def _liftable(v: Variable) -> bool:
    """A small float constant, a candidate to be fed as an input rather than compiled in. Integer
    constants (indices, shapes, axes, sizes) stay in the signature."""
    return isinstance(v, TensorConstant) and v.dtype in ("float32", "float64") and np.size(v.data) <= LIFT_SIZE


def _reads_data(op, position: int) -> bool:
    """Whether `op` computes on input `position`'s values alone, as data: not as a shape, an axis
    or an index that sets the structure of the graph."""
    if isinstance(op, (Elemwise, DimShuffle, CAReduce, MakeVector, Dot)):
        return True
    if isinstance(op, (Subtensor, AdvancedSubtensor, AdvancedSubtensor1, Alloc, SpecifyShape)):
        return position == 0
    if isinstance(op, (IncSubtensor, AdvancedIncSubtensor, AdvancedIncSubtensor1)):
        return position < 2
    if isinstance(op, Join):
        return position > 0
    if isinstance(op, RandomVariable):
        return position >= 2  # rng and size, then the distribution's parameters
    return False


def _fed_dtype(c: TensorConstant) -> str:
    return "float64" if c.dtype in ("float32", "float64") else c.dtype


def _signature(pm_model: pm.Model, term: _Term) -> tuple[tuple, list[Constant]]:
    """The term's graph with its inputs numbered: equal signatures, equal log-probability graphs
    once the lifted constants are fed (DESIGN §2.1b). Small float constants that are read only as
    data, and an observed variable's own small value, are lifted: numbered in the signature by
    first appearance, returned in that order. Other constants are part of the signature."""
    kind = "potential" if term.var in pm_model.potentials else "observed" if term.var in pm_model.observed_RVs else "free"
    leaves = {p: ("parent", k, str(p.type)) for k, p in enumerate(term.parents)}
    data_of = _observed_data(pm_model, term)
    candidates: dict = {}  # float constant -> [first appearance, read only as data]
    memo: dict = {}

    def candidate(c: Constant, as_data: bool) -> tuple:
        entry = candidates.setdefault(c, [len(candidates), True])
        entry[1] &= as_data
        return ("float", entry[0])

    def sig(v: Variable, op=None, position: int = 0):
        if v in leaves:
            return leaves[v]
        if v in data_of:
            d = data_of[v]
            return candidate(d, op is None or _reads_data(op, position)) if _liftable(d) else ("data", id(d))
        if v.owner is None and _liftable(v):
            return candidate(v, op is None or _reads_data(op, position))
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
            reader = v.owner.op
            s = (reader, tuple(sig(i, reader, k) for k, i in enumerate(v.owner.inputs)), v.owner.outputs.index(v))
        memo[v] = s
        return s

    own = (str(term.var.type), term.part, tuple(p in term.aligned for p in term.parents))
    graph = sig(term.var)
    lifted = [c for c, (_, as_data) in candidates.items() if as_data]
    constants = tuple(("lifted", _fed_dtype(c), np.shape(c.data)) if as_data
                      else ("constant", str(c.type), np.asarray(c.data).tobytes())
                      for c, (_, as_data) in candidates.items())
    value = ()
    if kind == "observed":
        v = pm_model.rvs_to_values[term.var]
        if isinstance(v, TensorConstant) and np.size(v.data) <= LIFT_SIZE and v not in candidates:
            lifted.append(v)
            value = ("value", str(v.type))
        else:
            value = ("value", id(v))
    return (kind, own, graph, constants, value), lifted


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
                columns[c].append(np.repeat(block, len(slots_of[var]), axis=1))  # every element the same value
            else:
                columns[c].append(block)
    return [np.concatenate(cols).astype(v.dtype) for cols, v in zip(columns, own)]


def _constant_feeds(constants: list[list[Constant]], rows: list[int], holders: list[Variable]) -> list[np.ndarray]:
    """The lifted constants of one group, each member's repeated over its grid's rows."""
    return [np.concatenate([np.broadcast_to(np.asarray(cs[j].data, dtype=h.dtype), (r, *np.shape(cs[j].data)))
                            for cs, r in zip(constants, rows)]) for j, h in enumerate(holders)]


def _grid(columns: Sequence[np.ndarray]) -> np.ndarray:
    """Every combination of the columns' values, first column most significant: (B, len(columns))."""
    if not columns:
        return np.zeros((1, 0))
    mesh = np.meshgrid(*columns, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1)
