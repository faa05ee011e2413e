"""Noise mechanisms p_M(y | q(x)) (DESIGN §1): `base.Mechanism` is the interface engines read
(and users subclass), `laplace`, `randomized_response` the pure-ε mechanisms, `gaussian` the
(ε, δ) ones whose leakage is a privacy profile (DESIGN §3.5), `make` builds one from flags."""

from ddpbayes.mechanisms.base import Mechanism
from ddpbayes.mechanisms.gaussian import DiscreteGaussian, Gaussian, l2_sensitivity
from ddpbayes.mechanisms.laplace import Geometric, Laplace, laplace_sums
from ddpbayes.mechanisms.make import MECHANISMS, make_mechanism
from ddpbayes.mechanisms.randomized_response import RandomizedResponse

__all__ = ["MECHANISMS", "DiscreteGaussian", "Gaussian", "Geometric", "Laplace", "Mechanism", "RandomizedResponse",
           "l2_sensitivity", "laplace_sums", "make_mechanism"]
