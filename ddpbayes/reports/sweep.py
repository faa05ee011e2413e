"""Leakage against the noise level, for every notion of the spec.

The noise level is the Laplace (or geometric) scale b, or randomized response's per-bit
epsilon. By default the sweep takes nine values from a quarter to four times the spec's,
evenly on a log scale; a spec's `sweep` list replaces them. Calibrated scales within
`SPAN` of the spec's are swept too (merged with a grid value within `SAME`, relative). Every
point is one `audit` call with the spec's settings (the sampling engine's MCMC runs do not
depend on the scale and are reused from its cache).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ddpbayes.auditing import AuditResult
from ddpbayes.encoding import number

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

    def to_json(self) -> dict:
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
    """Audit every notion of `results` at every noise level; `run(notion, **overrides)` audits
    with the spec's settings."""
    mechanism = next(iter(results.values())).mechanism
    parameter = "epsilon" if mechanism["kind"] == "randomized_response" else "scale"
    base = float(mechanism[parameter])
    grid = sorted(values) if values else [float(base * f) for f in DEFAULT_FACTORS]
    for scale in sorted(calibrated.values()):
        if base / SPAN <= scale <= base * SPAN and not any(abs(v - scale) <= SAME * scale for v in grid):
            grid = sorted([*grid, scale])
    leakage: dict[str, list[float]] = {n: [] for n in results}
    ci: dict[str, list] = {n: [] for n in results}
    other = "scale" if parameter == "epsilon" else "epsilon"
    for k, v in enumerate(grid):
        say(f"sweep {k + 1}/{len(grid)}: {parameter} {v:.4g}")
        for notion in results:
            r = run(notion, **{parameter: v, other: None})
            leakage[notion].append(r.leakage)
            ci[notion].append(r.ci)
    return Sweep(parameter, base, grid, leakage, ci, calibrated)
