"""Gaussian engine: jointly Gaussian tuples, a linear query, Laplace or Gaussian noise (DESIGN §2.2, §3.5).

With C = Cov(X_{i ∪ U} | X_K) (a Schur complement of Sigma) and beta_j = C_ji / C_ii, the
query A x (m rows; one row w for w·x; A = I for identity) released with Lap(b) on every output coordinate and the
target's domain [lo, hi]:

    leak(i, K) = (hi - lo) / b * ||c(i, K)||_1,   c(i, K) = A_{:,i} + sum_{j in U} A_{:,j} beta_j   (m,)

(for one row, |w_i + sum_U w_j beta_j|). Why: given X_i = t and X_K = x_K, A X is Gaussian with
mean affine in t with slope c(i, K) and a covariance free of t, so L(y | t, x_K) = h(y - c t) for
one density h, a Gaussian convolved with Laplace noise on each coordinate. For every value of
the Gaussian part the product of the Laplace kernels changes by at most exp(||c||_1 |t - t'| / b)
when t moves, so the log-ratio is at most ||c||_1 (hi - lo) / b; it tends to that as every y_c
goes to ±inf with the sign of c_c (dominated convergence; DESIGN §2.2). Hence the witness:
t, t' = hi, lo (swapped when the first nonzero c_c is negative), y_c = ±inf as a limit (not
attained unless U is empty); the known values x_K do not matter (the witness has none). An
unbounded domain gives inf, unless c = 0. Latent Gaussian variables are marginalised in Sigma
(`gaussian_graph`). N(i) = {j : Sigma_ij != 0}.

Large models with a sparse precision (a CAR on a graph) are solved from the precision by one
sparse factorisation per connected component (`gaussian_sparse`), never forming Sigma; the
rest from the dense covariance. `pdp_worst` takes pdp over every known set without listing the
lattice (`gaussian_lattice`, dense path only).

Gaussian noise N(0, σ_c²) per output coordinate (not the discrete Gaussian): the two laws of the
output are Gaussians of one covariance W = Cov(A X | X_i, X_K) + diag(σ²) whose means are c (t - t')
apart, so the adversary is μ-GDP with μ = (hi - lo) sqrt(c^T W^{-1} c) (`noise`; sparse path
`sparse_noise`); the result is ε at the mechanism's δ on μ-GDP's profile (DESIGN §3.5).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import log_ndtr
from threadpoolctl import threadpool_limits

from ddpbayes.engines.base import AdversaryLeakage, Curve, Engine, NoCurve, Witness
from ddpbayes.engines.curves import check_drawable, grid
from ddpbayes.engines.gaussian.graph import tuple_covariance, tuple_mean, unsupported_reason, use_sparse
from ddpbayes.engines.gaussian.lattice import exhaustive, greedy, snap
from ddpbayes.engines.gaussian.noise import gdp_profiles, loss_scale, noise_variances
from ddpbayes.engines.gaussian.sparse import sparse_law
from ddpbayes.engines.gaussian.sparse_noise import gaussian_scores
from ddpbayes.errors import InputError
from ddpbayes.model.supports import wider_than_declared
from ddpbayes.problem import Adversary, Problem

INDEPENDENT = 1e-12  # |Sigma_ij| below this times sqrt(Sigma_ii Sigma_jj) counts as 0 (rounding)


class GaussianEngine(Engine):
    name = "gaussian"
    searches_lattice = True

    def supports(self, problem: Problem) -> str | None:
        mech = problem.mechanism
        if _row_scales(problem, 1) is None and not gaussian_noise(mech):
            if mech.composed:
                return "it takes Laplace noise in every release of a composition"
            return f"it takes Laplace or Gaussian noise, not {mech.kind}" + (
                " (integer outputs: the privacy loss is not Gaussian)" if mech.gaussian and mech.discrete else "")
        if problem.query.matrix(problem.model.n) is None:
            return f"it takes a linear query (sum, count, mean, linear:, centroids:, identity), not {problem.query.name}"
        return unsupported_reason(problem.model)

    def leakage(self, problem: Problem) -> list[AdversaryLeakage]:
        model, advs = problem.model, problem.adversaries
        a = problem.query.matrix(model.n)
        if gaussian_noise(problem.mechanism):
            return _gaussian_leakage(problem, a, advs)
        if use_sparse(model):
            coefs = sparse_law(model).coefficients(a, advs)
        else:
            coefs = _dense_coefficients(tuple_covariance(model), a, advs)
        return _results(problem, advs, coefs)

    def pdp_worst(self, problem: Problem, targets: Sequence[int],
                  top_k: int | None = None) -> list[AdversaryLeakage] | None:
        """Each target's worst pdp adversary over every known set: exhaustive, or seed 003's
        greedy search keeping `top_k` known sets per layer (a lower bound). None for a model on
        the sparse path (thousands of tuples: the adversaries are counted, and refused, one by one)."""
        if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
            raise InputError(f"top_k must be a positive integer, got {top_k}")
        if use_sparse(problem.model):
            return None
        cov = tuple_covariance(problem.model)
        a = problem.query.matrix(problem.model.n)
        if gaussian_noise(problem.mechanism):
            if top_k is not None:
                raise InputError("the greedy lattice search ranks known sets by Laplace leakage; with Gaussian noise "
                                 "use the exhaustive search (no top_k) or audit --search greedy")
            sigma = np.sqrt(noise_variances(problem.mechanism, len(a)))  # rows / σ_c: unit noise, same μ
            best = exhaustive(cov, (a / sigma[:, None]).T, gaussian=True)
            return _gdp_results(problem, [Adversary(i, best[i][1]) for i in targets],
                                [best[i][0] * sigma for i in targets], [best[i][2] for i in targets])
        scales = _row_scales(problem, len(a))  # the search maximises sum_c |c_c| / b_c: rows of A / b_c
        best = exhaustive(cov, (a / scales[:, None]).T) if top_k is None else greedy(cov, (a / scales[:, None]).T, top_k)
        coefs = np.array([best[i][0] for i in targets]).reshape(len(targets), len(a)) * scales
        return _results(problem, [Adversary(i, best[i][1]) for i in targets], coefs)

    def covariance(self, problem: Problem) -> np.ndarray | None:
        """Sigma for reports' closed forms of a scalar linear query; None on the sparse path (Sigma
        is never formed) and for several output coordinates (the closed forms have one row)."""
        if problem.query.weights(problem.model.n) is None or use_sparse(problem.model):
            return None
        return tuple_covariance(problem.model)

    def witness_curve(self, problem: Problem, notion: str, witness: Witness | None) -> Curve:
        """Given X_i = t and X_K = x_K the query is N(m(t), v), so L is a Laplace–Gaussian
        convolution, evaluated in closed form in log space; x_K is set to its mean (another x_K
        shifts the curve in y without changing it). Not on the sparse path, which never forms Sigma."""
        if gaussian_noise(problem.mechanism):
            raise NoCurve("with Gaussian noise the log-ratio is linear in y (both laws of the output are Gaussians "
                          "with one covariance), unbounded: the leakage is the GDP profile, not a supremum over y")
        check_drawable(problem, witness)
        if use_sparse(problem.model):
            raise NoCurve("the gaussian engine's sparse path (a large sparse precision) draws no witness curve")
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

    def notes(self, problem: Problem) -> list[str]:
        """Whether declared domains narrower than the Gaussian support bound a tuple that another
        tuple's leakage conditions on or integrates out (one with a dependence): the engine
        does not truncate the model to them (`model.supports.wider_than_declared`)."""
        model = problem.model
        wider = wider_than_declared([slot.rv for slot in model.slots], model.domains)
        dependent = self.dependence_sets(problem)
        every = model.names  # built anew on each access: once here
        names = [every[k] for k in wider if dependent[k]]
        if not names:
            return []
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        note = (f"the declared domains of {shown} are narrower than the model's Gaussian support: a target's domain "
                "gives the values t, t' compared, but the other tuples are conditioned on and integrated out as "
                "untruncated Gaussians, so the answer is for the untruncated model, not the model truncated to the "
                "declared domains")
        return [note]

    def dependence_sets(self, problem: Problem) -> list[frozenset[int]]:
        if use_sparse(problem.model):
            return sparse_law(problem.model).dependence_sets()
        cov = tuple_covariance(problem.model)
        sd = np.sqrt(np.diag(cov))
        dependent = np.abs(cov) > INDEPENDENT * np.outer(sd, sd)
        return [frozenset(int(j) for j in np.flatnonzero(row) if j != i) for i, row in enumerate(dependent)]


@threadpool_limits.wrap(limits=1, user_api="blas")
def _dense_coefficients(cov: np.ndarray, a: np.ndarray, advs: Sequence[Adversary]) -> np.ndarray:
    """c(i, K) of every adversary (N, m) from Sigma; one BLAS thread (each adversary's products are
    small; on two busy cores threads cost more than they save, as on the sparse path)."""
    return np.array([coefficients(cov, a, adv.target, adv.known) for adv in advs]).reshape(len(advs), len(a))


def coefficients(cov: np.ndarray, a: np.ndarray, target: int, known: frozenset[int]) -> np.ndarray:
    """c(i, K) = (A_S C_{S,i}) / C_ii (m,) with C = Sigma_SS - Sigma_SK Sigma_KK^{-1} Sigma_KS, S = all but K."""
    s, c = _conditional(cov, target, known)
    return _slope(a[:, s], c)


def gaussian_score(cov: np.ndarray, a: np.ndarray, noise: np.ndarray, target: int,
                   known: frozenset[int]) -> tuple[np.ndarray, float]:
    """c(i, K) and c^T W^{-1} c = μ² / width² under noise variances `noise` (m,) (`noise` module):
    M = Cov(Y | X_K) = A_S C A_S^T + diag(noise), d = C_ii."""
    s, c = _conditional(cov, target, known)
    slope = _slope(a[:, s], c)
    cov_y = a[:, s] @ c @ a[:, s].T + np.diag(noise)
    return slope, float(loss_scale(cov_y[None], slope[None, None], np.array([[c[0, 0]]]), noise.min())[0, 0])


def _conditional(cov: np.ndarray, target: int, known: frozenset[int]) -> tuple[list[int], np.ndarray]:
    """S = target first, then the unknown tuples, and C = Cov(X_S | X_K) (Schur complement)."""
    known = sorted(known)
    s = [target] + [j for j in range(len(cov)) if j != target and j not in known]
    c = cov[np.ix_(s, s)]
    if known:
        c = c - cov[np.ix_(s, known)] @ np.linalg.solve(cov[np.ix_(known, known)], cov[np.ix_(known, s)])
    return s, c


def _slope(a_s: np.ndarray, c: np.ndarray) -> np.ndarray:
    """A_S C_{S,i} / C_ii, rounding set to 0 (`lattice.snap`)."""
    root = np.sqrt(np.diag(c))
    return snap(a_s @ c[0] / c[0, 0], np.abs(a_s) @ root / root[0])


def gaussian_noise(mechanism) -> bool:
    """Continuous Gaussian noise (`mechanisms.Gaussian`, not the discrete one)."""
    return mechanism.gaussian and not mechanism.discrete


def _gaussian_leakage(problem: Problem, a: np.ndarray, advs: Sequence[Adversary]) -> list[AdversaryLeakage]:
    """Every adversary's GDP μ and profile (`noise` module), on the sparse or the dense path."""
    model = problem.model
    noise = noise_variances(problem.mechanism, len(a))
    if use_sparse(model):
        coefs, scores = gaussian_scores(sparse_law(model), a, noise, advs)
    else:
        cov = tuple_covariance(model)
        found = [gaussian_score(cov, a, noise, adv.target, adv.known) for adv in advs]
        coefs, scores = [c for c, _ in found], [q for _, q in found]
    return _gdp_results(problem, advs, coefs, scores)


def _gdp_results(problem: Problem, advs: Sequence[Adversary], coefs, scores) -> list[AdversaryLeakage]:
    """μ = width sqrt(c^T W^{-1} c) per adversary, the leakage ε(δ) of μ-GDP at the mechanism's δ,
    and its profile (`noise.gdp_profiles`, all at once); the witness compares t, t' = hi, lo (the
    loss is symmetric) and has no single output."""
    mech, domains, names = problem.mechanism, problem.model.domains, problem.model.names
    mus, reasons = np.empty(len(advs)), [None] * len(advs)
    for k, (adv, c, score) in enumerate(zip(advs, coefs, scores)):
        dom = domains[adv.target]
        mus[k] = 0.0 if not np.any(c) else math.inf if math.isinf(dom.width) else dom.width * math.sqrt(max(score, 0))
        if math.isinf(mus[k]):
            moves = f"coefficient {c[0]:.6g}" if len(c) == 1 else f"coefficients' L2 norm {np.linalg.norm(c):.6g}"
            reasons[k] = (f"tuple {names[adv.target]} has the unbounded domain {dom} and the query "
                          f"moves with it ({moves}): the Gaussian loss has mu = inf")
    at = mech.deltas.index(float(mech.delta))
    out = []
    for adv, profile, reason in zip(advs, gdp_profiles(mus, mech.deltas), reasons):
        dom = domains[adv.target]
        out.append(AdversaryLeakage(adv, profile.epsilons[at], Witness(adv, None, dom.hi, dom.lo, None),
                                    reason=reason, profile=profile))
    return out


def _log_laplace_normal(u: np.ndarray, b: float, var: float) -> np.ndarray:
    """log of (Laplace(b) * N(0, var))(u) up to a constant, stable for any |u|:
    e^{-u/b} Phi((u - var/b)/s) + e^{u/b} Phi(-(u + var/b)/s), s = sqrt(var)."""
    if var <= 0:
        return -np.abs(u) / b
    s = math.sqrt(var)
    return np.logaddexp(-u / b + log_ndtr((u - var / b) / s), u / b + log_ndtr(-(u + var / b) / s))


def _row_scales(problem: Problem, rows: int) -> np.ndarray | None:
    """The Laplace scale b_c of every output row (one b for Laplace noise, each release's own for
    a composition), or None when some noise is not Laplace."""
    return problem.mechanism.laplace_scales(rows)


def _results(problem: Problem, advs: Sequence[Adversary], coefs: np.ndarray) -> list[AdversaryLeakage]:
    """leak = width sum_c |c_c| / b_c for every adversary (coefs (N, m); one b: width ||c||_1 / b;
    DESIGN §3.1b), with its witness: t, t' = hi, lo,
    y_c = +inf where c_c >= 0 and -inf where c_c < 0, or all of it mirrored when the first nonzero
    c_c is negative (so that a one-row query's witness is y = +inf, with t and t' swapped when c < 0)."""
    norms = (np.abs(coefs) / _row_scales(problem, coefs.shape[1])).sum(axis=1)
    first = coefs[np.arange(len(coefs)), np.argmax(coefs != 0, axis=1)] if coefs.size else np.zeros(0)
    flips = np.where(first < 0, -1.0, 1.0)
    signs = np.where(flips[:, None] * coefs >= 0, math.inf, -math.inf)
    return [_result(problem, adv, c, float(norm), flip > 0, tuple(y.tolist()))
            for adv, c, norm, flip, y in zip(advs, coefs, norms, flips, signs)]


def _result(problem: Problem, adv: Adversary, c: np.ndarray, norm: float, upward: bool,
            y: tuple[float, ...]) -> AdversaryLeakage:
    dom = problem.model.domains[adv.target]
    t, t_prime = (dom.hi, dom.lo) if upward else (dom.lo, dom.hi)
    witness = Witness(adv, None, t, t_prime, y)
    if norm == 0:
        return AdversaryLeakage(adv, 0.0, witness)
    if math.isinf(dom.width):
        name = problem.model.names[adv.target]
        moves = f"coefficient {c[0]:.6g}" if len(c) == 1 else f"coefficients' L1 norm {np.abs(c).sum():.6g}"
        reason = f"tuple {name} has the unbounded domain {dom} and the query moves with it ({moves})"
        return AdversaryLeakage(adv, math.inf, witness, reason=reason)
    return AdversaryLeakage(adv, dom.width * norm, witness)
