"""ddpbayes: verify privacy mechanisms on dependent data under DDP, PDP and IDP.

A model is a PyMC model plus the names of its tuples (`DependenceModel`); `audit` computes
the leakage of a query released through a noise mechanism, against the adversaries of a
notion, with the engine that fits the model.
"""

from ddpbayes.audit import AuditResult, audit
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Geometric, Laplace, RandomizedResponse
from ddpbayes.model import DependenceModel, Finite, Interval
from ddpbayes.model.loading import load_model
from ddpbayes.problem import Adversary, Problem
from ddpbayes.queries import parse_query

__version__ = "0.1.0"

__all__ = [
    "Adversary",
    "AuditResult",
    "DependenceModel",
    "Finite",
    "Geometric",
    "InputError",
    "Interval",
    "Laplace",
    "Problem",
    "RandomizedResponse",
    "audit",
    "load_model",
    "parse_query",
]
