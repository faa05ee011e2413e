"""Dependent-data recipes and their audit: seed 000's dependence coefficients, DPM and group
baseline, seed 004's IDP sufficient conditions, and Laplace calibration to a notion."""

from ddpbayes.ddp.calibration import METHODS, Calibration, MethodRow, calibrate, exact_scale
from ddpbayes.ddp.coefficients import Coefficients, dependence_coefficients, rho
from ddpbayes.ddp.dpm import DPMScale, dp_scale, dpm_scale, group_scale
from ddpbayes.ddp.idp_bounds import DependenceProfile, IdpBounds, dependence_profile, idp_bounds

__all__ = [
    "METHODS",
    "Calibration",
    "Coefficients",
    "DPMScale",
    "DependenceProfile",
    "IdpBounds",
    "MethodRow",
    "calibrate",
    "dependence_coefficients",
    "dependence_profile",
    "dp_scale",
    "dpm_scale",
    "exact_scale",
    "group_scale",
    "idp_bounds",
    "rho",
]
