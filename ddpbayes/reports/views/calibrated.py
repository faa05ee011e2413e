"""Laplace scales that `ddpbayes calibrate` prescribes, for the report's noise sweep.

At the spec's claimed epsilon (else its mechanism epsilon): `exact (notion)`, the smallest
scale whose audited leakage under each of the spec's model-based notions is at most epsilon
(over every target); 000's `dpm` and the `group` baseline; classic `dp`. These are the
calibration API's own functions (`ddpbayes.ddp`), run with the spec's engine settings so the
sampling engine reuses its cached MCMC runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ddpbayes.ddp import dp_scale, dpm_scale, exact_scale, group_scale
from ddpbayes.errors import InputError
from ddpbayes.notions import notion
from ddpbayes.problem import Problem, dependence_size
from ddpbayes.reports.input.spec import Spec


def calibrated_scales(
    spec: Spec, problem: Problem, dependence_sets: list[list[int]], say: Callable[[str], None]
) -> tuple[dict[str, float], list[str]]:
    """(label -> scale, notes on what was not calibrated and why)."""
    epsilon = spec.claim if spec.claim is not None else spec.epsilon
    if not spec.calibrate:
        return {}, ["calibration is turned off in the spec (calibrate = false)"]
    if epsilon is None or epsilon <= 0:
        return {}, ["no calibration: the spec has neither a positive claim nor an epsilon to calibrate to"]
    if problem.mechanism.profile or not problem.mechanism.calibratable:  # calibrate sets Laplace scales
        return {}, [f"no calibration: calibrate sets Laplace scales, and the mechanism is {problem.mechanism.kind}"]
    model, query = problem.model, problem.query
    settings = replace(problem.settings, pdp_greedy=0)  # a calibration takes no lower bound for the leakage
    scales: dict[str, float] = {}
    notes = [f"calibrated to epsilon = {epsilon:g}" + (" (the claim)" if spec.claim is not None else "")
             + ", over every target"]
    steps: list[tuple[str, Callable[[], float]]] = [
        (f"exact ({n})", lambda n=n: exact_scale(model, query, n, epsilon, settings)[0])
        for n in spec.notions if not notion(n).model_free
    ]
    steps += [
        ("dpm", lambda: dpm_scale(model, query, epsilon, settings).scale),
        ("group", lambda: group_scale(model, query, epsilon, dependence_size(dependence_sets))),
        ("dp", lambda: dp_scale(model, query, epsilon)),
    ]
    for label, scale in steps:
        say(f"calibrate: {label}")
        try:
            scales[label] = float(scale())
        except InputError as exc:  # e.g. an infinite leakage that no scale bounds
            notes.append(f"{label}: not calibrated: {exc}")
    return scales, notes
