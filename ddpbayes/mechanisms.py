"""Noise mechanisms p_M(y | q(x)) and what each needs to take the supremum over outputs y.

Like an OpenDP measurement, each states its input (a query's output), its noise and the
classic guarantee it gives; `log_kernel` hands the engines the finite set of outputs on
which the supremum of DESIGN §2.1 is attained.
"""

from __future__ import annotations

import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.limits import check_positive_finite, check_states
from ddpbayes.model.domains import Domain, Finite
from ddpbayes.queries import Identity, Query


class Mechanism(ABC):
    """A noise mechanism: what it can release (`check`), the outputs on which the supremum over y
    is attained with their log-densities (`log_kernel`), and its classic DP level."""

    kind: str

    @abstractmethod
    def log_kernel(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For one output coordinate whose query takes the distinct values `q` (m,), return the
        outputs y (G,) on which the sup over y is attained (±inf for limits) and log p(y | q)
        of shape (G, m), up to an additive constant per y (it cancels in likelihood ratios)."""

    @abstractmethod
    def grid_size(self, levels: int) -> int:
        """How many outputs `log_kernel` returns for `levels` distinct query values (its table
        has grid_size × levels cells: engines check that against --max-states first)."""

    @abstractmethod
    def dp_leakage(self, sensitivity: float) -> float:
        """Classic (model-free) DP leakage for a tuple whose change moves the query by `sensitivity` in L1."""

    def tuple_dp_leakage(self, query: Query, k: int, domains: Sequence[Domain]) -> tuple[float, str | None]:
        """Classic DP leakage for tuple k, and why it is only a bound when it is (composition)."""
        return self.dp_leakage(query.sensitivity(k, domains)), None

    def check(self, query: Query, domains: Sequence[Domain]) -> None:
        """Raise InputError if this mechanism cannot release this query."""

    def coordinate(self, c: int) -> Mechanism:
        """The mechanism that perturbs output coordinate `c` on its own: this one on every
        coordinate, unless releases with different noise are released together (composition)."""
        return self

    def log_mixtures(self, logw: np.ndarray, q: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """log Σ_s w_t(s) p(y | q_s) for every row t of the log-weights `logw` (T, m) at every y
        of `log_kernel`'s grid: (grid (G,), (T, G)), up to the same constant per y. Dense here
        (G·m·T cells, checked against `limit`); linear in m for Laplace."""
        check_states(self.grid_size(len(q)) * len(q) * len(logw), f"the mechanism's kernel ({len(q):,} query values)",
                     "cells", limit)
        grid, log_k = self.log_kernel(q)
        return grid, np.logaddexp.reduce(logw[:, None, :] + log_k[None], axis=2)

    @abstractmethod
    def describe(self) -> dict: ...


@dataclass(frozen=True)
class Laplace(Mechanism):
    """y = q(x) + Lap(b) on every output coordinate independently."""

    scale: float
    kind: str = "laplace"
    epsilon: float | None = field(default=None, compare=False)  # the DP level the scale came from, if given

    def __post_init__(self):
        _positive(self.scale, "scale")

    def log_kernel(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
        return levels + 2

    def log_mixtures(self, logw: np.ndarray, q: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """As `Mechanism.log_mixtures`, in O(T·m) (nothing to check against `limit`): the running
        log-sums of `laplace_sums` on either side of every level."""
        order = np.argsort(q, kind="stable")
        q, logw = np.asarray(q, dtype=float)[order], logw[:, order]
        self._check_span(float(q[-1] - q[0]))
        left, right, plus, minus = laplace_sums(logw, q, self.scale)
        grid = np.concatenate([q, [math.inf, -math.inf]])
        return grid, np.concatenate([np.logaddexp(left, right), plus[:, None], minus[:, None]], axis=1)

    def _check_span(self, span: float) -> None:
        """Query values `span` apart must keep their log-densities finite in double precision."""
        if not math.isfinite(span / self.scale):
            raise InputError(f"the noise scale {self.scale:g} is too small for query values spanning {span:g}: "
                             "their log-densities overflow double precision")

    def dp_leakage(self, sensitivity: float) -> float:
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
        return {} if self.epsilon is None else {"epsilon": self.epsilon}


def laplace_sums(logw: np.ndarray, q: np.ndarray, b: float) -> tuple[np.ndarray, ...]:
    """For increasing levels q (m,) and log-weights logw (T, m), in log space: left[:, k] =
    log Σ_{s ≤ k} w_s e^{-(q_k - q_s)/b}, right[:, k] = log Σ_{s > k} w_s e^{-(q_s - q_k)/b} (-inf at
    k = m - 1), plus = log Σ_s w_s e^{(q_s - q_max)/b} and minus = log Σ_s w_s e^{(q_min - q_s)/b}.
    Running log-sums, O(T·m), absolute error about 1e-16 · (max|log w| + (q_max - q_min)/b)."""
    up, down = (q - q[-1]) / b, (q[0] - q) / b  # both <= 0
    left = np.logaddexp.accumulate(logw + up, axis=1) - up
    after = np.logaddexp.accumulate((logw + down)[:, ::-1], axis=1)[:, ::-1]
    right = np.concatenate([after[:, 1:], np.full((len(logw), 1), -np.inf)], axis=1) - down
    return left, right, np.logaddexp.reduce(logw + up, axis=1), np.logaddexp.reduce(logw + down, axis=1)


@dataclass(frozen=True)
class Geometric(Laplace):
    """Two-sided geometric noise on an integer query: P(y | q) ∝ α^{|y - q|}, α = e^{-1/b}.

    Its outputs are integers; as every breakpoint q_k is an integer, the sup over integer y is
    attained at the same points as for Laplace(b), so the kernel is the same."""

    kind: str = "geometric"

    def check(self, query: Query, domains: Sequence[Domain]) -> None:
        w = query.weights(len(domains))
        integral = all(isinstance(d, Finite) and all(float(v).is_integer() for v in d.values) for d in domains)
        if w is None or not integral or not np.all(np.equal(np.mod(w, 1), 0)):
            raise InputError("the geometric mechanism needs an integer query: integer weights on integer-valued tuples")

    def describe(self) -> dict:
        alpha = math.exp(-1 / self.scale)
        return {"kind": self.kind, "scale": self.scale, **self._given(), "noise": f"two-sided geometric, alpha = {alpha:.6g}"}


@dataclass(frozen=True)
class RandomizedResponse(Mechanism):
    """Each binary tuple is reported truthfully with probability e^ε / (1 + e^ε), else flipped."""

    epsilon: float
    kind: str = "randomized_response"

    def __post_init__(self):
        _positive(self.epsilon, "epsilon")

    @property
    def keep(self) -> float:
        return 1.0 / (1.0 + math.exp(-self.epsilon))

    def log_kernel(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        grid = np.array([0.0, 1.0])
        q = np.asarray(q, dtype=float)
        same = grid[:, None] == q[None, :]
        # log keep = -log1p(e^-eps), log flip = -eps - log1p(e^-eps): exact for any eps
        log_keep = -math.log1p(math.exp(-self.epsilon))
        return grid, np.where(same, log_keep, log_keep - self.epsilon)

    def grid_size(self, levels: int) -> int:
        return 2

    def dp_leakage(self, sensitivity: float) -> float:
        return self.epsilon if sensitivity > 0 else 0.0

    def check(self, query: Query, domains: Sequence[Domain]) -> None:
        if not isinstance(query, Identity):
            raise InputError("randomized response perturbs the tuples themselves: use --query identity")
        for k, d in enumerate(domains):
            if not (isinstance(d, Finite) and set(d.values) <= {0.0, 1.0}):
                raise InputError(f"randomized response needs 0/1 tuples, but tuple {k} has domain {d}")

    def describe(self) -> dict:
        return {"kind": self.kind, "epsilon": self.epsilon, "noise": f"keep each bit with probability {self.keep:.6g}"}


MECHANISMS = ("laplace", "geometric", "randomized_response")


def make_mechanism(
    kind: str, query: Query, domains: Sequence[Domain], scale: float | None = None, epsilon: float | None = None
) -> Mechanism:
    """Build a mechanism from `scale`, or from `epsilon` as classic DP would set it
    (Laplace/geometric scale = global L1 sensitivity / epsilon)."""
    kind = {"rr": "randomized_response", "randomized-response": "randomized_response"}.get(kind, kind)
    if kind not in MECHANISMS:
        raise InputError(f"unknown mechanism '{kind}' (use {', '.join(MECHANISMS)})")
    if (scale is None) == (epsilon is None):
        raise InputError("give exactly one of scale and epsilon")
    if epsilon is not None:
        _positive(epsilon, "epsilon")
    if scale is not None:
        _positive(scale, "scale")
    if kind == "randomized_response":
        if epsilon is None:
            raise InputError("randomized response is set by --epsilon (the per-bit DP level), not --scale")
        mech: Mechanism = RandomizedResponse(epsilon)
    else:
        if scale is None:
            gs = query.global_sensitivity(domains)
            if not math.isfinite(gs) or gs == 0:
                why = "unbounded" if not math.isfinite(gs) else "zero"
                raise InputError(f"--epsilon cannot set the scale: the query's global sensitivity is {why}; give --scale")
            scale = gs / epsilon
            if scale < sys.float_info.min:
                raise InputError(f"--epsilon {epsilon:g} sets the scale to {scale:g}, below the smallest usable "
                                 f"{sys.float_info.min:.4g}")
        mech = (Laplace if kind == "laplace" else Geometric)(scale, epsilon=epsilon)
    mech.check(query, domains)
    return mech


def _positive(value: float, what: str) -> None:
    check_positive_finite(value, what)
    if value < sys.float_info.min or not math.isfinite(1 / value):
        raise InputError(f"{what} must be at least {sys.float_info.min:.4g} (a normal double, whose reciprocal is "
                         f"finite), got {value}")
