"""The witness's log-ratio as a function of the output y (DESIGN §1):

    r(y) = log L(y | t, x_K) - log L(y | t', x_K),   L(y | t, x_K) = E[p_M(y | X) | X_i = t, X_K = x_K],

for a scalar query released with Laplace or geometric noise of scale b, with its limits as
y -> ±inf (the horizontal asymptotes). One small function per engine kind, each computing L
from what that engine computed from:

- exact: the enumerated joint (`joint_table`), L a finite mixture of Laplace kernels;
- sampling: the engine's cached MCMC draws of the query given (t, x_K), the same
  Rao–Blackwellised mixture the engine estimated (a Monte Carlo estimate);
- gaussian: given X_i = t, X_K = x_K the query is N(m(t), v), so L is a Laplace–Gaussian
  convolution, evaluated in closed form in log space; x_K is set to its mean (another x_K
  shifts the curve in y without changing it).

The y grid holds the witness output and, up to MAX_BREAKS of them, the mixture's breakpoints (every
one for the exact engine), so the curve's maximum, or a limit, is the supremum the engine found.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytensor
import pytensor.tensor as pt
from scipy.special import log_ndtr, logsumexp

from ddpbayes.engines import Witness
from ddpbayes.engines.gaussian_graph import tuple_covariance
from ddpbayes.engines.joint import DEFAULT_MAX_STATES, joint_table
from ddpbayes.engines.sampling.runs import Settings, sample_event
from ddpbayes.mechanisms import Laplace
from ddpbayes.model import DependenceModel
from ddpbayes.problem import Problem

GRID = 241  # y values on the regular part of the grid
MAX_BREAKS = 400  # a sampled mixture's breakpoints join the grid up to this many


class NoCurve(Exception):
    """The curve cannot be drawn for this witness; the message says why."""


@dataclass(frozen=True)
class Curve:
    notion: str
    witness: Witness
    known_values: dict[int, float]  # the x_K the curve conditions on
    y: np.ndarray
    log_ratio: np.ndarray
    limits: tuple[float, float]  # r(y) as y -> -inf and y -> +inf
    method: str
    integer: bool  # geometric noise: only integer outputs exist

    def to_json(self) -> dict:
        return {
            "notion": self.notion,
            "target": self.witness.adversary.target,
            "known": sorted(self.witness.adversary.known),
            "known_values": {str(k): v for k, v in sorted(self.known_values.items())},
            "t": self.witness.t,
            "t_prime": self.witness.t_prime,
            "method": self.method,
            "limit_minus_inf": self.limits[0],
            "limit_plus_inf": self.limits[1],
            "y": [float(v) for v in self.y],
            "log_ratio": [float(v) for v in self.log_ratio],
        }


def witness_curve(problem: Problem, engine: str, notion: str, witness: Witness | None) -> Curve:
    """r(y) for the witness an engine reported; NoCurve when it does not apply."""
    mech = problem.mechanism
    if not isinstance(mech, Laplace):
        raise NoCurve(f"the curve is drawn for Laplace or geometric noise, not {mech.kind}")
    if problem.query.weights(problem.model.n) is None:
        raise NoCurve(f"the curve is drawn for a scalar linear query, not {problem.query.name}")
    if witness is None or witness.t is None or witness.t_prime is None:
        raise NoCurve("the engine reported no witness pair (t, t')")
    if engine == "analytic":
        raise NoCurve("dp is model-free: its witness ratio is that of two Laplace densities a sensitivity apart")
    if engine == "exact":
        return _mixture_curve(problem, notion, witness, _exact_mixture, "exact: enumerated joint")
    if engine == "sampling":
        return _mixture_curve(problem, notion, witness, _sampled_mixture,
                              "sampling: Monte Carlo estimate from the engine's MCMC draws")
    if engine == "gaussian":
        return _gaussian_curve(problem, notion, witness)
    raise NoCurve(f"no curve for engine {engine}")


def witness_draws(problem: Problem, witness: Witness) -> list[tuple[float, np.ndarray]]:
    """The sampling engine's query draws (chains, draws) given X_i = t and given X_i = t' (cached runs)."""
    return [(t, _query_draws(problem, witness, t)) for t in (witness.t, witness.t_prime)]


def _exact_mixture(problem: Problem, witness: Witness, t: float) -> tuple[np.ndarray, np.ndarray]:
    """(log weights, query values) of L(y | t, x_K) from the enumerated joint."""
    table = joint_table(problem.model, problem.options.get("max_states", DEFAULT_MAX_STATES))
    rows = table.x[:, witness.adversary.target] == t
    for k, v in (witness.known_values or {}).items():
        rows &= table.x[:, k] == v
    q = problem.query.values(table.x[rows])[:, 0]
    logw = table.logp[rows]
    return logw - logsumexp(logw), q


def _sampled_mixture(problem: Problem, witness: Witness, t: float) -> tuple[np.ndarray, np.ndarray]:
    q = _query_draws(problem, witness, t).ravel()
    return np.full(q.size, -math.log(q.size)), q


def _query_draws(problem: Problem, witness: Witness, t: float) -> np.ndarray:
    event = {**(witness.known_values or {}), witness.adversary.target: t}
    run = sample_event(problem.model, event, Settings.from_options(problem.options))
    return run.x @ problem.query.weights(problem.model.n)


def _mixture_curve(problem: Problem, notion: str, witness: Witness, mixture, method: str) -> Curve:
    """r(y) when L(y | t, x_K) is a finite mixture of Laplace kernels (`mixture` gives its weights)."""
    b = problem.mechanism.scale
    (lw1, q1), (lw2, q2) = mixture(problem, witness, witness.t), mixture(problem, witness, witness.t_prime)
    q = np.concatenate([q1, q2])
    lo, hi = np.quantile(q, [0.001, 0.999]) if q.size > 1000 else (q.min(), q.max())
    breaks = np.unique(q)
    if breaks.size > MAX_BREAKS and mixture is not _exact_mixture:  # thousands of MCMC draws
        breaks = np.array([])
    witness_y = [v for v in (witness.y or ()) if math.isfinite(v)]
    y = _grid(lo - 5 * b, hi + 5 * b, [*breaks, *witness_y], integer=problem.mechanism.kind == "geometric")
    r = _log_mixture(lw1, q1, y, b) - _log_mixture(lw2, q2, y, b)
    limits = (
        float(logsumexp(lw1 - q1 / b) - logsumexp(lw2 - q2 / b)),
        float(logsumexp(lw1 + q1 / b) - logsumexp(lw2 + q2 / b)),
    )
    return Curve(notion, witness, dict(witness.known_values or {}), y, r, limits, method,
                 problem.mechanism.kind == "geometric")


def _log_mixture(logw: np.ndarray, q: np.ndarray, y: np.ndarray, b: float) -> np.ndarray:
    """log sum_r w_r exp(-|y - q_r| / b) for every y (the common 1/(2b) cancels in ratios)."""
    values, inverse = np.unique(q, return_inverse=True)
    merged = np.full(values.size, -np.inf)
    np.logaddexp.at(merged, inverse, logw)
    return logsumexp(merged[None, :] - np.abs(y[:, None] - values[None, :]) / b, axis=1)


def _gaussian_curve(problem: Problem, notion: str, witness: Witness) -> Curve:
    model, b = problem.model, problem.mechanism.scale
    cov, mean = tuple_covariance(model), tuple_mean(model)
    w = problem.query.weights(model.n)
    i, known = witness.adversary.target, sorted(witness.adversary.known)
    given = [i, *known]
    rest = [j for j in range(model.n) if j not in given]
    gain = cov[np.ix_(rest, given)] @ np.linalg.inv(cov[np.ix_(given, given)]) if rest else np.zeros((0, len(given)))
    var = float(w[rest] @ (cov[np.ix_(rest, rest)] - gain @ cov[np.ix_(given, rest)]) @ w[rest]) if rest else 0.0

    def centre(t: float) -> float:
        x = mean[given].copy()
        x[0] = t
        return float(w[given] @ x + w[rest] @ (mean[rest] + gain @ (x - mean[given])))

    m1, m2 = centre(witness.t), centre(witness.t_prime)
    sd = math.sqrt(max(var, 0.0))
    margin = 4 * sd + var / b + 5 * b
    y = _grid(min(m1, m2) - margin, max(m1, m2) + margin, [m1, m2], integer=False)
    r = _log_laplace_normal(y - m1, b, var) - _log_laplace_normal(y - m2, b, var)
    known_values = {k: float(mean[k]) for k in known}
    return Curve(notion, witness, known_values, y, r, ((m2 - m1) / b, (m1 - m2) / b),
                 "gaussian: closed-form Laplace–Gaussian convolution, x_K at its mean (another x_K shifts the "
                 "curve in y)", False)


def _log_laplace_normal(u: np.ndarray, b: float, var: float) -> np.ndarray:
    """log of (Laplace(b) * N(0, var))(u) up to a constant, stable for any |u|:
    e^{-u/b} Phi((u - var/b)/s) + e^{u/b} Phi(-(u + var/b)/s), s = sqrt(var)."""
    if var <= 0:
        return -np.abs(u) / b
    s = math.sqrt(var)
    return np.logaddexp(-u / b + log_ndtr((u - var / b) / s), u / b + log_ndtr(-(u + var / b) / s))


def _grid(lo: float, hi: float, extra: list[float], integer: bool) -> np.ndarray:
    if integer:
        return np.arange(math.floor(lo), math.ceil(hi) + 1, dtype=float)
    return np.unique(np.concatenate([np.linspace(lo, hi, GRID), np.asarray(extra, dtype=float)]))


def tuple_mean(model: DependenceModel) -> np.ndarray:
    """E[X] of a linear-Gaussian model: each variable's mean parameter evaluated at its parents'
    means, in the model's (topological) order — exact, as every mean is affine (`gaussian_graph`)."""
    if "gaussian_mean" not in model.cache:
        pm_model = model.model
        rvs = pm_model.free_RVs
        values = [pm_model.rvs_to_values[rv] for rv in rvs]
        mus = [pt.broadcast_to(rv.owner.op.dist_params(rv.owner)[0], rv.type.shape) for rv in rvs]
        fn = pytensor.function(values, pm_model.replace_rvs_by_values(mus), on_unused_input="ignore")
        means = [np.zeros(v.type.shape, dtype=v.dtype) for v in values]
        for k in range(len(rvs)):  # a variable's mean uses earlier variables' means only
            means[k] = np.asarray(fn(*means)[k], dtype=values[k].dtype)
        index = {rv: k for k, rv in enumerate(rvs)}
        model.cache["gaussian_mean"] = np.array(
            [float(means[index[s.rv]] if s.index is None else means[index[s.rv]][s.index]) for s in model.slots])
    return model.cache["gaussian_mean"]
