"""The model contract (DESIGN §4): a PyMC model plus which of its variables are the tuples."""

from __future__ import annotations

import operator
import pickle
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

import pymc as pm
from pymc.logprob.utils import ParameterValueError

from ddpbayes.errors import InputError
from ddpbayes.formatting import abbreviated
from ddpbayes.model.chains import length
from ddpbayes.model.domains import Domain, Finite, Interval
from ddpbayes.model.reference import rebuild
from ddpbayes.model.supports import is_discrete, supports

T = TypeVar("T")


@dataclass(frozen=True)
class TupleSlot:
    """Tuple k of the database: random variable `rv`, or element `index` of a vector one.

    Parameters
    ----------
    name : str
        The tuple's name: the variable's, or ``NAME[k]`` for an element of a vector.
    rv : object
        The PyMC random variable (a PyTensor variable).
    index : int or None
        The element of a vector `rv`; None for a scalar one.
    """

    name: str
    rv: object
    index: int | None

    @property
    def expr(self):
        """The tuple's value as a graph: the variable, or its element `index`."""
        return self.rv if self.index is None else self.rv[self.index]


class DependenceModel:
    """Tuples X_0..X_{n-1} whose joint law is a PyMC model; other free variables are latent.

    `tuples` is a list of scalar random-variable names, or the name of one vector random
    variable whose elements are the tuples. `domains` is one `Domain` for every tuple, a
    mapping from variable name to `Domain`, or a list of one `Domain` per tuple; discrete supports
    are inferred otherwise.

    Parameters
    ----------
    model : pymc.Model
        The joint law of the tuples and any latent variables.
    tuples : str or sequence of str
        Names of scalar free random variables, one per tuple, or the name of one vector free
        random variable whose elements are the tuples.
    domains : Finite, Interval, mapping of str to Domain, list of Domain, or None, default None
        One domain for every tuple, domains by variable name, or a list with each tuple's (in tuple
        order); a variable without one gets its inferred discrete support.
    multimodal : bool, default False
        Declares the conditional laws multimodal (e.g. a kernel density over cities): the sampling
        engine draws every choosing run by SMC directly, without a NUTS run first (DESIGN §2.3).
    blocks : sequence of sequences of int, default ()
        Groups of tuples (indices) that SMC's Metropolis-within-Gibbs kernel moves together, the others
        held (e.g. one member's coordinates): each group's free coordinates are proposed at once from
        the kernel density's block marginal (DESIGN §2.3). Disjoint; none by default.

    Raises
    ------
    InputError
        If `model` is not a `pymc.Model`; a tuple is not a free random variable of it, repeats, or
        has the wrong dimension; no tuple is named; `domains` is of the wrong type or names a
        variable that is not a tuple; a support cannot be inferred; or `blocks` are not disjoint
        groups of tuple indices.
    """

    def __init__(
        self,
        model: pm.Model,
        tuples: str | Sequence[str],
        domains: Domain | Mapping[str, Domain] | None = None,
        multimodal: bool = False,
        blocks: Sequence[Sequence[int]] = (),
    ):
        if not isinstance(model, pm.Model):
            raise InputError(f"DependenceModel needs a pymc.Model, got {type(model).__name__}")
        self.model = model
        self.slots = _slots(model, tuples)
        self.domains = _domains(self.slots, domains)
        self.multimodal = bool(multimodal)
        self.blocks = _blocks(blocks, len(self.slots))
        self._memo: dict[tuple[str, Hashable], object] = {}
        self.origin = None  # the file and parameters it was loaded from (`parallel.ModelRef`)

    def __repr__(self) -> str:
        """One line: the tuples and their domains (long lists abbreviated), the latent variables and
        the file the model came from, if any; read from the graph, nothing compiled (DESIGN §4)."""
        names = self.names
        domains = [_short_domain(d) for d in self.domains]
        if len(set(domains)) == 1:
            tuples = f"{abbreviated(names)} in {domains[0]}"
        else:
            tuples = abbreviated([f"{name} in {d}" for name, d in zip(names, domains)])
        latent = abbreviated([rv.name for rv in self.latent_rvs]) or "none"
        origin = ""
        if self.origin is not None:
            params = ", ".join(f"{k}={v!r}" for k, v in pickle.loads(self.origin.params))
            origin = f"; from {self.origin.path}" + (f" with {params}" if params else "")
        return f"DependenceModel({self.n} tuple{'s' if self.n != 1 else ''}: {tuples}; latent: {latent}{origin})"

    def __reduce__(self):
        """Pickled by reference: a worker rebuilds the model from its file once and keeps it
        (`model.reference`); a model built in Python, with no file, cannot be sent."""
        if self.origin is None:
            raise TypeError("the model was built in Python, not loaded from a model file, so Dask workers cannot "
                            "rebuild it")
        return rebuild, (self.origin,)

    def memo(self, owner: str, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()` once per (`owner`, `key`) for this model: engines keep the work they reuse
        across audits here (the enumerated joint, the covariance, compiled MCMC steps and runs),
        each under its own name, so no engine reads another's entries.

        Parameters
        ----------
        owner : str
            The caller's name (an engine's), keeping its entries apart.
        key : Hashable
            What is computed.
        compute : Callable[[], T]
            Computes the value; called only the first time.

        Returns
        -------
        T
            The value computed the first time for (`owner`, `key`).
        """
        slot = (owner, key)
        if slot not in self._memo:
            self._memo[slot] = compute()
        return self._memo[slot]  # type: ignore[return-value]

    def has_memo(self, owner: str, key: Hashable) -> bool:
        return (owner, key) in self._memo

    @property
    def n(self) -> int:
        return len(self.slots)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.slots]

    @cached_property
    def tuple_rvs(self) -> list:
        return list({id(s.rv): s.rv for s in self.slots}.values())

    @cached_property
    def latent_rvs(self) -> list:
        tuples = {id(rv) for rv in self.tuple_rvs}
        return [rv for rv in self.model.free_RVs if id(rv) not in tuples]

    def is_discrete(self, k: int) -> bool:
        return is_discrete(self.slots[k].rv) and isinstance(self.domains[k], Finite)

    @property
    def all_discrete(self) -> bool:
        return all(self.is_discrete(k) for k in range(self.n))

    def describe(self) -> dict:
        return {
            "tuples": [{"name": s.name, "domain": str(d)} for s, d in zip(self.slots, self.domains)],
            "latent": [rv.name for rv in self.latent_rvs],
        }


def _short_domain(domain: Domain) -> str:
    """A domain as text, a long finite one as its first and last values and its size."""
    if isinstance(domain, Finite) and len(domain.values) > 6:
        v = domain.values
        return f"{{{v[0]:g}, {v[1]:g}, {v[2]:g}, ..., {v[-1]:g}}} ({len(v):,} values)"
    return str(domain)


@contextmanager
def rejected_parameters() -> Iterator[None]:
    """Evaluating the user's model (its log-probability or a prior draw): a parameter outside
    its distribution's range (Beta(a=-1)) is bad input, reported as one line."""
    try:
        yield
    except (ParameterValueError, ValueError) as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise InputError(f"the model rejects its own parameters: {type(exc).__name__}: {first}") from exc


def _slots(model: pm.Model, tuples: str | Sequence[str]) -> list[TupleSlot]:
    free = {rv.name: rv for rv in model.free_RVs}

    def lookup(name: str):
        if name in free:
            return free[name]
        if name in model.named_vars:
            raise InputError(f"tuple '{name}' is not a free random variable of the model (observed or deterministic)")
        raise InputError(f"the model has no random variable '{name}' (it has: {', '.join(free) or 'none'})")

    if isinstance(tuples, str):
        rv = lookup(tuples)
        if rv.ndim != 1:
            raise InputError(f"tuple vector '{tuples}' must be one-dimensional, it has {rv.ndim} dimensions")
        size = length(rv)
        if size is None:
            size = int(pm.draw(rv.shape[0]))
        return [TupleSlot(f"{tuples}[{k}]", rv, k) for k in range(size)]
    names = list(tuples)
    if not names:
        raise InputError("a DependenceModel needs at least one tuple")
    if len(set(names)) != len(names):
        raise InputError(f"tuple names repeat: {names}")
    slots = []
    for name in names:
        rv = lookup(name)
        if rv.ndim != 0:
            raise InputError(f"tuple '{name}' is not scalar; name a vector tuple as tuples='{name}'")
        slots.append(TupleSlot(name, rv, None))
    return slots


def _blocks(blocks: Sequence[Sequence[int]], n: int) -> tuple[tuple[int, ...], ...]:
    """The declared blocks as tuples of tuple indices: each non-empty, within 0..n-1, none in two."""
    try:
        out = tuple(tuple(operator.index(k) for k in block) for block in blocks)  # 1.5 or '1' refused, not rounded
    except (TypeError, ValueError):
        raise InputError(f"blocks must be groups of tuple indices, got {blocks!r}") from None
    flat = [k for block in out for k in block]
    if any(not block for block in out) or any(not 0 <= k < n for k in flat) or len(set(flat)) != len(flat):
        raise InputError(f"blocks must be disjoint, non-empty groups of tuple indices 0..{n - 1}, got {blocks!r}")
    return out


def _domains(slots: list[TupleSlot], domains) -> list[Domain]:
    if isinstance(domains, (list, tuple)):  # one per tuple (a vector's elements on different scales)
        if len(domains) != len(slots) or not all(isinstance(d, (Finite, Interval)) for d in domains):
            raise InputError(f"a list of domains must hold one Finite or Interval per tuple ({len(slots)}), "
                             f"got {len(domains)} items")
        return list(domains)
    if domains is not None and not isinstance(domains, (Finite, Interval, Mapping)):
        raise InputError(f"domains must be a Finite, an Interval, a mapping or a list (one per tuple), "
                         f"got {type(domains).__name__}")
    if isinstance(domains, Mapping):
        known = {s.rv.name for s in slots}
        for key, dom in domains.items():
            if key not in known:
                raise InputError(f"domains names '{key}', which is not a tuple (tuples: {', '.join(sorted(known))})")
            if not isinstance(dom, (Finite, Interval)):
                raise InputError(f"the domain of '{key}' must be a Finite or an Interval")
    if isinstance(domains, (Finite, Interval)):
        return [domains] * len(slots)
    given = domains or {}
    unique = {s.rv.name: s.rv for s in slots if s.rv.name not in given}
    inferred = dict(zip(unique, supports(list(unique.values()))))
    return [given[s.rv.name] if s.rv.name in given else inferred[s.rv.name] for s in slots]
