"""Numerical sparse vector (issue #28): Wang, Ding, Wang, Kifer, Zhang 2019, "Proving Differential Privacy with
Shadow Execution" (PLDI), NumericalSVT as DP-Sniper runs it. With s = Δ/ε: the threshold noise ρ ~ Lap(3s), each
query's comparison noise ν_i ~ Lap(6cs); a query with a_i + ν_i ≥ T + ρ is TRUE and releases a FRESH noisy answer
z_i = a_i + η_i, η_i ~ Lap(3cs); after c TRUEs the rest are not answered. ε-DP (Wang et al. 2019).

Output (2K entries): the pattern (1 TRUE, 0 FALSE, −1 not answered) then the values (z_i for a TRUE query, 0
otherwise). Law: P(pattern | a) is Alg. 1's one-ρ integral with these scales (`SparseVector._integrals`), times
Π_{TRUE} Lap_{3cs}(z_i − a_i). For one pattern the mixture over answer vectors is a mixture of products of Laplace
kernels in the released values, so the supremum over them is attained on the grid of every answer value of that
query and ±inf (DESIGN §2.1, coordinate-wise): the output space is finite. At an infinite value `log_prob` is
the Laplace kernel's limit, up to a constant of that output (±a_i/b: the constant cancels in every ratio at that
output, which is all the engine takes).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.limits import check_states
from ddpbayes.mechanisms.joint import laplace_noise
from ddpbayes.mechanisms.quadrature import laplace_log_pdf
from ddpbayes.mechanisms.sparse_vector import SparseVector


@dataclass(frozen=True)
class NumericalSparseVector(SparseVector):
    """NumericalSVT (Wang et al. 2019): the pattern of K answers, then the noisy values of the
    TRUE ones.

    Classic ε at sensitivity Δ: Δ/s, s = `scale` (Wang et al. 2019; an upper bound).

    Parameters
    ----------
    scale : float
        s = Δ/ε (positive): threshold noise Lap(3s), comparison noise Lap(6cs), values Lap(3cs).
    variant : int, optional
        Keep 1 (the default): the pattern's law is `SparseVector`'s Alg. 1 with these scales.
    threshold : float, optional
        The threshold T (finite; default 1).
    cutoff : int, optional
        c: stop after c TRUE answers (default 2).
    epsilon : float or None, optional
        The DP level the scale came from, if given (reported only).

    Raises
    ------
    InputError
        For a scale that is not positive, an infinite threshold or a cutoff that is not a
        positive integer.
    """

    scale: float
    variant: int = 1  # the pattern's law is Alg. 1's with this module's scales
    threshold: float = 1.0
    cutoff: int = 2
    epsilon: float | None = field(default=None, compare=False)
    kind = "numerical_sparse_vector"
    aliases = ("numerical_svt", "numerical-svt")
    parameters = {"threshold": (float, 1.0, "the threshold T"),
                  "cutoff": (int, 2, "c: stop after c TRUE answers"),
                  "sensitivity": (float, None, "per-answer sensitivity Δ that --epsilon sets the scale from "
                                  "(default: the query's global L1 sensitivity)")}

    @classmethod
    def _from(cls, scale, epsilon, values):
        if scale is None:
            raise InputError("the numerical_sparse_vector mechanism needs --scale (Δ/ε) or --epsilon")
        return cls(scale, 1, values["threshold"], values["cutoff"], epsilon)

    @property
    def rho_scale(self) -> float:
        """The threshold noise's scale, 3s."""
        return 3 * self.scale

    @property
    def nu_scale(self) -> float:
        """The comparison noise's scale, 6cs."""
        return 6 * self.cutoff * self.scale

    @property
    def value_scale(self) -> float:
        """The released values' noise scale, 3cs."""
        return 3 * self.cutoff * self.scale

    def _patterns(self, k: int) -> np.ndarray:
        return SparseVector(self.scale, 1, self.threshold, self.cutoff).output_space(np.zeros((1, k)))

    def output_count(self, answers: np.ndarray) -> int:
        """G without building the outputs: for each pattern, the product over its TRUE queries of that query's
        distinct answers plus ±inf.

        Parameters
        ----------
        answers : numpy.ndarray
            The distinct answer vectors (R, K).

        Returns
        -------
        int
            The number of outputs.
        """
        a = self._answers(answers)
        sizes = [len(np.unique(a[:, i])) + 2 for i in range(a.shape[1])]
        return int(sum(math.prod(sizes[i] for i in np.flatnonzero(p == 1)) for p in self._patterns(a.shape[1])))

    def output_space(self, answers: np.ndarray) -> np.ndarray:
        """Every pattern, with each TRUE query's value on the grid of its answers and ±inf (module docstring).

        Parameters
        ----------
        answers : numpy.ndarray
            The distinct answer vectors (R, K).

        Returns
        -------
        numpy.ndarray
            The outputs (G, 2K): the pattern, then the values.

        Raises
        ------
        InputError
            When G exceeds --max-states.
        """
        a = self._answers(answers)
        k = a.shape[1]
        check_states(self.output_count(a), f"the numerical sparse vector's output space ({k} queries)", "outputs")
        grids = [np.concatenate([np.unique(a[:, i]), [-math.inf, math.inf]]) for i in range(k)]
        out = []
        for pattern in self._patterns(k):
            true = np.flatnonzero(pattern == 1)
            for values in itertools.product(*[grids[i] for i in true]):
                z = np.zeros(k)
                z[true] = values
                out.append(np.concatenate([pattern, z]))
        return np.array(out)

    def log_prob(self, outputs: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """The pattern's log-probability plus the TRUE values' Laplace log-densities (at ±inf the kernel's
        limit, up to a constant of that output).

        Parameters
        ----------
        outputs : numpy.ndarray
            The outputs (G, 2K).
        answers : numpy.ndarray
            The answer vectors (R, K).

        Returns
        -------
        numpy.ndarray
            The log-probabilities (G, R); -inf for an impossible output.

        Raises
        ------
        InputError
            When an output does not have 2K entries.
        """
        a = self._answers(answers)
        k = a.shape[1]
        y = np.asarray(outputs, dtype=float).reshape(len(outputs), -1)
        if y.shape[1] != 2 * k:
            raise InputError(f"numerical_sparse_vector outputs have {y.shape[1]} entries for {k} answers (2K)")
        pattern, z = y[:, :k], y[:, k:]
        distinct, which = np.unique(pattern, axis=0, return_inverse=True)  # many outputs share one pattern
        out = super().log_prob(distinct, a)[which.ravel()]  # the pattern's law (Alg. 1's integral, these scales)
        b = self.value_scale
        true = pattern == 1
        with np.errstate(invalid="ignore"):
            x = z[:, None, :] - a[None, :, :]  # (G, R, K)
            kernel = np.where(np.isinf(z)[:, None, :], np.sign(z)[:, None, :] * a[None, :, :] / b,
                              laplace_log_pdf(x, b))
        out = out + np.where(true[:, None, :], kernel, 0.0).sum(axis=2)
        quiet = np.any(~true & (z != 0), axis=1)  # a value where no query was TRUE: impossible
        out[quiet] = -np.inf
        return out

    def sample(self, answers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Run NumericalSVT once on each answer vector.

        Parameters
        ----------
        answers : numpy.ndarray
            The answer vectors (S, K).
        rng : numpy.random.Generator
            The random generator.

        Returns
        -------
        numpy.ndarray
            The outputs (S, 2K).
        """
        a = self._answers(answers)
        pattern = super().sample(a, rng)
        z = np.where(pattern == 1, a + laplace_noise(rng, self.value_scale, a.shape), 0.0)
        return np.concatenate([pattern, z], axis=1)

    def dp_leakage(self, sensitivity: float) -> float:
        """Δ/s (Wang et al. 2019).

        Parameters
        ----------
        sensitivity : float
            The L1 sensitivity Δ (of each answer).

        Returns
        -------
        float
            The classic ε, 0 when Δ is not positive.
        """
        return float(sensitivity) / self.scale if sensitivity > 0 else 0.0

    @property
    def dp_bound_reason(self) -> str | None:
        return "Wang et al. 2019 prove NumericalSVT ε-DP: an upper bound"

    def dp_bound(self, query, k, domains):
        """`JointMechanism.dp_bound` (not Alg. 6's bound of `SparseVector`).

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
        return super(SparseVector, self).dp_bound(query, k, domains)

    def describe(self) -> dict:
        return {"kind": self.kind, "scale": self.scale, "threshold": self.threshold, "cutoff": self.cutoff,
                **({} if self.epsilon is None else {"epsilon": self.epsilon}), "rho_scale": self.rho_scale,
                "nu_scale": self.nu_scale, "value_scale": self.value_scale, "law_error": self.law_error,
                "output": f"the pattern (1 TRUE, 0 FALSE, -1 once {self.cutoff} TRUE answers are given), then each "
                          f"TRUE query's answer + Lap({self.value_scale:g})"}
