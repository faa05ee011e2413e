"""Selection mechanisms over K candidates (issue #28): report-noisy-max and the exponential mechanism.
Both output the index of the chosen candidate (d = 1, outputs 0..K−1)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.mechanisms import noisy_max_value
from ddpbayes.mechanisms.base import _positive, source_entry
from ddpbayes.mechanisms.joint import JointMechanism, answer_count, laplace_noise
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
    every answer moves), unbounded with exponential noise (the value's support moves with the answers)."""

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
        return self.returns != "index"

    @property
    def law_error(self) -> float:
        return LAW_ERROR if self.returns == "index" else noisy_max_value.LAW_ERROR

    def output_space(self, answers: np.ndarray) -> np.ndarray:
        if self.continuous:
            raise InputError(f"report_noisy_max releasing the {self.returns} has a continuous output: its supremum is "
                             "computed from the weights (sup_log_ratio)")
        return super().output_space(answers)

    def sup_log_ratio(self, log_w: np.ndarray, answers: np.ndarray) -> tuple[float, int, int, tuple[float, ...]]:
        return noisy_max_value.sup_log_ratio(log_w, self._answers(answers), self.scale, self.noise,
                                             self.returns == "both")

    @classmethod
    def scale_from(cls, epsilon: float, sensitivity: float, values: dict) -> float:
        return 2 * sensitivity / epsilon

    @classmethod
    def _from(cls, scale, epsilon, values):
        if scale is None:
            raise InputError("the report_noisy_max mechanism needs --scale or --epsilon")
        return cls(scale, values["noise"], epsilon, values["returns"])

    def log_prob(self, outputs: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """log P(argmax = i | a); with `returns` value or both the log-density of the output (v,) or (i, v)."""
        if not self.continuous:
            return self._pick(self.log_table(answers), outputs)
        y = np.asarray(outputs, dtype=float).reshape(len(outputs), -1)
        index = y[:, 0] if self.returns == "both" else None
        return noisy_max_value.log_density(y[:, -1], index, self._answers(answers), self.scale, self.noise)

    def log_table(self, answers: np.ndarray) -> np.ndarray:
        """log P(argmax = i | a_r) for every i and row: (K, R)."""
        a = self._answers(answers)
        b = self.scale
        if self.noise == "laplace":
            def log_f(v):
                x = v[:, :, None] - a[:, None, :]  # (R, N, K)
                log_cdf = laplace_log_cdf(x, b)
                return laplace_log_pdf(x, b) - log_cdf + log_cdf.sum(axis=2, keepdims=True)
            values, _ = log_integral(log_f, a, b)
        else:
            def log_f(v):
                x = np.maximum(v[:, :, None] - a[:, None, :], 0.0)  # v > max a at every node
                with np.errstate(divide="ignore"):
                    log_cdf = np.log(-np.expm1(-x / b))
                return (-x / b - math.log(b)) - log_cdf + log_cdf.sum(axis=2, keepdims=True)
            values, _ = log_integral(log_f, a.max(axis=1, keepdims=True), b, left=False)
        return values.T

    def sample(self, answers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        a = self._answers(answers)
        z = laplace_noise(rng, self.scale, a.shape) if self.noise == "laplace" else rng.exponential(self.scale, a.shape)
        noisy = a + z
        index = np.argmax(noisy, axis=1)
        value = noisy[np.arange(len(noisy)), index]
        columns = {"index": (index,), "value": (value,), "both": (index, value)}[self.returns]
        return np.column_stack([np.asarray(c, dtype=float) for c in columns])

    def dp_leakage(self, sensitivity: float) -> float:
        if self.continuous:
            raise InputError("report_noisy_max releasing the noisy maximum: its classic epsilon depends on the number of "
                             "answers (tuple_dp_leakage)")
        return 2 * float(sensitivity) / self.scale if sensitivity > 0 else 0.0

    def dp_bound(self, query, k, domains) -> tuple[float, str | None]:
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
    Classic ε: 2Δ/s (monotone: Δ/s), an upper bound."""

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
        """log p(r | a) for every candidate r and row: (K, R)."""
        z = self._answers(answers) / self.scale
        z = z - z.max(axis=1, keepdims=True)
        return (z - np.log(np.exp(z).sum(axis=1, keepdims=True))).T

    def log_prob(self, outputs: np.ndarray, answers: np.ndarray) -> np.ndarray:
        return self._pick(self.log_table(answers), outputs)

    def sample(self, answers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        cdf = np.cumsum(np.exp(self.log_table(answers).T), axis=1)
        u = rng.random(len(cdf)) * cdf[:, -1]
        return np.minimum((cdf < u[:, None]).sum(axis=1), cdf.shape[1] - 1).astype(float)[:, None]

    def dp_leakage(self, sensitivity: float) -> float:
        return (1 if self.monotone else 2) * float(sensitivity) / self.scale if sensitivity > 0 else 0.0

    def describe(self) -> dict:
        return {"kind": self.kind, "scale": self.scale, "monotone": self.monotone,
                **({} if self.epsilon is None else {"epsilon": self.epsilon}),
                "output": f"candidate r with probability proportional to exp(a_r / {self.scale:g})",
                **source_entry(self)}
