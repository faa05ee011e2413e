"""Exact engine for finite discrete models (DESIGN §2.1): the joint enumerated with the model's
own log-probability (`joint`), the supremum over outputs on the breakpoints and limits where it
is attained (`engine`)."""

from ddpbayes.engines.exact.engine import ExactEngine

__all__ = ["ExactEngine"]
