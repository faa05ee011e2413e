"""Gaussian and discrete Gaussian noise: (ε, δ) mechanisms whose leakage is a privacy profile
(DESIGN §3.5).

y = q(x) + N(0, σ²) on every output coordinate (OpenDP's `make_gaussian` on floats, diffprivlib's
`GaussianAnalytic`), or the discrete Gaussian N_Z(0, σ²), P(y) ∝ exp(-y² / 2σ²) on the integers
(OpenDP's `make_gaussian` on integers; Canonne, Kamath, Steinke 2020). σ is given, or set as the
libraries set it from the global L2 sensitivity Δ₂: zCDP ρ gives σ = Δ₂ / √(2ρ); (ε, δ) gives the
analytic Gaussian mechanism's σ (Balle & Wang 2018; for the discrete Gaussian the smallest σ whose
exact profile meets (ε, δ)). Under a notion the leakage is ε at `delta` of the profile.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.mechanisms.base import Mechanism, _positive, source_entry
from ddpbayes.mechanisms.gaussian.discrete import discrete_sigma, shift_profile
from ddpbayes.mechanisms.gaussian.gdp import analytic_sigma, gdp_profile, zcdp_sigma
from ddpbayes.mechanisms.gaussian.mixture import pair_profiles, pair_rho
from ddpbayes.model.domains import Domain, Finite
from ddpbayes.profiles import DEFAULT_DELTA, PairProfiles, Profile, delta_grid
from ddpbayes.queries import Histogram, Query, output_count


@dataclass(frozen=True)
class Gaussian(Mechanism):
    """y = q(x) + N(0, σ²) on every output coordinate independently; the leakage is ε at `delta`.

    An (ε, δ) mechanism: its leakage is read off the privacy profile δ(ε) (DESIGN §3.5).

    Parameters
    ----------
    sigma : float
        The noise's standard deviation σ (positive).
    delta : float, optional
        The δ at which the leakage is read, strictly between 0 and 1 (default 1e-6).
    kind : str, optional
        The mechanism's name ("gaussian").
    rho : float or None, optional
        The zCDP level σ came from, if given (reported only).
    epsilon : float or None, optional
        The ε of the (ε, `delta`) σ came from, if given (reported only).
    source : str or None, optional
        The library object it was read from (`from_library`).

    Raises
    ------
    InputError
        When `sigma` is not a positive normal double or `delta` is not in (0, 1).
    """

    sigma: float
    delta: float = DEFAULT_DELTA
    kind: str = "gaussian"
    rho: float | None = field(default=None, compare=False)  # the zCDP level σ came from, if given
    epsilon: float | None = field(default=None, compare=False)  # the (ε, delta) σ came from, if given
    source: str | None = field(default=None, compare=False)  # the library object it was read from (interop)
    profile = True
    gaussian = True
    calibratable = True
    shift_invariant = True

    def __post_init__(self):
        _positive(self.sigma, "sigma")
        check_delta(self.delta)

    @property
    def scale(self) -> float:
        """σ: what calibration solves for and report sweeps multiply."""
        return self.sigma

    @property
    def deltas(self) -> tuple[float, ...]:
        """The δ grid every profile is read on: `profiles.delta_grid` at `delta`."""
        return delta_grid(self.delta)

    def with_scale(self, sigma: float) -> Gaussian:
        """This mechanism with σ = `sigma` (its `rho`, `epsilon` and `source` dropped).

        Parameters
        ----------
        sigma : float
            The new σ.

        Returns
        -------
        Gaussian
            The copy.
        """
        return replace(self, sigma=sigma, rho=None, epsilon=None, source=None)

    def pair_profiles(self, logp: np.ndarray, logq: np.ndarray, levels: np.ndarray,
                      deltas: Sequence[float] | None = None) -> PairProfiles:
        """ε(δ) on `deltas` (default `self.deltas`) for each pair of mixtures Σ_s p_s N(levels_s, σ²)
        vs Σ_s q_s N(levels_s, σ²) (rows of log-weights (B, m), each normalised; `mixture.pair_profiles`):
        what an engine that has the mixture weights asks.

        Parameters
        ----------
        logp, logq : numpy.ndarray
            The two mixtures' normalised log-weights (B, m), row b against row b.
        levels : numpy.ndarray
            The query values (m,).
        deltas : sequence of float or None, optional
            The δ grid (default `deltas`).

        Returns
        -------
        PairProfiles
            The B pairs' ε(δ) and δ(0).
        """
        return pair_profiles(logp, logq, np.asarray(levels, dtype=float), self.sigma,
                             self.deltas if deltas is None else deltas, self.discrete)

    def pair_rho(self, logp: np.ndarray, logq: np.ndarray, levels: np.ndarray) -> tuple[float, str]:
        """zCDP ρ = sup_α D_α / α of one pair (both orders), with how it was found.

        Parameters
        ----------
        logp, logq : numpy.ndarray
            The two mixtures' normalised log-weights (m,).
        levels : numpy.ndarray
            The query values (m,).

        Returns
        -------
        rho : float
            The zCDP ρ.
        how : str
            How it was found.
        """
        return pair_rho(logp, logq, np.asarray(levels, dtype=float), self.sigma, self.discrete)

    def classic_profile(self, l2: float) -> Profile:
        """The model-free profile when one tuple moves the query by `l2` in L2 norm: μ = Δ₂ / σ.

        Parameters
        ----------
        l2 : float
            The L2 sensitivity Δ₂.

        Returns
        -------
        Profile
            The μ-GDP profile on `deltas` (`gdp.gdp_profile`).
        """
        return gdp_profile(l2 / self.sigma, self.deltas)

    def dp_leakage(self, sensitivity: float) -> float:
        """ε at `delta` of the classic profile at this sensitivity (`classic_profile`).

        Parameters
        ----------
        sensitivity : float
            The sensitivity (read as L2 by `classic_profile`).

        Returns
        -------
        float
            The classic ε at `delta`.
        """
        return self.classic_profile(float(sensitivity)).epsilon_at(self.delta)

    def tuple_dp_leakage(self, query: Query, k: int, domains: Sequence[Domain]) -> tuple[float, str | None]:
        """ε at `delta` for tuple k at its L2 sensitivity (`l2_sensitivity`).

        Parameters
        ----------
        query : Query
            The query the mechanism releases.
        k : int
            The tuple's index.
        domains : sequence of Domain
            The tuples' domains.

        Returns
        -------
        leakage : float
            The classic ε at `delta`.
        bound_reason : None
            Always None: the value is exact.

        Raises
        ------
        InputError
            When the L2 sensitivity of a vector query is not computed.
        """
        return self.dp_leakage(l2_sensitivity(query, k, domains)), None

    def log_kernel(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Refused: the log-ratio is unbounded in the tails; the leakage is a privacy profile.

        Parameters
        ----------
        q : numpy.ndarray
            The distinct values (m,) of one output coordinate.

        Returns
        -------
        tuple of numpy.ndarray
            Never returns.

        Raises
        ------
        InputError
            Always.
        """
        raise InputError(f"{self.kind} noise has no finite supremum over outputs: its leakage is a privacy profile, "
                         "which this engine does not compute")

    def grid_size(self, levels: int) -> int:
        """One cell per level (the size engines check before asking for profiles).

        Parameters
        ----------
        levels : int
            The number m of distinct query values.

        Returns
        -------
        int
            m.
        """
        return levels

    def describe(self) -> dict:
        given = {k: v for k, v in (("rho", self.rho), ("epsilon", self.epsilon)) if v is not None}
        return {"kind": self.kind, "sigma": self.sigma, "scale": self.sigma, "delta": self.delta, **given,
                "noise": f"{'discrete ' if self.discrete else ''}N(0, {self.sigma:g}^2) on every output coordinate", **source_entry(self)}


@dataclass(frozen=True)
class DiscreteGaussian(Gaussian):
    """y = q(x) + N_Z(0, σ²) on an integer query: P(y | q) ∝ exp(-(y - q)² / 2σ²) on the integers.

    Canonne, Kamath & Steinke (2020); its profiles are exact sums over the integers (`gaussian.discrete`).

    Parameters
    ----------
    sigma : float
        The σ parameter of N_Z (positive).
    delta : float, optional
        The δ at which the leakage is read, strictly between 0 and 1 (default 1e-6).
    kind : str, optional
        The mechanism's name ("discrete_gaussian").
    rho : float or None, optional
        The zCDP level σ came from, if given (reported only).
    epsilon : float or None, optional
        The ε of the (ε, `delta`) σ came from, if given (reported only).
    source : str or None, optional
        The library object it was read from (`from_library`).

    Raises
    ------
    InputError
        When `sigma` is not a positive normal double or `delta` is not in (0, 1).
    """

    kind: str = "discrete_gaussian"
    aliases = ("discrete-gaussian",)
    discrete = True
    calibratable = False

    def check(self, query: Query, domains: Sequence[Domain]) -> None:
        """Refuse all but an integer query: a histogram, or integer weights on integer-valued finite tuples.

        Parameters
        ----------
        query : Query
            The query to release.
        domains : sequence of Domain
            The tuples' domains.

        Raises
        ------
        InputError
            When the query is not an integer query.
        """
        w = query.matrix(len(domains))
        integral = all(isinstance(d, Finite) and all(float(v).is_integer() for v in d.values) for d in domains)
        if w is None and isinstance(query, Histogram):
            return
        if w is None or not integral or not np.all(np.equal(np.mod(w, 1), 0)):
            raise InputError("the discrete Gaussian mechanism needs an integer query: integer weights on "
                             "integer-valued tuples, or a histogram")

    def classic_profile(self, l2: float) -> Profile:
        """The exact profile of N_Z(0, σ²) against its shift by the integer `l2` (one output coordinate).

        Parameters
        ----------
        l2 : float
            The shift, an integer.

        Returns
        -------
        Profile
            The exact profile on `deltas` (`discrete.shift_profile`).

        Raises
        ------
        InputError
            When `l2` is not an integer.
        """
        if not float(l2).is_integer():
            raise InputError(f"the discrete Gaussian's classic profile needs an integer shift, got {l2:g} (a vector "
                             "query's change: use the gaussian mechanism)")
        return shift_profile(int(l2), self.sigma, self.deltas)

    def tuple_dp_leakage(self, query: Query, k: int, domains: Sequence[Domain]) -> tuple[float, str | None]:
        """ε at `delta` for tuple k, at its L1 sensitivity: the tuple must move one output coordinate only.

        Parameters
        ----------
        query : Query
            The query the mechanism releases.
        k : int
            The tuple's index.
        domains : sequence of Domain
            The tuples' domains.

        Returns
        -------
        leakage : float
            The classic ε at `delta`.
        bound_reason : None
            Always None: the value is exact.

        Raises
        ------
        InputError
            When tuple k moves several coordinates of a vector query, or its sensitivity is not an integer.
        """
        l1 = query.sensitivity(k, domains)
        if output_count(query, domains) > 1 and l1 > 0 and not _one_coordinate(query, k, domains):
            raise InputError("the dp notion of the discrete Gaussian on a vector query (a change on several "
                             "coordinates at once) is not computed: use --notion idp/pdp/ddp or the gaussian mechanism")
        return self.dp_leakage(l1), None


def check_delta(delta: float) -> None:
    """δ must lie strictly between 0 and 1."""
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not (0 < delta < 1):
        raise InputError(f"delta must lie strictly between 0 and 1, got {delta}")


def l2_sensitivity(query: Query, k: int, domains: Sequence[Domain]) -> float:
    """sup over x_{-k}, t, t' of ||q(t, x_{-k}) - q(t', x_{-k})||_2: ||A_{:,k}||_2 times the width
    for a linear query, √2 for a histogram whose tuple can move between two bins (1 into or out of
    the bins), the L1 sensitivity for one output; refused for other vector queries.

    Parameters
    ----------
    query : Query
        The query.
    k : int
        The tuple's index.
    domains : sequence of Domain
        The tuples' domains.

    Returns
    -------
    float
        Tuple k's L2 sensitivity.

    Raises
    ------
    InputError
        For a vector query that is neither linear nor a histogram (and that tuple k moves).
    """
    matrix = query.matrix(len(domains))
    if matrix is not None:
        column = float(np.linalg.norm(matrix[:, k]))
        return 0.0 if column == 0 else column * domains[k].width
    l1 = query.sensitivity(k, domains)
    if isinstance(query, Histogram):
        return math.sqrt(2.0) if l1 == 2 else l1
    if l1 == 0 or output_count(query, domains) == 1:
        return l1
    raise InputError(f"the L2 sensitivity of the vector query {query.spec} is not computed: give --sigma, and use "
                     "--notion idp, pdp or ddp (classic dp needs it)")


def global_l2_sensitivity(query: Query, domains: Sequence[Domain]) -> float:
    return max((l2_sensitivity(query, k, domains) for k in range(len(domains))), default=0.0)


def _one_coordinate(query: Query, k: int, domains: Sequence[Domain]) -> bool:
    matrix = query.matrix(len(domains))
    return matrix is not None and int(np.count_nonzero(matrix[:, k])) <= 1


def gaussian_sigma(kind: str, sensitivity: float, *, rho: float | None = None, epsilon: float | None = None,
                   delta: float | None = None) -> float:
    """σ as the libraries set it from the global L2 sensitivity: zCDP (OpenDP) or the analytic
    Gaussian mechanism at (ε, δ) (diffprivlib; exact for the discrete Gaussian)."""
    if rho is not None:
        return zcdp_sigma(rho, sensitivity)
    if kind == "discrete_gaussian":
        return discrete_sigma(epsilon, delta, sensitivity)
    return analytic_sigma(epsilon, delta, sensitivity)
