"""Enumerate the joint law of a finite discrete model with its own compiled log-probability.

The model's log-density is a sum of terms, one per variable (DESIGN §2.1). Each term depends
on its own value and on its parents' only, so it is compiled once, vectorised with
`vectorize_graph`, and evaluated on the small table of (value, parents) combinations; the
joint log-probability of every state is then a sum of table look-ups. Latent variables are
enumerated last and summed out (logsumexp), leaving P(X = x) for every tuple configuration.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.graph.replace import vectorize_graph
from pytensor.graph.traversal import ancestors
from scipy.special import logsumexp

from ddpbayes.errors import InputError
from ddpbayes.limits import DEFAULT_MAX_STATES, check_states
from ddpbayes.model import DependenceModel, Finite
from ddpbayes.model.contract import rejected_parameters
from ddpbayes.model.precision import in_float64
from ddpbayes.model.supports import is_discrete, support


@dataclass(frozen=True)
class JointTable:
    """P(X = x) over the tuple configurations of positive probability."""

    x: np.ndarray  # (S, n) tuple values
    codes: np.ndarray  # (S, n) index of each value in its tuple's domain
    logp: np.ndarray  # (S,) log-probability, normalised over the enumerated domains
    values: list[np.ndarray]  # the domain of every tuple
    mass: float  # prior mass that the enumerated domains cover (< 1 when a Finite domain truncates)

    def ids(self, cols: Sequence[int]) -> np.ndarray:
        """Each state's configuration of the tuples `cols` as a dense id 0..m-1 (mixed-radix order)."""
        key = np.zeros(len(self.logp), dtype=np.int64)
        for c in cols:
            key = key * len(self.values[c]) + self.codes[:, c]
        return np.unique(key, return_inverse=True)[1].reshape(-1)


@dataclass(frozen=True)
class _Slot:
    rv: object
    index: int | None  # element of a vector variable, None for a scalar one
    values: np.ndarray


def joint_table(model: DependenceModel, max_states: int = DEFAULT_MAX_STATES) -> JointTable:
    """Enumerate `model` (cached on it per state limit)."""
    key = ("joint_table", max_states)
    return model.memo("exact", key, lambda: _enumerate(model, max_states))


def unsupported_reason(model: DependenceModel) -> str | None:
    """Why the joint of `model` cannot be enumerated, or None."""
    for k, slot in enumerate(model.slots):
        if not model.is_discrete(k):
            return f"tuple '{slot.name}' is continuous or unbounded (domain {model.domains[k]})"
    for rv in model.latent_rvs:
        dom = support(rv) if is_discrete(rv) else None
        if not isinstance(dom, Finite):
            return f"latent variable '{rv.name}' is continuous or has unbounded support"
    return None


def _slots(model: DependenceModel) -> list[_Slot]:
    slots = [_Slot(s.rv, s.index, np.asarray(d.values)) for s, d in zip(model.slots, model.domains)]
    for rv in model.latent_rvs:
        vals = np.asarray(support(rv).values)
        size = int(np.prod(rv.type.shape)) if rv.ndim else 1
        if rv.ndim > 1 or any(s is None for s in rv.type.shape):
            raise InputError(f"latent variable '{rv.name}' must be a scalar or a vector of static length")
        slots += [_Slot(rv, k if rv.ndim else None, vals) for k in range(size)]
    return slots


def enumerable_slots(model: DependenceModel, engine: str) -> list[_Slot]:
    """The tuples', then the latents', value sets; InputError naming `engine` when one is not finite."""
    reason = unsupported_reason(model)
    if reason:
        raise InputError(f"the {engine} engine needs finite discrete tuples and latents: {reason}")
    return _slots(model)


def _enumerate(model: DependenceModel, max_states: int) -> JointTable:
    slots = enumerable_slots(model, "exact")
    sizes = [len(s.values) for s in slots]
    total = math.prod(sizes)
    check_states(total, "the joint state space", limit=max_states, advice=", or use another engine")
    factors = _factors(model, slots)
    logp = np.zeros(total)
    strides = np.cumprod([1] + sizes[::-1][:-1])[::-1]  # slot 0 is the most significant digit
    flat = np.arange(total, dtype=np.int64)
    for slot_ids, table in factors:
        index = np.zeros(total, dtype=np.int64)
        for s in slot_ids:
            index = index * sizes[s] + (flat // strides[s]) % sizes[s]
        logp += table[index]
    n = model.n
    per_config = math.prod(sizes[n:])
    logp = logsumexp(logp.reshape(-1, per_config), axis=1) if per_config > 1 else logp
    keep = np.flatnonzero(logp > -np.inf)
    if keep.size == 0:
        raise InputError("every state of the enumerated domains has probability zero")
    codes = np.stack([(keep // (strides[k] // per_config)) % sizes[k] for k in range(n)], axis=1)
    values = [slots[k].values for k in range(n)]
    x = np.stack([values[k][codes[:, k]] for k in range(n)], axis=1).astype(float)
    lp = logp[keep]
    norm = logsumexp(lp)
    return JointTable(x=x, codes=codes, logp=lp - norm, values=values, mass=float(np.exp(norm)))


def _factors(model: DependenceModel, slots: list[_Slot]) -> list[tuple[list[int], np.ndarray]]:
    """Each log-probability term of the model, tabulated over the slots it depends on."""
    pm_model = model.model
    value_of = {pm_model.rvs_to_values[s.rv]: s.rv for s in slots}
    slots_of: dict = {}
    for k, s in enumerate(slots):
        slots_of.setdefault(s.rv, []).append(k)
    terms = in_float64(pm_model.logp(sum=False))
    inputs, outputs, plans = [], [], []
    for term in terms:
        used = [v for v in ancestors([term]) if v in value_of]
        slot_ids = [k for v in used for k in slots_of[value_of[v]]]
        grid = _grid([slots[k].values for k in slot_ids])  # (B, len(slot_ids))
        replace, feeds = {}, []
        for v in used:
            rv = value_of[v]
            batched = pt.tensor(dtype=v.dtype, shape=(None, *v.type.shape))
            replace[v] = batched
            cols = [slot_ids.index(k) for k in slots_of[rv]]
            arr = grid[:, cols] if rv.ndim else grid[:, cols[0]]
            feeds.append(arr.astype(v.dtype))
        out = vectorize_graph(term, replace=replace) if replace else pt.shape_padleft(term.sum())
        if out.ndim > 1:
            out = out.sum(axis=tuple(range(1, out.ndim)))
        inputs += list(replace.values())
        outputs.append(out)
        plans.append((slot_ids, feeds))
    # The tables are tiny: C compilation would cost seconds and save nothing.
    fn = pytensor.function(inputs, outputs, on_unused_input="ignore", mode="FAST_COMPILE")
    with rejected_parameters():
        tables = fn(*[f for _, feeds in plans for f in feeds])
    return [(ids, np.asarray(t, dtype=float).reshape(-1)) for (ids, _), t in zip(plans, tables)]


def _grid(columns: list[np.ndarray]) -> np.ndarray:
    """Every combination of the columns' values, first column most significant: (B, len(columns))."""
    if not columns:
        return np.zeros((1, 0))
    mesh = np.meshgrid(*columns, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1)
