"""The model contract: `DependenceModel`, its domains, and loading model files."""

from ddpbayes.model.contract import DependenceModel, TupleSlot
from ddpbayes.model.domains import Domain, Finite, Interval

__all__ = ["DependenceModel", "Domain", "Finite", "Interval", "TupleSlot"]
