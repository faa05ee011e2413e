"""The witness's log-ratio as a function of the output y (DESIGN §1), as an engine draws it:

    r(y) = log L(y | t, x_K) - log L(y | t', x_K),   L(y | t, x_K) = E[p_M(y | X) | X_i = t, X_K = x_K],

for a scalar query released with Laplace or geometric noise of scale b, with its limits as
y -> ±inf (the horizontal asymptotes). Each engine computes L from what it computed the leakage
from (`Engine.witness_curve`, returning a `base.Curve`); this module holds what they share: the
checks that a curve applies, its y grid, and the curve of a finite mixture of Laplace kernels (the
exact engine's enumerated joint, the sampling engine's draws).

The y grid holds the witness output and, up to MAX_BREAKS of them, the mixture's breakpoints (every
one for an exact mixture), so the curve's maximum, or a limit, is the supremum the engine found.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import logsumexp

from ddpbayes.engines.base import Curve, NoCurve, Witness
from ddpbayes.errors import InputError
from ddpbayes.mechanisms.laplace import weighted_log_mixture
from ddpbayes.problem import Problem

GRID = 241  # y values on the regular part of the grid
MAX_BREAKS = 400  # a sampled mixture's breakpoints join the grid up to this many

Mixture = Callable[[Problem, Witness, float], tuple[np.ndarray, np.ndarray]]  # t -> (log weights, query values)


def check_drawable(problem: Problem, witness: Witness | None) -> None:
    """NoCurve unless the problem is a scalar query (one output: linear, or an expr:/fn: one) with
    Laplace or geometric noise and the witness names its pair (t, t')."""
    mech = problem.mechanism
    if not mech.laplace:
        raise NoCurve(f"the curve is drawn for Laplace or geometric noise, not {mech.kind}")
    if problem.query.weights(problem.model.n) is None and not _scalar(problem):
        raise NoCurve(f"the curve is drawn for a scalar query, not {problem.query.spec} (several outputs)")
    if witness is None or witness.t is None or witness.t_prime is None:
        raise NoCurve("the engine reported no witness pair (t, t')")


def _scalar(problem: Problem) -> bool:
    """The query has one output, as evaluated at one state of the domains."""
    probe = [d.lo if math.isfinite(d.lo) else (d.hi if math.isfinite(d.hi) else 0.0) for d in problem.model.domains]
    try:
        return problem.query.values(np.array([probe])).shape[1] == 1
    except InputError:  # not finite at that state: no curve rather than a guess
        return False


def mixture_curve(problem: Problem, notion: str, witness: Witness, mixture: Mixture, method: str,
                  every_break: bool) -> Curve:
    """r(y) when L(y | t, x_K) is a finite mixture of Laplace kernels (`mixture` gives its weights);
    `every_break`: put every breakpoint on the grid (else only up to MAX_BREAKS of them)."""
    b = problem.mechanism.scale
    (lw1, q1), (lw2, q2) = mixture(problem, witness, witness.t), mixture(problem, witness, witness.t_prime)
    q = np.concatenate([q1, q2])
    lo, hi = np.quantile(q, [0.001, 0.999]) if q.size > 1000 else (q.min(), q.max())
    breaks = np.unique(q)
    if breaks.size > MAX_BREAKS and not every_break:  # thousands of MCMC draws
        breaks = np.array([])
    witness_y = [v for v in (witness.y or ()) if math.isfinite(v)]
    y = grid(lo - 5 * b, hi + 5 * b, [*breaks, *witness_y], integer=problem.mechanism.discrete)
    r = weighted_log_mixture(lw1, q1, y, b) - weighted_log_mixture(lw2, q2, y, b)
    limits = (
        float(logsumexp(lw1 - q1 / b) - logsumexp(lw2 - q2 / b)),
        float(logsumexp(lw1 + q1 / b) - logsumexp(lw2 + q2 / b)),
    )
    return Curve(notion, witness, dict(witness.known_values or {}), y, r, limits, method,
                 problem.mechanism.discrete)


def grid(lo: float, hi: float, extra: list[float], integer: bool) -> np.ndarray:
    """The y values of a curve: every integer (geometric noise), or a regular grid plus `extra`."""
    if integer:
        return np.arange(math.floor(lo), math.ceil(hi) + 1, dtype=float)
    return np.unique(np.concatenate([np.linspace(lo, hi, GRID), np.asarray(extra, dtype=float)]))
