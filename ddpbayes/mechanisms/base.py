"""The noise-mechanism interface every engine reads (DESIGN §1; §5.1: writing your own).

Like an OpenDP measurement, a mechanism states its input (a query's output), its noise and the
classic guarantee it gives. Two kinds exist:

- pure-ε mechanisms (`profile = False`: Laplace, geometric, randomized response): `log_kernel`
  hands the engines the finite set of outputs on which the supremum of DESIGN §2.1 is attained,
  and the leakage is that supremum;
- profile mechanisms (`profile = True`: Gaussian, discrete Gaussian; `mechanisms.gaussian`):
  the log-ratio is unbounded in the tails, so the leakage is read off the privacy profile δ(ε)
  at the mechanism's `delta` (DESIGN §3.5); they answer `deltas`, `pair_profiles`, `pair_rho`
  and `classic_profile`, which the others refuse.

Extension point. A user's pure-ε mechanism is a subclass of `Mechanism` written outside the
package and passed as an instance: `audit(model, query, MyMechanism(...), notion)`. The exact
engine (finite models) audits it under every notion; the other engines refuse it with a reason
(exit 2), and 004's information measures are skipped with a reason. It defines:

- `kind`: a name for messages and the JSON (not one of the built-in kinds; a subclass of
  `Laplace` under its own kind keeps its methods but is not taken for Laplace: `BuiltInKinds`);
- `log_kernel(q)`: for the distinct values q (m,) one output coordinate of the query takes,
  the outputs y (G,) and log p(y | q_s) (G, m), up to an additive constant per y. The grid
  must contain every output at which sup_y of log Σ_s w_s p(y|q_s) − log Σ_s v_s p(y|q_s) can
  be attained, for ANY two weight vectors w, v (±inf stands for a limit): all outputs when
  they are finite (randomized response), the levels and both tails for Laplace (004 Lemma 1).
  The engine takes the maximum over this grid only, so a missing point is a wrong answer;
- `grid_size(levels)`: G for m = `levels` (the engine checks G·m against --max-states first);
- `dp_leakage(sensitivity)`: the classic ε when one tuple moves the query by `sensitivity`
  (L1), for `--notion dp`; `describe()`: the dict shown as the result's `mechanism`;
- optionally `check(query, domains)` (raise `InputError` for what it cannot release; called
  once by `audit`), `tuple_dp_leakage` (when the classic ε is not a function of the L1
  sensitivity) and `coordinate(c)` (different noise per output coordinate).

Noise is applied independently per output coordinate: the engine multiplies the coordinates'
kernels. `tests/test_mechanism_extension.py` writes k-ary randomized response this way and checks
the exact engine against a brute force.
"""
from __future__ import annotations

import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.limits import check_positive_finite, check_states
from ddpbayes.mechanisms.information import NotAvailable
from ddpbayes.model.domains import Domain
from ddpbayes.profiles import PairProfiles, Profile
from ddpbayes.queries import Query


class Mechanism(ABC):
    """A noise mechanism: what it can release (`check`), the outputs on which the supremum over y
    is attained with their log-densities (`log_kernel`), and its classic DP level (`dp_leakage`).

    Subclass it for your own pure-ε mechanism: define `kind`, `log_kernel`, `grid_size`,
    `dp_leakage` and `describe` (the module docstring says what each must return)."""

    kind: str
    # Capabilities callers ask instead of comparing kinds; the defaults say "not available"
    # (as `Engine`'s do). Not dataclass fields: subclasses set them without annotation.
    aliases: tuple[str, ...] = ()  # other spellings of `kind` a user may type (`registry.canonical_kind`)
    profile: bool = False  # True: the leakage is ε at `delta` on the privacy profile (mechanisms.gaussian)
    gaussian: bool = False  # N(0, σ²) noise (N_Z with `discrete`) on every output coordinate, σ = `sigma`
    laplace: bool = False  # p(y | q) ∝ e^{-|y - q| / scale} per coordinate (Laplace; geometric on the integers;
    #                        their kinds only, `BuiltInKinds`)
    discrete: bool = False  # the outputs are integers (geometric, discrete Gaussian)
    flips_bits: bool = False  # the outputs are the 0/1 tuples themselves, set by ε alone (randomized response)
    calibratable: bool = False  # `calibrate` solves for its scale (`with_scale`; built-in kinds only)
    composed: bool = False  # several releases' noise, one per output coordinate range (`releases`)
    delta: float | None = None  # with `profile`: the δ at which the leakage is read off the profile
    joint: bool = False  # the output law is over the whole answer vector (`output_space`, `log_prob`), not noise
    #                      per coordinate: report-noisy-max, sparse vector, exponential mechanism, RAPPOR (§5.2)
    black_box: bool = False  # a program we can only run (`mechanisms.program`): `sample` alone; no kernel, law or
    #                          classic ε; the program engine certifies a lower bound by sampling (DESIGN §2.6)
    shift_invariant: bool = False  # p(y + c | q + c) = p(y | q) for every shift c of the answers (Laplace, geometric,
    #                                Gaussian): known tuples that only shift the query then leave the sup unchanged
    continuous: bool = False  # with `joint`: a continuous output whose sup depends on the mixture weights: the
    #                           mechanism computes it (`sup_log_ratio`) instead of naming an output space
    law_error: float = 0.0  # with `joint`: a bound on the absolute error of `log_prob` (integrals computed to it)
    parameters: dict[str, tuple[type, object, str]] = {}  # name -> (type, default, help): `--mechanism-param NAME=VALUE`
    # `sigma` (with `gaussian`) and `scale` (with `laplace`) are fields without a default of those
    # classes: a class attribute here would become that default (dataclasses read it off the base).

    @abstractmethod
    def log_kernel(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For one output coordinate whose query takes the distinct values `q` (m,), return the
        outputs y (G,) on which the sup over y is attained (±inf for limits) and log p(y | q)
        of shape (G, m), up to an additive constant per y (it cancels in likelihood ratios).

        Parameters
        ----------
        q : numpy.ndarray
            The distinct values (m,) of one output coordinate of the query.

        Returns
        -------
        grid : numpy.ndarray
            The outputs y (G,), ±inf standing for a limit.
        log_kernel : numpy.ndarray
            log p(y | q_s) (G, m), up to an additive constant per y.
        """

    @abstractmethod
    def grid_size(self, levels: int) -> int:
        """How many outputs `log_kernel` returns for `levels` distinct query values (its table
        has grid_size × levels cells: engines check that against --max-states first).

        Parameters
        ----------
        levels : int
            The number m of distinct query values.

        Returns
        -------
        int
            G, the length of `log_kernel`'s grid.
        """

    @abstractmethod
    def dp_leakage(self, sensitivity: float) -> float:
        """Classic (model-free) DP leakage for a tuple whose change moves the query by `sensitivity` in L1.

        Parameters
        ----------
        sensitivity : float
            How far (L1) one tuple's change moves the query.

        Returns
        -------
        float
            The classic ε (0 when `sensitivity` is 0).
        """

    def tuple_dp_leakage(self, query: Query, k: int, domains: Sequence[Domain]) -> tuple[float, str | None]:
        """Classic DP leakage for tuple k, and why it is only a bound when it is (composition).

        Here `dp_leakage` at tuple k's L1 sensitivity (`Query.sensitivity`).

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
            The classic ε for tuple k.
        bound_reason : str or None
            Why `leakage` is only an upper bound, None when it is exact.
        """
        return self.dp_leakage(query.sensitivity(k, domains)), None

    def check(self, query: Query, domains: Sequence[Domain]) -> None:
        """Raise InputError if this mechanism cannot release this query.

        Called once by `audit`; accepts every query here.

        Parameters
        ----------
        query : Query
            The query to release.
        domains : sequence of Domain
            The tuples' domains.

        Raises
        ------
        InputError
            What this mechanism cannot release (a subclass's refusal).
        """

    def coordinate(self, c: int) -> Mechanism:
        """The mechanism that perturbs output coordinate `c` on its own: this one on every
        coordinate, unless releases with different noise are released together (composition).

        Parameters
        ----------
        c : int
            The output coordinate.

        Returns
        -------
        Mechanism
            Its noise (here this mechanism).
        """
        return self

    def mixture_cells(self, levels: int) -> int:
        """The cells `log_mixtures` builds per row of weights on `levels` query values (dense: the kernel's
        grid times the levels), which engines batching rows keep under --max-states.

        Parameters
        ----------
        levels : int
            The number m of distinct query values.

        Returns
        -------
        int
            The cells per row of weights.
        """
        return self.grid_size(levels) * levels

    def log_mixtures(self, logw: np.ndarray, q: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """log Σ_s w_t(s) p(y | q_s) for every row t of the log-weights `logw` (T, m) at every y
        of `log_kernel`'s grid: (grid (G,), (T, G)), up to the same constant per y. Dense here
        (G·m·T cells, checked against `limit`); linear in m for Laplace. A `joint` law on a scalar
        answer gives its output space as the grid, (G, d).

        Parameters
        ----------
        logw : numpy.ndarray
            Log-weights (T, m) over the query values.
        q : numpy.ndarray
            The distinct query values (m,).
        limit : int
            The most cells to build (--max-states).

        Returns
        -------
        grid : numpy.ndarray
            The outputs y (G,), or (G, d) for a `joint` law.
        log_mixtures : numpy.ndarray
            log Σ_s w_t(s) p(y | q_s) (T, G).

        Raises
        ------
        InputError
            When the cells exceed `limit`.
        """
        if self.joint:  # a joint law on one answer: its output space, one output (d,) per grid row
            answers = np.asarray(q, dtype=float)[:, None]
            check_states(self.output_count(answers) * len(q) * len(logw),
                         f"the {self.kind} mechanism's law ({len(q):,} query values)", "cells", limit)
            grid = self.output_space(answers)
            log_k = self.log_prob(grid, answers)
        else:
            check_states(self.grid_size(len(q)) * len(q) * len(logw),
                         f"the mechanism's kernel ({len(q):,} query values)", "cells", limit)
            grid, log_k = self.log_kernel(q)
        return grid, np.logaddexp.reduce(logw[:, None, :] + log_k[None], axis=2)

    @classmethod
    def build(cls, query: Query, domains: Sequence[Domain], *, scale: float | None = None,
              epsilon: float | None = None, params: dict[str, str] | None = None) -> Mechanism:
        """With `joint`: this mechanism from the flags (`--scale` or `--epsilon`, `--mechanism-param NAME=VALUE` for each
        of `parameters`), validated: one-line InputError for what it cannot take.

        Parameters
        ----------
        query : Query
            The query to release.
        domains : sequence of Domain
            The tuples' domains.
        scale : float or None, optional
            The noise scale (--scale).
        epsilon : float or None, optional
            The privacy level that sets the scale (--epsilon).
        params : dict[str, str] or None, optional
            The texts of ``--mechanism-param NAME=VALUE``.

        Returns
        -------
        Mechanism
            The mechanism, checked against `query`.

        Raises
        ------
        InputError
            Always here: only `joint` mechanisms are built this way.
        """
        raise InputError(f"the {cls.kind} mechanism is built from --scale or --epsilon alone")

    def output_space(self, answers: np.ndarray) -> np.ndarray:
        """With `joint`: the outputs (G, d) on which sup_y of log Σ_r w_r p(y | a_r) − log Σ_r v_r p(y | a_r) is
        attained for ANY weights, given the distinct answer vectors `answers` (R, K) the engine will mix: every
        output of a finite output space that these answers can produce (outputs of probability zero under every
        answer may be left out). The engine takes the maximum over these outputs only.

        Parameters
        ----------
        answers : numpy.ndarray
            The distinct answer vectors (R, K).

        Returns
        -------
        numpy.ndarray
            The outputs (G, d).

        Raises
        ------
        InputError
            Unless `joint`.
        """
        raise InputError(f"the {self.kind} mechanism adds noise per coordinate: it has no joint output law")

    def output_count(self, answers: np.ndarray) -> int:
        """With `joint`: G, the number of outputs `output_space(answers)` would return (checked against
        --max-states before it is built).

        Parameters
        ----------
        answers : numpy.ndarray
            The distinct answer vectors (R, K).

        Returns
        -------
        int
            G.

        Raises
        ------
        InputError
            Unless `joint`.
        """
        raise InputError(f"the {self.kind} mechanism adds noise per coordinate: it has no joint output law")

    def log_prob(self, outputs: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """With `joint`: log p(y_g | a_r) (G, R) of the outputs (G, d) given the answer vectors (R, K), −inf where
        impossible; exact, or to `law_error` in absolute value where it needs an integral.

        Parameters
        ----------
        outputs : numpy.ndarray
            The outputs y (G, d).
        answers : numpy.ndarray
            The answer vectors (R, K).

        Returns
        -------
        numpy.ndarray
            log p(y_g | a_r) (G, R).

        Raises
        ------
        InputError
            Unless `joint`.
        """
        raise InputError(f"the {self.kind} mechanism adds noise per coordinate: it has no joint output law")

    def sup_log_ratio(self, log_w: np.ndarray, answers: np.ndarray) -> tuple[float, int, int, tuple[float, ...]]:
        """With `continuous`: max over ordered pairs (t, t') of the rows of `log_w` (T, R) — each a log-probability
        vector over the answer vectors `answers` (R, K), −inf where absent — and over every output y of
        log Σ_r w_tr p(y | a_r) − log Σ_r w_t'r p(y | a_r): (value, t, t', y), a coordinate of y ±inf for a limit.

        Parameters
        ----------
        log_w : numpy.ndarray
            Rows (T, R) of log-probabilities over the answer vectors.
        answers : numpy.ndarray
            The answer vectors (R, K).

        Returns
        -------
        value : float
            The supremum of the log-ratio.
        t, t_prime : int
            The rows of `log_w` that attain it (numerator, denominator).
        y : tuple of float
            The output at which it is attained.

        Raises
        ------
        InputError
            Unless `continuous`.
        """
        raise InputError(f"the {self.kind} mechanism has no continuous output law")

    def sample(self, answers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One output (d,) per row of the answer vectors `answers` (S, K): (S, d). What the black-box audit
        and the tests run.

        Parameters
        ----------
        answers : numpy.ndarray
            The answer vectors (S, K).
        rng : numpy.random.Generator
            The random generator.

        Returns
        -------
        numpy.ndarray
            The outputs (S, d).

        Raises
        ------
        InputError
            When the mechanism cannot be sampled (here).
        """
        raise InputError(f"the {self.kind} mechanism cannot be sampled")

    def notes(self) -> list[str]:
        """What a result computed with this mechanism should say about it: a joint law computed by quadrature
        states its error (DESIGN §5.2).

        Returns
        -------
        list of str
            The notes; none unless `joint` with a positive `law_error`.
        """
        if self.joint and self.law_error > 0:
            return [f"the {self.kind} law is computed by quadrature to {self.law_error:.1g} in log-probability: "
                    f"the leakage is within {2 * self.law_error:.1g} of the exact value"]
        return []

    @property
    def releases(self) -> tuple[Mechanism, ...]:
        """The mechanisms of the releases composed into this one: itself unless `composed`."""
        return (self,)

    def laplace_scales(self, rows: int) -> np.ndarray | None:
        """The Laplace scale b_c of each of `rows` output coordinates, or None unless every one
        is continuous Laplace noise (the Gaussian engine's closed form, DESIGN §2.2).

        Parameters
        ----------
        rows : int
            The number of output coordinates.

        Returns
        -------
        numpy.ndarray or None
            The scales (rows,), or None (here).
        """
        return None

    def with_scale(self, scale: float) -> Mechanism:
        """This mechanism with its noise scale set (what calibration solves for).

        Parameters
        ----------
        scale : float
            The new noise scale.

        Returns
        -------
        Mechanism
            A copy with that scale.

        Raises
        ------
        InputError
            When the noise has no scale to set (here).
        """
        raise InputError(f"{self.kind} noise has no scale to set")

    @property
    def deltas(self) -> tuple[float, ...]:
        """With `profile`: the δ grid every profile is read on (`profiles.delta_grid`, `delta` included)."""
        return ()

    def pair_profiles(self, logp: np.ndarray, logq: np.ndarray, levels: np.ndarray,
                      deltas: Sequence[float] | None = None) -> PairProfiles:
        """With `profile`: ε(δ) on `deltas` (default `self.deltas`) and δ(0) for each pair of mixtures
        Σ_s p_s p(y | levels_s) vs Σ_s q_s p(y | levels_s), rows of normalised log-weights (B, m):
        what an engine that has the mixture weights asks (DESIGN §3.5).

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

        Raises
        ------
        InputError
            Unless `profile`.
        """
        raise InputError(self._no_profile())

    def pair_rho(self, logp: np.ndarray, logq: np.ndarray, levels: np.ndarray) -> tuple[float, str]:
        """With `profile`: the zCDP ρ = sup_α D_α / α of one pair (both orders), with how it was found.

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

        Raises
        ------
        InputError
            Unless `profile`.
        """
        raise InputError(self._no_profile())

    def classic_profile(self, l2: float) -> Profile:
        """With `profile`: the model-free profile when one tuple moves the query by `l2` in L2 norm.

        Parameters
        ----------
        l2 : float
            The L2 sensitivity.

        Returns
        -------
        Profile
            The classic privacy profile.

        Raises
        ------
        InputError
            Unless `profile`.
        """
        raise InputError(self._no_profile())

    def _no_profile(self) -> str:
        return f"{self.kind} noise has no privacy profile: its leakage is a supremum over outputs (pure epsilon)"

    def information(self, levels: np.ndarray, log_w: np.ndarray,
                    kernels: Sequence[Mechanism]) -> tuple[float, float, float]:
        """(I(X_i; Y), sup_y D, error) of one mixture group (004 Eqs. 26, 28): `log_w` (T, S) over the
        distinct `levels` (S, d) of the d output coordinates that vary, `kernels` their noise
        (this one first); NotAvailable when not integrated (`mechanisms.information`).

        Parameters
        ----------
        levels : numpy.ndarray
            The distinct levels (S, d) of the varying output coordinates.
        log_w : numpy.ndarray
            log P(X_i = t, q = q_s) (T, S).
        kernels : sequence of Mechanism
            The noise of the d coordinates, this one first.

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
            When the measures are not integrated for this mechanism (here always).
        """
        if self.joint:
            raise NotAvailable(f"Wu et al.'s integrals are for noise added to each answer, not the {self.kind} "
                               "mechanism's joint law")
        if len(kernels) > 1:
            raise NotAvailable(f"{len(kernels)} output coordinates vary with the target under continuous noise: the "
                               "integral over y is multi-dimensional (only scalar Laplace/geometric outputs are "
                               "integrated)")
        raise NotAvailable(f"no integral for the {self.kind} mechanism")

    @abstractmethod
    def describe(self) -> dict: ...


class BuiltInKinds:
    """A capability only the package's own noise has (DESIGN §5.1): true on a class whose `kind` is
    one of `kinds`, and on an instance whose `kind` is. A user's subclass that names its own kind
    inherits the methods but may bring its own kernel, so no closed form, engine or calibration
    meant for the built-in noise takes it for that noise."""

    def __init__(self, *kinds: str):
        self.kinds = frozenset(kinds)

    def __get__(self, mechanism: Mechanism | None, cls: type[Mechanism]) -> bool:
        return (cls if mechanism is None else mechanism).kind in self.kinds


def source_entry(mechanism: Mechanism) -> dict:
    """`{"from": ...}` naming the library object a mechanism was read from (`mechanisms.interop`), or {}."""
    source = getattr(mechanism, "source", None)
    return {"from": source} if source else {}


def _positive(value: float, what: str) -> None:
    check_positive_finite(value, what)
    if value < sys.float_info.min or not math.isfinite(1 / value):
        raise InputError(f"{what} must be at least {sys.float_info.min:.4g} (a normal double, whose reciprocal is "
                         f"finite), got {value}")
