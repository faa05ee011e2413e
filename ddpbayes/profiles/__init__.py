"""Privacy profiles δ(ε) of (ε, δ) mechanisms under dependence (DESIGN §3.5).

For Gaussian noise the log-ratio log L(y | t, x_K) - log L(y | t', x_K) is unbounded in the tails,
so the leakage becomes a profile: δ(ε) = sup over the notion's adversaries, x_K and t ≠ t' of the
hockey-stick divergence ∫ max(0, L(y|t,x_K) - e^ε L(y|t',x_K)) dy. A `Profile` holds its inverse
ε(δ) = inf{ε >= 0 : δ(ε) <= δ} on a fixed grid of δ (plus the user's), so the profile of a notion
is the pointwise maximum of its adversaries' profiles: every point is a point of the sup curve.
This is what holds for any (ε, δ) noise; the maths of Gaussian noise's profiles is its mechanism's
(`mechanisms.gaussian`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ddpbayes.encoding import number

__all__ = ["DEFAULT_DELTA", "GRID", "PairProfiles", "Profile", "delta_grid", "zero_profile"]

DEFAULT_DELTA = 1e-6
GRID = tuple(10.0 ** (-k / 2) for k in range(1, 25))  # 0.316 ... 1e-12, half a decade apart


def delta_grid(delta: float) -> tuple[float, ...]:
    """The δ at which every profile is read: GRID and the user's δ, decreasing.

    Parameters
    ----------
    delta : float
        The user's δ.

    Returns
    -------
    tuple of float
        GRID with `delta` added, without repeats, in decreasing order.
    """
    return tuple(sorted(set(GRID) | {float(delta)}, reverse=True))


@dataclass(frozen=True)
class Profile:
    """ε(δ) at each δ of `deltas` (decreasing δ, so non-decreasing ε), δ(0) = the total variation
    distance (`tv`), and where known the GDP μ (the privacy loss is Gaussian: DESIGN §3.5) and the
    zCDP ρ = sup_α D_α/α of the worst pair (`rho_note` says how it was found). A ρ that costs a
    search (mixtures) is `pending` until `with_rho`: only the notion's worst adversary pays for it.

    Parameters
    ----------
    deltas : tuple of float
        The δ grid, decreasing (`delta_grid`).
    epsilons : tuple of float
        ε(δ) at each δ of `deltas`.
    tv : float
        δ(0), the total variation distance.
    mu : float or None, default None
        The GDP μ, when the privacy loss is Gaussian.
    rho : float or None, default None
        The zCDP ρ of the worst pair, when known.
    rho_note : str or None, default None
        How ρ was found.
    pending : callable or None, default None
        Computes (ρ, note) on demand (`with_rho`); None when ρ is known or not computed.
    certified : bool or None, default None
        Mixtures: whether every pair's sign changes were proved complete; None when not applicable.
    """

    deltas: tuple[float, ...]
    epsilons: tuple[float, ...]
    tv: float
    mu: float | None = None
    rho: float | None = None
    rho_note: str | None = None
    pending: Callable[[], tuple[float, str]] | None = field(default=None, compare=False, repr=False)
    certified: bool | None = None  # mixtures: every pair's sign changes proved complete (None: not applicable)

    def with_rho(self) -> Profile:
        """This profile with a pending ρ computed.

        Returns
        -------
        Profile
            A copy with `rho` and `rho_note` from `pending` (then None); this profile when nothing is pending.
        """
        if self.pending is None:
            return self
        rho, note = self.pending()
        return replace(self, rho=rho, rho_note=note, pending=None)

    def with_rho_of(self, worst: Profile) -> Profile:
        """This (a notion's) profile with the ρ of its worst adversary, `worst`.

        Parameters
        ----------
        worst : Profile
            The worst adversary's profile.

        Returns
        -------
        Profile
            A copy with `worst`'s `rho`, `rho_note` and `pending`.
        """
        return replace(self, rho=worst.rho, rho_note=worst.rho_note, pending=worst.pending)

    def epsilon_at(self, delta: float) -> float:
        """ε(δ) at a δ of the grid.

        Parameters
        ----------
        delta : float
            One of `deltas`.

        Returns
        -------
        float
            ε at `delta`.

        Raises
        ------
        ValueError
            When `delta` is not on the grid.
        """
        return self.epsilons[self.deltas.index(float(delta))]

    def merge(self, other: Profile) -> Profile:
        """The pointwise maximum (a notion's profile over its adversaries); μ when both know it (the
        largest μ's curve is then the sup); ρ the larger when both know it (`with_rho_of` sets the worst's).

        Parameters
        ----------
        other : Profile
            A profile on the same δ grid.

        Returns
        -------
        Profile
            The merged profile; certified when every known `certified` is True (None when neither knows).

        Raises
        ------
        ValueError
            When the two profiles are on different δ grids.
        """
        if other.deltas != self.deltas:
            raise ValueError("profiles on different δ grids")
        eps = tuple(max(a, b) for a, b in zip(self.epsilons, other.epsilons))
        mu = None if self.mu is None or other.mu is None else max(self.mu, other.mu)
        rho = None if self.rho is None or other.rho is None else max(self.rho, other.rho)
        note = self.rho_note if self.rho is not None and (rho == self.rho) else other.rho_note
        known = [c for c in (self.certified, other.certified) if c is not None]
        return Profile(self.deltas, eps, max(self.tv, other.tv), mu, rho, note,
                       certified=all(known) if known else None)

    def pairs(self) -> list[list[float]]:
        """The curve as [ε, δ] pairs by increasing ε: (0, δ(0)) then every grid point with ε > 0.

        Returns
        -------
        list of list of float
            The [ε, δ] points.
        """
        points = [[0.0, self.tv]] + [[e, d] for d, e in zip(self.deltas, self.epsilons) if e > 0]
        return sorted(points, key=lambda p: (p[0], -p[1]))

    def to_dict(self, delta: float) -> dict:
        """The profile as the JSON report writes it.

        Parameters
        ----------
        delta : float
            The user's δ, one of `deltas`.

        Returns
        -------
        dict
            ``delta``, ``epsilon_at_delta``, ``profile`` (the [ε, δ] `pairs`), ``zcdp_rho`` and ``gdp_mu``.
        """
        return {
            "delta": delta,
            "epsilon_at_delta": number(self.epsilon_at(delta)),
            "profile": [[number(e), d] for e, d in self.pairs()],
            "zcdp_rho": None if self.rho is None else number(self.rho),
            "gdp_mu": None if self.mu is None else number(self.mu),
        }


def zero_profile(deltas: tuple[float, ...]) -> Profile:
    """An adversary who learns nothing: ε(δ) = 0 everywhere, μ = ρ = 0.

    Parameters
    ----------
    deltas : tuple of float
        The δ grid.

    Returns
    -------
    Profile
        ε = 0 at every δ, tv = 0, μ = ρ = 0.
    """
    return Profile(deltas, tuple(0.0 for _ in deltas), 0.0, 0.0, 0.0, None)


@dataclass(frozen=True)
class PairProfiles:
    """What a profile mechanism returns for B pairs of mixtures (`Mechanism.pair_profiles`): ε_b(δ_d)
    for each pair b and each δ of the grid (B, D), δ_b(0) (B,), and whether every evaluation was
    certified complete (B,; None when that does not apply: the discrete Gaussian's direct sums).

    Parameters
    ----------
    epsilons : numpy.ndarray
        ε_b(δ_d), shape (B, D).
    tv : numpy.ndarray
        δ_b(0), shape (B,).
    certified : numpy.ndarray or None, default None
        Whether each pair's evaluation was certified complete, shape (B,); None when that does not apply.
    """

    epsilons: np.ndarray
    tv: np.ndarray
    certified: np.ndarray | None = None
