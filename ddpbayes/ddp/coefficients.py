"""Seed 000's dependence coefficients rho_ij (000 §VI-B, Eq. 14–16; DESIGN §3.1).

    exp(rho_ij dD_j / sigma) = sup over d_i1, d_i2 in supp(D_i), y of
                               E[Lap_sigma(y - D_j) | D_i = d_i1] / E[Lap_sigma(y - D_j) | D_i = d_i2]

with dD_j the width of D_j's domain. The right-hand side is exactly leak(i, K = {}) (DESIGN §1)
of the query q = D_j (weights e_j) released with Laplace(sigma), target i, so

    rho_ij = leak_i(e_j, sigma) * sigma / dD_j,

computed by whichever engine fits the model (one Problem per j, adversaries A(i, {})): no
engine-specific mathematics here. rho_ii = 1 by definition, and rho_ij = 0 when D_j is outside
D_i's dependence set N(i) (D_j's law does not change with D_i, so the two expectations agree).
0 <= rho_ij <= 1 when D_j stays within its declared domain (000 Eq. 15: a mixture of Laplace
densities centred in an interval of width dD_j has log-ratios at most dD_j / sigma), and an
estimate's upper confidence bound is capped at 1 for such j. A D_j whose support is wider than
its declared domain (a Gaussian tuple: the gaussian and sampling engines do not truncate the
model to the declared domains) can give rho_ij > 1, which 000/001 exclude: `above_one` lists
those pairs and `assumption_note` says so. rho depends on sigma (000 treats it as fixed;
`ddpbayes.ddp.dpm` solves the resulting fixed point).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ddpbayes.encoding import JsonDocument, jsonable
from ddpbayes.engines import Engine, merge_diagnostics, select_engine
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Laplace
from ddpbayes.model import DependenceModel
from ddpbayes.model.reference import provenance
from ddpbayes.model.supports import wider_than_declared
from ddpbayes.problem import Adversary, Problem, dependence_size
from ddpbayes.queries import Linear
from ddpbayes.settings import RunSettings

ABOVE_ONE = 1e-9  # rho_ij above 1 by more than this (relative rounding) is outside 000/001's range


@dataclass(frozen=True)
class Coefficients(JsonDocument):
    """rho (n, n) at one Laplace scale, with (lower, upper) bounds (n, n, 2) for estimates.

    Parameters
    ----------
    rho : numpy.ndarray
        (n, n) coefficients rho_ij, rho_ii = 1 (000 Eq. 14-16).
    ci : numpy.ndarray or None
        (n, n, 2) lower and upper bounds of estimated coefficients; None when every one is exact.
    dependence_sets : list of frozenset of int
        N(i) for each tuple i.
    scale : float
        The Laplace scale sigma rho was computed at.
    engine : str
        The engine that computed the leakages.
    tuples : list of str
        The tuples' names.
    diagnostics : dict or None, default None
        The sampling engine's merged diagnostics, if it ran.
    model : dict or None, default None
        The model's file, parameters and digest (`model.reference.provenance`); None when built in Python.
    """

    rho: np.ndarray
    ci: np.ndarray | None
    dependence_sets: list[frozenset[int]]
    scale: float
    engine: str
    tuples: list[str]
    diagnostics: dict | None = None
    model: dict | None = None  # the model's file, parameters and digest (`provenance`)

    @property
    def dependence_size(self) -> int:
        """L = ``max |N(i)| + 1`` (000 §V)."""
        return dependence_size(self.dependence_sets)

    @property
    def above_one(self) -> list[tuple[int, int]]:
        """The pairs (i, j) with rho_ij > 1 (beyond rounding), outside 000/001's range [0, 1]."""
        return [(int(i), int(j)) for i, j in np.argwhere(self.rho > 1 + ABOVE_ONE)]

    def assumption_note(self) -> str | None:
        """What rho_ij > 1 means, naming the largest such coefficient; None when every rho_ij <= 1.

        Returns
        -------
        str or None
            One sentence, or None.
        """
        if not self.above_one:
            return None
        i, j = max(self.above_one, key=lambda p: self.rho[p])
        more = f" and {len(self.above_one) - 1} more" if len(self.above_one) > 1 else ""
        return (f"rho_ij > 1 (rho[{self.tuples[i]}, {self.tuples[j]}] = {self.rho[i, j]:.6g}{more}): "
                "Liu et al. 2016 (DDP) assume 0 <= rho_ij <= 1, which holds when every tuple stays within its "
                "declared domain; here the model moves a tuple by more than its domain's width, so DPM's derivation "
                "does not apply and only an audit of its scale says what it guarantees")

    def dependent_sensitivity(self, sensitivities: np.ndarray) -> float:
        """DS_Q = max_i sum_j rho_ij dQ_j (001 §VI, its Lemmas 1–2), dQ_j the query's sensitivity to tuple j.

        Parameters
        ----------
        sensitivities : numpy.ndarray
            (n,) dQ_j for every tuple j.

        Returns
        -------
        float
            The dependent sensitivity DS_Q.
        """
        return float((self.rho @ np.asarray(sensitivities, dtype=float)).max())

    def to_dict(self) -> dict:
        return jsonable({
            "scale": self.scale,
            "engine": self.engine,
            "tuples": self.tuples,
            "rho": self.rho.tolist(),
            "rho_ci": None if self.ci is None else self.ci.tolist(),
            "dependence_sets": [sorted(s) for s in self.dependence_sets],
            "L": self.dependence_size,
            "above_one": [list(p) for p in self.above_one],
            "notes": [] if self.assumption_note() is None else [self.assumption_note()],
            "diagnostics": self.diagnostics,
            "model": self.model,
        })


def unit_query(j: int, n: int) -> Linear:
    """q = D_j: `linear:` with a 1 at j."""
    return Linear("linear", coefficients=tuple(1.0 if k == j else 0.0 for k in range(n)))


def dependence_problem(model: DependenceModel, settings: RunSettings) -> Problem:
    """The problem the dependence structure is read from: D_0 released with Laplace(1)."""
    return Problem(model, unit_query(0, model.n), Laplace(1.0), settings=settings)


def dependence_engine(model: DependenceModel, settings: RunSettings) -> tuple[Engine, list[frozenset[int]]]:
    """The engine that fits `model` for a linear query with Laplace noise, and N(i) from it."""
    problem = dependence_problem(model, settings)
    engine = select_engine(problem, settings.engine)
    return engine, engine.dependence_sets(problem)


def dependence_coefficients(model: DependenceModel, scale: float, settings: RunSettings | None = None) -> Coefficients:
    """rho_ij at Laplace scale `scale` for every pair of tuples (module docstring).

    rho_ij = leak_i(e_j, sigma) sigma / dD_j: the leakage of q = D_j released with Laplace(`scale`)
    to the adversary A(i, {}), computed by the engine that fits `model`; rho_ij = 0 outside N(i).

    Parameters
    ----------
    model : DependenceModel
        The tuples and their dependence; every domain must be bounded.
    scale : float
        The Laplace scale sigma.
    settings : RunSettings or None, default None
        How to run (engine, seed, MCMC budget); None: the defaults.

    Returns
    -------
    Coefficients
        rho, its bounds when estimated, N(i) and the engine used.

    Raises
    ------
    InputError
        If a tuple's domain is unbounded, or the model cannot be evaluated.

    References
    ----------
    Liu, Chakraborty, Mittal, "Dependence Makes You Vulnerable: Differential Privacy Under Dependent
    Tuples", NDSS 2016, §VI-B, Eq. 14-16.
    """
    settings = settings or RunSettings()
    mech = Laplace(scale)
    unbounded = [name for name, d in zip(model.names, model.domains) if not math.isfinite(d.width)]
    if unbounded:
        raise InputError(
            f"dependence coefficients need bounded domains (dD_j is the domain's width); tuple {unbounded[0]} "
            "is unbounded: give the model domains=Interval(lo, hi)"
        )
    engine, dep = dependence_engine(model, settings)
    n = model.n
    unconfined = set(wider_than_declared([slot.rv for slot in model.slots], model.domains))
    rho = np.eye(n)
    ci = None
    runs: list[dict] = []
    for j in range(n):
        sources = [i for i in range(n) if i != j and j in dep[i]]
        width = model.domains[j].width
        if not sources or width == 0:
            continue
        advs = tuple(Adversary(i) for i in sources)
        problem = Problem(model, unit_query(j, n), mech, advs, settings)
        for r in engine.leakage(problem):
            i = r.adversary.target
            rho[i, j] = r.value * scale / width
            if r.ci is not None:
                ci = np.stack([np.eye(n), np.eye(n)], axis=-1) if ci is None else ci
                upper = r.ci[1] * scale / width
                ci[i, j] = [r.ci[0] * scale / width, upper if j in unconfined else min(1.0, upper)]
            if r.diagnostics:
                runs.append(r.diagnostics)
    return Coefficients(rho, ci, dep, float(scale), engine.name, model.names, merge_diagnostics(runs),
                        provenance(model))


def rho(model: DependenceModel, scale: float, *, settings: RunSettings | None = None, **run) -> Coefficients:
    """``ddpbayes rho`` from Python: `dependence_coefficients` at Laplace scale `scale`, with any
    `RunSettings` field by name (engine, seed, draws, ...) applied over `settings`.

    Parameters
    ----------
    model : DependenceModel
        The tuples and their dependence; every domain must be bounded.
    scale : float
        The Laplace scale sigma (``--scale``).
    settings : RunSettings or None, default None
        How to run; None: the defaults.
    **run
        RunSettings fields by name.

    Returns
    -------
    Coefficients
        rho_ij (Liu et al. 2016, Eq. 14-16), its bounds when estimated, N(i) and L.
    """
    return dependence_coefficients(model, scale, RunSettings.of(settings, **run))
