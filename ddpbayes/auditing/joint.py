"""The `composition` block of a joint audit: each release audited alone against the joint (DESIGN §3.1b)."""

from __future__ import annotations

from collections.abc import Callable

from ddpbayes.composition.summary import Leak, summary, touched
from ddpbayes.engines import engine_named
from ddpbayes.notions import Notion
from ddpbayes.settings import RunSettings


def composition_block(audit: Callable, joint, engine_name: str, dependence_sets, notion: Notion, targets: list[int],
                      known: list[int] | None, lower_bounds: bool) -> dict:
    """Each release of `joint` (an AuditResult of a composition) audited alone by `audit` (the
    joint's own audit, passed in: it calls this) under the same notion, engine and settings, set
    against the joint by `summary` (dependence sets from the engine, none for model-free dp)."""
    problem = joint.problem
    model, query, mechanism, settings = problem.model, problem.query, problem.mechanism, problem.settings
    engine = engine_named(engine_name)
    alone = RunSettings.of(settings, engine=None if engine is None else engine.name, progress=False)
    releases = []
    for q, m, spec in zip(query.queries, mechanism.mechanisms, mechanism.specs):
        r = audit(model, q, m, notion, target=targets, known=known, information=None, settings=alone)
        releases.append((spec, Leak(r.leakage, r.ci), r.per_target))
    if dependence_sets is None and engine is not None:
        dependence_sets = engine.dependence_sets(problem)
    return summary(Leak(joint.leakage, joint.ci), joint.per_target, releases, touched(query, model.domains),
                   dependence_sets, model.names, lower_bounds=lower_bounds)
