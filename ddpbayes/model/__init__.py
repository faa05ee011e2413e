"""The model contract: `DependenceModel`, its domains, and loading model files.

`DependenceModel` (and `TupleSlot`) are imported on first use: the contract loads PyMC, and the
domains, the model reference, the queries and the mechanisms are read without it (`ddpbayes
derive` and the command line's argument checks never load PyMC)."""

from __future__ import annotations

from ddpbayes.lazy import listing, on_first_use
from ddpbayes.model.domains import Domain, Finite, Interval

_LAZY = {"DependenceModel": "ddpbayes.model.contract", "TupleSlot": "ddpbayes.model.contract"}

__all__ = ["DependenceModel", "Domain", "Finite", "Interval", "TupleSlot"]

__getattr__ = on_first_use(__name__, _LAZY, globals())
__dir__ = listing(_LAZY, globals())
