"""The model contract: `DependenceModel`, its domains, and loading model files.

`DependenceModel` (and `TupleSlot`) are imported on first use: the contract loads PyMC, and the
domains, the model reference, the queries and the mechanisms are read without it (`ddpbayes
derive` and the command line's argument checks never load PyMC)."""

from __future__ import annotations

import importlib

from ddpbayes.model.domains import Domain, Finite, Interval

_LAZY = {"DependenceModel": "ddpbayes.model.contract", "TupleSlot": "ddpbayes.model.contract"}

__all__ = ["DependenceModel", "Domain", "Finite", "Interval", "TupleSlot"]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'ddpbayes.model' has no attribute '{name}'")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
