"""Sampling engine: MCMC estimates of leak(i, K) for any PyMC model (DESIGN §2.3).

Likelihood route: for every target value t (every value of a discrete domain; a grid with both
endpoints of a continuous one) and every x_K considered, draw the other tuples and latents
given X_i = t, X_K = x_K by MCMC and average the exact Laplace density over the draws of any
query's values (one output or several, each coordinate with its own scale); the sup over y is
taken exactly for those estimates (`mixture`; several varying outputs: `vector`), and
`estimate` turns the draws into a witness with a one-sided 95% lower bound and an approximate
upper bound. Gaussian noise (`profile`): the privacy profile of the same draw-mixtures, with
an interval on ε at the mechanism's δ. Posterior route (`posterior`): the adversary's own inference, posterior odds over
prior odds (004 Thm. 1).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import pymc as pm
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.op import RandomVariable

from ddpbayes.engines.base import AdversaryLeakage, Curve, Engine, Witness
from ddpbayes.engines.curves import check_drawable, mixture_curve
from ddpbayes.engines.sampling.estimate import Draws, estimate
from ddpbayes.engines.sampling.posterior import posterior_leakage
from ddpbayes.engines.sampling.profile import profile_estimate, scalar_groups
from ddpbayes.engines.sampling.runs import Run, sample_event, sample_events, summarise
from ddpbayes.errors import InputError
from ddpbayes.model import DependenceModel, Finite
from ddpbayes.model.condition import ImpossibleEvent
from ddpbayes.problem import Adversary, Problem
from ddpbayes.progress import Progress
from ddpbayes.settings import RunSettings

T, U = TypeVar("T"), TypeVar("U")
GRID_POINTS = 5  # target values on a continuous domain, endpoints included
MAX_KNOWN_COMBINATIONS = 16  # discrete x_K enumerated up to this; beyond, prior draws
KNOWN_DRAWS = 4
_INWARD = (0.0, 1e-6, 1e-4, 1e-2)  # an endpoint of zero density is approached from inside


class SamplingEngine(Engine):
    name = "sampling"
    estimates = True

    def supports(self, problem: Problem) -> str | None:
        """Any query with values (scalar or several outputs) under Laplace or geometric noise on
        every output coordinate (one mechanism, or a composition of such releases); Gaussian or
        discrete Gaussian noise on a query with one varying output (`profile`)."""
        mech = problem.mechanism
        if mech.gaussian:
            return None
        if not all(m.laplace for m in mech.releases):
            return "the sampling engine handles Laplace, geometric and Gaussian noise"
        return None

    def leakage(self, problem: Problem) -> list[AdversaryLeakage]:
        settings = problem.settings
        plans = _each(lambda adv: (adv, _known_values(problem.model, adv, settings)), problem.adversaries,
                      settings, "planning")
        runs = sum(len(kv) * _grid_size(problem.model, adv.target) for adv, kv in plans)
        if runs > settings.max_runs:
            raise InputError(f"this needs about {runs} MCMC runs (over {settings.max_runs}); restrict --target or "
                             "--known, or raise --max-runs")
        if settings.method == "posterior":
            return _each(lambda plan: posterior_leakage(problem, *plan, settings), plans, settings, "posterior route")
        _draw_all(problem.model, plans, settings)
        return _each(lambda plan: _adversary(problem, *plan, settings), plans, settings, "estimates")

    def dependence_sets(self, problem: Problem) -> list[frozenset[int]]:
        return structural_dependence(problem.model)

    def witness_curve(self, problem: Problem, notion: str, witness: Witness | None) -> Curve:
        """The same Rao–Blackwellised mixture the engine estimated, from its cached draws."""
        check_drawable(problem, witness)

        def mixture(problem: Problem, witness: Witness, t: float) -> tuple[np.ndarray, np.ndarray]:
            q = _query_draws(problem, witness, t)[..., 0].ravel()
            return np.full(q.size, -math.log(q.size)), q

        return mixture_curve(problem, notion, witness, mixture,
                             "sampling: Monte Carlo estimate from the engine's MCMC draws", every_break=False)

    def witness_draws(self, problem: Problem, witness: Witness) -> list[tuple[float, np.ndarray]] | None:
        """The query's draws for trace plots: a scalar query's only (none with several outputs)."""
        draws = [(t, _query_draws(problem, witness, t)) for t in (witness.t, witness.t_prime)]
        return [] if draws[0][1].shape[-1] != 1 else [(t, q[..., 0]) for t, q in draws]


def _each(fn: Callable[[T], U], items: Sequence[T], settings: RunSettings, phase: str) -> list[U]:
    """fn over the adversaries (or their plans) here, in order, with a progress line that shows
    only when the phase is slow (`Progress.slow_only`): the engine's work between its MCMC runs,
    which the runs' own line does not count (issue #24: planning 5,120 adversaries' x_K draws
    was ten silent minutes)."""
    out = []
    with Progress(f"sampling ({phase})", len(items), "adversaries", enabled=settings.progress, slow_only=True) as bar:
        for item in items:
            out.append(fn(item))
            bar.advance(1)
    return out


def _query_draws(problem: Problem, witness: Witness, t: float) -> np.ndarray:
    """The query's draws (chains, draws, C) given X_i = t and the witness's x_K (a cached run)."""
    event = {**(witness.known_values or {}), witness.adversary.target: t}
    return query_values(problem, sample_event(problem.model, event, problem.settings))


def query_values(problem: Problem, run: Run) -> np.ndarray:
    """q(x) for every draw of a run: (chains, draws, C)."""
    chains, draws, n = run.x.shape
    with np.errstate(all="ignore"):
        q = np.asarray(problem.query.values(run.x.reshape(-1, n)), dtype=float)
    if not np.all(np.isfinite(q)):
        raise InputError(f"the query {problem.query.spec} is not finite on some of the model's draws")
    return q.reshape(chains, draws, -1)


def output_scales(problem: Problem, outputs: int) -> np.ndarray:
    """Each output coordinate's Laplace scale b_c (`Mechanism.coordinate`: a composition's
    releases each have their own)."""
    try:
        return np.array([problem.mechanism.coordinate(c).scale for c in range(outputs)], dtype=float)
    except IndexError as e:
        raise InputError(f"the query has {outputs} outputs but the mechanism perturbs fewer ({e})") from None


def run_diagnostics(run: Run, q: np.ndarray) -> dict:
    """One run's diagnostics over every output coordinate: worst R-hat and ESS (`Run.diagnose`)."""
    per = [run.diagnose(np.ascontiguousarray(q[..., c])) for c in range(q.shape[-1])]
    rhats = [d["rhat"] for d in per]
    return {**per[0], "rhat": math.nan if any(math.isnan(r) for r in rhats) else max(rhats),
            "ess_bulk": min(d["ess_bulk"] for d in per), "ok": all(d["ok"] for d in per)}


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


def _draw_all(model: DependenceModel, plans: list, settings: RunSettings) -> None:
    """Every run the adversaries need, an MCMC run per unit of work (`sample_events`): the first
    value to try at each target grid point, then the next where it was impossible."""
    slots = [(known, tries, adv.target) for adv, known_sets in plans for known in known_sets
             for tries in _target_values(model, adv.target)]
    for depth in range(max((len(tries) for _, tries, _ in slots), default=0)):
        events = []
        for known, tries, target in slots:
            if depth < len(tries) and all(_impossible(model, {**known, target: t}, settings) for t in tries[:depth]):
                events.append({**known, target: tries[depth]})
        sample_events(model, events, settings)


def _impossible(model: DependenceModel, event: dict[int, float], settings: RunSettings) -> bool:
    try:
        sample_event(model, event, settings)  # cached by `sample_events`
    except ImpossibleEvent:
        return True
    return False


def _adversary(problem: Problem, adv: Adversary, known_sets, settings: RunSettings) -> AdversaryLeakage:
    model = problem.model
    groups, runs = [], []
    for known in known_sets:
        group = []
        for tries in _target_values(model, adv.target):
            for t in tries:
                try:
                    run = sample_event(model, {**known, adv.target: t}, settings)
                except ImpossibleEvent:
                    continue
                q = query_values(problem, run)
                group.append(Draws(known, t, q))
                runs.append((run, q))
                break
        if len(group) >= 2:
            groups.append(group)
    if problem.mechanism.profile:
        return _profile_adversary(problem, adv, known_sets, groups, runs)
    b = output_scales(problem, runs[0][1].shape[-1]) if runs else np.ones(1)
    peak, value, ci, held = estimate(groups, b)
    diagnostics = {**summarise([run_diagnostics(run, q) for run, q in runs]), **held}
    witness = Witness(adv, peak.known or ({} if not adv.known else None), _nan_none(peak.t), _nan_none(peak.t_prime),
                      peak.y)
    diagnostics["pass_blocked"] = _pass_blocked(model, adv, known_sets) or _grid_blocked(peak, len(b))
    return AdversaryLeakage(adv, value, witness, ci=ci, diagnostics=diagnostics, score=peak.value)


def _profile_adversary(problem: Problem, adv: Adversary, known_sets, groups: list[list[Draws]],
                       runs: list) -> AdversaryLeakage:
    """Gaussian noise: ε at the mechanism's δ of the plug-in profile, with its interval (`profile`);
    the witness is (x_K, t, t') with no output (the profile's witness is a set of outputs)."""
    chosen, value, ci, held, profile = profile_estimate(scalar_groups(groups), problem.mechanism)
    diagnostics = {**summarise([run_diagnostics(run, q) for run, q in runs]), **held}
    diagnostics["pass_blocked"] = _pass_blocked(problem.model, adv, known_sets)
    if chosen.first is None:
        witness = Witness(adv, {} if not adv.known else None, None, None, None)
    else:
        witness = Witness(adv, chosen.first.known or ({} if not adv.known else None), chosen.first.t,
                          chosen.second.t, None)
    return AdversaryLeakage(adv, value, witness, ci=ci, diagnostics=diagnostics, score=chosen.value,
                            profile=profile)


def _pass_blocked(model: DependenceModel, adv: Adversary, known_sets) -> str | None:
    """Why the upper bound cannot certify a pass: a continuum was sampled at finitely many points."""
    if not isinstance(model.domains[adv.target], Finite):
        return (f"target {model.names[adv.target]} is continuous and was compared on a grid of {GRID_POINTS} "
                "values: the leakage between grid points is not bounded, so a pass cannot be earned")
    if len(known_sets) > 1 and not all(isinstance(model.domains[k], Finite) for k in adv.known):
        return "the known values x_K were sampled, not exhausted: a pass cannot be earned"
    return None


def _grid_blocked(peak, outputs: int) -> str | None:
    """Why the upper bound cannot certify a pass: the sup over y of several varying outputs was
    searched on a subgrid of the breakpoints (`vector`)."""
    if peak.complete:
        return None
    return (f"the sup over the {outputs} output coordinates was searched on a subgrid of the draws' values (plus "
            "coordinate ascent), so the upper bound is not certified: a pass cannot be earned")


def _nan_none(v: float) -> float | None:
    return None if math.isnan(v) else v
