"""Gaussian engine: jointly Gaussian tuples, a linear query, Laplace noise (DESIGN §2.2).

With C = Cov(X_{i ∪ U} | X_K) (a Schur complement of Sigma) and beta_j = C_ji / C_ii, the
query w·X released with Lap(b) and the target's domain [lo, hi]:

    leak(i, K) = (hi - lo) / b * |c(i, K)|,   c(i, K) = w_i + sum_{j in U} w_j beta_j.

Why: given X_i = t and X_K = x_K, w·X is Gaussian with mean affine in t with slope c(i, K) and
a variance free of t, so L(y | t, x_K) is one Laplace–Gaussian convolution shifted by c t. Its
log-derivative is bounded by 1/b (a Laplace convolution), so the log-ratio is at most
|c| (hi - lo) / b, and it tends to that as y -> ±inf. Hence the witness: t, t' = hi, lo
(swapped when c < 0), y = +inf as a limit (not attained unless U is empty); the known values
x_K do not matter (the witness has none). An unbounded domain gives inf, unless c = 0.
Latent Gaussian variables are marginalised in Sigma (`gaussian_graph`). N(i) = {j : Sigma_ij != 0}.

`pdp_worst` takes pdp over every known set without listing the lattice (`gaussian_lattice`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import log_ndtr

from ddpbayes.engines.base import AdversaryLeakage, Engine, Witness
from ddpbayes.engines.curves import Curve, check_drawable, grid
from ddpbayes.engines.gaussian.graph import tuple_covariance, tuple_mean, unsupported_reason
from ddpbayes.engines.gaussian.lattice import exhaustive, greedy, snap
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Laplace
from ddpbayes.problem import Adversary, Problem

INDEPENDENT = 1e-12  # |Sigma_ij| below this times sqrt(Sigma_ii Sigma_jj) counts as 0 (rounding)


class GaussianEngine(Engine):
    name = "gaussian"
    searches_lattice = True

    def supports(self, problem: Problem) -> str | None:
        mech = problem.mechanism
        if not isinstance(mech, Laplace) or mech.kind != "laplace":
            return f"it takes Laplace noise, not {mech.kind}"
        if problem.query.weights(problem.model.n) is None:
            return f"it takes a linear query, not {problem.query.name}"
        return unsupported_reason(problem.model)

    def leakage(self, problem: Problem) -> list[AdversaryLeakage]:
        cov = tuple_covariance(problem.model)
        w = problem.query.weights(problem.model.n)
        return [_result(problem, adv, coefficient(cov, w, adv.target, adv.known)) for adv in problem.adversaries]

    def pdp_worst(self, problem: Problem, targets: Sequence[int], top_k: int | None = None) -> list[AdversaryLeakage]:
        """Each target's worst pdp adversary over every known set: exhaustive, or seed 003's
        greedy search keeping `top_k` known sets per layer (a lower bound)."""
        if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
            raise InputError(f"top_k must be a positive integer, got {top_k}")
        cov = tuple_covariance(problem.model)
        w = problem.query.weights(problem.model.n)
        best = exhaustive(cov, w) if top_k is None else greedy(cov, w, top_k)
        return [_result(problem, Adversary(i, best[i][1]), best[i][0]) for i in targets]

    def covariance(self, problem: Problem) -> np.ndarray | None:
        return tuple_covariance(problem.model)

    def witness_curve(self, problem: Problem, notion: str, witness: Witness | None) -> Curve:
        """Given X_i = t and X_K = x_K the query is N(m(t), v), so L is a Laplace–Gaussian
        convolution, evaluated in closed form in log space; x_K is set to its mean (another x_K
        shifts the curve in y without changing it)."""
        check_drawable(problem, witness)
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
        margin = 4 * math.sqrt(max(var, 0.0)) + var / b + 5 * b
        y = grid(min(m1, m2) - margin, max(m1, m2) + margin, [m1, m2], integer=False)
        r = _log_laplace_normal(y - m1, b, var) - _log_laplace_normal(y - m2, b, var)
        return Curve(notion, witness, {k: float(mean[k]) for k in known}, y, r, ((m2 - m1) / b, (m1 - m2) / b),
                     "gaussian: closed-form Laplace–Gaussian convolution, x_K at its mean (another x_K shifts the "
                     "curve in y)", False)

    def dependence_sets(self, problem: Problem) -> list[frozenset[int]]:
        cov = tuple_covariance(problem.model)
        sd = np.sqrt(np.diag(cov))
        dependent = np.abs(cov) > INDEPENDENT * np.outer(sd, sd)
        return [frozenset(int(j) for j in np.flatnonzero(row) if j != i) for i, row in enumerate(dependent)]


def coefficient(cov: np.ndarray, w: np.ndarray, target: int, known: frozenset[int]) -> float:
    """c(i, K) = (C w_S)_i / C_ii with C = Sigma_SS - Sigma_SK Sigma_KK^{-1} Sigma_KS, S = all but K."""
    known = sorted(known)
    s = [target] + [j for j in range(len(w)) if j != target and j not in known]
    c = cov[np.ix_(s, s)]
    if known:
        c = c - cov[np.ix_(s, known)] @ np.linalg.solve(cov[np.ix_(known, known)], cov[np.ix_(known, s)])
    root = np.sqrt(np.diag(c))
    return float(snap(np.array(c[0] @ w[s] / c[0, 0]), np.abs(w[s]) @ root / root[0]))


def _log_laplace_normal(u: np.ndarray, b: float, var: float) -> np.ndarray:
    """log of (Laplace(b) * N(0, var))(u) up to a constant, stable for any |u|:
    e^{-u/b} Phi((u - var/b)/s) + e^{u/b} Phi(-(u + var/b)/s), s = sqrt(var)."""
    if var <= 0:
        return -np.abs(u) / b
    s = math.sqrt(var)
    return np.logaddexp(-u / b + log_ndtr((u - var / b) / s), u / b + log_ndtr(-(u + var / b) / s))


def _result(problem: Problem, adv: Adversary, c: float) -> AdversaryLeakage:
    dom = problem.model.domains[adv.target]
    t, t_prime = (dom.hi, dom.lo) if c >= 0 else (dom.lo, dom.hi)
    witness = Witness(adv, None, t, t_prime, (math.inf,))
    if c == 0:
        return AdversaryLeakage(adv, 0.0, witness)
    if math.isinf(dom.width):
        name = problem.model.names[adv.target]
        reason = f"tuple {name} has the unbounded domain {dom} and the query moves with it (coefficient {c:.6g})"
        return AdversaryLeakage(adv, math.inf, witness, reason=reason)
    return AdversaryLeakage(adv, dom.width * abs(c) / problem.mechanism.scale, witness)
