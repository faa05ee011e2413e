"""The engine interface: `leakage(problem)` for every adversary of the problem.

Notions, calibration, reports and the CLI only see `AdversaryLeakage` values, never which
engine produced them (DESIGN §2).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

from ddpbayes.problem import Adversary, Problem


@dataclass(frozen=True)
class Witness:
    """What attains the supremum: the adversary, the known values x_K, the two target values
    t and t' compared, and the output y (a coordinate may be ±inf: the sup is a limit)."""

    adversary: Adversary
    known_values: dict[int, float] | None
    t: float | None
    t_prime: float | None
    y: tuple[float, ...] | None

    def to_json(self) -> dict:
        return {
            "target": self.adversary.target,
            "known": sorted(self.adversary.known),
            "known_values": None
            if self.known_values is None
            else {str(k): _num(v) for k, v in sorted(self.known_values.items())},
            "t": _num(self.t),
            "t_prime": _num(self.t_prime),
            "y": None if self.y is None else (_num(self.y[0]) if len(self.y) == 1 else [_num(v) for v in self.y]),
        }


@dataclass(frozen=True)
class AdversaryLeakage:
    """leak(i, K) for one adversary (DESIGN §1), with the witness and, for estimates, a CI."""

    adversary: Adversary
    value: float
    witness: Witness
    ci: tuple[float, float] | None = None  # estimates: (one-sided 95% lower bound, approximate upper bound)
    reason: str | None = None  # why the leakage is what it is when that needs saying (e.g. inf)
    diagnostics: dict | None = None  # estimates: MCMC diagnostics; "ok" False makes verdicts inconclusive
    score: float | None = None  # estimates: the value on the selection half, to pick the worst adversary


class Engine(ABC):
    name: str
    estimates: bool = False  # True when results are estimates (each adversary costs MCMC runs)

    @abstractmethod
    def supports(self, problem: Problem) -> str | None:
        """None if this engine can solve `problem`, else the reason it cannot."""

    @abstractmethod
    def leakage(self, problem: Problem) -> list[AdversaryLeakage]:
        """leak(i, K) for every adversary of `problem`, in the same order."""

    def seconds_per_adversary(self, problem: Problem) -> float | None:
        """A rough cost of one adversary on this machine, known without evaluating any (None:
        unknown); audit states it when it refuses a lattice too large to evaluate."""
        return None

    @abstractmethod
    def dependence_sets(self, problem: Problem) -> list[frozenset[int]]:
        """N(i) for every tuple: the tuples whose conditional law changes with X_i (DESIGN §3.1)."""


def _num(v):
    """A number for JSON: finite floats as they are, infinities as the strings '+inf' / '-inf'."""
    if v is None:
        return None
    v = float(v)
    if math.isinf(v):
        return "+inf" if v > 0 else "-inf"
    return int(v) if v.is_integer() and abs(v) < 2**53 else v
