"""Gaussian and discrete Gaussian noise (DESIGN §3.5): the mechanisms (`mechanism`) and their
profile maths, the privacy profile δ(ε) between two mixtures of their kernels: `mixture` (the door:
pairs of mixtures), `continuous` and `discrete` (δ(ε) and its inverse on the reals and on the
integers), `kernel` (log-space mixture densities and masses), `renyi` (zCDP ρ) and `gdp` (the
profile when the privacy loss is Gaussian; the Balle–Wang and zCDP σ)."""

from ddpbayes.mechanisms.gaussian.mechanism import (DiscreteGaussian, Gaussian, check_delta, gaussian_sigma,
                                                    global_l2_sensitivity, l2_sensitivity)

__all__ = ["DiscreteGaussian", "Gaussian", "check_delta", "gaussian_sigma", "global_l2_sensitivity", "l2_sensitivity"]
