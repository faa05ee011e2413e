"""Leakage against the noise level, for every notion of the spec.

The noise level is the Laplace (or geometric) scale b, or randomized response's per-bit
epsilon. By default the sweep takes nine values from a quarter to four times the spec's,
evenly on a log scale; a spec's `sweep` list replaces them. Calibrated scales within
`SPAN` of the spec's are swept too (merged with a grid value within `SAME`, relative). Every
point is one `audit` call with the spec's settings (the sampling engine's MCMC runs do not
depend on the scale and are reused from its cache: those points run in this process; the
others are units of work, on Dask workers when there are any).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ddpbayes.auditing import AuditResult
from ddpbayes.encoding import number
from ddpbayes.engines import engine_named
from ddpbayes.mechanisms import lookup
from ddpbayes.parallel import map_units
from ddpbayes.reports.views.auditor import Auditor

DEFAULT_FACTORS = 2.0 ** np.linspace(-2, 2, 9)
SPAN = 16.0  # calibrated scales within [base / SPAN, base * SPAN] join the sweep
SAME = 1e-3  # a calibrated scale this close (relative) to a swept value uses that value


@dataclass(frozen=True)
class Sweep:
    parameter: str  # "scale" or "epsilon"
    base: float  # the spec's value
    values: list[float]
    leakage: dict[str, list[float]]
    ci: dict[str, list[tuple[float, float] | None]]
    calibrated: dict[str, float] = field(default_factory=dict)  # label -> scale, from calibration

    def marks(self, value: float) -> list[str]:
        """The calibrations whose scale this swept value stands for."""
        return [k for k, s in self.calibrated.items() if abs(s - value) <= SAME * s]

    def to_dict(self) -> dict:
        return {
            "parameter": self.parameter,
            "base": self.base,
            "values": self.values,
            "leakage": {k: [number(v) for v in vs] for k, vs in self.leakage.items()},
            "ci": {k: [None if c is None else [number(c[0]), number(c[1])] for c in cs] for k, cs in self.ci.items()},
            "calibrated": self.calibrated,
        }


def sweep(
    run: Callable[..., AuditResult],
    results: dict[str, AuditResult],
    values: tuple[float, ...] | None,
    calibrated: dict[str, float],
    say: Callable[[str], None],
) -> Sweep:
    """Audit every notion of `results` at every noise level; with an `Auditor` as `run`, a point
    per unit of work (`parallel.map_units`: here or on Dask workers). The sampling engine's points run here, in
    order: an estimating engine's draws are cached on this process's model and shared by every
    point."""
    mechanism = next(iter(results.values())).mechanism
    parameter = "epsilon" if lookup(mechanism["kind"]).flips_bits else "scale"
    base = float(mechanism[parameter])
    grid = sorted(values) if values else [float(base * f) for f in DEFAULT_FACTORS]
    for scale in sorted(calibrated.values()):
        if base / SPAN <= scale <= base * SPAN and not any(abs(v - scale) <= SAME * scale for v in grid):
            grid = sorted([*grid, scale])
    other = "scale" if parameter == "epsilon" else "epsilon"
    points = [(notion, {parameter: v, other: None}) for v in grid for notion in results]
    say(f"sweep: {len(grid)} values of the {parameter}")
    shared = isinstance(run, Auditor)  # any other callable runs its points here
    here = [p for p in points if not shared or _estimated(results[p[0]])]
    there = [p for p in points if p not in here]
    done = dict(zip(map(_key, here), (_point((run, *p)) for p in here)))
    if there:
        units = [(replace(run, where=replace(run.where, progress=False)), *p) for p in there]
        done.update(zip(map(_key, there), map_units(_point, units, run.where, "sweep", "audits")))
    leakage = {n: [done[_key((n, {parameter: v}))][0] for v in grid] for n in results}
    ci = {n: [done[_key((n, {parameter: v}))][1] for v in grid] for n in results}
    return Sweep(parameter, base, grid, leakage, ci, calibrated)


def _estimated(result: AuditResult) -> bool:
    """An estimating engine ran: its draws are cached on this process's model."""
    engine = engine_named(result.engine)
    return engine is not None and engine.estimates


def _key(point: tuple[str, dict]) -> tuple:
    notion, overrides = point
    return notion, tuple(v for v in overrides.values() if v is not None)


def _point(unit: tuple[Callable[..., AuditResult], str, dict]) -> tuple[float, tuple[float, float] | None]:
    """One sweep point (a unit of work): the notion's leakage and interval at that noise level."""
    run, notion, overrides = unit
    r = run(notion, **overrides)
    return r.leakage, r.ci
