"""Seed 000's dependent perturbation mechanism (DPM), its group-privacy baseline, classic DP.

- classic DP: Q + Lap(dQ / eps), dQ the global sensitivity;
- baseline (000 Thm. 7, group privacy): Q + Lap(L dQ / eps), L = max |N(i)| + 1;
- DPM (000/001 §VI-B): Q + Lap(DS_Q / eps), DS_Q = max_i sum_j rho_ij dQ_j (`coefficients`).

rho_ij depends on the Laplace scale sigma, so the DPM scale is a fixed point sigma = DS_Q(sigma) / eps.
Writing rho_ij(sigma) = leak_i(e_j, sigma) sigma / dD_j (rho_ii = 1), it is the root of

    F(sigma) = DS_Q(sigma) / sigma - eps = max_i [dQ_i / sigma + sum_{j != i} leak_i(e_j, sigma) dQ_j / dD_j] - eps.

Method: F(a) >= 0 at a = dQ / eps (DS_Q >= dQ since rho_ii = 1). When every rho_ij <= 1 (000
Eq. 15), F(c) <= 0 at c = max_i sum_{j in N(i) ∪ {i}} dQ_j / eps; but rho_ij > 1 happens when D_j
is not confined to its declared domain (a Gaussian D_j whose conditional mean moves by more than
dD_j as D_i crosses its domain: `Coefficients.above_one`), so the bracket's upper end starts at
c and doubles until F <= 0 there (at most MAX_DOUBLINGS times, else an InputError; F(sigma) tends
to -eps as sigma grows, as leak_i(e_j, sigma) -> 0: it is at most dD_j / sigma for a confined
D_j, and c / sigma for a Gaussian one). brentq finds the root to 1e-10 relative, and the scale
returned is nudged up, if need be, to the side where sigma >= DS_Q(sigma) / eps (the inequality
000's argument uses).

Uniqueness: leak_i(e_j, sigma) is non-increasing in sigma for Laplace noise (see
`ddpbayes.ddp.calibration`: Lap(s2) = Lap(s1) + an independent noise for s2 > s1, and
post-processing cannot raise a likelihood ratio), so F is non-increasing, strictly wherever
the maximising i has dQ_i > 0: the fixed point is unique. rho itself need not be monotone in
sigma (household.py: rho_01 = 0.374, 0.469, 0.449, 0.436 at sigma = 0.3, 1, 3, 10), which is
why the root is sought in F rather than by iterating sigma <- DS_Q(sigma) / eps.
For the sampling engine F is built from the estimated rho (the plug-in values: the paper's
recipe uses rho as given), so the DPM scale inherits their Monte Carlo error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ddpbayes.ddp.coefficients import Coefficients, dependence_coefficients
from ddpbayes.ddp.roots import safe_root
from ddpbayes.errors import InputError
from ddpbayes.model import DependenceModel
from ddpbayes.queries import Query
from ddpbayes.settings import RunSettings

MAX_DOUBLINGS = 60  # of the bracket's upper end, from max_i sum_{j in N(i) ∪ {i}} dQ_j / eps


@dataclass(frozen=True)
class DPMScale:
    """The DPM's scale, DS_Q there and the coefficients it was computed from.

    Parameters
    ----------
    scale : float
        The fixed point sigma = DS_Q(sigma) / eps.
    dependent_sensitivity : float
        DS_Q at that scale.
    coefficients : Coefficients
        rho at that scale.
    evaluations : int
        Scales at which rho was computed while solving.
    """

    scale: float
    dependent_sensitivity: float
    coefficients: Coefficients
    evaluations: int

    def to_dict(self) -> dict:
        return {
            "scale": self.scale,
            "dependent_sensitivity": self.dependent_sensitivity,
            "evaluations": self.evaluations,
            "coefficients": self.coefficients.to_dict(),
        }


def sensitivities(model: DependenceModel, query: Query) -> np.ndarray:
    """dQ_j for every tuple j; an InputError when one is infinite."""
    out = np.array([query.sensitivity(j, model.domains) for j in range(model.n)], dtype=float)
    if not np.all(np.isfinite(out)):
        j = int(np.flatnonzero(~np.isfinite(out))[0])
        raise InputError(f"the query's sensitivity to tuple {model.names[j]} is unbounded (domain {model.domains[j]})")
    if out.max() == 0:
        raise InputError("the query does not depend on any tuple: there is nothing to calibrate")
    return out


def dp_scale(model: DependenceModel, query: Query, epsilon: float) -> float:
    """Classic DP: dQ / eps (dQ the global sensitivity).

    Parameters
    ----------
    model : DependenceModel
        The tuples and their domains.
    query : Query
        The statistic released.
    epsilon : float
        The privacy budget.

    Returns
    -------
    float
        The Laplace scale.

    Raises
    ------
    InputError
        If the query's sensitivity to a tuple is unbounded, or the query depends on no tuple.
    """
    return float(sensitivities(model, query).max()) / epsilon


def group_scale(model: DependenceModel, query: Query, epsilon: float, dependence_size: int) -> float:
    """000 Thm. 7 (group privacy): L dQ / eps.

    Parameters
    ----------
    model : DependenceModel
        The tuples and their domains.
    query : Query
        The statistic released.
    epsilon : float
        The privacy budget.
    dependence_size : int
        L = ``max |N(i)| + 1``.

    Returns
    -------
    float
        The Laplace scale.

    Raises
    ------
    InputError
        As `dp_scale`.
    """
    return dependence_size * dp_scale(model, query, epsilon)


def _upper_end(excess: Callable[[float], float], start: float) -> float:
    """A scale from `start` up, doubling, where the non-increasing `excess` is <= 0."""
    hi = start
    for _ in range(MAX_DOUBLINGS):
        if excess(hi) <= 0:
            return hi
        hi *= 2
    raise InputError(f"DPM's fixed point sigma = DS_Q(sigma) / epsilon lies above scale {hi:.3g}: DS_Q does not "
                     "settle as the noise grows")


def dpm_scale(model: DependenceModel, query: Query, epsilon: float, settings: RunSettings | None = None) -> DPMScale:
    """The fixed point sigma = DS_Q(sigma) / eps (module docstring).

    The root of F(sigma) = DS_Q(sigma) / sigma - eps, bracketed from dQ / eps and found with brentq,
    then nudged to the side where sigma >= DS_Q(sigma) / eps.

    Parameters
    ----------
    model : DependenceModel
        The tuples and their dependence; every domain must be bounded.
    query : Query
        The statistic released.
    epsilon : float
        The privacy budget.
    settings : RunSettings or None, default None
        How to run the leakage computations; None: the defaults.

    Returns
    -------
    DPMScale
        The scale, DS_Q there and the coefficients.

    Raises
    ------
    InputError
        As `dp_scale` and `dependence_coefficients`, or when DS_Q does not settle as the noise grows
        (no fixed point within 60 doublings of the bracket's upper end).

    References
    ----------
    Liu, Chakraborty, Mittal, "Dependence Makes You Vulnerable: Differential Privacy Under Dependent
    Tuples", NDSS 2016, §VI-B.
    """
    settings = settings or RunSettings()
    dq = sensitivities(model, query)
    cache: dict[float, Coefficients] = {}

    def coefficients(sigma: float) -> Coefficients:
        if sigma not in cache:
            cache[sigma] = dependence_coefficients(model, sigma, settings)
        return cache[sigma]

    def excess(sigma: float) -> float:
        return coefficients(sigma).dependent_sensitivity(dq) / sigma - epsilon

    lo = float(dq.max()) / epsilon
    deps = coefficients(lo).dependence_sets
    hi = max(lo, max(dq[i] + sum(dq[j] for j in deps[i]) for i in range(model.n)) / epsilon)
    sigma = lo
    if excess(lo) > 0:
        hi = _upper_end(excess, hi)
        sigma = hi if excess(hi) == 0 else safe_root(excess, lo, hi, epsilon * 1e-12)
    rho = coefficients(sigma)
    return DPMScale(float(sigma), rho.dependent_sensitivity(dq), rho, len(cache))
