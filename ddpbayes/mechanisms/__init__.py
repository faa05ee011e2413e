"""Noise mechanisms p_M(y | q(x)) (DESIGN §1), everything a noise kernel can do: `base.Mechanism` is
the interface engines read (and users subclass), with its capabilities; `registry` maps each kind
(and alias) to its class; `laplace` (with its mixture and information integrals) and
`randomized_response` the pure-ε mechanisms, `gaussian` the (ε, δ) ones whose leakage is a privacy
profile (DESIGN §3.5); `make` builds one from flags. The mechanisms with a joint output law over all
the answers (`joint`, issue #28): `selection` (report-noisy-max, the exponential mechanism),
`sparse_vector`, `rappor`, `truncated_geometric`; their shared base `joint` and integrals `quadrature`.
`program` a Python function audited as a black box; `interop` a DP library's object (diffprivlib, OpenDP)."""

from ddpbayes.mechanisms.base import Mechanism
from ddpbayes.mechanisms.gaussian import DiscreteGaussian, Gaussian, l2_sensitivity
from ddpbayes.mechanisms.information import NotAvailable
from ddpbayes.mechanisms.interop import from_library
from ddpbayes.mechanisms.joint import JointMechanism
from ddpbayes.mechanisms.laplace import Geometric, Laplace, laplace_sums
from ddpbayes.mechanisms.make import make_mechanism
from ddpbayes.mechanisms.randomized_response import RandomizedResponse
from ddpbayes.mechanisms.rappor import OneTimeRappor, Rappor
from ddpbayes.mechanisms.registry import MECHANISMS, REGISTRY, canonical_kind, lookup
from ddpbayes.mechanisms.selection import ExponentialMechanism, ReportNoisyMax
from ddpbayes.mechanisms.numerical_svt import NumericalSparseVector
from ddpbayes.mechanisms.sparse_vector import SparseVector
from ddpbayes.mechanisms.truncated_geometric import TruncatedGeometric

__all__ = ["MECHANISMS", "REGISTRY", "DiscreteGaussian", "ExponentialMechanism", "Gaussian", "Geometric",
           "JointMechanism", "Laplace", "Mechanism", "NotAvailable", "OneTimeRappor", "RandomizedResponse", "Rappor",
           "NumericalSparseVector", "ReportNoisyMax", "SparseVector", "TruncatedGeometric", "canonical_kind",
           "from_library", "l2_sensitivity", "laplace_sums",
           "lookup", "make_mechanism"]
