"""The engine interface: `leakage(problem)` for every adversary of the problem.

Notions, calibration, reports and the CLI only see `AdversaryLeakage` values, never which
engine produced them (DESIGN §2).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
import numpy as np

from ddpbayes.encoding import number
from ddpbayes.errors import InputError
from ddpbayes.problem import Adversary, Problem, dependence_size
from ddpbayes.profiles import Profile


class Outputs(Sequence):
    """A witness's output y produced when first read, then kept (DESIGN §2.1c): a continual release's
    witnesses hold n outputs per target, which only the report's and the JSON's witnesses read. Equal to
    (and hashed as) the tuple it produces; pickled as that tuple.

    Parameters
    ----------
    make : callable
        make(*args) -> the outputs, a tuple of float.
    *args
        Its arguments.
    """

    __slots__ = ("_make", "_args", "_y")

    def __init__(self, make: Callable[..., tuple[float, ...]], *args):
        self._make: Callable[..., tuple[float, ...]] | None = make
        self._args = args
        self._y: tuple[float, ...] | None = None

    def values(self) -> tuple[float, ...]:
        """The outputs (produced at the first call).

        Returns
        -------
        tuple of float
            y.
        """
        if self._y is None:
            self._y, self._make, self._args = tuple(self._make(*self._args)), None, ()
        return self._y

    def __len__(self) -> int:
        return len(self.values())

    def __getitem__(self, k):
        return self.values()[k]

    def __iter__(self):
        return iter(self.values())

    def __eq__(self, other) -> bool:
        if isinstance(other, Outputs):
            other = other.values()
        return isinstance(other, tuple) and self.values() == other

    def __hash__(self) -> int:
        return hash(self.values())

    def __repr__(self) -> str:
        return repr(self.values()) if self._y is not None else "Outputs(not yet produced)"

    def __reduce__(self):
        return tuple, (self.values(),)


@dataclass(frozen=True)
class Witness:
    """What attains the supremum: the adversary, the known values x_K, the two target values
    t and t' compared, and the output y (a coordinate may be ±inf: the sup is a limit).

    Parameters
    ----------
    adversary : Adversary
        The adversary A(i, K) the witness belongs to.
    known_values : dict[int, float] or None
        x_K, tuple -> value, or None when unknown.
    t, t_prime : float or None
        The two values of the target tuple compared, or None when unknown.
    y : tuple of float, Outputs or None
        The output attaining the supremum (`Outputs`: produced when first read), or None when unknown.
    """

    adversary: Adversary
    known_values: dict[int, float] | None
    t: float | None
    t_prime: float | None
    y: tuple[float, ...] | Outputs | None

    def to_dict(self) -> dict:
        """The witness as the JSON report writes it.

        Returns
        -------
        dict
            ``target``, ``known`` (sorted), ``known_values``, ``t``, ``t_prime`` and ``y`` (a number for a
            scalar output, a list for a vector).
        """
        return {
            "target": self.adversary.target,
            "known": sorted(self.adversary.known),
            "known_values": None
            if self.known_values is None
            else {str(k): number(v) for k, v in sorted(self.known_values.items())},
            "t": number(self.t),
            "t_prime": number(self.t_prime),
            "y": None if self.y is None else (number(self.y[0]) if len(self.y) == 1 else [number(v) for v in self.y]),
        }


@dataclass(frozen=True)
class AdversaryLeakage:
    """leak(i, K) for one adversary (DESIGN §1), with the witness and, for estimates, a CI.

    Parameters
    ----------
    adversary : Adversary
        The adversary A(i, K).
    value : float
        leak(i, K) (for (ε, δ) mechanisms ε at the mechanism's δ).
    witness : Witness
        What attains the supremum.
    ci : tuple of float or None, default None
        Estimates: (one-sided 95% lower bound, approximate upper bound).
    reason : str or None, default None
        Why the leakage is what it is, when that needs saying (e.g. inf).
    diagnostics : dict or None, default None
        Estimates: the MCMC diagnostics; ``"ok"`` False makes verdicts inconclusive.
    score : float or None, default None
        Estimates: the value on the choosing runs, used to pick the worst adversary.
    profile : Profile or None, default None
        (ε, δ) mechanisms: ε(δ) on the δ grid.
    """

    adversary: Adversary
    value: float
    witness: Witness
    ci: tuple[float, float] | None = None  # estimates: (one-sided 95% lower bound, approximate upper bound)
    reason: str | None = None  # why the leakage is what it is when that needs saying (e.g. inf)
    diagnostics: dict | None = None  # estimates: MCMC diagnostics; "ok" False makes verdicts inconclusive
    score: float | None = None  # estimates: the value on the choosing runs, to pick the worst adversary
    profile: Profile | None = None  # (ε, δ) mechanisms: ε(δ) on the δ grid; `value` is ε at mechanism.delta

    @classmethod
    def exact(cls, adversary: Adversary, value: float, witness: Witness) -> AdversaryLeakage:
        """`AdversaryLeakage(adversary, value, witness)`, the other fields their defaults, without the frozen
        dataclass's eight `object.__setattr__` calls (equal to it in every way; a continual release makes one per
        day of the chain, DESIGN §2.1c).

        Parameters
        ----------
        adversary : Adversary
            The adversary A(i, K).
        value : float
            leak(i, K), exact.
        witness : Witness
            What attains the supremum.

        Returns
        -------
        AdversaryLeakage
            The record.
        """
        out = object.__new__(cls)
        out.__dict__.update(adversary=adversary, value=value, witness=witness)
        return out


def merge_diagnostics(records: list[dict]) -> dict | None:
    """One MCMC diagnostics record for several estimates (each a record as `leakage` reports it):
    all ok, worst R-hat and bulk ESS, total divergences and runs; None when nothing was estimated.

    Parameters
    ----------
    records : list of dict
        The estimates' diagnostics records.

    Returns
    -------
    dict or None
        The merged record, or None when `records` is empty.
    """
    if not records:
        return None
    out: dict = {"ok": all(d.get("ok", True) for d in records)}
    for key, pick in (("rhat_max", max), ("ess_bulk_min", min), ("runs", sum), ("chains", min)):
        values = [d[key] for d in records if key in d]
        if values:
            out[key] = pick(values)
    out["divergences"] = sum(d.get("divergences", 0) for d in records)
    for key in ("summed", "runs_chose", "runs_bounded"):  # how the estimate was made, when every record agrees
        values = {d.get(key) for d in records}
        if len(values) == 1 and None not in values:
            out[key] = values.pop()
    if all(d.get("exact") for d in records):
        out["exact"] = True
    return out


class Declined(InputError):
    """The engine found while computing that it cannot solve the problem (a quadrature that does not settle);
    the message says why. `auto` then moves on to the next engine (`engines.select_engine`), a named engine
    reports it as one line."""


class NoMixtures(Exception):
    """The engine cannot hand over the mixture weights for this problem; the message says why."""


@dataclass(frozen=True)
class MixtureGroup:
    """The law of (X_i, q) within one group of known values x_K (groups whose measures must
    agree merged, their probabilities summed): the measures of `information` read these."""

    log_prob: float  # log P(x_K) of the group (and of those merged with it)
    levels: np.ndarray  # (S, d) distinct query values on the active output coordinates
    log_w: np.ndarray  # (T, S) log P(X_i = t, q = levels[s] | x_K), -inf where impossible


@dataclass(frozen=True)
class Mixtures:
    """Every group of an adversary A(i, K), and the output coordinates their levels cover."""

    coordinates: list[int]
    groups: list[MixtureGroup]


class NoCurve(Exception):
    """The witness curve cannot be drawn for this witness; the message says why."""


@dataclass(frozen=True)
class Curve:
    """The witness's log-ratio r(y) against the output y, with its limits as y -> ±inf, as
    `Engine.witness_curve` returns it (`engines.curves` draws it).

    Parameters
    ----------
    notion : str
        The notion whose witness this is.
    witness : Witness
        The witness.
    known_values : dict[int, float]
        The x_K the curve conditions on.
    y : numpy.ndarray
        The outputs at which r is evaluated.
    log_ratio : numpy.ndarray
        r(y) = log L(y | t, x_K) - log L(y | t', x_K) at each y.
    limits : tuple of float
        r(y) as y -> -inf and as y -> +inf.
    method : str
        How r was computed.
    integer : bool
        True when only integer outputs exist (geometric noise).
    """

    notion: str
    witness: Witness
    known_values: dict[int, float]  # the x_K the curve conditions on
    y: np.ndarray
    log_ratio: np.ndarray
    limits: tuple[float, float]  # r(y) as y -> -inf and y -> +inf
    method: str
    integer: bool  # geometric noise: only integer outputs exist

    def to_dict(self) -> dict:
        """The curve as the JSON output writes it.

        Returns
        -------
        dict
            The notion, the witness's target, known set, x_K, t and t', the method, the two limits, and
            the lists ``y`` and ``log_ratio``.
        """
        return {
            "notion": self.notion,
            "target": self.witness.adversary.target,
            "known": sorted(self.witness.adversary.known),
            "known_values": {str(k): v for k, v in sorted(self.known_values.items())},
            "t": self.witness.t,
            "t_prime": self.witness.t_prime,
            "method": self.method,
            "limit_minus_inf": self.limits[0],
            "limit_plus_inf": self.limits[1],
            "y": [float(v) for v in self.y],
            "log_ratio": [float(v) for v in self.log_ratio],
        }


@dataclass(frozen=True)
class DependenceProfile:
    """What seed 004's IDP bounds need from the model (Prop. 3, Thm. 4): k, the size of the
    largest dependence set plus one (n when some tuple is pairwise but not jointly independent of
    the rest), and eta >= max_i max_{t, t'} TV(P(X_(i) | t), P(X_(i) | t')) where it is known.

    Parameters
    ----------
    k : int
        The size of the largest dependence set plus one (n in the case above).
    eta : float or None
        The bound on the total variation above, or None when unknown.
    notes : tuple of str, default ()
        What the user should know about k and eta (e.g. why eta is unknown).
    """

    k: int
    eta: float | None
    notes: tuple[str, ...] = ()


class Engine(ABC):
    """One way to compute leak(i, K) (DESIGN §2): the only door to engine mathematics.

    Every engine answers `supports`, `leakage` and `dependence_sets`. The optional capabilities
    below have defaults that say "not available" (as scipy.stats' `rv_continuous` derives what a
    distribution does not define), so notions, calibration, reports and the CLI call them on any
    engine and never ask which engine ran."""

    name: str
    estimates: bool = False  # True when results are estimates (each adversary costs MCMC runs)
    searches_lattice: bool = False  # True when `pdp_worst` finds pdp without listing the lattice

    @abstractmethod
    def supports(self, problem: Problem) -> str | None:
        """None if this engine can solve `problem`, else the reason it cannot.

        Parameters
        ----------
        problem : Problem
            The audit problem: model, query, mechanism and adversaries.

        Returns
        -------
        str or None
            The reason the engine cannot solve `problem`, or None when it can.
        """

    @abstractmethod
    def leakage(self, problem: Problem) -> list[AdversaryLeakage]:
        """leak(i, K) for every adversary of `problem`, in the same order.

        Parameters
        ----------
        problem : Problem
            The audit problem: model, query, mechanism and adversaries.

        Returns
        -------
        list of AdversaryLeakage
            One per adversary of `problem.adversaries`.
        """

    @abstractmethod
    def dependence_sets(self, problem: Problem) -> Sequence[frozenset[int]]:
        """N(i) for every tuple: the tuples whose conditional law changes with X_i (DESIGN §3.1); an engine may
        return them as `DependenceSets`, each computed when first read.

        Parameters
        ----------
        problem : Problem
            The audit problem: model, query, mechanism and adversaries.

        Returns
        -------
        sequence of frozenset of int
            N(i) for each tuple i, in tuple order.
        """

    def pdp_worst(self, problem: Problem, targets: Sequence[int]) -> list[AdversaryLeakage] | None:
        """Each target's worst pdp adversary over every known set, found without listing the
        lattice (ties go to the smallest known set); None when this engine has no such search and
        the adversaries are evaluated one by one (`seconds_per_adversary` then says the cost).

        Parameters
        ----------
        problem : Problem
            The audit problem: model, query, mechanism and adversaries.
        targets : sequence of int
            The target tuples.

        Returns
        -------
        list of AdversaryLeakage or None
            The worst adversary of each target; None here.
        """
        return None

    def seconds_per_adversary(self, problem: Problem) -> float | None:
        """A rough cost of one adversary on this machine, known without evaluating any (None:
        unknown); audit states it when it refuses a lattice too large to evaluate.

        Parameters
        ----------
        problem : Problem
            The audit problem: model, query, mechanism and adversaries.

        Returns
        -------
        float or None
            Seconds per adversary, or None when unknown (here None).
        """
        return None

    def seconds(self, problem: Problem, adversaries: int, known_sets: int) -> float | None:
        """A rough cost of `adversaries` adversaries with at most `known_sets` distinct known sets (None: unknown):
        each at `seconds_per_adversary` here; an engine that shares work within a known set says less.

        Parameters
        ----------
        problem : Problem
            The audit problem: model, query, mechanism and adversaries.
        adversaries : int
            The number of adversaries.
        known_sets : int
            At most this many distinct known sets among them.

        Returns
        -------
        float or None
            Seconds, or None when unknown.
        """
        each = self.seconds_per_adversary(problem)
        return None if each is None else adversaries * each

    def plausible_leakages(self, problem: Problem, fixed: object, draws: object,
                           targets: list[int]) -> np.ndarray | None:
        """Each posterior draw's weakest-adversary (idp) leakage per target, every draw at once, for a
        `problem` built on one draw of a clustered fit (DESIGN §9.6): (S, targets), NaN where a draw needs
        its own audit; None when this engine has no such path.

        Parameters
        ----------
        problem : Problem
            The audit problem of one draw, which this engine solved.
        fixed : FixedClustered
            The fit's rows: covariates and clusters (`fitting.fitted`).
        draws : PosteriorDraws
            The draws' parameters (`fitting.posterior`).
        targets : list of int
            The targets.

        Returns
        -------
        numpy.ndarray or None
            The leakages, or None (here None).
        """
        return None

    def integrated_leakages(self, problem: Problem, fixed: object, draws: object,
                            targets: list[int]) -> tuple[list[AdversaryLeakage], str] | None:
        """The weakest adversary's (idp) leakage per target under the mixture of the posterior draws' laws
        (the Bayesian adversary of DESIGN §9.6), for a `problem` built on one draw (or the means) of a
        clustered fit, without a latent draw index in the model; None when this engine has no such path.

        Parameters
        ----------
        problem : Problem
            The audit problem of one fixed-parameter model of the fit, which this engine solved.
        fixed : FixedClustered
            The fit's rows: covariates and clusters (`fitting.fitted`).
        draws : PosteriorDraws
            The draws' parameters (`fitting.posterior`).
        targets : list of int
            The targets.

        Returns
        -------
        tuple of (list of AdversaryLeakage, str) or None
            Each target's leakage with its witness and a note on how it was computed, or None (here None).
        """
        return None

    def notes(self, problem: Problem) -> list[str]:
        """What the user should know about the answer (e.g. the domains truncate the prior).

        Parameters
        ----------
        problem : Problem
            The audit problem: model, query, mechanism and adversaries.

        Returns
        -------
        list of str
            One line per note (here none).
        """
        return []

    def witness_curve(self, problem: Problem, notion: str, witness: Witness | None) -> Curve:
        """log L(y | t, x_K) - log L(y | t', x_K) against y for `witness` (`engines.curves`).

        Parameters
        ----------
        problem : Problem
            The audit problem: model, query, mechanism and adversaries.
        notion : str
            The notion whose witness is drawn.
        witness : Witness or None
            The witness; None when the audit has none.

        Returns
        -------
        Curve
            The log-ratio against y.

        Raises
        ------
        NoCurve
            When the curve cannot be drawn for this witness (here always).
        """
        raise NoCurve(f"the {self.name} engine draws no witness curve")

    def witness_draws(self, problem: Problem, witness: Witness) -> list[tuple[float, np.ndarray]] | None:
        """MCMC draws of the query (chains, draws) given X_i = t and given X_i = t', for trace
        plots; None for an engine that does not sample.

        Parameters
        ----------
        problem : Problem
            The audit problem: model, query, mechanism and adversaries.
        witness : Witness
            The witness whose t and t' condition the draws.

        Returns
        -------
        list of tuple of (float, numpy.ndarray) or None
            For t and then t', the conditioning value and the draws of shape (chains, draws); None here.
        """
        return None

    def mixtures(self, problem: Problem, adversary: Adversary, shift_invariant: bool) -> Mixtures:
        """The mixture weights of `adversary` (`Mixtures`), groups deduplicated (up to a shift of
        all query levels when `shift_invariant`: the noise is a translation kernel); NoMixtures
        when this engine has none (DESIGN §3.4).

        Parameters
        ----------
        problem : Problem
            The audit problem: model, query, mechanism and adversaries.
        adversary : Adversary
            The adversary A(i, K).
        shift_invariant : bool
            Merge groups whose query levels differ by a shift (the noise is a translation kernel).

        Returns
        -------
        Mixtures
            The groups of known values and the output coordinates they cover.

        Raises
        ------
        NoMixtures
            When this engine has no exact mixture weights (here always).
        """
        raise NoMixtures(f"the {self.name} engine has no exact mixture weights to integrate (the measures are not "
                         "estimated: use an exact engine)")

    def covariance(self, problem: Problem) -> np.ndarray | None:
        """Cov(X) of the tuples when the engine reads the model as jointly Gaussian (for closed
        forms), else None.

        Parameters
        ----------
        problem : Problem
            The audit problem: model, query, mechanism and adversaries.

        Returns
        -------
        numpy.ndarray or None
            The (n, n) covariance, or None (here None).
        """
        return None

    def dependence_profile(self, problem: Problem, dependence_sets: list[frozenset[int]]) -> DependenceProfile:
        """k and eta for seed 004's IDP bounds; eta only where the engine has the joint law.

        Parameters
        ----------
        problem : Problem
            The audit problem: model, query, mechanism and adversaries.
        dependence_sets : list of frozenset of int
            N(i) for every tuple (`dependence_sets`).

        Returns
        -------
        DependenceProfile
            k from the dependence sets (`dependence_size`); here eta None, with a note saying why.
        """
        k = dependence_size(dependence_sets)
        reason = f"eta needs the enumerated joint (finite discrete model); the {self.name} engine fits this one"
        return DependenceProfile(k, None, (reason,))
