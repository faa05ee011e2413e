"""Symbolic derivations (sympy): closed forms of the leakage that the engines compute numerically."""

from ddpbayes.symbolic.gaussian import Derivation, derive_gaussian, derive_gaussian_rho
from ddpbayes.symbolic.derive import derive
from ddpbayes.symbolic.gdp import derive_gaussian_gdp

__all__ = ["Derivation", "derive", "derive_gaussian", "derive_gaussian_gdp", "derive_gaussian_rho"]
