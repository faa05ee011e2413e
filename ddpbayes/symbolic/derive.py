"""`derive`: the command line's `ddpbayes derive KIND` from Python, one keyword per flag
(DESIGN §2.2, §3.1, §3.5); the derivations themselves are `gaussian` and `gdp`."""

from __future__ import annotations

from collections.abc import Sequence

from ddpbayes.errors import InputError
from ddpbayes.symbolic.gaussian import Derivation, Matrixish, derive_gaussian, derive_gaussian_rho
from ddpbayes.symbolic.gdp import derive_gaussian_gdp
from ddpbayes.vocabulary import DERIVED_NOISES

LAPLACE = DERIVED_NOISES[0]


def derive(
    kind: str,
    cov: Matrixish,
    *,
    mechanism: str = LAPLACE,
    mean: str | Sequence | None = None,
    target: int = 0,
    known: Sequence[int] = (),
    weights: str | Sequence | None = None,
    width: float | None = None,
    scale: float | None = None,
    sigma: float | None = None,
    delta: float | None = None,
    pair: Sequence[int] = (0, 1),
    widths: Sequence[float | None] = (None, None),
) -> Derivation:
    """A closed form, as ``ddpbayes derive KIND`` gives it (its flags are these keywords).

    Parameters
    ----------
    kind : str
        "gaussian": leak(target, known) of w·X + Laplace(b) (Wu et al.'s Gaussian example), or with
        mechanism="gaussian" the GDP μ of w·X + N(0, σ²); "gaussian-rho": Liu et al. 2016's
        (DDP) dependence coefficient rho_ij of a Gaussian pair.
    cov : str, sympy.Matrix or sequence of sequences
        The covariance, numeric or symbolic (a string is parsed: ``"[[1, rho], [rho, 1]]"``).
    mechanism : str, default "laplace"
        gaussian: the noise, laplace or gaussian.
    mean, target, known, weights, width : optional
        gaussian: as `derive_gaussian`.
    scale : float or None, default None
        gaussian: the Laplace scale b (with mechanism="gaussian": σ, as `sigma`).
    sigma, delta : float or None, default None
        gaussian with mechanism="gaussian": σ, and the δ at which ε is also given.
    pair : sequence of two int, default (0, 1)
        gaussian-rho: i, j.
    widths : sequence of two float or None, default (None, None)
        gaussian-rho: the widths of D_i's and D_j's domains (None: a symbol).

    Returns
    -------
    Derivation
        The expression, its assumptions, and for Gaussian noise ρ, δ(ε) and ε at δ.

    Raises
    ------
    InputError
        For an unknown kind or noise, a keyword the kind does not take, or an input the
        derivation refuses.

    Examples
    --------
    >>> from ddpbayes import derive
    >>> derive("gaussian-rho", "[[1, 0.5], [0.5, 1]]", widths=(1, 1)).value
    0.5
    """
    chosen = DERIVATIONS.get(kind)
    if chosen is None:
        raise InputError(f"unknown derivation '{kind}' (use {' or '.join(DERIVATIONS)})")
    return chosen(cov, dict(mechanism=mechanism, mean=mean, target=target, known=tuple(known), weights=weights,
                            width=width, scale=scale, sigma=sigma, delta=delta, pair=tuple(pair),
                            widths=tuple(widths)))


def _gaussian(cov: Matrixish, options: dict) -> Derivation:
    """gaussian: leak(i, K) under Laplace noise (`derive_gaussian`) or μ under Gaussian noise (`derive_gaussian_gdp`)."""
    if options.pop("pair") != (0, 1) or options.pop("widths") != (None, None):
        raise InputError("pair and widths (--pair, --widths) are gaussian-rho's: the gaussian derivation takes "
                         "target, known and width")
    mechanism, sigma, scale, delta = (options.pop(k) for k in ("mechanism", "sigma", "scale", "delta"))
    if mechanism not in DERIVED_NOISES:
        raise InputError(f"unknown noise '{mechanism}' for a derivation (use {' or '.join(DERIVED_NOISES)})")
    if mechanism == LAPLACE:
        for name, value in (("sigma", sigma), ("delta", delta)):
            if value is not None:
                raise InputError(f"--{name} is for --mechanism gaussian; Laplace noise takes --scale b")
        return derive_gaussian(cov, **options, scale=scale)
    if sigma is not None and scale is not None:
        raise InputError("give the Gaussian noise's sigma once: --sigma or --scale, not both")
    return derive_gaussian_gdp(cov, **options, sigma=scale if sigma is None else sigma, delta=delta)


def _rho(cov: Matrixish, options: dict) -> Derivation:
    """gaussian-rho: rho_ij of the pair (`derive_gaussian_rho`), refusing the gaussian derivation's keywords."""
    pair, widths = options.pop("pair"), options.pop("widths")
    defaults = {"mechanism": LAPLACE, "target": 0, "known": ()}
    given = [name for name, value in options.items() if value != defaults.get(name)]
    if given:
        raise InputError(f"gaussian-rho takes cov, pair and widths, not {', '.join(given)}")
    if len(pair) != 2:
        raise InputError(f"--pair takes two indices i,j, got {list(pair)}")
    if len(widths) != 2:
        raise InputError(f"--widths takes two numbers width_i,width_j, got {list(widths)}")
    return derive_gaussian_rho(cov, *pair, *widths)


DERIVATIONS = {"gaussian": _gaussian, "gaussian-rho": _rho}  # `ddpbayes derive KIND`
