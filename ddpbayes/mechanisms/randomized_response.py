"""Randomized response: each 0/1 tuple reported truthfully with probability e^ε / (1 + e^ε)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.mechanisms.base import Mechanism, _positive
from ddpbayes.model.domains import Domain, Finite
from ddpbayes.queries import Identity, Query


@dataclass(frozen=True)
class RandomizedResponse(Mechanism):
    """Each binary tuple is reported truthfully with probability e^ε / (1 + e^ε), else flipped."""

    epsilon: float
    kind: str = "randomized_response"

    def __post_init__(self):
        _positive(self.epsilon, "epsilon")

    @property
    def keep(self) -> float:
        return 1.0 / (1.0 + math.exp(-self.epsilon))

    def log_kernel(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        grid = np.array([0.0, 1.0])
        q = np.asarray(q, dtype=float)
        same = grid[:, None] == q[None, :]
        # log keep = -log1p(e^-eps), log flip = -eps - log1p(e^-eps): exact for any eps
        log_keep = -math.log1p(math.exp(-self.epsilon))
        return grid, np.where(same, log_keep, log_keep - self.epsilon)

    def grid_size(self, levels: int) -> int:
        return 2

    def dp_leakage(self, sensitivity: float) -> float:
        return self.epsilon if sensitivity > 0 else 0.0

    def check(self, query: Query, domains: Sequence[Domain]) -> None:
        if not isinstance(query, Identity):
            raise InputError("randomized response perturbs the tuples themselves: use --query identity")
        for k, d in enumerate(domains):
            if not (isinstance(d, Finite) and set(d.values) <= {0.0, 1.0}):
                raise InputError(f"randomized response needs 0/1 tuples, but tuple {k} has domain {d}")

    def describe(self) -> dict:
        return {"kind": self.kind, "epsilon": self.epsilon, "noise": f"keep each bit with probability {self.keep:.6g}"}
