"""Gaussian engine (DESIGN §2.2): jointly Gaussian tuples read off the PyMC graph (`graph`), the
closed form of leak(i, K) (`engine`), and pdp over every known set without listing it (`lattice`)."""

from ddpbayes.engines.gaussian.engine import GaussianEngine

__all__ = ["GaussianEngine"]
