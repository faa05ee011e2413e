"""Closed forms for Gaussian noise on jointly Gaussian tuples with sympy (DESIGN §3.5).

The query w·X released as w·X + N(0, σ²): given X_i = t and x_K, w·X + E is Gaussian with mean
affine in t (slope c) and variance σ² + Var(w·X | X_i, X_K), free of t, so the privacy loss is
Gaussian and the adversary is μ-GDP with (the gaussian engine's formula; `engines/gaussian/noise.py`)

    C = Sigma_SS - Sigma_SK Sigma_KK^{-1} Sigma_KS                 (S = target first, then U)
    c = (C w_S)_i / C_ii                                            (= w_i + sum_{j in U} w_j C_ji / C_ii)
    Var(w·X | X_i, X_K) = w_S^T C w_S - (C w_S)_i^2 / C_ii
    μ = width |c| / sqrt(σ² + Var(w·X | X_i, X_K)),

its profile δ(ε) = Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2) (Balle & Wang 2018, Thm. 8; Dong, Roth &
Su 2019) and zCDP ρ = μ²/2. Equicorrelation ρ_c with unit variances, n tuples, sum, K = {}:
μ = width |1 + (n-1) ρ_c| / sqrt(σ² + (n-1)(1 - ρ_c)(1 + (n-1) ρ_c)).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from ddpbayes.errors import InputError
from ddpbayes.mechanisms.gaussian.gdp import gdp_epsilon
from ddpbayes.symbolic.gaussian import WIDTH, Derivation, Matrixish, _covariance, _index, _positive, _vector
from ddpbayes.symbolic.parse import parse_vector

SIGMA = sympy.Symbol("sigma", positive=True)
EPSILON = sympy.Symbol("epsilon", nonnegative=True)
MU = sympy.Symbol("mu", positive=True)
PHI = sympy.Function("Phi")  # the standard normal CDF, kept by name in the printed profile
RESERVED = {"width", "sigma", "epsilon", "mu", "Phi"}


def derive_gaussian_gdp(
    cov: Matrixish,
    mean: str | Sequence | None = None,
    target: int = 0,
    known: Sequence[int] = (),
    weights: str | Sequence | None = None,
    width: float | None = None,
    sigma: float | None = None,
    delta: float | None = None,
) -> Derivation:
    """μ(target, known) of w·X + N(0, σ²) for X ~ N(mean, cov), with ρ = μ²/2, δ(ε) and (given
    `delta` and a numeric μ) ε at δ; `width` and `sigma` stay symbols when not given.

    Parameters
    ----------
    cov : str, sympy.Matrix or sequence of sequences
        The covariance, numeric or symbolic.
    mean : str, sequence or None, default None
        The mean (checked for length only).
    target : int, default 0
        The target tuple i.
    known : sequence of int, default ()
        The known tuples K.
    weights : str, sequence or None, default None
        The query's weights w; None: the sum.
    width : float or None, default None
        The width of the target's domain; None: the symbol ``width``.
    sigma : float or None, default None
        The noise's σ; None: the symbol ``sigma``.
    delta : float or None, default None
        With a numeric μ, the δ at which ε is computed, in (0, 1).

    Returns
    -------
    Derivation
        μ, with extras zcdp_rho and gdp_delta_of_epsilon, and numbers delta and epsilon_at_delta.

    Raises
    ------
    InputError
        As `derive_gaussian`, or for a `delta` outside (0, 1).

    References
    ----------
    Balle and Wang (2018), Thm. 8; Dong, Roth and Su (2019).
    """
    given = {WIDTH: _positive(width, "--width", WIDTH), SIGMA: _positive(sigma, "--sigma", SIGMA)}
    if delta is not None and not 0 < delta < 1:
        raise InputError(f"--delta must lie strictly between 0 and 1, got {delta}")
    mean = parse_vector(mean, "--mean") if isinstance(mean, str) else mean
    weights = parse_vector(weights, "--weights") if isinstance(weights, str) else weights
    sig, notes = _covariance(cov, RESERVED)
    n = sig.rows
    _vector(mean, n, "--mean")
    w = _vector(weights, n, "--weights") if weights is not None else [sympy.Integer(1)] * n
    target, known = _index(target, n, "target"), sorted({_index(k, n, "known tuple") for k in known})
    if target in known:
        raise InputError(f"known tuple {target} is also the target")
    s = [target] + [j for j in range(n) if j != target and j not in known]
    c = _conditional(sig, s, known)
    var = sympy.factor(sympy.cancel(c[0, 0]))
    if var == 0:
        raise InputError(f"singular conditional covariance: Var(X_{target} | X_K) = 0 for K = {known} "
                         "(the known tuples determine the target)")
    if var.free_symbols:
        notes.append(f"Var(X_{target} | X_K) = {sympy.sstr(var)} > 0")
    ws = sympy.Matrix([w[j] for j in s])
    cw = c * ws
    slope = sympy.factor(sympy.cancel(cw[0] / var))
    rest = sympy.factor(sympy.cancel((ws.T * cw)[0] - cw[0] ** 2 / var))  # Var(w·X | X_i, X_K)
    mu = sympy.Integer(0) if slope == 0 else WIDTH * sympy.Abs(slope) / sympy.sqrt(SIGMA**2 + rest)
    mu = sympy.simplify(mu.subs(given))
    profile = PHI(-EPSILON / MU + MU / 2) - sympy.exp(EPSILON) * PHI(-EPSILON / MU - MU / 2)
    extras = {"zcdp_rho": sympy.simplify(mu**2 / 2), "gdp_delta_of_epsilon": profile}
    numbers = {}
    if delta is not None and not mu.free_symbols:
        numbers = {"delta": delta, "epsilon_at_delta": gdp_epsilon(delta, float(mu))}
    notes += [
        "X jointly Gaussian; the query w·X is released with Gaussian noise N(0, sigma^2)",
        f"target X_{target} ranges over an interval of width 'width'; known K = {known}: the values x_K do not matter",
        f"Var(w·X | X_i, X_K) = {sympy.sstr(rest)}: the privacy loss is Gaussian, the adversary is mu-GDP",
        "delta(epsilon) with Phi the standard normal CDF and mu the expression (Balle & Wang 2018, Thm. 8)",
    ]
    return Derivation(mu, notes, extras, numbers)


def _conditional(sig: sympy.Matrix, s: list[int], known: list[int]) -> sympy.Matrix:
    """Cov(X_S | X_K) = Sigma_SS - Sigma_SK Sigma_KK^{-1} Sigma_KS (Schur complement)."""
    c = sig.extract(s, s)
    if not known:
        return c
    sigma_kk = sig.extract(known, known)
    if sympy.simplify(sigma_kk.det()) == 0:
        raise InputError(f"the known tuples' covariance Cov(X_K), K = {known}, is singular")
    return c - sig.extract(s, known) * sigma_kk.LUsolve(sig.extract(known, s))
