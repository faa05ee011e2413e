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


@dataclass(frozen=True)
class Direct:
    """A term whose table is a lookup in constants: `parents` (the free variables it reads, besides its own
    value), and `table(own, *parents)`, the log-probability over every combination of the slots' values (own
    value first, most significant), or None when the numbers are not ones the model's logp would accept."""

    parents: list
    table: Callable[..., np.ndarray | None]
    key: tuple  # equal keys, equal tables on equal values


def scalar_term(var, free: set) -> Direct | None:
    """A scalar free Categorical or Bernoulli read as a lookup, or None."""
    node = var.owner
    if var.ndim != 0 or not isinstance(node.op, (CategoricalRV, BernoulliRV)) \
            or not isinstance(node.inputs[1].type, NoneTypeT):
        return None
    [p] = node.op.dist_params(node)
    if isinstance(node.op, CategoricalRV):
        return _categorical(p, free)
    return _bernoulli(p, free)


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


def scalar_chain(rvs: list, values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """A chain of scalar variables read off its constants at once (DESIGN §2.1b): x_0 a Categorical or Bernoulli
    of constant probabilities, each next x_k a `Categorical(p=P[x_{k-1}])` of a constant P or a
    `Bernoulli(p=switch(x_{k-1}, a, b))` of constants, every x_k taking `values`. Returns x_0's log table (values,)
    and the steps' (n - 1, values, values) over (x_k, x_{k-1}): the tables `scalar_term` gives, each distinct one
    computed once; None for anything else or numbers the model's checks would refuse (the general route says so)."""
    first = scalar_term(rvs[0], set())
    if first is None or first.parents:
        return None
    keys: dict = {}
    at = np.empty(len(rvs) - 1, dtype=np.int64)
    for k, (previous, var) in enumerate(zip(rvs, rvs[1:])):
        key = _step_key(var, previous)
        if key is None:
            return None
        at[k] = keys.setdefault(key, len(keys))
    distinct = [_step_table(key, values) for key in keys]
    head = first.table(values)
    if head is None or any(t is None for t in distinct):
        return None
    steps = np.stack(distinct)[at] if distinct else np.zeros((0, len(values), len(values)))
    return head.ravel(), steps


def _step_key(var, previous) -> tuple | None:
    """x_k's term as a lookup by x_{k-1} = `previous`, as `_categorical`'s rows or `_bernoulli`'s switch read it:
    ("rows", P's bytes, P's shape) or ("switch", a, b); None for anything else."""
    node = var.owner
    if node is None or var.ndim != 0 or not isinstance(node.op, (CategoricalRV, BernoulliRV)) \
            or not isinstance(node.inputs[1].type, NoneTypeT):
        return None
    [p] = node.op.dist_params(node)
    found = p.owner
    if found is None:
        return None
    if isinstance(node.op, CategoricalRV):
        if not isinstance(found.op, Subtensor) or len(found.inputs) != 2 or len(found.op.idx_list) != 1 \
                or isinstance(found.op.idx_list[0], slice) or _read(found.inputs[1]) is not previous:
            return None
        matrix = _constant(found.inputs[0])
        return None if matrix is None or matrix.ndim != 2 else ("rows", matrix.tobytes(), matrix.shape)
    if not isinstance(found.op, Elemwise) or not isinstance(found.op.scalar_op, Switch) \
            or found.inputs[0] is not previous:  # a checked scalar Categorical or Bernoulli: an integer scalar
        return None
    a, b = _constant(found.inputs[1]), _constant(found.inputs[2])
    if a is None or b is None or a.ndim or b.ndim:
        return None
    return "switch", float(a), float(b)


def _step_table(key: tuple, values: np.ndarray) -> np.ndarray | None:
    """The table over (x_k, x_{k-1}) of a `_step_key`."""
    if key[0] == "rows":
        matrix = np.frombuffer(key[1], dtype=np.float64).reshape(key[2])
        return _rows_table(values, values, matrix, check=True)
    return _bernoulli_table(values, values, np.float64(key[1]), np.float64(key[2]))


def _categorical(p: Variable, free: set) -> Direct | None:
    probs = _constant(p)
    if probs is not None and probs.ndim == 1:
        return Direct([], lambda own: _categorical_table(own, probs[None, :], np.zeros(1)),
                      ("categorical", probs.tobytes()))
    node = p.owner
    if node is None or not isinstance(node.op, Subtensor) or len(node.inputs) != 2 or len(node.op.idx_list) != 1 \
            or isinstance(node.op.idx_list[0], slice):
        return None
    matrix = _constant(node.inputs[0])
    parent = _scalar_parent(node.inputs[1], free)
    if matrix is None or matrix.ndim != 2 or parent is None:
        return None
    return Direct([parent], lambda own, previous: _rows_table(own, previous, matrix, check=True),
                  ("categorical rows", matrix.tobytes(), matrix.shape))


def _bernoulli(p: Variable, free: set) -> Direct | None:
    prob = _constant(p)
    if prob is not None and prob.ndim == 0:
        return Direct([], lambda own: _bernoulli_table(own, np.zeros(1), prob, prob), ("bernoulli", float(prob)))
    node = p.owner
    if node is None or not isinstance(node.op, Elemwise) or not isinstance(node.op.scalar_op, Switch) \
            or p.ndim != 0:
        return None
    cond, high, low = node.inputs
    a, b = _constant(high), _constant(low)
    if cond not in free or cond.ndim != 0 or not cond.dtype.startswith(("int", "uint", "bool")) \
            or a is None or b is None or a.ndim or b.ndim:
        return None
    return Direct([cond], lambda own, parent: _bernoulli_table(own, parent, a, b), ("bernoulli switch", float(a),
                                                                                    float(b)))


def _read(index: Variable) -> Variable:
    """The variable an index reads, through PyTensor's scalar conversion."""
    return index.owner.inputs[0] if index.owner is not None and isinstance(index.owner.op, ScalarFromTensor) else index


def _scalar_parent(index: Variable, free: set):
    """The free integer scalar variable an index reads (through PyTensor's scalar conversion), or None."""
    index = _read(index)
    if index in free and index.ndim == 0 and index.dtype.startswith(("int", "uint")):
        return index
    return None


def _constant(v: Variable) -> np.ndarray | None:
    """A float constant's data in float64 (as `precision.in_float64` reads it), through dimensions added in
    front (a `.dist`'s batch of one); else None."""
    while v.owner is not None and isinstance(v.owner.op, DimShuffle) and _leading(v.owner.op):
        v = v.owner.inputs[0]
    if not isinstance(v, TensorConstant) or v.dtype not in ("float32", "float64", "float16"):
        return None
    return np.asarray(v.data, dtype=np.float64)


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
