"""Vector variables read element by element (DESIGN §2.1b, issue #29).

A Markov chain written as one vector variable — pymc-extras' `DiscreteMarkovChain` — is read as
an initial term over x[0] and one transition term per day over (x[k], x[k-1]), with the
log-density pymc-extras gives it: log p_init(x[0]) + Σ_k log P[x[k-1], x[k]]. An element-wise
variable (an HMM's emissions) whose parameters read a vector parent only element by element
(`Bernoulli(p=pt.switch(x, a, b))`, `Categorical(p=E[x])`) reads, for element k, only x[k].
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytensor.tensor as pt
from pymc.distributions.dist_math import check_parameters
from pymc.logprob.basic import logp
from pymc.pytensorf import constant_fold
from pytensor.graph.basic import Variable
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.subtensor import AdvancedSubtensor, AdvancedSubtensor1
from pytensor.tensor.type_other import SliceType

from ddpbayes.errors import InputError

_EXTRAS = "pymc_extras.distributions.timeseries"  # loaded by any model that holds a DiscreteMarkovChain


@dataclass(frozen=True)
class Chain:
    """A first-order chain over {0, ..., states-1}: x[0] ~ `init` (shape (1,)), x[k] | x[k-1] ~ P[x[k-1]]."""

    length: int
    states: int
    transition: Variable  # the (states, states) matrix P, a graph in the model's variables
    init: Variable  # the initial distribution, an unregistered `.dist` of shape (1,)

    def init_logp(self, value: Variable) -> Variable:
        """log p_init(x[0] = value), a scalar."""
        return logp(self.init, value[None], warn_rvs=False).sum()

    def step_logp(self, current: Variable, previous: Variable) -> Variable:
        """log P[previous, current], with pymc-extras' checks on P (and P >= 0)."""
        P = self.transition
        return check_parameters(pt.log(P[previous, current]), pt.all(pt.ge(P, 0)),
                                pt.all(pt.allclose(P.sum(axis=-1), 1.0)),
                                msg="P must be non-negative and sum to 1 along the last axis")


def chain(rv) -> Chain | None:
    """`rv` read as a chain if it is a `DiscreteMarkovChain` (cached on it); InputError for one this
    reading cannot take."""
    if rv.owner is None:
        return None
    extras = sys.modules.get(_EXTRAS)
    if extras is None or not isinstance(rv.owner.op, extras.DiscreteMarkovChainRV):
        return None
    node, found = getattr(rv.tag, _CACHED, (None, None))
    if node is not rv.owner:  # a clone copies its tag: read its own inputs
        found = _read(rv)
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
    return Chain(int(steps) + 1, int(states), P, init)


def length(rv) -> int | None:
    """The static length of a vector variable (a chain's from its steps), or None."""
    if rv.type.shape[0] is not None:
        return rv.type.shape[0]
    found = chain(rv)
    return found.length if found is not None else None


def aligned_parents(var, parents: list) -> set:
    """The vector `parents` that an element-wise `var` (a univariate RandomVariable's batch of n)
    reads element by element: element k of every parameter depends on the parent only through
    its element k (element-wise operations, axis 0 kept first, a fixed table indexed by it)."""
    op = var.owner.op
    n = var.type.shape[0]
    if not isinstance(op, RandomVariable) or _depends(var.owner.inputs[1], parents):
        return set()
    params = op.dist_params(var.owner)
    out = set()
    for p in parents:
        if p.ndim != 1 or length(p) != n:
            continue
        memo: dict = {}
        states = [_status(q, p, memo) for q in params]
        if all(s == _FREE or (s == _ALIGNED and q.ndim - nd == 1)
               for s, q, nd in zip(states, params, op.ndims_params)) and _ALIGNED in states:
            out.add(p)
    return out


_FREE, _ALIGNED, _MIXED = "free", "aligned", "mixed"


def _depends(v: Variable, parents: list) -> bool:
    return any(_status(v, p, {}) != _FREE for p in parents)


def _status(v: Variable, parent: Variable, memo: dict) -> str:
    """Whether `v` is free of `parent`, aligned with it (axis 0 element k reads only parent[k]), or mixed."""
    if v is parent:
        return _ALIGNED
    if v in memo:
        return memo[v]
    memo[v] = _FREE
    node = v.owner
    if node is not None:
        states = [_status(i, parent, memo) for i in node.inputs]
        if any(s != _FREE for s in states):
            memo[v] = _ALIGNED if _keeps_alignment(node, v, states) else _MIXED
    return memo[v]


def _keeps_alignment(node, v: Variable, states: list[str]) -> bool:
    if _MIXED in states:
        return False
    op = node.op
    if isinstance(op, Elemwise):
        return all(s == _FREE or (i.ndim == v.ndim and not i.type.broadcastable[0])
                   for i, s in zip(node.inputs, states))
    if isinstance(op, DimShuffle):
        return bool(op.new_order) and op.new_order[0] == 0
    if isinstance(op, (AdvancedSubtensor1, AdvancedSubtensor)):  # table[x] or table[x, slices]
        return (states[0] == _FREE and states[1] == _ALIGNED and node.inputs[1].ndim == 1
                and all(isinstance(i.type, SliceType) and s == _FREE for i, s in zip(node.inputs[2:], states[2:])))
    return False
