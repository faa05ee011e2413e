"""Engines behind one interface (`Engine`, in `base`), chosen automatically or by name.

A new engine is one module (or subpackage) here implementing `Engine`, added to `_HOMES` and to
`ddpbayes.vocabulary.ENGINES`; nothing outside this package changes."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Mapping

from ddpbayes.engines.base import (AdversaryLeakage, Curve, Declined, DependenceProfile, Engine, NoCurve, Witness,
                                   merge_diagnostics)
from ddpbayes.errors import InputError
from ddpbayes.problem import Problem
from ddpbayes.vocabulary import ENGINES as ENGINE_NAMES

# Each engine's home, imported when the engine is first asked for: `auto` stops at the first engine that
# fits, so an audit on the structured engine never imports the gaussian, sampling and program engines.
_HOMES = {"exact": ("ddpbayes.engines.exact", "ExactEngine"),
          "structured": ("ddpbayes.engines.structured", "StructuredEngine"),
          "gaussian": ("ddpbayes.engines.gaussian", "GaussianEngine"),
          "sampling": ("ddpbayes.engines.sampling", "SamplingEngine"),
          "program": ("ddpbayes.engines.program", "ProgramEngine")}
assert tuple(_HOMES) == ENGINE_NAMES, "the CLI offers the engines of ddpbayes.vocabulary"
_MADE: dict[str, Engine] = {}
_LOCK = threading.Lock()  # one instance per engine, also when threads of a Dask worker ask at once


def _engine(name: str) -> Engine:
    with _LOCK:
        if name not in _MADE:
            module, cls = _HOMES[name]
            _MADE[name] = getattr(importlib.import_module(module), cls)()
        return _MADE[name]


def _in_order() -> Iterator[Engine]:
    """The engines in `auto`'s order, each imported only when reached."""
    return (_engine(name) for name in _HOMES)


def __getattr__(name: str) -> object:
    """ENGINES, {name: engine} in `auto`'s order: every engine, imported on first use."""
    if name == "ENGINES":
        return {e.name: e for e in _in_order()}
    raise AttributeError(f"module 'ddpbayes.engines' has no attribute '{name}'")


def engine_named(name: str) -> Engine | None:
    """The engine an AuditResult names (None for `analytic`: dp needs no engine).

    Parameters
    ----------
    name : str
        An engine's name, or ``"analytic"``.

    Returns
    -------
    Engine or None
        The engine, or None when `name` is not an engine's.
    """
    return _engine(name) if name in _HOMES else None


def certify_classic_dp(problem: Problem, targets: list[int], pairs: object = None) -> list[AdversaryLeakage]:
    """Classic dp of a mechanism known only as a program (`black_box`): a certified lower bound per target
    on neighbouring databases, given (`pairs`, ``--pairs``) or searched over the domains, by the program
    engine (DESIGN §2.6).

    Parameters
    ----------
    problem : Problem
        The audit problem (its mechanism a black box).
    targets : list of int
        The target tuples i.
    pairs : str, path, sequence or None, default None
        A JSON file, or the list itself, of [x, x'] pairs of neighbouring databases; None: searched.

    Returns
    -------
    list of AdversaryLeakage
        One per target certified.
    """
    return _engine("program").classic_leakage(problem, targets, pairs)


def select_engine(problem: Problem, name: str = "auto", declined: Mapping[str, str] | None = None) -> Engine:
    """The named engine, or with `auto` the first in ENGINES that can solve `problem` and has not declined it.

    Parameters
    ----------
    problem : Problem
        The audit problem.
    name : str, default "auto"
        An engine's name (``exact``, ``structured``, ``gaussian``, ``sampling``, ``program``) or ``auto``.
    declined : mapping of str to str or None, default None
        With ``auto``: the engines that raised `Declined` on `problem` while computing, with its message.

    Returns
    -------
    Engine
        An engine that supports `problem`.

    Raises
    ------
    InputError
        When the name is unknown, the named engine cannot solve `problem`, or (with ``auto``) no engine can.
    """
    if name != "auto":
        if name not in _HOMES:
            raise InputError(f"unknown engine '{name}' (use auto, {', '.join(_HOMES)})")
        reason = _engine(name).supports(problem)
        if reason:
            raise InputError(f"the {name} engine cannot solve this problem: {reason}")
        return _engine(name)
    reasons = []
    for engine in _in_order():
        reason = _reason(engine, problem, declined)
        if reason is None:
            return engine
        reasons.append(f"{engine.name}: {reason}")
    raise InputError("no engine can solve this problem (" + "; ".join(reasons) + ")")


def _reason(engine: Engine, problem: Problem, declined: Mapping[str, str] | None) -> str | None:
    """Why `engine` cannot solve `problem`: it declined it while computing, or `supports` says why; else None."""
    return (declined or {}).get(engine.name) or engine.supports(problem)


def passed_over(problem: Problem, chosen: Engine, declined: Mapping[str, str] | None = None) -> list[str]:
    """Why `auto` chose an estimating engine, or one after an engine that declined while computing: what each
    engine before it could not do (one note).

    Parameters
    ----------
    problem : Problem
        The audit problem.
    chosen : Engine
        The engine `auto` chose.
    declined : mapping of str to str or None, default None
        The engines that declined `problem` while computing, with why (`select_engine`).

    Returns
    -------
    list of str
        One note naming each engine passed over and its reason; empty when `chosen` is exact and no engine
        declined.
    """
    if not chosen.estimates:
        if not declined:
            return []
        reasons = "; ".join(f"{name}: {reason}" for name, reason in declined.items())
        return [f"auto chose the {chosen.name} engine because an engine before it declined while computing ({reasons})"]
    reasons = []
    for engine in _in_order():
        if engine is chosen:
            break
        reasons.append(f"{engine.name}: {_reason(engine, problem, declined)}")
    return [f"auto chose the {chosen.name} engine, an estimate, because no exact engine applies (" + "; ".join(reasons) + ")"]


__all__ = ["ENGINES", "AdversaryLeakage", "Curve", "Declined", "DependenceProfile", "Engine", "NoCurve", "Witness",
           "certify_classic_dp", "engine_named", "merge_diagnostics", "passed_over", "select_engine"]
