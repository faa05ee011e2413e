"""Term tables read off the model's numbers, with no graph compiled (DESIGN §2.1b, issue #44).

The commonest chain terms are a table lookup: a `Categorical` whose probabilities are a constant vector, or a
constant matrix's row picked by the previous day (`Categorical(p=P[prev])`), a `Bernoulli` whose probability is
a constant or `switch(prev, a, b)` of constants, and pymc-extras' `DiscreteMarkovChain` with a constant P and a
constant initial `Categorical`. Their log-probability is then log p[x] (Categorical, DiscreteMarkovChain's
log P[x[k-1], x[k]]) or log p, log1p(-p) (Bernoulli): the formulas of PyMC's and pymc-extras' `logp`, evaluated
in NumPy on the float64 constants. Building and compiling a PyTensor function for them cost 0.3-0.6 s on a
1,000-day chain; this costs a few milliseconds. Anything else, and any numbers those libraries' checks would
refuse (a row outside [0, 1] or not summing to 1, a parent value that is not a row), is left to the compiled
route, which evaluates the model's own graph and refuses them as before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from pytensor.graph.basic import Variable
from pytensor.scalar.basic import Switch
from pytensor.tensor.basic import ScalarFromTensor
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.random.basic import BernoulliRV, CategoricalRV
from pytensor.tensor.subtensor import Subtensor
from pytensor.tensor.type_other import NoneTypeT
from pytensor.tensor.variable import TensorConstant

from ddpbayes.limits import DEFAULT_MAX_STATES
from ddpbayes.model import DependenceModel, Finite


@dataclass(frozen=True)
class Direct:
    """A term whose table is a lookup in constants: `parents` (the free variables it reads, besides its own
    value), and `table(own, *parents)`, the log-probability over every combination of the slots' values (own
    value first, most significant), or None when the numbers are not ones the model's logp would accept."""

    parents: list
    table: Callable[..., np.ndarray | None]
    key: tuple  # equal keys, equal tables on equal values


def scalar_term(var, free: set) -> Direct | None:
    """A scalar free Categorical or Bernoulli read as a lookup (`_lookup`), its parent a free integer
    scalar, or None."""
    found = _lookup(var, _numbers)
    if found is None:
        return None
    parent, key = found
    if parent is not None and not (parent in free and parent.type.ndim == 0 and _integer(parent)):
        return None
    return Direct([] if parent is None else [parent], functools.partial(_table, key), key)


def chain_init(init) -> Direct | None:
    """A DiscreteMarkovChain's initial law when it is a Categorical of constant probabilities."""
    node = init.owner
    if node is None or not isinstance(node.op, CategoricalRV):
        return None
    probs = _constant(node.op.dist_params(node)[0])
    if probs is None or probs.ndim < 1 or probs.size != probs.shape[-1]:
        return None
    row = probs.reshape(-1)
    return Direct([], lambda own: _categorical_table(own, row[None, :], np.zeros(1)), ("init", row.tobytes()))


def chain_step(transition) -> Direct | None:
    """A DiscreteMarkovChain's step log P[x[k-1], x[k]] when P is constant: over (x[k], x[k-1])."""
    P = _constant(transition)
    if P is None or P.ndim != 2 or P.shape[0] != P.shape[1]:
        return None
    if not (np.all(P >= 0) and np.allclose(P.sum(axis=-1), 1.0)):  # pymc-extras' check (and P >= 0)
        return None
    return Direct([], lambda own, previous: _rows_table(own, previous, P, check=False), ("step", P.tobytes()))


@dataclass(frozen=True)
class ScalarChain:
    """A chain of scalar variables read as lookups (`scalar_chain`): x_0's key, the distinct keys of the steps
    (days with one key are one law) and each step's index into them."""

    head: tuple
    keys: list[tuple]
    at: np.ndarray

    def tables(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """x_0's log table (values,) and the steps' (n - 1, values, values) over (x_k, x_{k-1}), every x_k taking
        `values`: the tables `scalar_term` gives, each distinct one computed once; None when numbers the model's
        checks would refuse (the general route says so)."""
        distinct = [_table(key, values, values) for key in self.keys]
        head = _table(self.head, values)
        if head is None or any(t is None for t in distinct):
            return None
        steps = np.stack(distinct)[self.at] if distinct else np.zeros((0, len(values), len(values)))
        return head.ravel(), steps


def chain_of(model: DependenceModel, limit: int = DEFAULT_MAX_STATES) -> ScalarChain | None:
    """The model as a recognised chain (DESIGN §2.1b), cached on it per state limit: the tuples are every free
    variable, scalars in the model's order on one shared finite domain object (the inferred supports are one object
    per integer range, `supports._integers`) whose day's table (values²) is within `limit` (the audit's
    --max-states: the chain holds a table a day), with no observed variable or potential, and `scalar_chain` reads
    them; else None. The per-audit checks then ask once per chain what they would ask of every tuple (`joint`);
    those that only need to know whether the tuples are alike ask at the default limit."""
    return model.memo("direct", ("scalar chain", limit), lambda: _chain_of(model, limit))


def _chain_of(model: DependenceModel, limit: int) -> ScalarChain | None:
    pm_model, rvs = model.model, model.model.free_RVs
    if model.n < 2 or len(rvs) != model.n or pm_model.observed_RVs or pm_model.potentials \
            or any(s.index is not None or s.rv is not rv for s, rv in zip(model.slots, rvs)) \
            or len({id(d) for d in model.domains}) != 1 or not isinstance(model.domains[0], Finite) \
            or len(model.domains[0].values) ** 2 > limit:
        return None
    return scalar_chain(rvs)


def scalar_chain(rvs: list) -> ScalarChain | None:
    """A chain of scalar variables read off its constants at once (DESIGN §2.1b): x_0 a Categorical or Bernoulli
    of constant probabilities, each next x_k a `Categorical(p=P[x_{k-1}])` of a constant P or a
    `Bernoulli(p=switch(x_{k-1}, a, b))` of constants; None for anything else. A matrix is read once (by identity:
    the days may share one, and constants are immutable; `pm.math.constant(P)[prev]` makes a constant a day
    around one array, read once)."""
    matrices: dict[int, tuple] = {}

    def matrix(v: Variable) -> tuple | None:
        data = _constant(v)
        if data is None:
            return None
        found = matrices.get(id(data))
        if found is None:
            found = matrices[id(data)] = (data, _key(data))  # kept alive: its id stays its own
        return found[1]

    first = _lookup(rvs[0], matrix)
    if first is None or first[0] is not None:
        return None
    keys: dict = {}
    at = np.empty(len(rvs) - 1, dtype=np.int64)
    for k, (previous, var) in enumerate(zip(rvs, rvs[1:])):
        found = _lookup(var, matrix)
        if found is None or found[0] is not previous:
            return None
        at[k] = keys.setdefault(found[1], len(keys))
    return ScalarChain(first[1], list(keys), at)


def _lookup(var, matrix: Callable[[Variable], tuple | None]) -> tuple[Variable | None, tuple] | None:
    """A scalar Categorical or Bernoulli (no size) whose law is a lookup in constants, as (the variable indexing
    its probabilities, or None; its key): ("categorical", p) of a constant vector p, ("categorical rows", P, shape)
    of `P[index]` for a constant matrix P read by `matrix` (the index read through PyTensor's scalar conversion),
    ("bernoulli", p) of a constant p or ("bernoulli switch", a, b) of `switch(cond, a, b)` of constants (numbers as
    float64 bytes, `_numbers`); None for anything else. The one reader of both routes: `scalar_term` (the parent
    must be a free integer scalar) and `scalar_chain` (it must be the previous day)."""
    node = var.owner
    if node is None or var.type.ndim or not isinstance(node.inputs[1].type, NoneTypeT):
        return None
    law = _kind(type(node.op))
    if law != "categorical" and law != "bernoulli":
        return None
    [p] = node.op.dist_params(node)
    found = p.owner
    shape = None if found is None else _kind(type(found.op))
    if shape == "index" and law == "categorical" and len(found.inputs) == 2 and len(found.op.idx_list) == 1 \
            and not isinstance(found.op.idx_list[0], slice):
        rows = matrix(found.inputs[0])
        if rows is None or len(rows[0]) != 2:
            return None
        return _read(found.inputs[1]), ("categorical rows", rows[1], rows[0])
    if shape == "elemwise" and law == "bernoulli" and _kind(type(found.op.scalar_op)) == "switch" \
            and p.type.ndim == 0:
        cond, high, low = found.inputs
        a, b = _numbers(high), _numbers(low)
        if a is None or b is None or a[0] or b[0]:
            return None
        return cond, ("bernoulli switch", a[1], b[1])
    numbers = _numbers(p)  # constant probabilities: a vector, or one probability
    if numbers is None or len(numbers[0]) != (1 if law == "categorical" else 0):
        return None
    return None, (law, numbers[1])


@functools.cache
def _kind(cls: type) -> str | None:
    """What `_lookup` reads of an op's (or scalar op's) class, asked once per class: PyTensor's ops are abstract
    base classes, and a failed `isinstance` against one costs about a microsecond."""
    return next((kind for kind, base in _KINDS if issubclass(cls, base)), None)


_KINDS = (("categorical", CategoricalRV), ("bernoulli", BernoulliRV), ("index", Subtensor), ("elemwise", Elemwise),
          ("switch", Switch), ("scalar", ScalarFromTensor), ("dimshuffle", DimShuffle))


def _table(key: tuple, own: np.ndarray, *parents: np.ndarray) -> np.ndarray | None:
    """The log table of a `_lookup` key over (own, parent) (over own alone, a column, for a key without parent):
    PyMC's Categorical and Bernoulli log-probabilities (`_rows_table`, `_bernoulli_table`)."""
    kind, numbers = key[0], np.frombuffer(key[1], dtype=np.float64)
    if kind == "categorical":
        return _categorical_table(own, numbers[None, :], np.zeros(1))
    if kind == "categorical rows":
        return _rows_table(own, parents[0], numbers.reshape(key[2]), check=True)
    if kind == "bernoulli":
        return _bernoulli_table(own, np.zeros(1), numbers[0], numbers[0])
    return _bernoulli_table(own, parents[0], numbers[0], np.frombuffer(key[2], dtype=np.float64)[0])


def _read(index: Variable) -> Variable:
    """The variable an index reads, through PyTensor's scalar conversion."""
    node = index.owner
    return node.inputs[0] if node is not None and _kind(type(node.op)) == "scalar" else index


def _integer(v: Variable) -> bool:
    """An integer (or boolean) variable: a Categorical's or Bernoulli's value, an index."""
    return v.type.dtype.startswith(("int", "uint", "bool"))


def _numbers(v: Variable) -> tuple[tuple[int, ...], bytes] | None:
    """`_constant`'s numbers as a key (`_key`), or None."""
    data = _constant(v)
    return None if data is None else _key(data)


def _key(data: np.ndarray) -> tuple[tuple[int, ...], bytes]:
    """A constant's shape and float64 bytes: how a lookup key holds its numbers."""
    return data.shape, data.tobytes()


def _constant(v: Variable) -> np.ndarray | None:
    """A float constant's data in float64 (as `precision.in_float64` reads it), through dimensions added in
    front (a `.dist`'s batch of one); else None."""
    while not isinstance(v, TensorConstant):
        node = v.owner
        if node is None or _kind(type(node.op)) != "dimshuffle" or not _leading(node.op):
            return None
        v = node.inputs[0]
    data = v.data  # of the constant's type: float16, float32 or float64 ("e", "f", "d"), else not read
    if data.dtype.char == "d":
        return data
    return np.asarray(data, dtype=np.float64) if data.dtype.char in ("e", "f") else None


def _leading(op: DimShuffle) -> bool:
    """Whether a dimension shuffle only adds broadcastable dimensions in front."""
    order = list(op.new_order)
    kept = [d for d in order if d != "x"]
    return kept == list(range(op.input_ndim)) and order[len(order) - len(kept):] == kept


def _codes(values: np.ndarray, size: int) -> np.ndarray | None:
    """Integer values as row or column indices: None unless every value is an integer; those outside
    [0, size) are marked -1."""
    values = np.asarray(values)
    codes = values.astype(np.int64)
    if not np.array_equal(codes, values):
        return None
    return np.where((codes >= 0) & (codes < size), codes, -1)


def _categorical_table(own: np.ndarray, rows: np.ndarray, previous: np.ndarray) -> np.ndarray | None:
    """log rows[previous, own] over (own, previous) (PyMC's Categorical: -inf outside 0..k-1)."""
    return _rows_table(own, previous, rows, check=True)


def _rows_table(own: np.ndarray, previous: np.ndarray, matrix: np.ndarray, check: bool) -> np.ndarray | None:
    """log matrix[previous, own] over (own, previous), -inf for an own value outside the row; None when a
    previous value is not a row (PyTensor's index error) or, with `check`, a row it picks fails PyMC's
    Categorical check (0 <= p <= 1, sum(p) close to 1)."""
    states = matrix.shape[1]
    x, v = _codes(own, states), _codes(previous, len(matrix))
    if x is None or v is None or np.any(v < 0):
        return None
    picked = matrix[v]  # (previous, states)
    if check and not (np.all((picked >= 0) & (picked <= 1)) and np.all(np.isclose(picked.sum(axis=-1), 1))):
        return None
    with np.errstate(divide="ignore"):
        logs = np.log(picked)
    return np.where(x[:, None] >= 0, logs[:, np.maximum(x, 0)].T, -np.inf)


def _bernoulli_table(own: np.ndarray, parent: np.ndarray, high: np.ndarray, low: np.ndarray) -> np.ndarray | None:
    """PyMC's Bernoulli log p (x = 1), log1p(-p) (x = 0), -inf otherwise, over (own, parent), with
    p = high where the parent is nonzero else low (`switch`); None when p is outside [0, 1]."""
    x = _codes(own, 2)
    if x is None or not all(0 <= float(q) <= 1 for q in (high, low)):
        return None
    p = np.where(np.asarray(parent) != 0, float(high), float(low))
    with np.errstate(divide="ignore"):
        by_value = np.stack([np.log1p(-p), np.log(p)])  # (x, parent)
    return np.where(x[:, None] >= 0, by_value[np.maximum(x, 0)], -np.inf)
