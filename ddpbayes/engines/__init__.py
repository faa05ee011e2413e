"""Engines behind one interface (`Engine`, in `base`), chosen automatically or by name.

A new engine is one module (or subpackage) here implementing `Engine`, added to ENGINES and to
`ddpbayes.vocabulary.ENGINES`; nothing outside this package changes."""

from __future__ import annotations

from ddpbayes.engines.base import (AdversaryLeakage, Curve, DependenceProfile, Engine, NoCurve, Witness,
                                   merge_diagnostics)
from ddpbayes.engines.exact import ExactEngine
from ddpbayes.engines.gaussian import GaussianEngine
from ddpbayes.engines.program import ProgramEngine
from ddpbayes.engines.sampling import SamplingEngine
from ddpbayes.engines.structured import StructuredEngine
from ddpbayes.errors import InputError
from ddpbayes.problem import Problem
from ddpbayes.vocabulary import ENGINES as ENGINE_NAMES

ENGINES: dict[str, Engine] = {e.name: e for e in (ExactEngine(), StructuredEngine(), GaussianEngine(), SamplingEngine(),
                                                  ProgramEngine())}
assert tuple(ENGINES) == ENGINE_NAMES, "the CLI offers the engines of ddpbayes.vocabulary"


def engine_named(name: str) -> Engine | None:
    """The engine an AuditResult names (None for `analytic`: dp needs no engine)."""
    return ENGINES.get(name)


def select_engine(problem: Problem, name: str = "auto") -> Engine:
    """The named engine, or with `auto` the first in ENGINES that can solve `problem`."""
    if name != "auto":
        if name not in ENGINES:
            raise InputError(f"unknown engine '{name}' (use auto, {', '.join(ENGINES)})")
        reason = ENGINES[name].supports(problem)
        if reason:
            raise InputError(f"the {name} engine cannot solve this problem: {reason}")
        return ENGINES[name]
    reasons = []
    for engine in ENGINES.values():
        reason = engine.supports(problem)
        if reason is None:
            return engine
        reasons.append(f"{engine.name}: {reason}")
    raise InputError("no engine can solve this problem (" + "; ".join(reasons) + ")")


def passed_over(problem: Problem, chosen: Engine) -> list[str]:
    """Why `auto` chose an estimating engine: what each engine before it could not do (one note)."""
    if not chosen.estimates:
        return []
    reasons = []
    for engine in ENGINES.values():
        if engine is chosen:
            break
        reasons.append(f"{engine.name}: {engine.supports(problem)}")
    return [f"auto chose the {chosen.name} engine, an estimate, because no exact engine applies (" + "; ".join(reasons) + ")"]


__all__ = ["ENGINES", "AdversaryLeakage", "Curve", "DependenceProfile", "Engine", "NoCurve", "Witness", "engine_named",
           "merge_diagnostics", "passed_over", "select_engine"]
