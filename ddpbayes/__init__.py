"""ddpbayes: verify privacy mechanisms on dependent data under DDP, PDP and IDP.

A model is a PyMC model plus the names of its tuples (`DependenceModel`); `audit` computes
the leakage of a query released through a noise mechanism, against the adversaries of a
notion, with the engine that fits the model; `calibrate`, `rho` and `derive` are the command
line's commands of the same names, their keywords its flags. The names below are imported on first use, so
`import ddpbayes` (and the command line's argument parsing) does not load PyMC.
"""

from __future__ import annotations

from ddpbayes.errors import InputError
from ddpbayes.lazy import on_first_use

__version__ = "0.1.0"

_HOMES = {
    "AuditResult": "ddpbayes.auditing",
    "audit": "ddpbayes.auditing",
    "Calibration": "ddpbayes.ddp",
    "calibrate": "ddpbayes.ddp",
    "rho": "ddpbayes.ddp",
    "derive": "ddpbayes.symbolic",
    "Geometric": "ddpbayes.mechanisms",
    "Laplace": "ddpbayes.mechanisms",
    "RandomizedResponse": "ddpbayes.mechanisms",
    "DependenceModel": "ddpbayes.model",
    "Finite": "ddpbayes.model",
    "Interval": "ddpbayes.model",
    "fit": "ddpbayes.fitting",
    "load_model": "ddpbayes.model.loading",
    "Adversary": "ddpbayes.problem",
    "Problem": "ddpbayes.problem",
    "RunSettings": "ddpbayes.settings",
    "parse_query": "ddpbayes.queries",
}

__all__ = ["InputError", *sorted(_HOMES)]


__getattr__ = on_first_use(__name__, _HOMES, globals())


def __dir__() -> list[str]:
    """The public API (what tab completion offers): no imports, private names or loaded submodules."""
    return sorted([*__all__, "__version__"])
