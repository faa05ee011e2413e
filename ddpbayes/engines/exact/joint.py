"""Enumerate the joint law of a finite discrete model with its own compiled log-probability.

The model's log-density is a sum of terms, one per variable (DESIGN §2.1), each tabulated over
the slots it reads (`engines.terms`); the joint log-probability of every state is a sum of
table look-ups. Latent variables are enumerated last and summed out (logsumexp), leaving
P(X = x) for every tuple configuration.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from ddpbayes.engines.direct import chain_of
from ddpbayes.engines.terms import Slot, model_slots, tabulate
from ddpbayes.errors import InputError
from ddpbayes.limits import DEFAULT_MAX_STATES, check_states
from ddpbayes.model import DependenceModel, Finite
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


def joint_table(model: DependenceModel, max_states: int = DEFAULT_MAX_STATES) -> JointTable:
    """Enumerate `model` (cached on it per state limit)."""
    key = ("joint_table", max_states)
    return model.memo("exact", key, lambda: _enumerate(model, max_states))


def unsupported_reason(model: DependenceModel) -> str | None:
    """Why the joint of `model` cannot be enumerated, or None."""
    reason = continuous_tuple_reason(model)
    if reason:
        return reason
    for rv in model.latent_rvs:
        dom = support(rv) if is_discrete(rv) else None
        if not isinstance(dom, Finite):
            return f"latent variable '{rv.name}' is continuous or has unbounded support"
    return None


def continuous_tuple_reason(model: DependenceModel) -> str | None:
    """The first tuple that is not finite and discrete, as a reason, or None (cached on the model: the exact and
    structured engines both ask on every audit)."""
    return model.memo("exact", "continuous tuple", lambda: _continuous_tuple(model))


def _continuous_tuple(model: DependenceModel) -> str | None:
    # One check for a recognised chain (`direct.chain_of`): its tuples are alike by construction, each a scalar
    # Categorical or Bernoulli (integer-valued), all on one shared Finite domain.
    if chain_of(model) is not None:
        return None
    for slot, domain in zip(model.slots, model.domains):
        if not (is_discrete(slot.rv) and isinstance(domain, Finite)):  # `model.is_discrete`
            return f"tuple '{slot.name}' is continuous or unbounded (domain {domain})"
    return None


def oversized_reason(model: DependenceModel, limit: int) -> str | None:
    """Why the joint of `model` is too large to enumerate under `limit`, or None."""
    try:
        check_states(_states(model), "the joint state space", limit=limit,
                     advice=", or use the structured engine for models of small treewidth",
                     bytes_per=bytes_per_state(model.n))
    except InputError as e:
        return str(e)
    return None


def _states(model: DependenceModel) -> int:
    """How many configurations `_slots(model)` enumerates (read off the tuples' domains without building the
    slots when there are no latents)."""
    if model.latent_rvs:
        return math.prod(len(s.values) for s in _slots(model))
    if chain_of(model) is not None:  # one domain object for every tuple
        return len(model.domains[0].values) ** model.n
    return math.prod(len(d.values) for d in model.domains)


def bytes_per_state(n: int) -> int:
    """Memory one enumerated state of `n` tuples takes while the table is built: its
    log-probability, index, position and a look-up (8 bytes each), and its codes and values
    (8 bytes per tuple each). Household n = 21 (2^22 states) peaked at 276 bytes a state."""
    return 8 * (4 + 2 * n)


def _slots(model: DependenceModel) -> list[Slot]:
    return model_slots(model, lambda rv: support(rv).values)


def enumerable_slots(model: DependenceModel, engine: str) -> list[Slot]:
    """The tuples', then the latents', value sets; InputError naming `engine` when one is not finite."""
    reason = unsupported_reason(model)
    if reason:
        raise InputError(f"the {engine} engine needs finite discrete tuples and latents: {reason}")
    return _slots(model)


def _enumerate(model: DependenceModel, max_states: int) -> JointTable:
    slots = enumerable_slots(model, "exact")
    sizes = [len(s.values) for s in slots]
    total = math.prod(sizes)
    check_states(total, "the joint state space", limit=max_states,
                 advice=", or use the structured engine for models of small treewidth",
                 bytes_per=bytes_per_state(model.n))
    factors = tabulate(model, slots, max_states)
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
