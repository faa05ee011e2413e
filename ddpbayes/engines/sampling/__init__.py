"""Sampling engine: MCMC estimates of leak(i, K) for any PyMC model (DESIGN §2.3).

Likelihood route: for every target value t (every value of a discrete domain; a grid with both
endpoints of a continuous one) and every x_K considered, draw the other tuples and latents
given X_i = t, X_K = x_K by MCMC and average the exact Laplace density over the draws; the sup
over y is taken exactly for those estimates (`mixture`), and `estimate` turns the draws into a
witness with a one-sided 95% lower bound and an approximate upper bound. Posterior route
(`posterior`): the adversary's own inference, posterior odds over prior odds (004 Thm. 1).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pymc as pm
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.op import RandomVariable

from ddpbayes.engines.base import AdversaryLeakage, Engine, Witness
from ddpbayes.engines.curves import Curve, check_drawable, mixture_curve
from ddpbayes.engines.sampling.estimate import Draws, estimate
from ddpbayes.engines.sampling.posterior import posterior_leakage
from ddpbayes.engines.sampling.runs import sample_event, summarise
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Laplace
from ddpbayes.model import DependenceModel, Finite
from ddpbayes.model.condition import ImpossibleEvent
from ddpbayes.problem import Adversary, Problem
from ddpbayes.queries import Linear
from ddpbayes.settings import RunSettings

GRID_POINTS = 5  # target values on a continuous domain, endpoints included
MAX_KNOWN_COMBINATIONS = 16  # discrete x_K enumerated up to this; beyond, prior draws
KNOWN_DRAWS = 4
_INWARD = (0.0, 1e-6, 1e-4, 1e-2)  # an endpoint of zero density is approached from inside


class SamplingEngine(Engine):
    name = "sampling"
    estimates = True

    def supports(self, problem: Problem) -> str | None:
        if not isinstance(problem.query, Linear):
            return "the sampling engine handles linear queries (sum, count, mean, linear:)"
        if not isinstance(problem.mechanism, Laplace):
            return "the sampling engine handles Laplace and geometric noise"
        return None

    def leakage(self, problem: Problem) -> list[AdversaryLeakage]:
        settings = problem.settings
        plans = [(adv, _known_values(problem.model, adv, settings)) for adv in problem.adversaries]
        runs = sum(len(kv) * _grid_size(problem.model, adv.target) for adv, kv in plans)
        if runs > settings.max_runs:
            raise InputError(f"this needs about {runs} MCMC runs (over {settings.max_runs}); restrict --target or "
                             "--known, or raise --max-runs")
        if settings.method == "posterior":
            return [posterior_leakage(problem, adv, known_sets, settings) for adv, known_sets in plans]
        return [_adversary(problem, adv, known_sets, settings) for adv, known_sets in plans]

    def dependence_sets(self, problem: Problem) -> list[frozenset[int]]:
        return structural_dependence(problem.model)

    def witness_curve(self, problem: Problem, notion: str, witness: Witness | None) -> Curve:
        """The same Rao–Blackwellised mixture the engine estimated, from its cached draws."""
        check_drawable(problem, witness)

        def mixture(problem: Problem, witness: Witness, t: float) -> tuple[np.ndarray, np.ndarray]:
            q = _query_draws(problem, witness, t).ravel()
            return np.full(q.size, -math.log(q.size)), q

        return mixture_curve(problem, notion, witness, mixture,
                             "sampling: Monte Carlo estimate from the engine's MCMC draws", every_break=False)

    def witness_draws(self, problem: Problem, witness: Witness) -> list[tuple[float, np.ndarray]] | None:
        return [(t, _query_draws(problem, witness, t)) for t in (witness.t, witness.t_prime)]


def _query_draws(problem: Problem, witness: Witness, t: float) -> np.ndarray:
    """The query's draws (chains, draws) given X_i = t and the witness's x_K (a cached run)."""
    event = {**(witness.known_values or {}), witness.adversary.target: t}
    run = sample_event(problem.model, event, problem.settings)
    return run.x @ problem.query.weights(problem.model.n)


def structural_dependence(model: DependenceModel) -> list[frozenset[int]]:
    """N(i) from the PyMC graph: X_j depends on X_i when they share a random ancestor (or one is
    the other's). Tuples with no common random ancestor are independent whatever the parameters;
    sharing one makes them dependent for all but special parameter values."""
    roots = []
    for s in model.slots:
        rvs = {a for a in ancestors([s.rv]) if a.owner is not None and isinstance(a.owner.op, RandomVariable)}
        roots.append({id(r) for r in rvs})
    return [frozenset(j for j in range(model.n) if j != i and roots[i] & roots[j]) for i in range(model.n)]


def _grid_size(model: DependenceModel, i: int) -> int:
    dom = model.domains[i]
    return len(dom.values) if isinstance(dom, Finite) else GRID_POINTS


def _target_values(model: DependenceModel, i: int) -> list[tuple[float, ...]]:
    """For each target grid point, the values to try in order (inward nudges for endpoints)."""
    dom = model.domains[i]
    if isinstance(dom, Finite):
        return [(v,) for v in dom.values]
    if not dom.bounded:
        raise InputError(
            f"the sampling engine compares target values on a bounded domain; tuple {model.names[i]} has {dom} "
            "(give it domains=Interval(lo, hi))"
        )
    grid = np.linspace(dom.lo, dom.hi, GRID_POINTS)
    out = [tuple(dom.lo + d * dom.width for d in _INWARD)]
    out += [(float(v),) for v in grid[1:-1]]
    out.append(tuple(dom.hi - d * dom.width for d in _INWARD))
    return out


def _known_values(model: DependenceModel, adv: Adversary, settings: RunSettings) -> list[dict[int, float]]:
    known = sorted(adv.known)
    if not known:
        return [{}]
    doms = [model.domains[k] for k in known]
    if all(isinstance(d, Finite) for d in doms) and math.prod(len(d.values) for d in doms) <= MAX_KNOWN_COMBINATIONS:
        return [dict(zip(known, combo)) for combo in itertools.product(*[d.values for d in doms])]
    draws = pm.draw([_slot_expr(model, k) for k in known], draws=KNOWN_DRAWS, random_seed=settings.seed)
    return [{k: float(np.asarray(d)[j]) for k, d in zip(known, draws)} for j in range(KNOWN_DRAWS)]


def _slot_expr(model: DependenceModel, k: int):
    s = model.slots[k]
    return s.rv if s.index is None else s.rv[s.index]


def _adversary(problem: Problem, adv: Adversary, known_sets, settings: RunSettings) -> AdversaryLeakage:
    model, w = problem.model, problem.query.weights(problem.model.n)
    groups, runs = [], []
    for known in known_sets:
        group = []
        for tries in _target_values(model, adv.target):
            for t in tries:
                try:
                    run = sample_event(model, {**known, adv.target: t}, settings)
                except ImpossibleEvent:
                    continue
                group.append(Draws(known, t, run.x @ w))
                runs.append((run, run.x @ w))
                break
        if len(group) >= 2:
            groups.append(group)
    peak, value, ci, held = estimate(groups, problem.mechanism.scale)
    diagnostics = {**summarise([run.diagnose(q) for run, q in runs]), **held}
    witness = Witness(adv, peak.known or ({} if not adv.known else None), _nan_none(peak.t), _nan_none(peak.t_prime),
                      None if math.isnan(peak.y) else (peak.y,))
    diagnostics["pass_blocked"] = _pass_blocked(model, adv, known_sets)
    return AdversaryLeakage(adv, value, witness, ci=ci, diagnostics=diagnostics, score=peak.value)


def _pass_blocked(model: DependenceModel, adv: Adversary, known_sets) -> str | None:
    """Why the upper bound cannot certify a pass: a continuum was sampled at finitely many points."""
    if not isinstance(model.domains[adv.target], Finite):
        return (f"target {model.names[adv.target]} is continuous and was compared on a grid of {GRID_POINTS} "
                "values: the leakage between grid points is not bounded, so a pass cannot be earned")
    if len(known_sets) > 1 and not all(isinstance(model.domains[k], Finite) for k in adv.known):
        return "the known values x_K were sampled, not exhausted: a pass cannot be earned"
    return None


def _nan_none(v: float) -> float | None:
    return None if math.isnan(v) else v
