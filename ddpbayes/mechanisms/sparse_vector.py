"""The sparse vector technique (issue #28): Lyu, Su & Li 2017, "Understanding the Sparse Vector Technique
for Differential Privacy" (PVLDB 10(6)), Algs. 1-6, as DP-Sniper's SparseVectorTechnique1-6 sample them. Query i is TRUE when a_i + ν_i ≥ T + ρ (ρ the threshold noise, ν_i the query noise).
With s = Δ/ε (the `scale`; Δ the per-answer sensitivity) the noise scales are, per variant:

  1: ρ ~ Lap(2s), ν ~ Lap(4cs), stop after c TRUEs (Alg. 1; ε-DP)
  2: ρ ~ Lap(2cs), ν ~ Lap(4cs), ρ redrawn after every TRUE, stop after c TRUEs (Alg. 2; ε-DP)
  3: ρ ~ Lap(2s), ν ~ Lap(2cs), a TRUE query releases its noisy answer, stop after c TRUEs (Alg. 3; not ε-DP as K
     grows; `svt_value.py`)
  4: ρ ~ Lap(4s), ν ~ Lap(4s/3), stop after c TRUEs (Alg. 4; ((1 + 6c)/4)ε-DP)
  5: ρ ~ Lap(2s), no query noise, never stops (Alg. 5; not private: ∞)
  6: ρ ~ Lap(2s), ν ~ Lap(2s), never stops (Alg. 6; not ε-DP as K grows; K·ε/2 for K queries)

The output has one entry per query: 1 (TRUE), 0 (FALSE), −1 (not answered: after the c-th TRUE); Alg. 3's has 2K,
the pattern then the released values (a TRUE query's a_i + ν_i, 0 otherwise), a continuous output whose supremum
`sup_log_ratio` computes (`svt_value.py`).
Law: given ρ the queries are independent, so P(y | a) = ∫ f_ρ(ρ) Π_{y_i=1} P(ν > T + ρ − a_i)
Π_{y_i=0} P(ν ≤ T + ρ − a_i) dρ, by `quadrature.log_integral` cut at ρ = a_i − T and 0, tails mapped at
the larger noise scale (every scale ratio above is an integer, so the tail integrands are polynomials);
Alg. 2's law is the product of such integrals over the runs of queries that end at each TRUE. Alg. 5 is
closed form: the TRUE set must be {i: a_i − T ≥ ρ}, so P = F_ρ(min_TRUE(a_i − T)) − F_ρ(max_FALSE(a_i − T)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.limits import check_states
from ddpbayes.mechanisms import svt_value
from ddpbayes.mechanisms.base import _positive
from ddpbayes.mechanisms.joint import DayLaw, JointMechanism, answer_count, laplace_noise, positive_int
from ddpbayes.mechanisms.quadrature import LAW_ERROR, laplace_log_cdf, laplace_log_pdf, laplace_log_sf, log_integral

VARIANTS = (1, 2, 3, 4, 5, 6)
ABORTING = (1, 2, 3, 4)


@dataclass(frozen=True)
class SparseVector(JointMechanism):
    """The sparse vector technique, Lyu et al. 2017 Alg. `variant`: K answers in,
    K entries out (1 TRUE, 0 FALSE, −1 not answered).

    Classic ε at sensitivity Δ, with s = `scale`: Δ/s (Algs. 1, 2) and ((1 + 6c)/4)Δ/s (Alg. 4), upper bounds
    (Lyu et al. 2017 §4); Algs. 3, 5 and 6 are not ε-DP (`dp_bound`: K·Δ/b_ν for Algs. 3 and 6's K queries).

    Parameters
    ----------
    scale : float
        s = Δ/ε (positive); the noise scales follow from it per variant.
    variant : int, optional
        Lyu et al. 2017's Alg. 1 (default), 2, 3, 4, 5 or 6.
    threshold : float, optional
        The threshold T (finite; default 1).
    cutoff : int, optional
        c: stop after c TRUE answers (variants 1, 2, 4; default 1).
    epsilon : float or None, optional
        The DP level the scale came from, if given (reported only).

    Raises
    ------
    InputError
        For a scale that is not positive, an unknown variant, an infinite threshold or a
        cutoff that is not a positive integer.
    """

    scale: float
    variant: int = 1
    threshold: float = 1.0
    cutoff: int = 1
    epsilon: float | None = field(default=None, compare=False)
    kind = "sparse_vector"
    aliases = ("svt", "sparse-vector", "sparse_vector_technique")
    law_error = LAW_ERROR
    parameters = {"variant": (int, 1, "Lyu et al. 2017 Alg. 1, 2, 3, 4, 5 or 6 (3, 5 and 6 are not private; 3 releases "
                                      "the noisy answers)"),
                  "threshold": (float, 1.0, "the threshold T"),
                  "cutoff": (int, 1, "c: stop after c TRUE answers (variants 1, 2, 4)"),
                  "sensitivity": (float, None, "per-answer sensitivity Δ that --epsilon sets the scale from "
                                  "(default: the query's global L1 sensitivity)")}

    def __post_init__(self):
        _positive(self.scale, "scale")
        if self.variant not in VARIANTS:
            raise InputError(f"--mechanism-param variant= of sparse_vector must be one of 1, 2, 3, 4, 5, 6, got {self.variant}")
        if not math.isfinite(self.threshold):
            raise InputError(f"--mechanism-param threshold= of sparse_vector must be finite, got {self.threshold}")
        positive_int(self.cutoff, "--mechanism-param cutoff=", self.kind)

    @classmethod
    def _from(cls, scale, epsilon, values):
        if scale is None:
            raise InputError("the sparse_vector mechanism needs --scale (Δ/ε) or --epsilon")
        return cls(scale, values["variant"], values["threshold"], values["cutoff"], epsilon)

    @property
    def rho_scale(self) -> float:
        """The threshold noise's scale (per variant, module docstring)."""
        c, s = self.cutoff, self.scale
        return {1: 2 * s, 2: 2 * c * s, 3: 2 * s, 4: 4 * s, 5: 2 * s, 6: 2 * s}[self.variant]

    @property
    def nu_scale(self) -> float:
        """The query noise's scale (0: none, Alg. 5)."""
        c, s = self.cutoff, self.scale
        return {1: 4 * c * s, 2: 4 * c * s, 3: 2 * c * s, 4: 4 * s / 3, 5: 0.0, 6: 2 * s}[self.variant]

    @property
    def day_law(self) -> DayLaw | None:
        """Alg. 1 with c = 1 given ρ: the first TRUE's index, a product over the answers (`DayLaw`)."""
        if self.variant != 1 or self.cutoff != 1:
            return None
        return DayLaw(True, self.threshold, self.nu_scale, self.rho_scale)

    @property
    def aborts(self) -> bool:
        return self.variant in ABORTING

    @property
    def continuous(self) -> bool:
        """True for Alg. 3, which releases the noisy answers: no finite output space (`sup_log_ratio`)."""
        return self.variant == 3

    def sup_log_ratio(self, log_w: np.ndarray, answers: np.ndarray,
                      directed: bool = False) -> tuple[float, int, int, tuple[float, ...]]:
        """Alg. 3: the supremum over patterns and released values of the mixtures' log-ratio, over ordered pairs of
        rows, by a Lipschitz branch and bound per pattern (`svt_value`; within SUP_ERROR + 2·LAW_ERROR).

        Parameters
        ----------
        log_w : numpy.ndarray
            Rows (T, R) of log-probabilities over the answer vectors (-inf where absent).
        answers : numpy.ndarray
            The answer vectors (R, K).
        directed : bool, optional
            Only the pair (row 0, row 1) (two rows; a composition adds each part's supremum per direction).

        Returns
        -------
        value : float
            The supremum of the log-ratio.
        t, t_prime : int
            The rows of `log_w` that attain it.
        y : tuple of float
            The output (the pattern, then the values; inf for a limit).

        Raises
        ------
        InputError
            Unless variant 3; for several TRUE answers under mixtures of answer vectors.
        """
        if not self.continuous:
            raise InputError(f"sparse_vector variant {self.variant} has a finite output space (output_space)")
        a = self._answers(answers)
        patterns = SparseVector(self.scale, 1, self.threshold, self.cutoff).output_space(a)
        return svt_value.sup_log_ratio(patterns, np.asarray(log_w, dtype=float), a, self.threshold, self.rho_scale,
                                       self.nu_scale, directed)

    # ---- the output space
    def output_count(self, answers: np.ndarray) -> int:
        """G without building the outputs: Σ_{t ≤ c} C(K, t) patterns when the variant aborts, 2^K when not (Alg. 5:
        the patterns some threshold noise gives).

        Parameters
        ----------
        answers : numpy.ndarray
            The distinct answer vectors (R, K).

        Returns
        -------
        int
            The number of outputs.
        """
        k = self._answers(answers).shape[1]
        if self.continuous:
            self.output_space(answers)
        if self.variant == 5:
            return len(self.output_space(answers))
        if self.aborts:
            return sum(math.comb(k, t) for t in range(min(self.cutoff, k) + 1))
        return 2 ** k

    def output_space(self, answers: np.ndarray) -> np.ndarray:
        """Every output the variant can produce: the 0/1 patterns (with −1 after the c-th TRUE when it aborts);
        Alg. 5 only the patterns {i: a_i − T ≥ ρ} some ρ gives under the given answers.

        Parameters
        ----------
        answers : numpy.ndarray
            The distinct answer vectors (R, K).

        Returns
        -------
        numpy.ndarray
            The outputs (G, K).

        Raises
        ------
        InputError
            When G exceeds --max-states.
        """
        a = self._answers(answers)
        k = a.shape[1]
        if self.continuous:
            raise InputError("sparse_vector variant 3 releases the noisy answers, a continuous output: its supremum is "
                             "computed from the weights (sup_log_ratio)")
        if self.variant == 5:  # the patterns {i: a_i − T ≥ ρ} some ρ gives, under each answer vector
            cuts = a - self.threshold
            rows = [np.vstack([np.full(k, 1.0), (row[None, :] > np.unique(row)[:, None]).astype(float)])
                    for row in cuts]
            return np.unique(np.vstack(rows), axis=0)
        count = self.output_count(a)
        check_states(count, f"the sparse vector technique's output space ({k} queries)", "outputs")
        if not self.aborts:
            return ((np.arange(2 ** k)[:, None] >> np.arange(k)[None, :]) & 1).astype(float)
        out = []
        for t in range(min(self.cutoff, k) + 1):
            for on in combinations(range(k), t):
                y = np.zeros(k)
                y[list(on)] = 1.0
                if t == self.cutoff:
                    y[on[-1] + 1:] = -1.0
                out.append(y)
        return np.array(out).reshape(len(out), k)

    def _valid(self, y: np.ndarray) -> np.ndarray:
        """Which outputs (G, K) the mechanism can produce at all (entries, and −1 exactly after the c-th TRUE)."""
        ok = np.all((y == 0) | (y == 1) | (y == -1), axis=1)
        before = np.cumsum(y == 1, axis=1) - (y == 1)  # TRUEs strictly before each position
        want = (before >= self.cutoff) if self.aborts else np.zeros_like(y, dtype=bool)
        return ok & np.all((y == -1) == want, axis=1)

    # ---- the law
    def log_prob(self, outputs: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """log P(y | a) by the one-ρ integral (Alg. 2: a product of them over the runs; Alg. 5: closed form),
        to `law_error` (module docstring).

        Parameters
        ----------
        outputs : numpy.ndarray
            The outputs (G, K).
        answers : numpy.ndarray
            The answer vectors (R, K).

        Returns
        -------
        numpy.ndarray
            The log-probabilities (G, R); -inf for an output the variant cannot produce.

        Raises
        ------
        InputError
            When the outputs and the answers differ in length.
        """
        a = self._answers(answers)
        y = np.asarray(outputs, dtype=float).reshape(len(outputs), -1)
        width = a.shape[1] * (2 if self.continuous else 1)
        if y.shape[1] != width:
            raise InputError(f"sparse_vector outputs have {y.shape[1]} entries for {a.shape[1]} answers (need {width})")
        valid = self._valid(y[:, :a.shape[1]])
        if self.continuous:  # a value only where the query is TRUE
            valid &= np.all((y[:, :a.shape[1]] == 1) | (y[:, a.shape[1]:] == 0), axis=1)
        out = np.full((len(y), len(a)), -np.inf)
        if not valid.any():
            return out
        yv = y[valid]
        if self.continuous:
            out[valid] = svt_value.log_density(yv, a, self.threshold, self.rho_scale, self.nu_scale)
        elif self.variant == 5:
            out[valid] = self._closed_form(yv, a)
        elif self.variant == 2:
            out[valid] = self._runs(yv, a)
        else:
            out[valid] = self._integrals(yv == 1, yv == 0, a)
        return out

    def _integrals(self, true: np.ndarray, false: np.ndarray, a: np.ndarray) -> np.ndarray:
        """log ∫ f_ρ Π_true P(ν > T + ρ − a_i) Π_false P(ν ≤ T + ρ − a_i) dρ: (M, R) for masks (M, K)."""
        t_mask, f_mask = true.astype(float).T, false.astype(float).T  # (K, M)
        b_rho, b_nu, big = self.rho_scale, self.nu_scale, max(self.rho_scale, self.nu_scale)

        def log_f(v):
            x = self.threshold + v[:, :, None] - a[:, None, :]  # (R, N, K)
            return (laplace_log_pdf(v, b_rho)[:, :, None] + laplace_log_sf(x, b_nu) @ t_mask
                    + laplace_log_cdf(x, b_nu) @ f_mask)

        breaks = np.concatenate([a - self.threshold, np.zeros((len(a), 1))], axis=1)
        values, _ = log_integral(log_f, breaks, big, width=max(t_mask.shape[1], a.shape[1]),
                                 narrow=min(b_rho, b_nu))
        return values.T

    def _runs(self, y: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Alg. 2: ρ is redrawn after each TRUE, so the law is a product over the runs of queries ending at
        each TRUE (and the run after the last one), each a one-ρ integral."""
        owner, true, false = [], [], []
        k = y.shape[1]
        for g, row in enumerate(y):
            start = 0
            for end in [*np.flatnonzero(row == 1), k - 1]:
                seg = np.zeros(k, dtype=bool)
                seg[start:end + 1] = True
                if start <= end and np.any(seg & (row >= 0)):
                    owner.append(g)
                    true.append(seg & (row == 1))
                    false.append(seg & (row == 0))
                start = end + 1
        out = np.zeros((len(y), len(a)))
        if owner:
            np.add.at(out, np.array(owner), self._integrals(np.array(true), np.array(false), a))
        return out

    def _closed_form(self, y: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Alg. 5: P(max_FALSE(a_i − T) < ρ ≤ min_TRUE(a_i − T)), ρ ~ Lap(2s)."""
        cut = a - self.threshold  # (R, K)
        hi = np.where(y[:, None, :] == 1, cut[None], np.inf).min(axis=2)  # (G, R)
        lo = np.where(y[:, None, :] == 0, cut[None], -np.inf).max(axis=2)
        b = self.rho_scale
        with np.errstate(divide="ignore", invalid="ignore"):
            upper_tail = lo >= 0  # difference of survival functions there, of CDFs below: no cancellation
            ls_lo, ls_hi = laplace_log_sf(lo, b), laplace_log_sf(hi, b)
            lc_lo, lc_hi = laplace_log_cdf(lo, b), laplace_log_cdf(hi, b)
            out = np.where(upper_tail, ls_lo + np.log1p(-np.exp(ls_hi - ls_lo)),
                           lc_hi + np.log1p(-np.exp(lc_lo - lc_hi)))
        return np.where(hi > lo, out, -np.inf)

    def sample(self, answers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Run the variant once on each answer vector.

        Parameters
        ----------
        answers : numpy.ndarray
            The answer vectors (S, K).
        rng : numpy.random.Generator
            The random generator.

        Returns
        -------
        numpy.ndarray
            The outputs (S, K).
        """
        a = self._answers(answers)
        s, k = len(a), a.shape[1]
        rho = laplace_noise(rng, self.rho_scale, (s,))
        noisy = a if self.variant == 5 else a + laplace_noise(rng, self.nu_scale, a.shape)
        if self.variant == 2:
            res = np.empty(a.shape)
            for i in range(k):
                hit = noisy[:, i] >= rho + self.threshold
                res[:, i] = hit
                rho = np.where(hit, laplace_noise(rng, self.rho_scale, (s,)), rho)
        else:
            res = (noisy >= rho[:, None] + self.threshold).astype(float)
        if self.aborts:
            before = np.cumsum(res, axis=1) - res
            res[before >= self.cutoff] = -1.0
        if self.continuous:
            return np.concatenate([res, np.where(res == 1, noisy, 0.0)], axis=1)
        return res

    # ---- the guarantee
    def dp_leakage(self, sensitivity: float) -> float:
        """The paper's ε at sensitivity Δ: Δ/s (Algs. 1, 2), ((1 + 6c)/4)Δ/s (Alg. 4), inf (Algs. 5, 6).

        Parameters
        ----------
        sensitivity : float
            The L1 sensitivity Δ (of each answer).

        Returns
        -------
        float
            The classic ε, 0 when Δ is not positive.
        """
        if sensitivity <= 0:
            return 0.0
        eps = float(sensitivity) / self.scale
        return {1: eps, 2: eps, 3: math.inf, 4: (1 + 6 * self.cutoff) / 4 * eps, 5: math.inf, 6: math.inf}[self.variant]

    @property
    def dp_bound_reason(self) -> str | None:
        return {1: "Lyu et al. 2017 Thm 2's ε for Alg. 1 is an upper bound",
                2: "Lyu et al. 2017's ε for Alg. 2 is an upper bound",
                3: "Lyu et al. 2017 §4.2: Alg. 3 is not ε-DP for any finite ε as the number of queries grows; for K "
                   "queries it is at most K·Δ/b_ν (each released value's and FALSE comparison's kernel given ρ)",
                4: "Lyu et al. 2017 §4.2: Alg. 4 is ((1 + 6c)/4)ε-DP, an upper bound",
                5: "Lyu et al. 2017 §4.2: Alg. 5 is not ε-DP for any finite ε",
                6: "Lyu et al. 2017 §4.2: Alg. 6 is not ε-DP for any finite ε as the number of queries grows; "
                   "for K queries it is at most K·Δ/b_ν (each query's answer given ρ)"}[self.variant]

    def dp_bound(self, query, k, domains):
        """As `JointMechanism.dp_bound`; Algs. 3 and 6 at K·Δ/b_ν for their K queries.

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
        value, reason = super().dp_bound(query, k, domains)
        if self.variant in (3, 6) and value > 0:
            value = answer_count(query, domains) * query.sensitivity(k, domains) / self.nu_scale
        return value, reason

    def describe(self) -> dict:
        return {"kind": self.kind, "scale": self.scale, "variant": self.variant, "threshold": self.threshold,
                "cutoff": self.cutoff, **({} if self.epsilon is None else {"epsilon": self.epsilon}),
                "rho_scale": self.rho_scale, "nu_scale": self.nu_scale, "law_error": self.law_error,
                "output": f"Lyu et al. 2017 Alg. {self.variant}: 1 TRUE, 0 FALSE"
                          + (f", -1 once {self.cutoff} TRUE answers are given" if self.aborts else "")
                          + (", then each TRUE query's noisy answer (0 otherwise)" if self.continuous else "")}
