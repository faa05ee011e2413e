"""Laplace and two-sided geometric noise: pure-ε mechanisms whose supremum over outputs lies on
the query's levels and the two tails (DESIGN §2.1; 004 Lemma 1). Their mixtures: `mixture`; their
information integrals: `information`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.mechanisms.base import BuiltInKinds, Mechanism, _positive, source_entry
from ddpbayes.mechanisms.laplace.information import geometric_information, laplace_information
from ddpbayes.mechanisms.laplace.mixture import laplace_mixtures
from ddpbayes.model.domains import Domain, Finite
from ddpbayes.queries import Query


@dataclass(frozen=True)
class Laplace(Mechanism):
    """y = q(x) + Lap(b) on every output coordinate independently.

    Pure ε-DP: ε = Δ₁ / b (DESIGN §2.1); the supremum over outputs lies on the query's levels and the
    two tails (004 Lemma 1).

    Parameters
    ----------
    scale : float
        The noise scale b (positive).
    kind : str, optional
        The mechanism's name ("laplace").
    epsilon : float or None, optional
        The DP level the scale came from, if given (reported only).
    source : str or None, optional
        The library object it was read from (`from_library`).

    Raises
    ------
    InputError
        When `scale` is not a positive normal double.
    """

    scale: float
    kind: str = "laplace"
    epsilon: float | None = field(default=None, compare=False)  # the DP level the scale came from, if given
    source: str | None = field(default=None, compare=False)  # the library object it was read from (interop)
    laplace = BuiltInKinds("laplace", "geometric", "prefix_sums")  # not a subclass's own kind: its kernel may differ
    calibratable = BuiltInKinds("laplace")
    shift_invariant = True

    def __post_init__(self):
        _positive(self.scale, "scale")

    def laplace_scales(self, rows: int) -> np.ndarray | None:
        """The scale b on each of `rows` coordinates (DESIGN §2.2), for the built-in continuous kernel only.

        Parameters
        ----------
        rows : int
            The number of output coordinates.

        Returns
        -------
        numpy.ndarray or None
            ``scale`` repeated (rows,); None for geometric noise or a subclass's own kind.
        """
        # the built-in continuous kernel only: not geometric's integers, nor a subclass's own kind
        return np.full(rows, self.scale) if self.kind in (Laplace.kind, PrefixSums.kind) else None

    def with_scale(self, scale: float) -> Laplace:
        """This mechanism with scale b = `scale` (its `epsilon` and `source` dropped).

        Parameters
        ----------
        scale : float
            The new scale b.

        Returns
        -------
        Laplace
            The copy.
        """
        return replace(self, scale=scale, epsilon=None, source=None)

    def information(self, levels: np.ndarray, log_w: np.ndarray,
                    kernels: Sequence[Mechanism]) -> tuple[float, float, float]:
        """(I(X_i; Y), sup_y D, error) of one mixture group under scalar Laplace noise (004 Eqs. 26, 28;
        `laplace.information`).

        Parameters
        ----------
        levels : numpy.ndarray
            The distinct levels (S, 1) of the one varying output coordinate.
        log_w : numpy.ndarray
            log P(X_i = t, q = q_s) (T, S).
        kernels : sequence of Mechanism
            The varying coordinates' noise, this one first.

        Returns
        -------
        mutual_information : float
            I(X_i; Y).
        sup_divergence : float
            sup_y D(y).
        error : float
            A bound on the numerical error.

        Raises
        ------
        NotAvailable
            When several coordinates vary or the kind is a subclass's own.
        """
        if len(kernels) > 1 or not self.laplace:  # a subclass's own kernel: not Laplace's integral
            return super().information(levels, log_w, kernels)
        return laplace_information(levels[:, 0], log_w, self.scale)

    def log_kernel(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The levels q and y = ±inf, where the sup over y is attained (004 Lemma 1), with log p(y | q).

        Parameters
        ----------
        q : numpy.ndarray
            The distinct values (m,) of one output coordinate.

        Returns
        -------
        grid : numpy.ndarray
            The outputs (m + 2,): the levels, then +inf and -inf.
        log_kernel : numpy.ndarray
            log p(y | q_s) (m + 2, m) up to a constant per y (at ±inf, the limit's q-dependent factor).

        Raises
        ------
        InputError
            When the levels' span over the scale overflows double precision.
        """
        # Between consecutive q_k the log-ratio is monotone in y (004 Lemma 1), so the sup is at
        # y = q_k or y -> ±inf, where p(y|q) ∝ e^{±q/b} once the common factor e^{∓y/b} is dropped.
        q = np.asarray(q, dtype=float)
        self._check_span(float(q.max() - q.min()))
        finite = -np.abs(q[:, None] - q[None, :]) / self.scale
        plus = (q - q.max())[None, :] / self.scale
        minus = (q.min() - q)[None, :] / self.scale
        grid = np.concatenate([q, [math.inf, -math.inf]])
        return grid, np.concatenate([finite, plus, minus])

    def grid_size(self, levels: int) -> int:
        """The levels and the two tails.

        Parameters
        ----------
        levels : int
            The number m of distinct query values.

        Returns
        -------
        int
            m + 2.
        """
        return levels + 2

    def mixture_cells(self, levels: int) -> int:
        """Running sums: one cell per output of the grid (a subclass's own kernel: dense).

        Parameters
        ----------
        levels : int
            The number m of distinct query values.

        Returns
        -------
        int
            m + 2 for the built-in kinds, else the dense count.
        """
        return self.grid_size(levels) if self.laplace else super().mixture_cells(levels)

    def log_mixtures(self, logw: np.ndarray, q: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """As `Mechanism.log_mixtures`, in O(T·m) (nothing to check against `limit`): the running
        log-sums of `laplace_sums` on either side of every level, added (`laplace_mixtures`). A subclass
        under its own kind (its own `log_kernel`) gets the dense sums of its kernel.

        Parameters
        ----------
        logw : numpy.ndarray
            Log-weights (T, m) over the query values.
        q : numpy.ndarray
            The distinct query values (m,), in any order.
        limit : int
            The most cells to build (used by the dense sums only).

        Returns
        -------
        grid : numpy.ndarray
            The levels in increasing order, then +inf and -inf (m + 2,).
        log_mixtures : numpy.ndarray
            log Σ_s w_t(s) p(y | q_s) (T, m + 2), up to the kernel's constant per y.

        Raises
        ------
        InputError
            When the levels' span over the scale overflows double precision.
        """
        if not self.laplace:
            return super().log_mixtures(logw, q, limit)
        q = np.asarray(q, dtype=float)
        if np.any(q[1:] < q[:-1]):
            order = np.argsort(q, kind="stable")
            q, logw = q[order], np.ascontiguousarray(logw[:, order])
        self._check_span(float(q[-1] - q[0]))
        levels, plus, minus = laplace_mixtures(logw, q, self.scale)
        grid = np.concatenate([q, [math.inf, -math.inf]])
        return grid, np.concatenate([levels, plus[:, None], minus[:, None]], axis=1)

    def _check_span(self, span: float) -> None:
        """Query values `span` apart must keep their log-densities finite in double precision."""
        if not math.isfinite(span / self.scale):
            raise InputError(f"the noise scale {self.scale:g} is too small for query values spanning {span:g}: "
                             "their log-densities overflow double precision")

    def dp_leakage(self, sensitivity: float) -> float:
        """ε = Δ₁ / b.

        Parameters
        ----------
        sensitivity : float
            The L1 sensitivity Δ₁.

        Returns
        -------
        float
            Δ₁ / b, 0 when Δ₁ is not positive.

        Raises
        ------
        InputError
            When Δ₁ / b overflows double precision.
        """
        sensitivity = float(sensitivity)
        if sensitivity <= 0:
            return 0.0
        if math.isfinite(sensitivity) and not math.isfinite(sensitivity / self.scale):
            raise InputError(f"the leakage {sensitivity:g}/{self.scale:g} overflows double precision: rescale the query")
        return sensitivity / self.scale

    def describe(self) -> dict:
        return {"kind": self.kind, "scale": self.scale, **self._given(),
                "noise": f"Laplace(0, {self.scale:g}) on every output coordinate"}

    def _given(self) -> dict:
        return {**({} if self.epsilon is None else {"epsilon": self.epsilon}), **source_entry(self)}


@dataclass(frozen=True)
class Geometric(Laplace):
    """Two-sided geometric noise on an integer query: P(y | q) ∝ α^{abs(y - q)}, α = e^{-1/b}.

    Its outputs are integers; as every breakpoint q_k is an integer, the sup over integer y is
    attained at the same points as for Laplace(b), so the kernel is the same.

    Parameters
    ----------
    scale : float
        The scale b (positive): α = e^{-1/b}, ε = Δ₁ / b.
    kind : str, optional
        The mechanism's name ("geometric").
    epsilon : float or None, optional
        The DP level the scale came from, if given (reported only).
    source : str or None, optional
        The library object it was read from (`from_library`).

    Raises
    ------
    InputError
        When `scale` is not a positive normal double.
    """

    kind: str = "geometric"
    discrete = True

    def information(self, levels: np.ndarray, log_w: np.ndarray,
                    kernels: Sequence[Mechanism]) -> tuple[float, float, float]:
        """(I(X_i; Y), sup_y D, error) of one mixture group under scalar geometric noise (004 Eqs. 26, 28;
        `laplace.information`).

        Parameters
        ----------
        levels : numpy.ndarray
            The distinct levels (S, 1) of the one varying output coordinate.
        log_w : numpy.ndarray
            log P(X_i = t, q = q_s) (T, S).
        kernels : sequence of Mechanism
            The varying coordinates' noise, this one first.

        Returns
        -------
        mutual_information : float
            I(X_i; Y).
        sup_divergence : float
            sup_y D(y).
        error : float
            0 (exact sums).

        Raises
        ------
        NotAvailable
            When several coordinates vary or the kind is a subclass's own.
        InputError
            When the sums over the integers between the extreme levels exceed --max-states.
        """
        if len(kernels) > 1 or not self.laplace:
            return super().information(levels, log_w, kernels)
        return geometric_information(levels[:, 0], log_w, self.scale)

    def check(self, query: Query, domains: Sequence[Domain]) -> None:
        """Refuse all but an integer query: integer weights on finite integer-valued tuples.

        Parameters
        ----------
        query : Query
            The query to release.
        domains : sequence of Domain
            The tuples' domains.

        Raises
        ------
        InputError
            When the query is not linear with integer weights on integer-valued finite domains.
        """
        w = query.weights(len(domains))
        integral = all(isinstance(d, Finite) and all(float(v).is_integer() for v in d.values) for d in domains)
        if w is None or not integral or not np.all(np.equal(np.mod(w, 1), 0)):
            raise InputError("the geometric mechanism needs an integer query: integer weights on integer-valued tuples")

    def describe(self) -> dict:
        alpha = math.exp(-1 / self.scale)
        return {"kind": self.kind, "scale": self.scale, **self._given(), "noise": f"two-sided geometric, alpha = {alpha:.6g}"}


@dataclass(frozen=True)
class PrefixSums(Laplace):
    """The running sums of the answers plus Laplace(b) noise each: y_j = Σ_{k≤j} (q_k + Z_k) (DP-Sniper's
    PrefixSum; Wang et al. 2019, PLDI). The running sums are an invertible linear map of the noisy answers, so
    every likelihood ratio, hence every leakage under every notion, is Laplace noise's on the answers; engines
    read it as Laplace, and its witness y is the noisy answers before the running sums."""

    kind: str = "prefix_sums"
    aliases = ("prefix_sum", "prefix-sums")

    def describe(self) -> dict:
        return {"kind": self.kind, "scale": self.scale, **self._given(),
                "noise": f"running sums of the answers + Laplace(0, {self.scale:g}) each (the witness y: the noisy "
                         "answers before the sums)"}

