"""Sampling engine: MCMC estimates of leak(i, K) for any PyMC model (DESIGN §2.3).

Likelihood route: for every target value t (every value of a discrete domain; a grid with both
endpoints of a continuous one, refined where `cells` bounds the leakage between its values) and
every x_K considered, draw the other tuples and latents
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
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pymc as pm
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.op import RandomVariable

from ddpbayes.engines.base import AdversaryLeakage, Curve, Engine, Mixtures, Witness
from ddpbayes.engines.curves import check_drawable, mixture_curve
from ddpbayes.engines.sampling.cells import Certificate, certify, refuse
from ddpbayes.engines.sampling.estimate import Z95, Draws, Peak, bound, choose
from ddpbayes.engines.sampling.joint import JointDraws, choose_joint
from ddpbayes.engines.sampling.posterior import posterior_leakage
from ddpbayes.engines.sampling.profile import Found, profile_estimate, scalar_groups, worst_pair
from ddpbayes.engines.sampling.summed import exact_dependence, summed_leakage, summed_values, summing_engine
from ddpbayes.engines.sampling.runs import (Run, bounding, rebound, roles, sample_event, sample_events, settled,
                                           summarise, sums)
from ddpbayes.engines.sampling.slope import Slope, Uncertified
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
        discrete Gaussian noise on a query with one varying output (`profile`); a joint output
        law with a finite output space (`joint`)."""
        mech = problem.mechanism
        if mech.gaussian:
            return None
        if mech.joint:  # a finite output space (`joint`); the noisy maximum's value is continuous
            return "the sampling engine takes a joint output law with finite outputs" if mech.continuous else None
        if not all(m.laplace for m in mech.releases):
            return "the sampling engine handles Laplace, geometric and Gaussian noise"
        return None

    def leakage(self, problem: Problem) -> list[AdversaryLeakage]:
        """Every adversary's estimate; a model with no continuous variable is summed exactly
        instead (`summed`), and only the posterior route samples it."""
        settings = problem.settings
        summing = _summing(problem)
        if summing is not None:
            return summed_leakage(problem, summing)
        plans = _each(lambda adv: (adv, _known_values(problem.model, adv, settings)), problem.adversaries,
                      settings, "planning")
        runs = sum(len(kv) * _grid_size(problem.model, adv.target) + 2 for adv, kv in plans)  # + 2 bounding runs
        if runs > settings.max_runs:
            raise InputError(f"this needs about {runs} MCMC runs (over {settings.max_runs}); restrict --target or "
                             "--known, or raise --max-runs")
        if settings.method == "posterior":
            return _each(lambda plan: posterior_leakage(problem, *plan, settings), plans, settings, "posterior route")
        _draw_all(problem.model, plans, settings)
        choices = _each(lambda plan: _choose(problem, *plan, settings), plans, settings, "choosing")
        sample_events(problem.model, [e for c in choices for e in c.bounding_events()], bounding(settings),
                      "sampling (bounding)")
        return _each(lambda choice: _bound(problem, choice, settings), choices, settings, "bounding")

    def dependence_sets(self, problem: Problem) -> list[frozenset[int]]:
        """An exact engine's N(i) where one reads the model (`summed.exact_dependence`), else the
        structural sets."""
        return exact_dependence(problem) or structural_dependence(problem.model)

    def notes(self, problem: Problem) -> list[str]:
        summing = _summing(problem)
        if summing is None:
            return []
        return [f"nothing to sample: every variable is discrete, so the {summing.name} engine summed the model "
                "exactly (the interval has width zero)", *summing.notes(problem)]

    def mixtures(self, problem: Problem, adversary: Adversary, shift_invariant: bool) -> Mixtures:
        """The exact engine's mixture weights when the model was summed; otherwise none."""
        summing = _summing(problem)
        if summing is None:
            return super().mixtures(problem, adversary, shift_invariant)
        return summing.mixtures(problem, adversary, shift_invariant)

    def witness_curve(self, problem: Problem, notion: str, witness: Witness | None) -> Curve:
        """The same Rao–Blackwellised mixture the engine estimated, from its cached draws (the
        exact engine's curve when the model was summed)."""
        summing = _summing(problem)
        if summing is not None:
            return summing.witness_curve(problem, notion, witness)
        check_drawable(problem, witness)

        def mixture(problem: Problem, witness: Witness, t: float) -> tuple[np.ndarray, np.ndarray]:
            points, logw = _query_draws(problem, witness, t).mixture()
            return logw, points[:, 0]

        return mixture_curve(problem, notion, witness, mixture,
                             "sampling: Monte Carlo estimate from the engine's MCMC draws", every_break=False)

    def witness_draws(self, problem: Problem, witness: Witness) -> list[tuple[float, np.ndarray]] | None:
        """The query's draws for trace plots: a scalar query's only (none with several outputs,
        None when the model was summed exactly)."""
        if _summing(problem) is not None:
            return None
        draws = [(t, _query_draws(problem, witness, t).expected()) for t in (witness.t, witness.t_prime)]
        return [] if draws[0][1].shape[-1] != 1 else [(t, q[..., 0]) for t, q in draws]


def _summing(problem: Problem):
    """The exact engine that sums the model when nothing is left to sample (only where runs sum,
    `runs.sums`: not the posterior route), else None."""
    return summing_engine(problem) if sums(problem.settings) else None


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


def _query_draws(problem: Problem, witness: Witness, t: float) -> Draws:
    """The query's draws given X_i = t and the witness's x_K (the cached choosing run)."""
    known = witness.known_values or {}
    run = _run(problem, {**known, witness.adversary.target: t}, problem.settings)
    return Draws(known, t, query_values(problem, run), run.logw, run.groups)


def _run(problem: Problem, event: dict[int, float], settings: RunSettings) -> Run:
    """The event's run (cached): NUTS's, or SMC's when the NUTS chains disagreed on the query (`runs.settled`)."""
    return settled(problem.model, event, settings, lambda run: query_values(problem, run))


def query_values(problem: Problem, run: Run) -> np.ndarray:
    """q(x) for every draw of a run: (chains, draws, C), or (chains, draws, K, C) when the run
    summed its discrete variables out (a value per configuration)."""
    q = summed_values(problem.query, run.x)
    finite = np.isfinite(q)
    if run.logw is not None:
        finite |= ~np.isfinite(run.logw)[..., None]  # a configuration of probability zero does not count
    if not np.all(finite):
        raise InputError(f"the query {problem.query.spec} is not finite on some of the model's draws")
    return q


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
    draws = pm.draw([model.slots[k].expr for k in known], draws=KNOWN_DRAWS, random_seed=settings.seed)
    return [{k: float(np.asarray(d)[j]) for k, d in zip(known, draws)} for j in range(KNOWN_DRAWS)]


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


@dataclass(frozen=True)
class Choice:
    """One adversary's choosing runs and the witness chosen on them (`estimate.choose`; Gaussian
    noise: `profile.choose`)."""

    adversary: Adversary
    known_sets: list
    groups: list[list[Draws]]
    runs: list[tuple[Run, Draws]]  # every choosing run with its query draws (for the diagnostics)
    peak: Peak | Found
    upper: tuple[float, float] = (0.0, 0.0)  # (plug-in, approximate upper bound)
    certificate: Certificate | None = None  # a continuous target's bound over its domain (`cells`)

    def witness_events(self) -> tuple[dict[int, float], dict[int, float]] | None:
        """The two conditioning events of the chosen witness (given t, given t'), if any."""
        if isinstance(self.peak, Found):
            if self.peak.first is None:
                return None
            known, t, t_prime = self.peak.first.known, self.peak.first.t, self.peak.second.t
        else:
            if math.isnan(self.peak.t):
                return None
            known, t, t_prime = self.peak.known, self.peak.t, self.peak.t_prime
        target = self.adversary.target
        return {**known, target: t}, {**known, target: t_prime}

    def bounding_events(self) -> list[dict[int, float]]:
        events = self.witness_events()
        return [] if events is None else list(events)


def _choose(problem: Problem, adv: Adversary, known_sets, settings: RunSettings) -> Choice:
    """The adversary's choosing runs (one per x_K and target value: the first feasible try) and
    the witness chosen on them; a continuous target's values refined where the bound over its
    domain needs them (`cells`)."""
    model = problem.model
    groups, runs, certificates = [], [], []
    for known in known_sets:
        group = []
        for tries in _target_values(model, adv.target):
            for t in tries:
                draws = _draws_at(problem, adv, known, t, runs, settings)
                if draws is not None:
                    group.append(draws)
                    break
        if len(group) >= 2:
            if not isinstance(model.domains[adv.target], Finite) and not problem.mechanism.profile:
                certificates.append(_certify(problem, adv, known, group, runs, settings))
            groups.append(group)
    if problem.mechanism.profile:
        scalar = scalar_groups(groups, settings.seed)
        return Choice(adv, known_sets, scalar, runs, worst_pair(scalar, problem.mechanism))
    if problem.mechanism.joint:
        peak, upper = choose_joint(groups, problem.mechanism)
    else:
        peak, upper = choose(groups, _scales(problem, groups))
    certificate = _combine(certificates)
    if certificate is not None and certificate.reason is None:
        upper = (upper[0], max(upper[0], certificate.upper) + upper[1] - upper[0])
    return Choice(adv, known_sets, groups, runs, peak, upper, certificate)


def _draws_at(problem: Problem, adv: Adversary, known: dict, t: float, runs: list, settings: RunSettings
              ) -> Draws | None:
    """The query's draws given X_i = t and x_K (the run recorded for the diagnostics), or None
    when the event is impossible."""
    try:
        run = _run(problem, {**known, adv.target: t}, settings)
    except ImpossibleEvent:
        return None
    draws = Draws(known, t, query_values(problem, run), run.logw, run.groups)
    runs.append((run, draws))
    return draws


def _certify(problem: Problem, adv: Adversary, known: dict, group: list[Draws], runs: list,
             settings: RunSettings) -> Certificate:
    """The bound over the target's whole domain for one x_K (`cells`), or why there is none."""
    model, i = problem.model, adv.target
    kappa = _kernel_slope(problem, i, group[0].q.shape[-1])
    if kappa is None:
        return refuse("the query is not linear in the target or the noise is not Laplace")
    try:
        slope = Slope(model, i, known)
    except Uncertified as e:
        return refuse(str(e))
    except (ValueError, TypeError, IndexError, NotImplementedError) as e:  # a graph the interval rules cannot read
        return refuse(f"the slope bound could not read the model's log-density ({type(e).__name__})")
    dom = model.domains[i]
    return certify(slope, (dom.lo, dom.hi), group, kappa,
                   lambda t: _draws_at(problem, adv, known, t, runs, settings), _scales(problem, [group]))


def _kernel_slope(problem: Problem, i: int, outputs: int) -> float | None:
    """κ = Σ_c |A_ci| / b_c: how fast the Laplace log-kernel at any y moves with X_i (None
    unless the query is linear and every coordinate's noise continuous Laplace)."""
    matrix = problem.query.matrix(problem.model.n)
    scales = problem.mechanism.laplace_scales(outputs)
    if matrix is None or scales is None:
        return None
    return float(np.sum(np.abs(np.atleast_2d(matrix)[:, i]) / scales))


def _combine(certificates: list[Certificate]) -> Certificate | None:
    """One adversary's certificate: the largest bound over its x_K, or the first refusal."""
    if not certificates:
        return None
    refused = next((c for c in certificates if c.reason is not None), None)
    if refused is not None:
        return refused
    return Certificate(max(c.upper for c in certificates), sum(c.anchors for c in certificates))


def _scales(problem: Problem, groups: list[list[Draws]]) -> np.ndarray:
    """Each output's Laplace scale (one unused 1 for a joint law: it carries its own)."""
    if problem.mechanism.joint or not groups:
        return np.ones(1)
    return output_scales(problem, groups[0][0].q.shape[-1])


def _bound(problem: Problem, choice: Choice, settings: RunSettings) -> AdversaryLeakage:
    """The chosen witness bounded on fresh runs of its two events (`bounding`); an SMC bounding run over
    the R-hat limit is joined by a fresh one with twice the particles (`runs.rebound`), the lower bound
    the lower of the two (it holds whenever either does), the diagnostics the second's."""
    adv, model = choice.adversary, problem.model
    events = choice.witness_events() or ()
    fresh = [_run(problem, e, bounding(settings)) for e in events]
    again = [] if problem.mechanism.profile else [  # an SMC bounding run over the R-hat limit: a wider fresh one
        rebound(model, e, bounding(settings), r, lambda run: query_values(problem, run)) for e, r in zip(events, fresh)]
    final = [a or r for a, r in zip(again, fresh)] if any(again) else fresh
    draws = [_draws_of(problem, adv, e, r) for e, r in zip(events, fresh)]
    last = [d if a is None else _draws_of(problem, adv, e, a) for e, a, d in zip(events, again, draws)
            ] if final is not fresh else draws  # the query's values of a run computed once
    records = [run_diagnostics(run, d.expected()) for run, d in [*choice.runs, *zip(final, last)]]
    diagnostics = {**summarise(records), **roles(settings, "conditioning event, every x_K and target value",
                                                 "the chosen witness's two events")}
    diagnostics["pass_blocked"] = _pass_blocked(model, adv, choice.known_sets, choice.certificate)
    if choice.certificate is not None:
        diagnostics["target_bound"] = _certificate_record(choice.certificate)
    if problem.mechanism.profile:
        return _profile_adversary(problem, choice, draws, diagnostics)
    peak, b = choice.peak, _scales(problem, choice.groups)
    if problem.mechanism.joint:  # each draw's kernel is its exact p(y | answers)
        joint = [JointDraws(d, problem.mechanism) for d in draws]
        last = joint if last is draws else [JointDraws(d, problem.mechanism) for d in last]
        draws = joint
    lower, held = bound(peak, *draws, b) if draws else (0.0, {})
    if final is not fresh:  # the lower of the two lower bounds: it holds whenever either does (DESIGN §2.3)
        wide_lower, wide_held = bound(peak, *last, b)
        held = {**wide_held, "held_out_first": held["held_out"], "held_out_first_se": held["held_out_se"]}
        lower = min(lower, wide_lower)
    value, upper = choice.upper
    witness = Witness(adv, peak.known or ({} if not adv.known else None), _nan_none(peak.t), _nan_none(peak.t_prime),
                      peak.y)
    diagnostics.update(held)
    diagnostics["pass_blocked"] = diagnostics["pass_blocked"] or _grid_blocked(peak, len(b))
    if held:  # the upper bound's margin: the larger of the choosing runs' and the bounding runs' standard errors
        certified = value if choice.certificate is None or choice.certificate.reason else max(
            value, choice.certificate.upper)
        upper = max(upper, certified + Z95 * held["held_out_se"], held["held_out"],
                    held.get("held_out_first", -math.inf))
    return AdversaryLeakage(adv, value, witness, ci=(lower, upper), diagnostics=diagnostics, score=peak.value)


def _draws_of(problem: Problem, adv: Adversary, event: dict[int, float], run: Run) -> Draws:
    """The query's draws of the event's run."""
    return Draws(event, event[adv.target], query_values(problem, run), run.logw, run.groups)


def _profile_adversary(problem: Problem, choice: Choice, draws: list[Draws], diagnostics: dict) -> AdversaryLeakage:
    """Gaussian noise: ε at the mechanism's δ of the plug-in profile, with its interval (`profile`);
    the witness is (x_K, t, t') with no output (the profile's witness is a set of outputs)."""
    adv, chosen = choice.adversary, choice.peak
    fresh = scalar_groups([draws], problem.settings.seed)[0] if draws else []
    value, ci, held, profile = profile_estimate(chosen, fresh, problem.mechanism)
    diagnostics.update(held)
    if chosen.first is None:
        witness = Witness(adv, {} if not adv.known else None, None, None, None)
    else:
        witness = Witness(adv, chosen.first.known or ({} if not adv.known else None), chosen.first.t,
                          chosen.second.t, None)
    return AdversaryLeakage(adv, value, witness, ci=ci, diagnostics=diagnostics, score=chosen.value,
                            profile=profile)


def _pass_blocked(model: DependenceModel, adv: Adversary, known_sets, certificate: Certificate | None) -> str | None:
    """Why the upper bound cannot certify a pass: a continuum compared at finitely many points
    without a bound between them (`cells`), or known values sampled."""
    if not isinstance(model.domains[adv.target], Finite) and (certificate is None or certificate.reason):
        why = certificate.reason if certificate is not None else "no bound between the values compared"
        return (f"target {model.names[adv.target]} is continuous and was compared on a grid of values with no bound "
                f"between them ({why}), so a pass cannot be earned")
    if len(known_sets) > 1 and not all(isinstance(model.domains[k], Finite) for k in adv.known):
        return "the known values x_K were sampled, not exhausted: a pass cannot be earned"
    return None


def _certificate_record(certificate: Certificate) -> dict:
    """The JSON record of a continuous target's bound over its domain."""
    if certificate.reason is not None:
        return {"certified": False, "reason": certificate.reason}
    return {"certified": True, "plug_in_bound": certificate.upper, "target_values": certificate.anchors}


def _grid_blocked(peak, outputs: int) -> str | None:
    """Why the upper bound cannot certify a pass: the sup over y of several varying outputs was
    searched on a subgrid of the breakpoints (`vector`)."""
    if peak.complete:
        return None
    return (f"the sup over the {outputs} output coordinates was searched on a subgrid of the draws' values (plus "
            "coordinate ascent), so the upper bound is not certified: a pass cannot be earned")


def _nan_none(v: float) -> float | None:
    return None if math.isnan(v) else v
