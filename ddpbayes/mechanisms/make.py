"""`make_mechanism`: a mechanism from its kind and the parameters a user gives."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence

from ddpbayes.errors import InputError
from ddpbayes.mechanisms.base import Mechanism, _positive
from ddpbayes.mechanisms.gaussian import Gaussian, check_delta, gaussian_sigma, global_l2_sensitivity
from ddpbayes.mechanisms.registry import REGISTRY, canonical_kind
from ddpbayes.model.domains import Domain
from ddpbayes.profiles import DEFAULT_DELTA
from ddpbayes.queries import Query


def make_mechanism(
    kind: str, query: Query, domains: Sequence[Domain], scale: float | None = None, epsilon: float | None = None,
    *, delta: float | None = None, rho: float | None = None, params: dict[str, str] | None = None,
) -> Mechanism:
    """Build a mechanism from `scale` (σ for Gaussian noise), or as the DP libraries set it:
    Laplace/geometric scale = global L1 sensitivity / `epsilon`; Gaussian σ from zCDP `rho` or
    from (`epsilon`, `delta`) (mechanisms.gaussian). `delta` is also the δ at which a Gaussian
    leakage is read (default 1e-6); pure-ε mechanisms refuse it. A mechanism with a joint output law
    (DESIGN §5.2) builds itself from `scale` or `epsilon` and its `params`; the others refuse params.

    Parameters
    ----------
    kind : str
        A mechanism kind or alias (`MECHANISMS`).
    query : Query
        The query to release.
    domains : sequence of Domain
        The tuples' domains.
    scale : float or None, optional
        The noise scale (σ for Gaussian noise).
    epsilon : float or None, optional
        The DP level that sets the scale (with `delta` for Gaussian noise).
    delta : float or None, optional
        Gaussian noise only: the δ of (ε, δ), and at which the leakage is read (default 1e-6).
    rho : float or None, optional
        Gaussian noise only: the zCDP level that sets σ.
    params : dict[str, str] or None, optional
        ``--mechanism-param NAME=VALUE`` texts, for a mechanism with `parameters`.

    Returns
    -------
    Mechanism
        The mechanism, checked against `query` (`Mechanism.check`).

    Raises
    ------
    InputError
        For an unknown kind, a wrong combination of settings (e.g. both or neither of `scale` and
        `epsilon` for pure-ε noise), a non-positive value, a global sensitivity that is zero or unbounded
        when `epsilon` or `rho` sets the scale, or a query the mechanism cannot release.

    Examples
    --------
    >>> from ddpbayes.model.domains import Finite
    >>> from ddpbayes.queries import parse_query
    >>> mech = make_mechanism("laplace", parse_query("sum"), [Finite((0.0, 1.0))] * 3, epsilon=0.5)
    >>> print(mech.scale)
    2.0
    """
    kind = canonical_kind(kind)
    cls = REGISTRY[kind]
    if params and not cls.parameters:
        raise InputError(f"--mechanism-param sets a setting of a mechanism that has some; {kind} noise has none")
    if cls.joint:
        for value, flag in ((delta, "--delta"), (rho, "--rho")):
            if value is not None:
                raise InputError(f"{flag} is meaningless for the {kind} mechanism: it is pure epsilon-DP")
        if epsilon is not None:
            _positive(epsilon, "epsilon")
        if scale is not None:
            _positive(scale, "scale")
        mech = cls.build(query, domains, scale=scale, epsilon=epsilon, params=dict(params or {}))
    elif cls.gaussian:
        mech = _gaussian(kind, query, domains, scale, epsilon, delta, rho)
    else:
        if delta is not None:
            raise InputError(f"--delta is meaningless for {kind} noise: it is pure epsilon-DP (delta = 0); use "
                             "--mechanism gaussian for an (epsilon, delta) guarantee")
        if rho is not None:
            raise InputError(f"--rho sets Gaussian noise (zCDP); {kind} noise is set by --scale or --epsilon")
        mech = _pure(kind, query, domains, scale, epsilon)
    mech.check(query, domains)
    return mech


def _pure(kind: str, query: Query, domains: Sequence[Domain], scale: float | None, epsilon: float | None) -> Mechanism:
    if (scale is None) == (epsilon is None):
        raise InputError("give exactly one of scale and epsilon")
    if epsilon is not None:
        _positive(epsilon, "epsilon")
    if scale is not None:
        _positive(scale, "scale")
    if REGISTRY[kind].flips_bits:
        if epsilon is None:
            raise InputError("randomized response is set by --epsilon (the per-bit DP level), not --scale")
        return REGISTRY[kind](epsilon)
    if scale is None:
        scale = _from_sensitivity(query.global_sensitivity(domains), "L1", lambda gs: gs / epsilon,
                                  f"--epsilon {epsilon:g}")
    return REGISTRY[kind](scale, epsilon=epsilon)


def _gaussian(kind: str, query: Query, domains: Sequence[Domain], sigma: float | None, epsilon: float | None,
              delta: float | None, rho: float | None) -> Gaussian:
    if sum(v is not None for v in (sigma, epsilon, rho)) != 1:
        raise InputError(f"{kind} noise needs exactly one of --sigma, --rho (zCDP) and --epsilon with --delta")
    if delta is not None:
        check_delta(delta)
    if epsilon is not None and delta is None:
        raise InputError("--epsilon sets Gaussian noise only with --delta (the analytic Gaussian mechanism at "
                         "(epsilon, delta)); or give --sigma or --rho")
    for value, what in ((sigma, "sigma"), (epsilon, "epsilon"), (rho, "rho")):
        if value is not None:
            _positive(value, what)
    if sigma is None:
        sigma = _from_sensitivity(global_l2_sensitivity(query, domains), "L2",
                                  lambda gs: gaussian_sigma(kind, gs, rho=rho, epsilon=epsilon, delta=delta),
                                  f"--rho {rho:g}" if rho is not None else f"--epsilon {epsilon:g}")
    return REGISTRY[kind](sigma, DEFAULT_DELTA if delta is None else delta, rho=rho, epsilon=epsilon)


def _from_sensitivity(gs: float, norm: str, recipe, given: str) -> float:
    """The noise scale `recipe` sets from the global sensitivity `gs`, refusing what cannot be set."""
    if not math.isfinite(gs) or gs == 0:
        why = "unbounded" if not math.isfinite(gs) else "zero"
        raise InputError(f"the privacy level cannot set the noise: the query's global {norm} sensitivity is {why}; "
                         "give the noise scale (--scale, or --sigma for Gaussian noise)")
    scale = recipe(gs)
    if scale < sys.float_info.min:
        raise InputError(f"{given} sets the scale to {scale:g}, below the smallest usable {sys.float_info.min:.4g}")
    return scale
