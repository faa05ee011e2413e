"""Sampling engine: MCMC estimates of leak(i, K) for any PyMC model (DESIGN §2.3); `engine`
holds the `Engine`."""

from ddpbayes.engines.sampling.engine import SamplingEngine

__all__ = ["SamplingEngine"]
