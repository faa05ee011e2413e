"""A DP library's mechanism object as a ddpbayes `Mechanism` (issue #28 item 6; docs/guide/mechanisms.md, "Interop"):
`audit(model, query, Laplace(epsilon=1, sensitivity=1), "idp")` with diffprivlib's object, or an OpenDP
`Measurement`, goes through `from_library`.

- As the EXACT law where ddpbayes has it, its parameters read off the object and checked (a one-line
  InputError when they disagree, e.g. an attribute changed after diffprivlib cached its scale):
  diffprivlib `Laplace` (scale Δ/(ε − ln(1 − δ)), what its `randomise` uses; read back from its
  `variance`), `Geometric` (two-sided geometric, scale Δ/ε), `GeometricTruncated` on 0..n (Ghosh's
  clamped geometric, `truncated_geometric`), `Gaussian`, `GaussianAnalytic`, `GaussianDiscrete` (the σ
  the object samples with, checked against its calibration; the leakage read at its δ), `Binary` with
  labels "0"/"1" (randomized response), `Exponential` without a base measure (the exponential mechanism,
  the query's answers as the utilities: the object's own utility list is replaced). Each sampler was
  tested against that law (`tests/test_interop.py`, `tests/test_interop_objects.py`).
- OpenDP measurements do not expose their noise: one is taken for Laplace / geometric (MaxDivergence) or
  Gaussian / discrete Gaussian (zCDP) noise only when its input domain (a float or integer atom, or a
  vector of them), its input metric (absolute, L1 or L2 distance), its `map` (ε = d/b, ρ = d²/2σ², read at
  d = 1 and checked at d = 2) and `CHECK_DRAWS` draws of its own sampler (Kolmogorov–Smirnov or
  chi-square, p > P_MIN) all agree with that law. OpenDP samples from the operating system's CSPRNG, so
  this check is not reproducible: a true Laplace measurement is refused with probability P_MIN, and is
  then audited as a program.
- Anything else with diffprivlib's `randomise(value)` (seeded from the audit's generator: reproducible
  from --seed), any other OpenDP measurement (its CSPRNG cannot be seeded: the bound is not reproducible
  from --seed), or a function `mechanism(answers, rng)` is a `Program` (a certified lower bound, DESIGN
  §2.6); its description says why.

The libraries are imported only when their objects are given (they are optional: `pip install ".[interop]"`).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable

import numpy as np
from scipy import stats

from ddpbayes.errors import InputError
from ddpbayes.mechanisms.base import Mechanism
from ddpbayes.mechanisms.gaussian import DiscreteGaussian, Gaussian
from ddpbayes.mechanisms.gaussian.discrete import discrete_sigma
from ddpbayes.mechanisms.gaussian.gdp import analytic_sigma
from ddpbayes.mechanisms.laplace import Geometric, Laplace
from ddpbayes.mechanisms.program import Program
from ddpbayes.mechanisms.randomized_response import RandomizedResponse
from ddpbayes.mechanisms.selection import ExponentialMechanism
from ddpbayes.mechanisms.truncated_geometric import TruncatedGeometric
from ddpbayes.profiles import DEFAULT_DELTA
from ddpbayes.vocabulary import LIBRARY

CHECK_DRAWS = 4000  # draws of an OpenDP measurement's sampler before it is taken for a law (0.5 s for a scalar)
P_MIN = 1e-6  # the goodness-of-fit p-value below which it is not
REL = 1e-9  # agreement asked of a scale the object states twice (its map at 1 and 2, its cached scale)
CALIBRATION_REL = 1e-5  # agreement of a library's calibrated σ with ddpbayes' (diffprivlib bisects to 1e-6)
SEEDED = "diffprivlib's generator is seeded from the audit's (reproducible from --seed)"
UNSEEDED = ("OpenDP samples from the operating system's CSPRNG and cannot be seeded: the bound is not reproducible "
            "from --seed")


def from_library(obj) -> Mechanism:
    """`obj` as a Mechanism: itself if it is one; a diffprivlib mechanism or an OpenDP measurement as the exact
    law ddpbayes has for it, else as a program; any other object with `randomise(value)`, or a function
    `mechanism(answers, rng)`, as a program. A one-line InputError for anything else.

    Parameters
    ----------
    obj : object
        A `Mechanism`, a diffprivlib mechanism, an OpenDP `Measurement`, an object with ``randomise(value)``
        or a function ``mechanism(answers, rng)``.

    Returns
    -------
    Mechanism
        The exact law (module docstring), or a `Program` audited as a black box (DESIGN §2.6).

    Raises
    ------
    InputError
        For any other object, or a library object ddpbayes cannot take (no noise, parameters that
        disagree with its law, ...).
    """
    if isinstance(obj, Mechanism):
        return obj
    module = type(obj).__module__ or ""
    if module.startswith("diffprivlib."):
        return _diffprivlib(obj)
    if module.startswith("opendp.") and type(obj).__name__ == "Measurement":
        return _opendp(obj)
    if callable(getattr(obj, "randomise", None)):
        return _randomise_program(obj, _name(obj), "its law is not one ddpbayes knows; its generator is not "
                                  "seeded by the audit (the bound is not reproducible from --seed)", seed=False)
    if callable(obj) and not isinstance(obj, type):
        return Program(obj, source=_name(obj))
    raise InputError(f"cannot audit a {type(obj).__name__} as a mechanism: give a mechanism kind (e.g. 'laplace'), a "
                     "ddpbayes Mechanism, a diffprivlib mechanism, an OpenDP measurement or a function "
                     "mechanism(answers, rng)")


def library_object(spec: str) -> object:
    """The object `py:MODULE:EXPRESSION` names: MODULE imported as Python imports it, EXPRESSION evaluated with
    Python's `eval` in the module's namespace (it runs code, as program:FILE does: give only specs you trust).

    Parameters
    ----------
    spec : str
        ``py:MODULE:EXPRESSION``, e.g. ``py:diffprivlib.mechanisms:Laplace(epsilon=1, sensitivity=1)``.

    Returns
    -------
    object
        What the expression evaluates to (for `from_library`).

    Raises
    ------
    InputError
        In one line, for a spec not of that form, a module that does not import or an expression that fails.
    """
    module_name, sep, expression = spec[len(LIBRARY):].partition(":")
    module_name, expression = module_name.strip(), expression.strip()
    if not spec.startswith(LIBRARY) or not sep or not module_name or not expression:
        raise InputError(f"a library object is written py:MODULE:EXPRESSION (e.g. py:diffprivlib.mechanisms:"
                         f"Laplace(epsilon=1, sensitivity=1)), got '{spec}'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or whatever the module raises while it loads
        raise InputError(f"{LIBRARY}{module_name}: the module does not import ({_error(exc)})") from None
    try:
        return eval(compile(expression, f"<{LIBRARY}{module_name}>", "eval"), dict(vars(module)))  # noqa: S307
    except Exception as exc:  # a syntax error, or whatever the expression raises
        raise InputError(f"{spec}: the expression fails ({_error(exc)})") from None


def _error(exc: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _name(obj) -> str:
    text = " ".join(repr(obj).split())
    return text if len(text) <= 200 else text[:197] + "..."


# ------------------------------------------------------------------------------------------- diffprivlib


def _diffprivlib(obj) -> Mechanism:
    cls = type(obj).__name__
    source = _name(obj).replace(f"{type(obj).__module__}.", "diffprivlib.mechanisms.", 1)
    reader = _EXACT.get(cls) if type(obj).__module__.startswith("diffprivlib.mechanisms") else None
    if reader is not None:
        mech = reader(obj, source)
        if mech is not None:
            return mech
    if not callable(getattr(obj, "randomise", None)):
        raise InputError(f"{source} is not a diffprivlib mechanism (it has no randomise): give a mechanism object")
    return _randomise_program(obj, source, f"ddpbayes has no exact law for diffprivlib's {cls}; {SEEDED}", seed=True)


def _eps_sens(obj, source: str) -> tuple[float, float]:
    eps, sens = float(obj.epsilon), float(getattr(obj, "sensitivity", 1.0))
    if not (math.isfinite(eps) and eps > 0 and math.isfinite(sens) and sens > 0):
        raise InputError(f"{source} adds no noise (epsilon {eps:g}, sensitivity {sens:g}): nothing to audit but the "
                         "answer itself")
    return eps, sens


def _agree(value: float, expected: float, what: str, source: str, rel: float = REL) -> None:
    if not math.isclose(value, expected, rel_tol=rel):
        raise InputError(f"{source}: {what} is {value:.10g}, but its parameters give {expected:.10g} (was an "
                         "attribute changed after it was built?)")


def _laplace(obj, source: str) -> Mechanism:
    eps, sens = _eps_sens(obj, source)
    delta = float(obj.delta)
    scale = sens / (eps - math.log1p(-delta))  # what randomise uses: ε' = ε − ln(1 − δ) when δ > 0
    _agree(math.sqrt(obj.variance(0.0) / 2), scale, "the scale its variance gives", source)
    return Laplace(scale, epsilon=eps if delta == 0 else None, source=source)


def _geometric(obj, source: str) -> Mechanism:
    eps, sens = _eps_sens(obj, source)
    _agree(float(obj._scale), -eps / sens, "its cached log(alpha)", source)
    return Geometric(sens / eps, epsilon=eps, source=source)


def _truncated_geometric(obj, source: str) -> Mechanism | None:
    """Clamped to [0, n]: Ghosh et al.'s law (clamp(a + Z, 0, n)); other bounds: a program."""
    eps, sens = _eps_sens(obj, source)
    lower, upper = obj.lower, obj.upper
    if lower != 0 or not math.isfinite(upper) or upper < 1 or float(upper) != int(upper):
        return None
    _agree(float(obj._scale), -eps / sens, "its cached log(alpha)", source)
    return TruncatedGeometric(sens / eps, n=int(upper), epsilon=eps, source=source)


def _gaussian(calibrated: Callable[[float, float, float], float], cls: type[Gaussian], what: str,
              keep_epsilon: bool) -> Callable:
    def read(obj, source: str) -> Mechanism:
        eps, sens = _eps_sens(obj, source)
        delta = float(obj.delta)
        sigma = float(obj._scale)  # what randomise samples with
        _agree(sigma, calibrated(eps, delta, sens), f"the sigma it samples with ({what})", source, CALIBRATION_REL)
        return cls(sigma, delta=delta, epsilon=eps if keep_epsilon else None, source=source)
    return read


def _classic_sigma(eps: float, delta: float, sens: float) -> float:
    return math.sqrt(2 * math.log(1.25 / delta)) * sens / eps


def _binary(obj, source: str) -> Mechanism:
    if {obj.value0, obj.value1} != {"0", "1"}:
        raise InputError(f"{source}: randomized response audits 0/1 tuples; build Binary with value0='0', "
                         "value1='1'")
    if float(obj.delta) != 0:
        raise InputError(f"{source}: delta {obj.delta:g} > 0 changes the flip probability; ddpbayes' randomized "
                         "response is pure epsilon")
    eps = float(obj.epsilon)
    if not (math.isfinite(eps) and eps > 0):
        raise InputError(f"{source}: epsilon {eps:g} is not a positive finite number")
    return RandomizedResponse(eps, source=source)


def _exponential(obj, source: str) -> Mechanism | None:
    """The softmax exp(ε u / ((2 − monotonic) Δ)) with the query's answers as u; with a base measure: a program."""
    if obj.measure is not None:
        return None
    eps, sens = _eps_sens(obj, source)
    mono = bool(obj.monotonic)
    _fresh_probabilities(obj, source)
    return ExponentialMechanism((1 if mono else 2) * sens / eps, mono, epsilon=eps,
                                source=f"{source}; utilities: the query's answers")


def _fresh_probabilities(obj, source: str) -> None:
    """Refuse an Exponential whose cached cumulative probabilities (what its `randomise` draws from, computed at
    construction) are not those of its current epsilon, sensitivity, utility and monotonic: an attribute changed
    after it was built, so its samples and its stated ε disagree."""
    cached, find = getattr(obj, "_probabilities", None), getattr(type(obj), "_find_probabilities", None)
    if cached is None or find is None:
        return
    now = find(obj.epsilon, obj.sensitivity, obj.utility, obj.monotonic, obj.measure)
    if np.shape(now) != np.shape(cached) or not np.allclose(now, cached, rtol=REL, atol=0.0):
        raise InputError(f"{source}: its cached selection probabilities (what randomise draws from) are not those of "
                         f"its epsilon {float(obj.epsilon):g}, sensitivity, utility and monotonic (was an attribute "
                         "changed after it was built?): build a new Exponential")


_EXACT: dict[str, Callable] = {
    "Laplace": _laplace,
    "Geometric": _geometric,
    "GeometricTruncated": _truncated_geometric,
    "Gaussian": _gaussian(_classic_sigma, Gaussian, "sqrt(2 ln(1.25/delta)) Delta/epsilon", False),
    "GaussianAnalytic": _gaussian(analytic_sigma, Gaussian, "Balle-Wang's analytic sigma", True),
    "GaussianDiscrete": _gaussian(discrete_sigma, DiscreteGaussian, "the discrete Gaussian's calibrated sigma", True),
    "Binary": _binary,
    "Exponential": _exponential,
}


def _randomise_program(obj, source: str, why: str, *, seed: bool) -> Program:
    """`obj.randomise` on every answer (an integer where diffprivlib asks one); a selection mechanism (a
    `utility` list, `randomise(None)`) gets the answer vector as its utilities and returns an index."""
    selection = isinstance(getattr(obj, "utility", None), list) and hasattr(obj, "_find_probabilities")
    integer = "Geometric" in [c.__name__ for c in type(obj).__mro__]

    def run(answers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        mech = obj
        if seed:
            mech = obj.copy()
            mech._rng = np.random.RandomState(int(rng.integers(2 ** 32)))
        if selection:
            mech.candidates = None
            out = np.empty(len(answers))
            for r, row in enumerate(answers):
                mech.utility = [float(a) for a in row]
                mech._probabilities = mech._find_probabilities(mech.epsilon, mech.sensitivity, mech.utility,
                                                               mech.monotonic, mech.measure)
                out[r] = mech.randomise(None)
            return out[:, None]
        values = answers.astype(int) if integer else answers
        if integer and np.any(values != answers):
            raise InputError(f"{source} takes integers, but the query answered {answers[values != answers][0]:g}")
        return np.array([[mech.randomise(v.item()) for v in row] for row in values], dtype=float)

    return Program(run, name=type(obj).__name__, vectorized=True, source=source, why=why)


# ------------------------------------------------------------------------------------------- OpenDP


def _opendp(meas) -> Mechanism:
    try:
        source = (f"opendp Measurement(input_domain={meas.input_domain}, input_metric={meas.input_metric}, "
                  f"output_measure={meas.output_measure})")
    except Exception:  # the library's own errors: name it as it names itself
        source = "opendp " + _name(meas)
    try:
        read = _opendp_law(meas, source)
    except Exception as exc:  # the library's own errors: the object is not what the law needs
        read = f"its law could not be read ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})"
    if isinstance(read, Mechanism):
        return read
    return _measurement_program(meas, source, f"{read}; {UNSEEDED}")


def _carrier(meas) -> tuple[bool, str]:
    domain = meas.input_domain
    vector = type(domain).__name__ == "VectorDomain"
    atom = domain.element_domain if vector else domain
    return vector, str(atom.carrier_type)


def _opendp_law(meas, source: str) -> Mechanism | str:
    """The law `meas` is checked to sample, or why it is not taken for one."""
    vector, carrier = _carrier(meas)
    integer, real = carrier[:1] in ("i", "u"), carrier in ("f32", "f64")
    measure, metric = str(meas.output_measure), str(meas.input_metric).split("(")[0]
    laplace = measure == "MaxDivergence" and metric == ("L1Distance" if vector else "AbsoluteDistance")
    gaussian = measure == "ZeroConcentratedDivergence" and metric == ("L2Distance" if vector else "AbsoluteDistance")
    if not (integer or real) or not (laplace or gaussian):
        return (f"ddpbayes reads an OpenDP measurement as noise only on float or integer inputs under L1/absolute "
                f"distance with MaxDivergence (Laplace, geometric) or L2/absolute with zCDP (Gaussian); this one "
                f"takes {carrier} under {metric} with {measure}")
    one, two = (1, 2) if integer else (1.0, 2.0)
    d1, d2 = float(meas.map(one)), float(meas.map(two))
    if not (d1 > 0 and math.isfinite(d1)):
        return f"its map(1) = {d1:g} is not a positive privacy level"
    power = 1 if laplace else 2
    if not math.isclose(d2, d1 * 2 ** power, rel_tol=REL):
        return (f"its map is not {'linear' if laplace else 'quadratic'} in the distance (map(1) = {d1:.10g}, map(2) = "
                f"{d2:.10g}) as {'Laplace' if laplace else 'Gaussian'} noise's is")
    # to 12 significant digits: OpenDP rounds its map up (make_geometric(scale=1.5).map(1) is 1/1.5 + 1 ulp),
    # so the scale as given (1.5) is the one its map is within an ulp of
    scale = float(f"{1 / d1 if laplace else 1 / math.sqrt(2 * d1):.12g}")
    draws = _draws(meas, vector, 0 if integer else 0.0)
    if integer and not np.all(np.equal(np.mod(draws, 1), 0)):
        return "its outputs are not integers"
    law = ("two-sided geometric" if integer else "Laplace") if laplace else \
        ("discrete Gaussian" if integer else "Gaussian")
    if integer:
        p = _chi_square(draws, _geometric_pmf(scale) if laplace else _discrete_gaussian_pmf(scale), scale)
    else:
        p = float(stats.kstest(draws, "laplace" if laplace else "norm", args=(0, scale)).pvalue)
    if p < P_MIN:
        return (f"{CHECK_DRAWS} draws of its sampler do not follow the {law} law its map implies (scale {scale:.6g}; "
                f"goodness of fit p = {p:.2g})")
    checked = f"{source}; read as {law} noise of scale {scale:.6g} from its map, {CHECK_DRAWS} draws fit (p = {p:.2g})"
    if laplace:
        return (Geometric if integer else Laplace)(scale, source=checked)
    return (DiscreteGaussian if integer else Gaussian)(scale, delta=DEFAULT_DELTA, source=checked)


def _draws(meas, vector: bool, zero) -> np.ndarray:
    if not vector:
        return np.array([meas(zero) for _ in range(CHECK_DRAWS)], dtype=float)
    size = meas.input_domain.size
    if size is None:
        return np.asarray(meas([zero] * CHECK_DRAWS), dtype=float)
    rounds = -(-CHECK_DRAWS // size)
    return np.concatenate([np.asarray(meas([zero] * size), dtype=float) for _ in range(rounds)])


def _geometric_pmf(b: float) -> Callable:
    alpha = math.exp(-1 / b)
    return lambda y: alpha ** np.abs(y) * (1 - alpha) / (1 + alpha)


def _discrete_gaussian_pmf(sigma: float) -> Callable:
    end = _end(sigma)
    ys = np.arange(-end, end + 1)
    total = np.exp(-(ys ** 2) / (2 * sigma ** 2)).sum()
    return lambda y: np.exp(-(np.asarray(y, dtype=float) ** 2) / (2 * sigma ** 2)) / total


def _end(scale: float) -> int:
    return math.ceil(40 * scale) + 40


def _chi_square(samples: np.ndarray, pmf: Callable, scale: float) -> float:
    """Chi-square p-value of integer counts, one bin per integer expected at least 5 times, tails pooled."""
    end = _end(scale)
    ys = np.arange(-end, end + 1)
    p = pmf(ys)
    central = ys[len(samples) * p >= 5]
    if len(central) < 2:
        return 1.0
    lo, hi = int(central.min()), int(central.max())
    expected = np.concatenate([[p[ys <= lo].sum()], p[(ys > lo) & (ys < hi)], [p[ys >= hi].sum()]])
    observed = np.bincount(np.clip(samples.astype(np.int64), lo, hi) - lo, minlength=hi - lo + 1)
    return float(stats.chisquare(observed, len(samples) * expected / expected.sum()).pvalue)


def _measurement_program(meas, source: str, why: str) -> Program:
    """The measurement run on the answers: a scalar one on the single answer, a vector one on all of them,
    each cast to its input type."""
    try:
        vector, carrier = _carrier(meas)
    except Exception:  # a measurement whose domain cannot be read: scalar floats
        vector, carrier = False, "f64"
    cast = bool if carrier == "bool" else int if carrier[:1] in ("i", "u") else float

    def convert(a: float):
        value = cast(round(a)) if cast is int else cast(a)
        if value != a:
            raise InputError(f"{source} takes {carrier} inputs, but the query answered {a:g}")
        return value

    def run(answers: np.ndarray, rng: np.random.Generator):
        if vector:
            out = meas([convert(a) for a in answers])
        else:
            if len(answers) != 1:
                raise InputError(f"{source} takes one answer, but the query returns {len(answers)}")
            out = meas(convert(answers[0]))
        return np.asarray(out, dtype=float)

    return Program(run, name="opendp_measurement", source=source, why=why)
