"""The truncated geometric mechanism on a count in {0, …, n} (issue #28), output in {0, …, n} (d = 1):

- `ghosh`: Ghosh, Roughgarden & Sundararajan 2009 ("Universally utility-maximizing privacy mechanisms",
  STOC 2009, §2): y = clamp(a + Z, 0, n), Z two-sided geometric P(Z = z) ∝ α^{|z|}, α = e^{−1/s} (s = Δ/ε), so
  P(y | a) = (1 − α)/(1 + α) α^{|y − a|} inside and α^{a}/(1 + α), α^{n − a}/(1 + α) at the two ends.
- `balcer_vadhan`: Balcer & Vadhan 2018 ("Differential privacy on finite computers", ITCS 2018), Alg. 4.8
  GeoSample, as DP-Sniper's TruncatedGeometricMechanism runs it: with ε₀ = 1/s, k = max(0, ⌈ln(2/ε₀)⌉) and
  d = (2^{k+1} + 1)(2^k + 1)^{n−1}, F(z) = 2^{k(a−z)} (2^k + 1)^{n−(a−z)} for z < a, d − 2^{k(z−a+1)}
  (2^k + 1)^{n−1−(z−a)} for a ≤ z < n, F(n) = d, and P(y = z | a) = (F(z) − F(z − 1))/d, in exact integers.
  The differences telescope: F(z) − F(z − 1) = 2^{k|z−a|} (2^k + 1)^{n−1−|z−a|} for 0 < z < n and
  2^{ka} (2^k + 1)^{n−a}, 2^{k(n−a)} (2^k + 1)^{a} at z = 0, n; divided by d this is Ghosh's law with
  α = 2^k/(2^k + 1) = 1/(1 + 2^{−k}), (1 − α)/(1 + α) = 1/(2^{k+1} + 1). So the integers never need building:
  the law is computed as Ghosh's at log α = −ln(1 + 2^{−k}) (tests/test_mechanism_laws.py checks it against
  the integers).

Both laws are exact. The answer must be an integer in 0..n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.mechanisms.base import _positive, source_entry
from ddpbayes.mechanisms.joint import JointMechanism, integer_range, positive_int

VARIANTS = ("ghosh", "balcer_vadhan")


@dataclass(frozen=True)
class TruncatedGeometric(JointMechanism):
    """A count a in 0..n released as y in 0..n: `variant` ghosh or balcer_vadhan.
    Classic ε at sensitivity Δ (counts move by whole units): ghosh Δ/s; balcer_vadhan Δ·ln(1 + 2^{−k})
    (Balcer & Vadhan Thm 4.7, as DP-Sniper states it; group privacy beyond Δ = 1, a bound there).

    Parameters
    ----------
    scale : float
        s = Δ/ε (positive): α = e^{−1/s}; balcer_vadhan's ε₀ = 1/s.
    n : int, optional
        The largest count: outputs are 0..n (1 to 2^20; default 5).
    variant : str, optional
        "ghosh" (default) or "balcer_vadhan".
    epsilon : float or None, optional
        The DP level the scale came from, if given (reported only).
    source : str or None, optional
        The library object it was read from (`from_library`).

    Raises
    ------
    InputError
        For a scale that is not positive, `n` out of range or an unknown variant.
    """

    scale: float
    n: int = 5
    variant: str = "ghosh"
    epsilon: float | None = field(default=None, compare=False)
    source: str | None = field(default=None, compare=False)  # the library object it was read from (interop)
    kind = "truncated_geometric"
    aliases = ("truncated-geometric", "truncated_geometric_mechanism")
    answer_range = (1, 1)
    parameters = {"n": (int, 5, "the largest count: outputs are 0..n"),
                  "variant": (str, "ghosh", "ghosh (Ghosh et al. 2009) or balcer_vadhan (Balcer & Vadhan 2018 "
                              "Alg. 4.8, integer arithmetic)"),
                  "sensitivity": (float, None, "sensitivity Δ that --epsilon sets the scale from (default: the "
                                  "query's global L1 sensitivity)")}

    def __post_init__(self):
        _positive(self.scale, "scale")
        positive_int(self.n, "--mechanism-param n=", self.kind, 1 << 20)
        if self.variant not in VARIANTS:
            raise InputError(f"--mechanism-param variant= of truncated_geometric must be ghosh or balcer_vadhan, "
                             f"got '{self.variant}'")

    @classmethod
    def _from(cls, scale, epsilon, values):
        if scale is None:
            raise InputError("the truncated_geometric mechanism needs --scale or --epsilon")
        return cls(scale, values["n"], values["variant"], epsilon)

    @property
    def alpha(self) -> float:
        return math.exp(self.log_alpha)

    @property
    def log_alpha(self) -> float:
        """log α of the folded geometric: −1/s (ghosh); −ln(1 + 2^{−k}) (balcer_vadhan, module docstring)."""
        return -1.0 / self.scale if self.variant == VARIANTS[0] else -math.log1p(2.0 ** -self.k)

    @property
    def k(self) -> int:
        """Balcer & Vadhan's k = ⌈ln(2/ε₀)⌉, ε₀ = 1/scale (at least 0)."""
        return max(0, math.ceil(math.log(2.0 * self.scale)))

    def check(self, query, domains) -> None:
        """One integer count that stays within 0..n.

        Parameters
        ----------
        query : Query
            The query to release.
        domains : sequence of Domain
            The tuples' domains.

        Raises
        ------
        InputError
            When the query is not one integer answer ranging within 0..n.
        """
        super().check(query, domains)
        span = integer_range(query, domains)
        if span is None or span[0] < 0 or span[1] > self.n:
            where = "" if span is None else f" (it ranges over {span[0]:g}..{span[1]:g})"
            raise InputError(f"the truncated_geometric mechanism needs an integer count in 0..{self.n} (integer "
                             f"weights on integer-valued tuples){where}: set --mechanism-param n= or use another query")

    def _counts(self, answers: np.ndarray) -> np.ndarray:
        a = self._answers(answers)[:, 0]
        bad = (a != np.round(a)) | (a < 0) | (a > self.n)
        if bad.any():
            raise InputError(f"the truncated_geometric mechanism takes a count in 0..{self.n}, got {a[bad][0]:g}")
        return a.astype(int)

    def output_space(self, answers: np.ndarray) -> np.ndarray:
        """The counts 0..n.

        Parameters
        ----------
        answers : numpy.ndarray
            The counts (R, 1), integers in 0..n.

        Returns
        -------
        numpy.ndarray
            The outputs (n + 1, 1).

        Raises
        ------
        InputError
            When an answer is not an integer in 0..n.
        """
        self._counts(answers)
        return np.arange(self.n + 1, dtype=float)[:, None]

    def output_count(self, answers: np.ndarray) -> int:
        """n + 1.

        Parameters
        ----------
        answers : numpy.ndarray
            The counts (R, 1), integers in 0..n.

        Returns
        -------
        int
            n + 1.
        """
        return self.n + 1

    def log_table(self, answers: np.ndarray) -> np.ndarray:
        """log P(y | a_r) for y = 0..n and every row: (n + 1, R).

        Parameters
        ----------
        answers : numpy.ndarray
            The counts (R, 1), integers in 0..n.

        Returns
        -------
        numpy.ndarray
            The exact log-probabilities (n + 1, R).

        Raises
        ------
        InputError
            When an answer is not an integer in 0..n.
        """
        a = self._counts(answers)
        y = np.arange(self.n + 1)[:, None]
        la = self.log_alpha
        fold = math.log1p(self.alpha)  # log(1 + α)
        inner = math.log(-math.expm1(la)) - fold + la * np.abs(y - a[None, :])
        lo = la * a[None, :] - fold
        hi = la * (self.n - a[None, :]) - fold
        return np.where(y == 0, lo, np.where(y == self.n, hi, inner))

    def log_prob(self, outputs: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """log P(y | a) of each output, from `log_table`.

        Parameters
        ----------
        outputs : numpy.ndarray
            The outputs (G, 1).
        answers : numpy.ndarray
            The counts (R, 1), integers in 0..n.

        Returns
        -------
        numpy.ndarray
            The log-probabilities (G, R); -inf for an output outside 0..n.
        """
        table = self.log_table(answers)
        y = np.asarray(outputs, dtype=float).reshape(len(outputs), -1)[:, 0]
        idx = y.astype(int)
        bad = (idx != y) | (idx < 0) | (idx > self.n)
        out = table[np.clip(idx, 0, self.n)]
        out[bad] = -np.inf
        return out

    def sample(self, answers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One output per count.

        Parameters
        ----------
        answers : numpy.ndarray
            The counts (S, 1), integers in 0..n.
        rng : numpy.random.Generator
            The random generator.

        Returns
        -------
        numpy.ndarray
            The outputs (S, 1).
        """
        a = self._counts(answers)
        p = -math.expm1(self.log_alpha)  # success probability: failures ~ Geometric(1 − α)
        z = rng.geometric(p, len(a)) - rng.geometric(p, len(a))
        return np.clip(a + z, 0, self.n).astype(float)[:, None]

    def dp_leakage(self, sensitivity: float) -> float:
        """ghosh Δ/s; balcer_vadhan Δ·ln(1 + 2^{−k}).

        Parameters
        ----------
        sensitivity : float
            The L1 sensitivity Δ.

        Returns
        -------
        float
            The classic ε, 0 when Δ is not positive.
        """
        if sensitivity <= 0:
            return 0.0
        if self.variant == VARIANTS[0]:
            return float(sensitivity) / self.scale
        return float(sensitivity) * math.log1p(2.0 ** -self.k)

    @property
    def dp_bound_reason(self) -> str | None:
        return (None if self.variant == VARIANTS[0] else
                "Balcer & Vadhan's ln(1 + 2^-k) is per unit of count; larger changes compose (group privacy)")

    def describe(self) -> dict:
        extra = {"alpha": self.alpha} if self.variant == VARIANTS[0] else {"k": self.k}
        return {"kind": self.kind, "scale": self.scale, "n": self.n, "variant": self.variant,
                **({} if self.epsilon is None else {"epsilon": self.epsilon}), **extra,
                "output": f"a count in 0..{self.n}", **source_entry(self)}
