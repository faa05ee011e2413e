"""The one registry of built-in mechanisms, `{kind: class}`: each class declares its `kind` and
the `aliases` a user may type (DESIGN §1). A new mechanism is a class here and nowhere else."""

from __future__ import annotations

from ddpbayes.errors import InputError
from ddpbayes.mechanisms.base import Mechanism
from ddpbayes.mechanisms.gaussian import DiscreteGaussian, Gaussian
from ddpbayes.mechanisms.laplace import Geometric, Laplace, PrefixSums
from ddpbayes.mechanisms.randomized_response import RandomizedResponse
from ddpbayes.mechanisms.rappor import OneTimeRappor, Rappor
from ddpbayes.mechanisms.selection import ExponentialMechanism, ReportNoisyMax
from ddpbayes.mechanisms.numerical_svt import NumericalSparseVector
from ddpbayes.mechanisms.sparse_vector import SparseVector
from ddpbayes.mechanisms.truncated_geometric import TruncatedGeometric

REGISTRY: dict[str, type[Mechanism]] = {cls.kind: cls for cls in
                                        (Laplace, Geometric, PrefixSums, RandomizedResponse, Gaussian, DiscreteGaussian,
                                         ReportNoisyMax, ExponentialMechanism, SparseVector, NumericalSparseVector,
                                         Rappor, OneTimeRappor, TruncatedGeometric)}
MECHANISMS = tuple(REGISTRY)  # the kinds, in the order messages list them
ALIASES = {alias: kind for kind, cls in REGISTRY.items() for alias in cls.aliases}


def lookup(name: str) -> type[Mechanism] | None:
    """The class of the kind or alias `name`, None when no mechanism is called so.

    Parameters
    ----------
    name : str
        A kind (e.g. "laplace") or one of its aliases (e.g. "rr").

    Returns
    -------
    type[Mechanism] or None
        The registered class, or None.
    """
    return REGISTRY.get(ALIASES.get(name, name))


def canonical_kind(name: str) -> str:
    """The kind `name` spells (itself or an alias); InputError naming the kinds when none.

    Parameters
    ----------
    name : str
        A kind or one of its aliases.

    Returns
    -------
    str
        The kind (a key of `REGISTRY`).

    Raises
    ------
    InputError
        When no mechanism is called `name`.

    Examples
    --------
    >>> canonical_kind("rr")
    'randomized_response'
    """
    cls = lookup(name)
    if cls is None:
        raise InputError(f"unknown mechanism '{name}' (use {', '.join(MECHANISMS)})")
    return cls.kind
