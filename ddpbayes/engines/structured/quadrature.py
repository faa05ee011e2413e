"""Quadrature rules that turn a continuous latent into weighted nodes (issue 13, DESIGN §2.1b).

A continuous latent Z of a finite model (a Beta rate shared by all records, a Normal household
effect) is integrated out: P(x) = ∫ p(z) Π p(x_k | z) dz ≈ Σ_j W_j p(z_j) Π p(x_k | z_j), so Z
becomes a discrete slot with values z_j and a unary factor log W_j, and the structured engine
runs unchanged. The rule fits the latent's support and, where its parameters are constants,
its density (the weight function then cancels the density and the rule is exact for
polynomial likelihoods, e.g. Beta–Bernoulli):

- Beta(a, b): Gauss–Jacobi with weight (1 - x)^(b-1) (1 + x)^(a-1) on [-1, 1], z = (1 + x) / 2;
- another bounded support [lo, hi]: Gauss–Legendre;
- Normal(mu, sigma): Gauss–Hermite, z = mu + sqrt(2) sigma x;
- [lo, inf): exp-sinh, z = lo + exp(pi/2 sinh t); (-inf, inf): sinh-sinh, z = sinh(pi/2 sinh t),
  both the trapezoid rule in t on [-T, T] (Takahasi & Mori's double-exponential quadrature).

W_j is the weight against Lebesgue measure: ∫ f(z) dz ≈ Σ_j W_j f(z_j). The engine raises the
node count until the leakage settles (`engine`), so no rule is trusted blindly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pytensor.tensor.basic import get_underlying_scalar_constant_value
from pytensor.tensor.exceptions import NotScalarConstantError
from pytensor.tensor.random.basic import BetaRV, NormalRV
from scipy.special import roots_hermite, roots_jacobi, roots_legendre

from ddpbayes.errors import InputError
from ddpbayes.model.domains import Interval
from ddpbayes.model.supports import support

_T = 4.5  # double-exponential rules: t in [-T, T] reaches |z| ~ 1e30 (sinh-sinh) and 1e-30 .. 1e30 (exp-sinh)


@dataclass(frozen=True)
class Rule:
    """Nodes z_j of a latent and log W_j with ∫ f(z) dz ≈ Σ_j W_j f(z_j)."""

    name: str
    nodes: np.ndarray
    log_weights: np.ndarray


def rule(rv, m: int) -> Rule:
    """An m-node rule for one element of the continuous latent `rv` (see the module docstring)."""
    op, params = rv.owner.op, rv.owner.op.dist_params(rv.owner)
    if isinstance(op, BetaRV) and (ab := _constants(params[:2])) is not None:
        _check_positive(rv, "Beta", ("alpha", "beta"), ab)
        return _jacobi(m, *ab)
    if isinstance(op, NormalRV) and (ms := _constants(params[:2])) is not None:
        _check_positive(rv, "Normal", ("sigma",), ms[1:])
        return _hermite(m, *ms)
    dom = support(rv)
    lo, hi = (dom.lo, dom.hi) if isinstance(dom, Interval) else (-math.inf, math.inf)
    if math.isfinite(lo) and math.isfinite(hi):
        return _legendre(m, lo, hi)
    if math.isfinite(lo):
        return _exp_sinh(m, lo, 1.0)
    if math.isfinite(hi):
        return _exp_sinh(m, hi, -1.0)
    return _sinh_sinh(m)


def _check_positive(rv, family: str, names: tuple[str, ...], values: tuple[float, ...]) -> None:
    """A parameter outside its range is the model's own error, reported as one line."""
    for name, value in zip(names, values):
        if not value > 0:
            raise InputError(f"the model rejects its own parameters: {family} '{rv.name}' has {name} = {value:g}, "
                             "which must be positive")


def _constants(params) -> tuple[float, ...] | None:
    try:
        return tuple(float(get_underlying_scalar_constant_value(p)) for p in params)
    except NotScalarConstantError:
        return None


def _jacobi(m: int, a: float, b: float) -> Rule:
    x, w = roots_jacobi(m, b - 1.0, a - 1.0)
    log_omega = (b - 1.0) * np.log1p(-x) + (a - 1.0) * np.log1p(x)
    return Rule(f"Gauss–Jacobi (Beta({a:g}, {b:g}) weight)", (1.0 + x) / 2.0, _log(w) - log_omega - math.log(2.0))


def _log(w: np.ndarray) -> np.ndarray:
    """log of a rule's weights, -inf where a weight underflowed to 0 (Gauss–Hermite's outer nodes
    from 512 nodes on: w_j ~ e^(-x_j^2) < 1e-308): their terms are below the float range and
    drop out of every log-sum, as meant, so NumPy's divide-by-zero warning is not raised."""
    with np.errstate(divide="ignore"):
        return np.log(w)


def _legendre(m: int, lo: float, hi: float) -> Rule:
    x, w = roots_legendre(m)
    half = (hi - lo) / 2.0
    return Rule("Gauss–Legendre", lo + half * (1.0 + x), np.log(w) + math.log(half))


def _hermite(m: int, mu: float, sigma: float) -> Rule:
    x, w = roots_hermite(m)
    scale = math.sqrt(2.0) * sigma
    return Rule(f"Gauss–Hermite (Normal({mu:g}, {sigma:g}) weight)", mu + scale * x, _log(w) + x**2 + math.log(scale))


def _exp_sinh(m: int, end: float, side: float) -> Rule:
    """z = end + side · exp(pi/2 sinh t): the half-line from `end` towards side · inf."""
    t, h = np.linspace(-_T, _T, m, retstep=True)
    u = math.pi / 2 * np.sinh(t)
    return Rule("exp-sinh (double exponential)", end + side * np.exp(u), math.log(h) + np.log(math.pi / 2 * np.cosh(t)) + u)


def _sinh_sinh(m: int) -> Rule:
    t, h = np.linspace(-_T, _T, m, retstep=True)
    u = math.pi / 2 * np.sinh(t)
    log_cosh_u = np.abs(u) + np.log1p(np.exp(-2 * np.abs(u))) - math.log(2.0)
    return Rule("sinh-sinh (double exponential)", np.sinh(u), math.log(h) + np.log(math.pi / 2 * np.cosh(t)) + log_cosh_u)
