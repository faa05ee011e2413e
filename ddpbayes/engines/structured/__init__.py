"""Structured exact engine (issue 13): variable elimination with a partial-sum axis over the
model's factor graph (`graph`, `potential`) for integer linear queries with Laplace or geometric
noise, the supremum over outputs taken as in DESIGN §2.1 (`engine`)."""

from ddpbayes.engines.structured.engine import StructuredEngine

__all__ = ["StructuredEngine"]
