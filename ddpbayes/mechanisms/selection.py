"""Selection mechanisms over K candidates (issue #28): report-noisy-max and the exponential mechanism.
Both output the index of the chosen candidate (d = 1, outputs 0..K−1)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.mechanisms import noisy_max_value
from ddpbayes.mechanisms.base import _positive, source_entry
from ddpbayes.mechanisms.joint import DayLaw, JointMechanism, answer_count, laplace_noise
from ddpbayes.mechanisms.quadrature import LAW_ERROR, laplace_log_cdf, laplace_log_pdf, log_integral

RETURNS = ("index", "value", "both")
_SENSITIVITY = (float, None, "per-answer sensitivity Δ that --epsilon sets the scale from (default: the query's "
                "global L1 sensitivity)")


class _Selection(JointMechanism):
    """Outputs an index into the K answers."""

    answer_range = (1, None)

    def output_space(self, answers: np.ndarray) -> np.ndarray:
        return np.arange(self._answers(answers).shape[1], dtype=float)[:, None]

    def output_count(self, answers: np.ndarray) -> int:
        return int(self._answers(answers).shape[1])

    def _pick(self, table: np.ndarray, outputs: np.ndarray) -> np.ndarray:
        """Rows of the (K, R) table of every index's log-probability at the outputs (G, 1)."""
        y = np.asarray(outputs, dtype=float).reshape(len(outputs), -1)[:, 0]
        idx = y.astype(int)
        bad = (idx != y) | (idx < 0) | (idx >= len(table))
        out = table[np.clip(idx, 0, len(table) - 1)]
        out[bad] = -np.inf
        return out


@dataclass(frozen=True)
class ReportNoisyMax(_Selection):
    """Report-noisy-max: y = argmax_i (a_i + Z_i), Z_i iid Laplace(b) (`noise=laplace`; Dwork & Roth 2014
    §3.3, Claim 3.9) or one-sided exponential(b) (`noise=exponential`; Ding et al. 2018 Alg. 6). DP-Sniper's
    ReportNoisyMax1 and ReportNoisyMax2 (Ding et al. 2018 Algs. 5, 6) are b = 2/ε on sensitivity-1 answers.

    Law: P(argmax = i | a) = ∫ f(v − a_i) Π_{j≠i} F(v − a_j) dv, by piecewise Gauss–Legendre between the
    sorted a_j with mapped tails (`quadrature.log_integral`; the exponential noise integrates over
    [max_j a_j, ∞) only); the tail integrands are polynomials in u, so the quadrature is exact there.
    Ties have probability zero. Classic ε: 2Δ/b (either noise; an upper bound, attained as K grows).

    `returns=value` releases the noisy maximum itself (Ding et al. 2018 Algs. 7, 8; DP-Sniper's ReportNoisyMax3/4),
    `returns=both` the index and the value: a continuous output, whose supremum the mechanism computes from the
    mixture weights (`noisy_max_value`: exactly, at the stationary points of the densities' ratio). Classic ε
    then: KΔ/b with Laplace noise (every factor of the density moves by at most e^{Δ/b}; attained as v → −∞ when
    every answer moves), unbounded with exponential noise (the value's support moves with the answers).

    Parameters
    ----------
    scale : float
        The noise scale b (positive).
    noise : str, optional
        "laplace" (default) or "exponential" (one-sided).
    epsilon : float or None, optional
        The DP level the scale came from, if given (reported only).
    returns : str, optional
        "index" (default), "value" or "both".

    Raises
    ------
    InputError
        For a scale that is not positive or an unknown `noise` or `returns`.
    """

    scale: float
    noise: str = "laplace"
    epsilon: float | None = field(default=None, compare=False)
    returns: str = "index"
    kind = "report_noisy_max"
    aliases = ("rnm", "report-noisy-max", "noisy_max")
    parameters = {"noise": (str, "laplace", "the noise on each answer: laplace or exponential (one-sided)"),
                  "returns": (str, "index", "index (of the noisy maximum), value (the noisy maximum) or both"),
                  "sensitivity": _SENSITIVITY}
    answer_range = (2, None)
    dp_bound_reason = "report-noisy-max's 2Δ/b is an upper bound (the worst case approaches it as K grows)"

    def __post_init__(self):
        _positive(self.scale, "scale")
        if self.noise not in ("laplace", "exponential"):
            raise InputError(f"--mechanism-param noise= of report_noisy_max must be laplace or exponential, got "
                             f"'{self.noise}'")
        if self.returns not in RETURNS:
            raise InputError(f"--mechanism-param returns= of report_noisy_max must be index, value or both, got "
                             f"'{self.returns}'")

    @property
    def continuous(self) -> bool:  # the noisy maximum is released: no finite output space
        """True when the noisy maximum is released (`returns` value or both): no finite output space."""
        return self.returns != "index"

    @property
    def law_error(self) -> float:
        """The bound on `log_prob`'s error: the quadrature's for the index, `noisy_max_value`'s for the value."""
        return LAW_ERROR if self.returns == "index" else noisy_max_value.LAW_ERROR

    def output_space(self, answers: np.ndarray) -> np.ndarray:
        """The indices 0..K-1 as outputs (K, 1); refused when the value is released.

        Parameters
        ----------
        answers : numpy.ndarray
            The answer vectors (R, K).

        Returns
        -------
        numpy.ndarray
            The outputs (K, 1).

        Raises
        ------
        InputError
            When `continuous` (the supremum comes from `sup_log_ratio`).
        """
        if self.continuous:
            raise InputError(f"report_noisy_max releasing the {self.returns} has a continuous output: its supremum is "
                             "computed from the weights (sup_log_ratio)")
        return super().output_space(answers)

    def sup_log_ratio(self, log_w: np.ndarray, answers: np.ndarray) -> tuple[float, int, int, tuple[float, ...]]:
        """The supremum over the released value (with its index for `returns` both) of the mixtures' log-ratio, over
        ordered pairs of rows: exactly, at the stationary points of the densities' ratio (`noisy_max_value`).

        Parameters
        ----------
        log_w : numpy.ndarray
            Rows (T, R) of log-probabilities over the answer vectors (-inf where absent).
        answers : numpy.ndarray
            The answer vectors (R, K).

        Returns
        -------
        value : float
            The supremum of the log-ratio.
        t, t_prime : int
            The rows of `log_w` that attain it.
        y : tuple of float
            The output at which it is attained (a coordinate ±inf for a limit).
        """
        return noisy_max_value.sup_log_ratio(log_w, self._answers(answers), self.scale, self.noise,
                                             self.returns == "both")

    @property
    def day_law(self) -> DayLaw | None:
        """With Laplace noise, releasing the index: given the noisy maximum v a product over the answers (`DayLaw`)."""
        if self.noise != "laplace" or self.returns != "index":
            return None
        return DayLaw(False, 0.0, self.scale)

    @classmethod
    def scale_from(cls, epsilon: float, sensitivity: float, values: dict) -> float:
        return 2 * sensitivity / epsilon

    @classmethod
    def _from(cls, scale, epsilon, values):
        if scale is None:
            raise InputError("the report_noisy_max mechanism needs --scale or --epsilon")
        return cls(scale, values["noise"], epsilon, values["returns"])

    def log_prob(self, outputs: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """log P(argmax = i | a); with `returns` value or both the log-density of the output (v,) or (i, v).

        Parameters
        ----------
        outputs : numpy.ndarray
            The outputs (G, 1) (an index or a value) or (G, 2) (both).
        answers : numpy.ndarray
            The answer vectors (R, K).

        Returns
        -------
        numpy.ndarray
            The log-probabilities or log-densities (G, R); -inf for an impossible index.
        """
        if not self.continuous:
            return self._pick(self.log_table(answers), outputs)
        y = np.asarray(outputs, dtype=float).reshape(len(outputs), -1)
        index = y[:, 0] if self.returns == "both" else None
        return noisy_max_value.log_density(y[:, -1], index, self._answers(answers), self.scale, self.noise)

    def log_table(self, answers: np.ndarray) -> np.ndarray:
        """log P(argmax = i | a_r) for every i and row: (K, R).

        Parameters
        ----------
        answers : numpy.ndarray
            The answer vectors (R, K).

        Returns
        -------
        numpy.ndarray
            The log-probabilities (K, R), by quadrature to `law_error`.
        """
        a = self._answers(answers)
        b = self.scale
        if self.noise == "laplace":
            def log_f(v):
                x = v[:, :, None] - a[:, None, :]  # (R, N, K)
                log_cdf = laplace_log_cdf(x, b)
                return laplace_log_pdf(x, b) - log_cdf + log_cdf.sum(axis=2, keepdims=True)
            values, _ = log_integral(log_f, a, b, width=a.shape[1])
        else:
            def log_f(v):
                x = np.maximum(v[:, :, None] - a[:, None, :], 0.0)  # v > max a at every node
                with np.errstate(divide="ignore"):
                    log_cdf = np.log(-np.expm1(-x / b))
                return (-x / b - math.log(b)) - log_cdf + log_cdf.sum(axis=2, keepdims=True)
            values, _ = log_integral(log_f, a.max(axis=1, keepdims=True), b, left=False, width=a.shape[1])
        return values.T

    def sample(self, answers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The noisy argmax, the noisy maximum or both (`returns`) of each answer vector.

        Parameters
        ----------
        answers : numpy.ndarray
            The answer vectors (S, K).
        rng : numpy.random.Generator
            The random generator.

        Returns
        -------
        numpy.ndarray
            The outputs (S, 1), or (S, 2) for `returns` both.
        """
        a = self._answers(answers)
        z = laplace_noise(rng, self.scale, a.shape) if self.noise == "laplace" else rng.exponential(self.scale, a.shape)
        noisy = a + z
        index = np.argmax(noisy, axis=1)
        value = noisy[np.arange(len(noisy)), index]
        columns = {"index": (index,), "value": (value,), "both": (index, value)}[self.returns]
        return np.column_stack([np.asarray(c, dtype=float) for c in columns])

    def dp_leakage(self, sensitivity: float) -> float:
        """2Δ/b, an upper bound; refused when the value is released (its ε depends on K: `dp_bound`).

        Parameters
        ----------
        sensitivity : float
            The L1 sensitivity Δ (of each answer).

        Returns
        -------
        float
            2Δ/b, 0 when Δ is not positive.

        Raises
        ------
        InputError
            When `continuous`.
        """
        if self.continuous:
            raise InputError("report_noisy_max releasing the noisy maximum: its classic epsilon depends on the number of "
                             "answers (tuple_dp_leakage)")
        return 2 * float(sensitivity) / self.scale if sensitivity > 0 else 0.0

    def dp_bound(self, query, k, domains) -> tuple[float, str | None]:
        """As `JointMechanism.dp_bound` for the index; for the value KΔ/b with Laplace noise, inf with
        exponential noise.

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
            The classic ε for tuple k (an upper bound).
        bound_reason : str or None
            Why it is a bound, None when it is not.
        """
        if not self.continuous:
            return super().dp_bound(query, k, domains)
        sensitivity = query.sensitivity(k, domains)
        if sensitivity == 0:
            return 0.0, None
        if self.noise == "exponential":
            return math.inf, "the noisy maximum's support moves with the answers (exponential noise is one-sided)"
        answers = answer_count(query, domains)
        return (answers * float(sensitivity) / self.scale,
                f"an upper bound: K·Δ/b for the {answers} answers, each moved by at most the L1 sensitivity Δ")

    def describe(self) -> dict:
        return {"kind": self.kind, "scale": self.scale, "noise": self.noise,
                **({} if self.epsilon is None else {"epsilon": self.epsilon}),
                "returns": self.returns, "law_error": self.law_error,
                "output": {"index": "argmax_i", "value": "max_i", "both": "(argmax_i, max_i)"}[self.returns]
                + f" (a_i + {self.noise.capitalize()}({self.scale:g}))"}


@dataclass(frozen=True)
class ExponentialMechanism(_Selection):
    """The exponential mechanism (McSherry & Talwar 2007) with the K answers as the candidates' utilities:
    p(r | a) = exp(a_r / s) / Σ_j exp(a_j / s), s = 2Δ/ε (`monotone=true`: s = Δ/ε, for utilities that all
    move the same way when a tuple changes; Dwork & Roth 2014 §3.4, Thm 3.10). Exact (a softmax).
    Classic ε: 2Δ/s (monotone: Δ/s), an upper bound.

    Parameters
    ----------
    scale : float
        The scale s (positive).
    monotone : bool, optional
        Utilities monotone in the data (--epsilon then sets s = Δ/ε; default False).
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
    monotone: bool = False
    epsilon: float | None = field(default=None, compare=False)
    source: str | None = field(default=None, compare=False)  # the library object it was read from (interop)
    kind = "exponential"
    aliases = ("exponential_mechanism", "exp_mech")
    parameters = {"monotone": (bool, False, "utilities monotone in the data: scale Δ/ε instead of 2Δ/ε"),
                  "sensitivity": _SENSITIVITY}
    dp_bound_reason = "the exponential mechanism's 2Δ/s (Δ/s if monotone) is an upper bound"

    def __post_init__(self):
        _positive(self.scale, "scale")

    @classmethod
    def scale_from(cls, epsilon: float, sensitivity: float, values: dict) -> float:
        return (1 if values["monotone"] else 2) * sensitivity / epsilon

    @classmethod
    def _from(cls, scale, epsilon, values):
        if scale is None:
            raise InputError("the exponential mechanism needs --scale or --epsilon")
        return cls(scale, values["monotone"], epsilon)

    def log_table(self, answers: np.ndarray) -> np.ndarray:
        """log p(r | a) for every candidate r and row: (K, R).

        Parameters
        ----------
        answers : numpy.ndarray
            The answer vectors (R, K).

        Returns
        -------
        numpy.ndarray
            The log-probabilities (K, R), exact (a softmax).
        """
        z = self._answers(answers) / self.scale
        z = z - z.max(axis=1, keepdims=True)
        return (z - np.log(np.exp(z).sum(axis=1, keepdims=True))).T

    def log_prob(self, outputs: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """log p(r | a) of each output index r.

        Parameters
        ----------
        outputs : numpy.ndarray
            The candidate indices (G, 1).
        answers : numpy.ndarray
            The answer vectors (R, K).

        Returns
        -------
        numpy.ndarray
            The log-probabilities (G, R); -inf for an index that is not a candidate.
        """
        return self._pick(self.log_table(answers), outputs)

    def sample(self, answers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One candidate index per answer vector, drawn from the softmax.

        Parameters
        ----------
        answers : numpy.ndarray
            The answer vectors (S, K).
        rng : numpy.random.Generator
            The random generator.

        Returns
        -------
        numpy.ndarray
            The indices (S, 1).
        """
        cdf = np.cumsum(np.exp(self.log_table(answers).T), axis=1)
        u = rng.random(len(cdf)) * cdf[:, -1]
        return np.minimum((cdf < u[:, None]).sum(axis=1), cdf.shape[1] - 1).astype(float)[:, None]

    def dp_leakage(self, sensitivity: float) -> float:
        """2Δ/s (monotone: Δ/s), an upper bound.

        Parameters
        ----------
        sensitivity : float
            The L1 sensitivity Δ (of each answer).

        Returns
        -------
        float
            The classic ε, 0 when Δ is not positive.
        """
        return (1 if self.monotone else 2) * float(sensitivity) / self.scale if sensitivity > 0 else 0.0

    def describe(self) -> dict:
        return {"kind": self.kind, "scale": self.scale, "monotone": self.monotone,
                **({} if self.epsilon is None else {"epsilon": self.epsilon}),
                "output": f"candidate r with probability proportional to exp(a_r / {self.scale:g})",
                **source_entry(self)}
