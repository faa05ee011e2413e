"""Everything a report shows, computed from a spec and its model with the public engines.

Every audit goes through `ddpbayes.audit` with the spec's settings (`Auditor`), so
the numbers in a report are those a user gets from `audit` or `ddpbayes audit`.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace

import numpy as np

from ddpbayes.auditing import AuditResult
from ddpbayes.engines import Curve, NoCurve, engine_named, select_engine
from ddpbayes.model import DependenceModel
from ddpbayes.notions import notion
from ddpbayes.problem import Problem
from ddpbayes.reports.input.spec import Spec
from ddpbayes.reports.views.auditor import Auditor
from ddpbayes.reports.views.calibrated import calibrated_scales
from ddpbayes.reports.views.closed_form import ClosedForm, closed_forms
from ddpbayes.reports.views.information import InformationView, information_view
from ddpbayes.reports.views.lattice import LatticeView, pdp_lattice
from ddpbayes.reports.views.profile import ProfileView, profile_view
from ddpbayes.reports.views.sweep import Sweep, sweep
from ddpbayes.settings import RunSettings


class Progress:
    """One line per step on stderr, with the seconds since the report began."""

    def __init__(self, enabled: bool, label: str):
        self.enabled, self.label, self.start = enabled, label, time.perf_counter()

    def __call__(self, message: str) -> None:
        if self.enabled:
            print(f"ddpbayes report [{self.label}] {time.perf_counter() - self.start:6.1f} s  {message}",
                  file=sys.stderr, flush=True)


@dataclass
class Collected:
    spec: Spec
    model: DependenceModel
    problem: Problem
    results: dict[str, AuditResult]
    dependence_sets: list[list[int]]
    lattice: LatticeView | None
    curves: list[Curve]
    curve_notes: list[str]
    sweep: Sweep
    calibration_notes: list[str]
    closed_forms: list[ClosedForm]
    traces: list[tuple[str, np.ndarray]]
    information: InformationView | None = None  # seed 004's measures (`views.information`)
    profile: ProfileView | None = None  # the spec's [profile]: Gaussian noise (`views.profile`)


def collect(spec: Spec, model: DependenceModel, say: Progress, where: RunSettings | None = None) -> Collected:
    """Every audit and view of the spec's report; `where` says where units of work run and whether
    the audits show progress."""
    run = Auditor(spec, model, RunSettings.of(where))
    results = {}
    for k, name in enumerate(spec.notions):
        say(f"audit {k + 1}/{len(spec.notions)}: {name}")
        results[name] = run(name)
    problem = next(iter(results.values())).problem  # what the audits ran: query, mechanism, settings
    targets = list(spec.target) if spec.target is not None else list(range(model.n))
    pdp = next((name for name in results if notion(name).lattice), None)
    lattice = (pdp_lattice(run, pdp, results[pdp], engine_named(results[pdp].engine), model.n, targets, spec.seed,
                           say) if pdp is not None else None)
    curves, notes = _curves(problem, results)
    dependence_sets = _dependence_sets(problem, results, spec.engine)
    scales, calibration_notes = calibrated_scales(spec, problem, dependence_sets, say)
    say("noise sweep")
    swept = sweep(run, results, spec.sweep, scales, say)
    information = information_view(run, results, swept, say)
    profile = None if spec.profile is None else profile_view(spec, model, say)
    say("closed forms and traces")
    return Collected(
        spec=spec,
        model=model,
        problem=problem,
        results=results,
        dependence_sets=dependence_sets,
        lattice=lattice,
        curves=curves,
        curve_notes=notes,
        sweep=swept,
        calibration_notes=calibration_notes,
        closed_forms=closed_forms(problem, results, spec.derive_cov),
        traces=_traces(problem, results),
        information=information,
        profile=profile,
    )


def _curves(problem: Problem, results: dict[str, AuditResult]) -> tuple[list[Curve], list[str]]:
    """One curve per distinct witness of the model-based notions, and why any is missing."""
    curves: dict[tuple, Curve] = {}
    missing: dict[str, list[str]] = {}  # reason -> notions
    for name, r in results.items():
        if notion(name).model_free:
            continue
        w = r.witness
        key = None if w is None else (w.adversary, tuple(sorted((w.known_values or {}).items())), w.t, w.t_prime)
        if key in curves:
            curves[key] = replace(curves[key], notion=f"{curves[key].notion}, {name}")
            continue
        try:
            engine = engine_named(r.engine)
            if engine is None:
                raise NoCurve("dp is model-free: its witness ratio is that of two Laplace densities a sensitivity apart")
            curves[key] = engine.witness_curve(problem, name, w)
        except NoCurve as exc:
            missing.setdefault(str(exc), []).append(name)
    return list(curves.values()), [f"{', '.join(notions)}: {reason}" for reason, notions in missing.items()]


def _dependence_sets(problem: Problem, results: dict[str, AuditResult], engine: str) -> list[list[int]]:
    ddp = [r.dependence_sets for name, r in results.items() if notion(name).needs_dependence_sets]
    if ddp and ddp[0] is not None:  # every tuple's set (an engine's lazily computed sets computed here)
        return [list(s) for s in ddp[0]]
    return [sorted(s) for s in select_engine(problem, engine).dependence_sets(problem)]


def _traces(problem: Problem, results: dict[str, AuditResult]) -> list[tuple[str, np.ndarray]]:
    """Query draws of the worst sampled witness (both conditioning events), where an engine sampled."""
    sampled = [r for r in results.values() if r.witness is not None and r.witness.t is not None
               and r.witness.t_prime is not None and engine_named(r.engine) is not None
               and engine_named(r.engine).estimates]
    if not sampled:
        return []
    worst = max(sampled, key=lambda r: r.leakage)
    names = problem.model.names
    known = ", ".join(f"{names[k]} = {v:.4g}" for k, v in sorted((worst.witness.known_values or {}).items()))
    target = names[worst.witness.adversary.target]
    return [(f"given {target} = {t:.4g}" + (f", {known}" if known else "") + f"  ({worst.notion} witness)", q)
            for t, q in engine_named(worst.engine).witness_draws(problem, worst.witness)]
