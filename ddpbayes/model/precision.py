"""Double precision for every number the engines read off a model's graph.

PyTensor stores a Python float that float32 holds exactly (0.5, 0.25) as a float32 constant,
and whatever is computed from it alone stays float32: log(0.5) or sqrt(0.5) lose half their
digits. 8 Bernoulli(0.5) tuples summed to a mass of 0.99999999238, and leakages moved in the
eighth digit. The engines evaluate `in_float64(graphs)` instead.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytensor.tensor as pt
from pytensor.compile.mode import Mode, get_mode
from pytensor.graph.replace import clone_replace
from pytensor.graph.traversal import ancestors
from pytensor.tensor.variable import TensorConstant


def in_float64(graphs: list) -> list:
    """The graphs with every float32 constant made float64 (the operations above it are rebuilt)."""
    singles = {v for v in ancestors(graphs) if isinstance(v, TensorConstant) and v.dtype == "float32"}
    if not singles:
        return graphs
    return clone_replace(graphs, {v: pt.constant(np.asarray(v.data, dtype="float64")) for v in singles},
                         rebuild_strict=False)


@cache
def python_mode() -> Mode:
    """FAST_COMPILE's graph rewrites with the pure-Python linker: the small functions the engines evaluate once
    need no C code, and this linker does not import PyTensor's C machinery (setuptools: 0.1-0.3 s a process)."""
    return Mode(linker="py", optimizer=get_mode("FAST_COMPILE").provided_optimizer)
