"""Vector variables read element by element (DESIGN §2.1b, issue #29).

A Markov chain written as one vector variable — pymc-extras' `DiscreteMarkovChain`, or a
`CustomDist` whose value is a `scan` drawing x[k] given x[k-1] from a constant initial state —
is read as an initial term over x[0] and one transition term per day over (x[k], x[k-1]),
with the log-density its library gives it (pymc-extras: log p_init(x[0]) + Σ_k log P[x[k-1],
x[k]]; PyMC's measurable scan: Σ_k log p_step(x[k] | x[k-1])). Other scans stay one table over
all their elements. An element-wise variable (an HMM's emissions) whose parameters read a
vector parent only element by element (`Bernoulli(p=pt.switch(x, a, b))`, `Categorical(p=E[x])`)
reads, for element k, only x[k]; through a gather by a constant integer vector (`u[cluster]`, a
clustered model's effects, issue #41) it reads only u[cluster[k]].
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.logprob.basic import logp
from pymc.pytensorf import constant_fold
from pymc.distributions.custom import CustomSymbolicDistRV
from pytensor.graph.basic import Variable, clone_get_equiv
from pytensor.graph.traversal import ancestors
from pytensor.scalar import ScalarConstant
from pytensor.scan.op import Scan
from pytensor.tensor.random.basic import BernoulliRV, CategoricalRV
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.subtensor import AdvancedSubtensor, AdvancedSubtensor1, Subtensor
from pytensor.tensor.type_other import SliceType
from pytensor.tensor.variable import TensorConstant

from ddpbayes.errors import InputError

_EXTRAS = "pymc_extras.distributions.timeseries"  # loaded by any model that holds a DiscreteMarkovChain


class Chain:
    """A first-order chain of `length` elements over {0, ..., states-1}: an initial law for x[0] and
    a law of x[k] given x[k-1], each a log-probability graph in the model's variables."""

    length: int
    states: int

    def init_logp(self, value: Variable) -> Variable:
        """log P(x[0] = value), a scalar graph."""
        raise NotImplementedError

    def step_logp(self, current: Variable, previous: Variable) -> Variable:
        """log P(x[k] = current | x[k-1] = previous), a scalar graph."""
        raise NotImplementedError

    def reads(self, step: bool) -> list[Variable]:
        """The graphs the initial (or step) law is computed from: their free ancestors are its parents."""
        raise NotImplementedError


@dataclass(frozen=True)
class MarkovChain(Chain):
    """pymc-extras' `DiscreteMarkovChain`: x[0] ~ `init` (shape (1,)), x[k] | x[k-1] ~ P[x[k-1]]."""

    length: int
    states: int
    transition: Variable  # the (states, states) matrix P
    init: Variable  # the initial distribution, an unregistered `.dist` of shape (1,)

    def init_logp(self, value: Variable) -> Variable:
        return logp(self.init, value[None], warn_rvs=False).sum()

    def step_logp(self, current: Variable, previous: Variable) -> Variable:
        """log P[previous, current], with pymc-extras' checks on P (and P >= 0)."""
        P = self.transition
        return check_parameters(pt.log(P[previous, current]), pt.all(pt.ge(P, 0)),
                                pt.all(pt.allclose(P.sum(axis=-1), 1.0)),
                                msg="P must be non-negative and sum to 1 along the last axis")

    def reads(self, step: bool) -> list[Variable]:
        return [self.transition if step else self.init]


def chain(rv) -> Chain | None:
    """`rv` read as a chain if it is a `DiscreteMarkovChain` or a scan `CustomDist` of the pattern
    `ScanChain` reads (cached on it); InputError for a DiscreteMarkovChain this reading cannot take."""
    if rv.owner is None:
        return None
    extras = sys.modules.get(_EXTRAS)
    if extras is not None and isinstance(rv.owner.op, extras.DiscreteMarkovChainRV):
        read = _read
    elif isinstance(rv.owner.op, CustomSymbolicDistRV) and rv.ndim == 1:
        read = _read_scan
    else:
        return None
    node, found = getattr(rv.tag, _CACHED, (None, None))
    if node is not rv.owner:  # a clone copies its tag: read its own inputs
        found = read(rv)
        setattr(rv.tag, _CACHED, (rv.owner, found))
    return found


_CACHED = "ddpbayes_chain"


def _read(rv) -> Chain:
    op = rv.owner.op
    P, steps, init = rv.owner.inputs[:3]
    if op.n_lags != 1:
        raise InputError(f"DiscreteMarkovChain '{rv.name}' has n_lags={op.n_lags}; only first-order chains "
                         "(n_lags=1) are read")
    if rv.ndim != 1 or P.ndim != 2:
        raise InputError(f"DiscreteMarkovChain '{rv.name}' must be one chain (a vector) with one (k, k) transition "
                         f"matrix; it has {rv.ndim} dimensions and P has {P.ndim}")
    states = P.type.shape[-1]
    if states is None:
        raise InputError(f"DiscreteMarkovChain '{rv.name}': the number of states (P's last dimension) must be static")
    [steps] = constant_fold([steps], raise_not_constant=False)
    if isinstance(steps, Variable):
        raise InputError(f"DiscreteMarkovChain '{rv.name}': its number of steps must be a constant")
    return MarkovChain(int(steps) + 1, int(states), P, init)


@dataclass(frozen=True)
class ScanChain(Chain):
    """A `CustomDist` whose value is `scan(step, outputs_info=[initial], non_sequences=...)`: x[k] is
    the step's Bernoulli or Categorical draw given x[k-1] (x[-1] = the constant `initial`), as PyMC
    derives the scan's log-density step by step."""

    length: int
    states: int
    draw: Variable  # the step's draw, a graph in `previous` and the scan's inner inputs
    previous: Variable  # the scan's inner input for x[k-1]
    inputs: dict  # the scan's other inner inputs -> their graphs in the model's variables
    initial: Variable  # x[-1], a constant

    def init_logp(self, value: Variable) -> Variable:
        return self.step_logp(value, self.initial)

    def step_logp(self, current: Variable, previous: Variable) -> Variable:
        [draw] = _substitute([self.draw], {self.previous: previous, **self.inputs})
        return logp(draw, current, warn_rvs=False)

    def reads(self, step: bool) -> list[Variable]:
        return list(self.inputs.values())


def _read_scan(rv) -> ScanChain | None:
    """The pattern `ScanChain` reads, or None (the variable is then one table over its elements)."""
    op = rv.owner.op
    out = op.inner_outputs[op.default_output]
    tail = out.owner
    if tail is None or not isinstance(tail.op, Subtensor) or len(tail.op.idx_list) != 1 \
            or not isinstance(tail.inputs[1], ScalarConstant) or tail.inputs[1].data != 1:
        return None  # not the scan's trace without its initial state
    node = tail.inputs[0].owner
    if node is None or not isinstance(node.op, Scan) or node.outputs.index(tail.inputs[0]) != 0:
        return None
    info, scan = node.op.info, node.op
    if info.n_seqs or info.mit_mot_in_slices or info.mit_sot_in_slices or info.n_nit_sot or info.as_while \
            or info.sit_sot_in_slices != ((-1,),):
        return None
    outer = _substitute(node.inputs, dict(zip(op.inner_inputs, rv.owner.inputs)))
    steps, initial = constant_fold([outer[0], outer[1][0]], raise_not_constant=False)
    draw = scan.inner_outputs[0]
    if isinstance(steps, Variable) or isinstance(initial, Variable) or draw.owner is None \
            or not isinstance(draw.owner.op, (BernoulliRV, CategoricalRV)) or draw is not draw.owner.default_output():
        return None
    params = draw.owner.op.dist_params(draw.owner)
    if any(a.owner is not None and isinstance(a.owner.op, RandomVariable)
           for a in ancestors(params, blockers=scan.inner_inputs)):
        return None  # the step draws more than x[k]
    states = 2 if isinstance(draw.owner.op, BernoulliRV) else params[0].type.shape[-1]
    if states is None:
        return None
    inputs = dict(zip(scan.inner_inputs[1:], outer[2:]))
    return ScanChain(int(steps), int(states), draw, scan.inner_inputs[0], inputs, pt.constant(initial))


def _substitute(outputs: list[Variable], memo: dict) -> list[Variable]:
    """`outputs` with the variables `memo` maps replaced, the replacements themselves (the model's
    variables) kept as they are, not cloned."""
    equiv = clone_get_equiv([], outputs, copy_inputs=False, copy_orphans=False, memo=dict(memo))
    return [equiv.get(v, v) for v in outputs]


def length(rv) -> int | None:
    """The static length of a vector variable (a chain's from its steps), or None."""
    if rv.type.shape[0] is not None:
        return rv.type.shape[0]
    found = chain(rv)
    return found.length if found is not None else None


def aligned_parents(var, parents: list) -> dict:
    """The vector `parents` that an element-wise `var` (a univariate RandomVariable's batch of n)
    reads element by element, each with its map: element k of every parameter depends on parent p
    only through p[map[k]] (element-wise operations, axis 0 kept first, a fixed table indexed by it,
    a gather by a constant integer array: `u[cluster]` maps element k to cluster[k])."""
    op = var.owner.op
    n = var.type.shape[0]
    if not isinstance(op, RandomVariable) or _depends(var.owner.inputs[1], parents):
        return {}
    params = op.dist_params(var.owner)
    out = {}
    for p in parents:
        if p.ndim != 1 or length(p) is None:
            continue
        memo: dict = {}
        states = [_status(q, p, memo) for q in params]
        maps = [s for s in states if isinstance(s, _Map)]
        if maps and all(s is _FREE or (isinstance(s, _Map) and q.ndim - nd == 1)
                        for s, q, nd in zip(states, params, op.ndims_params)) \
                and all(m == maps[0] for m in maps) and len(maps[0].index) == n:
            out[p] = maps[0].index
    return out


@dataclass(frozen=True, eq=False)
class _Map:
    """Aligned with the parent: element k (on axis 0) reads only parent[index[k]]."""

    index: np.ndarray

    def __eq__(self, other) -> bool:
        return isinstance(other, _Map) and np.array_equal(self.index, other.index)

    def __hash__(self) -> int:
        return hash(self.index.tobytes())


_FREE, _MIXED = "free", "mixed"


def _depends(v: Variable, parents: list) -> bool:
    return bool(set(ancestors([v])) & set(parents))


def _status(v: Variable, parent: Variable, memo: dict) -> str | _Map:
    """Whether `v` is free of `parent`, aligned with it (a `_Map`: element k on axis 0 reads only
    parent[map[k]]), or mixed."""
    if v is parent:
        return _Map(np.arange(length(parent)))
    if v in memo:
        return memo[v]
    memo[v] = _FREE
    node = v.owner
    if node is not None:
        states = [_status(i, parent, memo) for i in node.inputs]
        if any(s is not _FREE for s in states):
            memo[v] = _through(node, v, states)
    return memo[v]


def _through(node, v: Variable, states: list) -> _Map | str:
    """The map of `v`, computed by `node` from inputs of these `states` (one of them not free), or `_MIXED`."""
    if _MIXED in states:
        return _MIXED
    op, maps = node.op, [s for s in states if isinstance(s, _Map)]
    if isinstance(op, Elemwise):
        same = all(m == maps[0] for m in maps)
        kept = all(s is _FREE or (i.ndim == v.ndim and not i.type.broadcastable[0])
                   for i, s in zip(node.inputs, states))
        return maps[0] if same and kept else _MIXED
    if isinstance(op, DimShuffle):
        return states[0] if op.new_order and op.new_order[0] == 0 else _MIXED
    if isinstance(op, (AdvancedSubtensor1, AdvancedSubtensor)):
        rest_free = all(isinstance(i.type, SliceType) and s is _FREE for i, s in zip(node.inputs[2:], states[2:]))
        if states[0] is _FREE and isinstance(states[1], _Map) and node.inputs[1].ndim == 1 and rest_free:
            return states[1]  # table[x] or table[x, slices]
        if isinstance(states[0], _Map) and len(node.inputs) == 2:
            return _gathered(states[0], node.inputs[1])  # u[cluster]
    return _MIXED


def _gathered(read: _Map, index: Variable) -> _Map | str:
    """u[index] for a constant integer vector `index` and u aligned by `read`: element k reads
    read.index[index[k]] (negative indices count from the end; outside u: mixed, PyMC refuses it)."""
    if not isinstance(index, TensorConstant) or index.ndim != 1 or not index.dtype.startswith(("int", "uint")):
        return _MIXED
    at, size = np.asarray(index.data, dtype=np.int64), len(read.index)
    if np.any(at < -size) or np.any(at >= size):
        return _MIXED
    return _Map(read.index[np.where(at < 0, at + size, at)])
