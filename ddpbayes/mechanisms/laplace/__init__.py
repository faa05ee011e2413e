"""Laplace and two-sided geometric noise (DESIGN §2.1): the mechanisms (`mechanism`), their
mixtures (`mixture`) and their information integrals (`information`, DESIGN §3.4)."""

from ddpbayes.mechanisms.laplace.mechanism import Geometric, Laplace
from ddpbayes.mechanisms.laplace.mixture import laplace_sums, log_mixture, weighted_log_mixture

__all__ = ["Geometric", "Laplace", "laplace_sums", "log_mixture", "weighted_log_mixture"]
