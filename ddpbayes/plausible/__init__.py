"""Auditing under a fitted model three ways (DESIGN §9.6, issue #41): the posterior means, the
parameters integrated over the posterior (the Bayesian adversary), or a class of plausible models,
one per posterior draw (Pufferfish privacy, Kifer & Machanavajjhala, TODS 2014)."""

from ddpbayes.plausible.audit import (DEFAULT_DRAWS, FittedAudit, Parameters, audit_fitted, check_fitted,
                                      parse_parameters)
from ddpbayes.plausible.calibrate import FittedCalibration, calibrate_fitted

__all__ = ["DEFAULT_DRAWS", "FittedAudit", "FittedCalibration", "Parameters", "audit_fitted", "calibrate_fitted",
           "check_fitted", "parse_parameters"]
