"""Symbolic derivations (sympy): closed forms of the leakage that the engines compute numerically."""

from ddpbayes.symbolic.gaussian import Derivation, derive_gaussian, derive_gaussian_rho

__all__ = ["Derivation", "derive_gaussian", "derive_gaussian_rho"]
