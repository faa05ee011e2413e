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
    """y = q(x) + N(0, σ²) on every output coordinate independently; the leakage is ε at `delta`."""

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
        return delta_grid(self.delta)

    def with_scale(self, sigma: float) -> Gaussian:
        return replace(self, sigma=sigma, rho=None, epsilon=None, source=None)

    def pair_profiles(self, logp: np.ndarray, logq: np.ndarray, levels: np.ndarray,
                      deltas: Sequence[float] | None = None) -> PairProfiles:
        """ε(δ) on `deltas` (default `self.deltas`) for each pair of mixtures Σ_s p_s N(levels_s, σ²)
        vs Σ_s q_s N(levels_s, σ²) (rows of log-weights (B, m), each normalised; `mixture.pair_profiles`):
        what an engine that has the mixture weights asks."""
        return pair_profiles(logp, logq, np.asarray(levels, dtype=float), self.sigma,
                             self.deltas if deltas is None else deltas, self.discrete)

    def pair_rho(self, logp: np.ndarray, logq: np.ndarray, levels: np.ndarray) -> tuple[float, str]:
        """zCDP ρ = sup_α D_α / α of one pair (both orders), with how it was found."""
        return pair_rho(logp, logq, np.asarray(levels, dtype=float), self.sigma, self.discrete)

    def classic_profile(self, l2: float) -> Profile:
        """The model-free profile when one tuple moves the query by `l2` in L2 norm: μ = Δ₂ / σ."""
        return gdp_profile(l2 / self.sigma, self.deltas)

    def dp_leakage(self, sensitivity: float) -> float:
        return self.classic_profile(float(sensitivity)).epsilon_at(self.delta)

    def tuple_dp_leakage(self, query: Query, k: int, domains: Sequence[Domain]) -> tuple[float, str | None]:
        return self.dp_leakage(l2_sensitivity(query, k, domains)), None

    def log_kernel(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise InputError(f"{self.kind} noise has no finite supremum over outputs: its leakage is a privacy profile, "
                         "which this engine does not compute")

    def grid_size(self, levels: int) -> int:
        return levels

    def describe(self) -> dict:
        given = {k: v for k, v in (("rho", self.rho), ("epsilon", self.epsilon)) if v is not None}
        return {"kind": self.kind, "sigma": self.sigma, "scale": self.sigma, "delta": self.delta, **given,
                "noise": f"{'discrete ' if self.discrete else ''}N(0, {self.sigma:g}^2) on every output coordinate", **source_entry(self)}


@dataclass(frozen=True)
class DiscreteGaussian(Gaussian):
    """y = q(x) + N_Z(0, σ²) on an integer query: P(y | q) ∝ exp(-(y - q)² / 2σ²) on the integers."""

    kind: str = "discrete_gaussian"
    aliases = ("discrete-gaussian",)
    discrete = True
    calibratable = False

    def check(self, query: Query, domains: Sequence[Domain]) -> None:
        w = query.matrix(len(domains))
        integral = all(isinstance(d, Finite) and all(float(v).is_integer() for v in d.values) for d in domains)
        if w is None and isinstance(query, Histogram):
            return
        if w is None or not integral or not np.all(np.equal(np.mod(w, 1), 0)):
            raise InputError("the discrete Gaussian mechanism needs an integer query: integer weights on "
                             "integer-valued tuples, or a histogram")

    def classic_profile(self, l2: float) -> Profile:
        """The exact profile of N_Z(0, σ²) against its shift by the integer `l2` (one output coordinate)."""
        if not float(l2).is_integer():
            raise InputError(f"the discrete Gaussian's classic profile needs an integer shift, got {l2:g} (a vector "
                             "query's change: use the gaussian mechanism)")
        return shift_profile(int(l2), self.sigma, self.deltas)

    def tuple_dp_leakage(self, query: Query, k: int, domains: Sequence[Domain]) -> tuple[float, str | None]:
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
    the bins), the L1 sensitivity for one output; refused for other vector queries."""
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
