"""Laplace and two-sided geometric noise (DESIGN §2.1): the mechanisms (`mechanism`), their
mixtures (`mixture`) and their information integrals (`information`, DESIGN §3.4)."""

from ddpbayes.mechanisms.laplace.mechanism import Geometric, Laplace, PrefixSums
from ddpbayes.mechanisms.laplace.mixture import laplace_sums, log_mixture, weighted_log_mixture

__all__ = ["Geometric", "Laplace", "PrefixSums", "laplace_sums", "log_mixture", "weighted_log_mixture"]
