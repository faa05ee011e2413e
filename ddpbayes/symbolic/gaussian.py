"""Closed forms for jointly Gaussian tuples with sympy (DESIGN §2.2 and §3.1).

`derive_gaussian` is the formula the gaussian engine evaluates, with the same structure:

    C = Sigma_SS - Sigma_SK Sigma_KK^{-1} Sigma_KS        (S = target first, then U)
    leak(i, K) = width / b * |(C w_S)_i / C_ii|           (= |w_i + sum_{j in U} w_j beta_j|)

e.g. equicorrelation rho, n tuples, sum, K = {}: width |1 + (n-1) rho| / b. A numeric covariance
must be positive semi-definite (a singular one is fine unless the adversary conditions on a
singular Cov(X_K) or Var(X_i | X_K) = 0: an InputError); a symbolic one is assumed positive
definite, its leading principal minors listed as assumptions.

`derive_gaussian_rho` is 000's dependence coefficient (DESIGN §3.1) for a Gaussian pair:
D_j | D_i = d ~ N(mu_j + beta (d - mu_i), v), beta = Sigma_ij / Sigma_ii and v = Sigma_jj -
Sigma_ij^2 / Sigma_ii free of d. So E[Lap_sigma(y - D_j) | D_i = d] = g(y - mu_j - beta (d - mu_i))
with g = Lap_sigma * N(0, v), a location family. A Laplace convolution has |(log g)'| <= 1/sigma
(|f'| = f / sigma for the Laplace density f), hence log g(u) - log g(u - delta) <= |delta| / sigma,
and the bound is the limit as u -> ±inf (exactly attained when v = 0). With delta = beta (d_i1 -
d_i2) and d_i1, d_i2 over D_i's domain of width width_i:

    sup log-ratio = |beta| width_i / sigma = rho_ij dD_j / sigma
    =>  rho_ij = |Sigma_ij / Sigma_ii| * width_i / width_j        (dD_j = width_j, D_j's domain width)

It does not depend on sigma (as in 000 Example 1: beta = 0.5, widths 1, rho = 0.5). 000 has
0 <= rho <= 1; a Gaussian rho above 1 says D_j's domain is narrower than the range of its
conditional mean, i.e. the domains do not fit the model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import sympy

from ddpbayes.encoding import number
from ddpbayes.errors import InputError
from ddpbayes.limits import check_positive_finite
from ddpbayes.numerics import eigenvalues_min
from ddpbayes.symbolic.parse import parse_matrix, parse_vector

WIDTH = sympy.Symbol("width", positive=True)
B = sympy.Symbol("b", positive=True)
WIDTH_I = sympy.Symbol("width_i", positive=True)
WIDTH_J = sympy.Symbol("width_j", positive=True)
RESERVED = {"width", "b", "width_i", "width_j"}

Matrixish = str | sympy.Matrix | Sequence[Sequence]


@dataclass(frozen=True)
class Derivation:
    """A leakage (or coefficient) as a sympy expression, with what it assumes; for Gaussian
    noise (`symbolic.gdp`) also related closed forms (`extras`: ρ, δ(ε)) and numbers (ε at δ).

    Parameters
    ----------
    expression : sympy.Expr
        The leakage, μ or coefficient.
    assumptions : list of str
        What the expression assumes, in words.
    extras : dict[str, sympy.Expr], default {}
        Related closed forms by name (zcdp_rho, gdp_delta_of_epsilon).
    numbers : dict[str, float], default {}
        Related numbers by name (delta, epsilon_at_delta).
    """

    expression: sympy.Expr
    assumptions: list[str]
    extras: dict[str, sympy.Expr] = field(default_factory=dict)
    numbers: dict[str, float] = field(default_factory=dict)

    @property
    def latex(self) -> str:
        return sympy.latex(self.expression)

    @property
    def value(self) -> float | None:
        """The number, when no symbol is left."""
        return float(self.expression) if not self.expression.free_symbols else None

    def to_json(self) -> str:
        """`to_dict` as indented JSON text, symbols as they are.

        Returns
        -------
        str
            What ``ddpbayes derive --format json`` prints.
        """
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def to_dict(self) -> dict:
        """The derivation as a JSON document.

        Returns
        -------
        dict
            expression, latex, value and assumptions, then each of `extras` and `numbers`.
        """
        value = self.value
        out = {
            "expression": sympy.sstr(self.expression),
            "latex": self.latex,
            "value": number(value),
            "assumptions": self.assumptions,
        }
        for name, expr in self.extras.items():
            out[name] = {"expression": sympy.sstr(expr), "latex": sympy.latex(expr),
                         "value": None if expr.free_symbols else number(float(expr))}
        return out | {k: number(v) for k, v in self.numbers.items()}


def derive_gaussian(
    cov: Matrixish,
    mean: str | Sequence | None = None,
    target: int = 0,
    known: Sequence[int] = (),
    weights: str | Sequence | None = None,
    width: float | None = None,
    scale: float | None = None,
) -> Derivation:
    """leak(target, known) of w·X + Lap(b) for X ~ N(mean, cov); `width`, `b` stay symbols when
    not given. The mean is checked but cannot matter (a location shift).

    Parameters
    ----------
    cov : str, sympy.Matrix or sequence of sequences
        The covariance, numeric or symbolic (a string is parsed: ``"[[1, rho], [rho, 1]]"``).
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
    scale : float or None, default None
        The Laplace scale b; None: the symbol ``b``.

    Returns
    -------
    Derivation
        leak(i, K) and its assumptions.

    Raises
    ------
    InputError
        If the covariance is not square, symmetric and positive semi-definite, uses a reserved
        symbol, or a vector's length, an index, `width` or `scale` is wrong; if the target is known,
        or Cov(X_K) or Var(X_i | X_K) is singular.

    Examples
    --------
    >>> from ddpbayes.symbolic import derive_gaussian
    >>> derive_gaussian("[[1, rho], [rho, 1]]").expression
    width*Abs(rho + 1)/b
    >>> derive_gaussian([[1, 0.5], [0.5, 1]], width=1, scale=1).value
    1.5
    """
    given = {WIDTH: _positive(width, "--width", WIDTH), B: _positive(scale, "--scale", B)}
    mean = parse_vector(mean, "--mean") if isinstance(mean, str) else mean  # every input is read before the algebra
    weights = parse_vector(weights, "--weights") if isinstance(weights, str) else weights
    sigma, notes = _covariance(cov)
    n = sigma.rows
    _vector(mean, n, "--mean")
    w = _vector(weights, n, "--weights") if weights is not None else [sympy.Integer(1)] * n
    target, known = _index(target, n, "target"), sorted({_index(k, n, "known tuple") for k in known})
    if target in known:
        raise InputError(f"known tuple {target} is also the target")
    s = [target] + [j for j in range(n) if j != target and j not in known]
    row = sigma.extract([target], s)
    if known:
        sigma_kk = sigma.extract(known, known)
        if sympy.simplify(sigma_kk.det()) == 0:
            raise InputError(f"the known tuples' covariance Cov(X_K), K = {known}, is singular")
        row = row - sigma.extract([target], known) * sigma_kk.LUsolve(sigma.extract(known, s))
    var = sympy.factor(sympy.cancel(row[0]))
    if var == 0:
        raise InputError(
            f"singular conditional covariance: Var(X_{target} | X_K) = 0 for K = {known} (the known tuples determine the target)"
        )
    if var.free_symbols:
        notes.append(f"Var(X_{target} | X_K) = {sympy.sstr(var)} > 0")
    slope = sympy.factor(sympy.cancel(sum(row[k] * w[j] for k, j in enumerate(s)) / var))
    expression = sympy.Integer(0) if slope == 0 else WIDTH * sympy.Abs(slope) / B
    expression = expression.subs(given)
    notes += [
        "X jointly Gaussian; the query w·X is released with Laplace noise of scale b",
        f"target X_{target} ranges over an interval of width 'width'; known K = {known}: the values x_K do not matter",
        "the supremum over y is a limit as y -> ±inf (attained only when U is empty)",
    ]
    return Derivation(sympy.simplify(expression), notes)


def derive_gaussian_rho(
    cov: Matrixish, i: int = 0, j: int = 1, width_i: float | None = None, width_j: float | None = None
) -> Derivation:
    """000's dependence coefficient rho_ij of a Gaussian pair (module docstring).

    rho_ij = ``|Sigma_ij / Sigma_ii| * width_i / width_j``, free of the Laplace scale.

    Parameters
    ----------
    cov : str, sympy.Matrix or sequence of sequences
        The covariance, numeric or symbolic.
    i, j : int, default 0 and 1
        The pair of tuples.
    width_i, width_j : float or None, default None
        The widths of D_i's and D_j's domains; None: the symbols ``width_i``, ``width_j``.

    Returns
    -------
    Derivation
        rho_ij and its assumptions (1 when i = j).

    Raises
    ------
    InputError
        For an invalid covariance, index or width, or Var(D_i) = 0.

    Examples
    --------
    >>> from ddpbayes.symbolic import derive_gaussian_rho
    >>> derive_gaussian_rho([[1, 0.5], [0.5, 1]], width_i=1, width_j=1).value
    0.5
    """
    given = {WIDTH_I: _positive(width_i, "width_i", WIDTH_I), WIDTH_J: _positive(width_j, "width_j", WIDTH_J)}
    sigma, notes = _covariance(cov)
    n = sigma.rows
    i, j = _index(i, n, "i"), _index(j, n, "j")
    if i == j:
        return Derivation(sympy.Integer(1), notes + ["rho_ii = 1 by definition"])
    if sympy.simplify(sigma[i, i]) == 0:
        raise InputError(f"Var(D_{i}) = 0: D_{i} is constant and rho_{i}{j} is undefined")
    beta = sympy.factor(sympy.cancel(sigma[i, j] / sigma[i, i]))
    expression = sympy.Abs(beta) * WIDTH_I / WIDTH_J
    expression = sympy.simplify(expression.subs(given))
    notes += [
        (f"(D_{i}, D_{j}) jointly Gaussian: D_{j} | D_{i} = d has mean linear in d (slope {sympy.sstr(beta)}) "
         "and a variance free of d"),
        f"d_i1, d_i2 range over D_{i}'s domain (width width_i); dD_j = width_j, the width of D_{j}'s domain",
        "independent of the Laplace scale sigma; the supremum over y is a limit as y -> ±inf",
    ]
    if not expression.free_symbols and expression > 1:
        notes.append("rho > 1: D_j's domain is narrower than the range of its conditional mean "
                     "(Liu et al. 2016 assume rho <= 1)")
    return Derivation(expression, notes)


def _covariance(cov: Matrixish, reserved: set[str] = RESERVED) -> tuple[sympy.Matrix, list[str]]:
    """The covariance as a sympy Matrix, checked, and the assumptions it needs."""
    sigma = parse_matrix(cov, "--cov") if isinstance(cov, str) else sympy.Matrix(cov)
    sigma = sigma.applyfunc(lambda e: sympy.nsimplify(e, rational=True))
    if not sigma.is_square:
        raise InputError(f"the covariance must be square, got {sigma.rows}x{sigma.cols}")
    clash = sorted(reserved & {s.name for s in sigma.free_symbols})
    if clash:
        raise InputError(f"symbol '{clash[0]}' is reserved ({', '.join(sorted(reserved))}); rename it")
    if not (sigma - sigma.T).applyfunc(sympy.simplify).is_zero_matrix:
        raise InputError("the covariance is not symmetric")
    symbols = sorted(sigma.free_symbols, key=lambda s: s.name)
    if not symbols:
        values = np.array(sigma.evalf(), dtype=float)
        scale = np.abs(values).max() or 1.0  # same signs; keeps (cov + cov.T) / 2 finite and the tolerance relative
        low = eigenvalues_min(values / scale) * scale
        if low < 0:
            raise InputError(f"the covariance is not positive semi-definite (smallest eigenvalue {low:.3g})")
        return sigma, []
    minors = [sympy.factor(sigma[:k, :k].det()) for k in range(1, sigma.rows + 1)]
    if any(m.is_negative for m in minors):
        raise InputError("the covariance is not positive semi-definite (a leading principal minor is negative)")
    conditions = [f"{sympy.sstr(m)} > 0" for m in minors if m.free_symbols]
    return sigma, [
        f"symbols are real: {', '.join(s.name for s in symbols)}",
        "the covariance is positive definite (leading principal minors): " + "; ".join(conditions),
    ]


def _vector(values, n: int, what: str) -> list[sympy.Expr] | None:
    if values is None:
        return None
    vec = [sympy.sympify(v) for v in values]
    if len(vec) != n:
        raise InputError(f"{what} has {len(vec)} entries but the covariance is {n}x{n}")
    return vec


def _index(k: int, n: int, what: str) -> int:
    if not isinstance(k, (int, np.integer)) or not 0 <= k < n:
        raise InputError(f"{what} {k} is out of range: the covariance has tuples 0..{n - 1}")
    return int(k)


def _positive(value: float | None, what: str, symbol: sympy.Symbol) -> sympy.Expr:
    if value is None:
        return symbol
    return sympy.nsimplify(check_positive_finite(value, what), rational=True)
