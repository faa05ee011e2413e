"""What the mechanisms with a joint output law share (issue #28, DESIGN §5.2): report-noisy-max, the
exponential mechanism, the sparse vector technique, RAPPOR and the truncated geometric mechanism.

Their output is not the answers plus independent noise per coordinate, so they have no per-coordinate
kernel (`log_kernel` refuses); they state a finite output space and the log-probability of each output
given the whole answer vector (`Mechanism.output_space`, `log_prob`, `sample`). This module holds
`JointMechanism` (the refusals, `--mechanism-param NAME=VALUE` parsing and `build` from --scale/--epsilon) and
`answer_count` (how many answers a query hands the mechanism)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.limits import check_states
from ddpbayes.mechanisms.base import Mechanism, _positive
from ddpbayes.model.domains import Domain, Finite
from ddpbayes.queries import Query

ENUMERATED = 1 << 16  # tuple states an expr:/fn: query is evaluated on to find its integer range
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def answer_count(query: Query, domains: Sequence[Domain]) -> int:
    """K, the number of answers `query` returns (its output width), read off one row of tuple values
    inside the domains."""
    row = np.array([[min(max(0.0, float(d.lo)), float(d.hi)) for d in domains]])
    with np.errstate(all="ignore"):
        return int(np.atleast_2d(query.values(row)).shape[1])


def domain_states(domains: Sequence[Domain]) -> np.ndarray | None:
    """Every combination of the tuples' values (states, n), or None when a domain is not finite or the product
    has more than ENUMERATED states."""
    if not all(isinstance(d, Finite) for d in domains) or math.prod(len(d.values) for d in domains) > ENUMERATED:
        return None
    return np.array(list(itertools.product(*[d.values for d in domains])), dtype=float)


def integer_range(query: Query, domains: Sequence[Domain]) -> tuple[float, float] | None:
    """(lowest, highest) value of a scalar integer query, None when the query is not one: read off the weights
    of a linear query with integer weights on integer-valued finite tuples, else (an expr:/fn: query) from its
    values over the product of finite domains when that has at most ENUMERATED states."""
    if not all(isinstance(d, Finite) for d in domains):
        return None
    w = query.weights(len(domains))
    if w is not None:
        if not all(float(v).is_integer() for d in domains for v in d.values) or np.any(np.mod(w, 1) != 0):
            return None
        ends = np.array([[min(d.values), max(d.values)] for d in domains], dtype=float) * np.asarray(w)[:, None]
        return float(ends.min(axis=1).sum()), float(ends.max(axis=1).sum())
    states = domain_states(domains)
    if states is None:
        return None
    with np.errstate(all="ignore"):
        q = np.asarray(query.values(states), dtype=float)
    if q.ndim != 2 or q.shape[1] != 1 or not np.all(np.isfinite(q)) or np.any(q != np.round(q)):
        return None
    return float(q.min()), float(q.max())


def parse_params(kind: str, parameters: dict[str, tuple[type, object, str]], given: dict[str, str]) -> dict:
    """The values of `parameters` (name -> (type, default, help)) from the user's `--mechanism-param NAME=VALUE`
    texts `given`: defaults for the others; one-line InputError for an unknown name or a bad value."""
    out = {name: default for name, (_, default, _) in parameters.items()}
    for name, text in given.items():
        if name not in parameters:
            known = ", ".join(parameters) or "none"
            raise InputError(f"the {kind} mechanism has no parameter '{name}' (its parameters: {known})")
        typ = parameters[name][0]
        text = str(text).strip()
        try:
            if typ is bool:
                if text.lower() not in _TRUE | _FALSE:
                    raise ValueError
                value: object = text.lower() in _TRUE
            elif typ is int:
                value = int(text)
            elif typ is float:
                value = float(text)
                if not math.isfinite(value):
                    raise ValueError
            else:
                value = text
        except ValueError:
            what = {bool: "true or false", int: "an integer", float: "a finite number"}.get(typ, "a value")
            raise InputError(f"--mechanism-param {name}= must be {what} for the {kind} mechanism, got '{text}'") from None
        out[name] = value
    return out


def sensitivity_for(query: Query, domains: Sequence[Domain], given: float | None, kind: str) -> float:
    """Δ, the per-answer sensitivity --epsilon sets the noise from: `given` (--mechanism-param sensitivity=), else
    the query's global L1 sensitivity (an upper bound on every answer's change); refused when zero or
    unbounded."""
    if given is not None:
        _positive(given, "--mechanism-param sensitivity")
        return float(given)
    gs = query.global_sensitivity(domains)
    if not math.isfinite(gs) or gs <= 0:
        why = "unbounded" if not math.isfinite(gs) else "zero"
        raise InputError(f"--epsilon cannot set the {kind} mechanism: the query's global L1 sensitivity is {why}; "
                         "give --scale or --mechanism-param sensitivity=")
    return float(gs)


@dataclass(frozen=True)
class DayLaw:
    """A joint law over K answers that is a product over the answers given one real v (issue #43 item 4): the
    output is an index j (or, with `first`, also "none" after every answer), and given v answer a_m contributes
    F_b(z) below j (Laplace CDF of scale `scale`, z = `threshold` + v − a_m with `first`, v − a_m without), at j
    F_b(−z) with `first` (a TRUE) or f_b(z) without (the noisy maximum's density), after j 1 with `first` (not
    answered) or F_b(z); v has density Lap(`weight_scale`) with `first` (the threshold noise), Lebesgue measure
    without. SVT Alg. 1 with c = 1 (`first`) and report-noisy-max with Laplace noise releasing the index."""

    first: bool
    threshold: float
    scale: float
    weight_scale: float = 0.0


class JointMechanism(Mechanism):
    """A mechanism whose output law is over the whole answer vector (`joint`): no per-coordinate kernel.
    Subclasses define `_from(scale, epsilon, values)` (the instance from a noise scale and the parsed
    parameters) and `scale_from(epsilon, sensitivity, values)` (the scale --epsilon sets, as the paper does)."""

    joint = True
    law_error = 0.0
    answer_range: tuple[int, int | None] = (1, None)  # the fewest and most answers it takes (None: no limit)
    dp_bound_reason: str | None = None  # why `dp_leakage` is only an upper bound, when it is

    @property
    def day_law(self) -> DayLaw | None:
        """The law as a product over the answers given one real (`DayLaw`), or None when it is not one."""
        return None

    def log_kernel(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Refused: the law is over the whole answer vector (`output_space`, `log_prob`).

        Parameters
        ----------
        q : numpy.ndarray
            The distinct values (m,) of one output coordinate.

        Returns
        -------
        tuple of numpy.ndarray
            Never returns.

        Raises
        ------
        InputError
            Always.
        """
        raise InputError(f"the {self.kind} mechanism has a joint output law over all answers, not noise per "
                         "coordinate: use its output_space and log_prob")

    def grid_size(self, levels: int) -> int:
        """Refused: the law is over the whole answer vector (`output_count`).

        Parameters
        ----------
        levels : int
            The number of distinct query values.

        Returns
        -------
        int
            Never returns.

        Raises
        ------
        InputError
            Always.
        """
        raise InputError(f"the {self.kind} mechanism has a joint output law over all answers, not noise per "
                         "coordinate: use its output_count")

    def output_count(self, answers: np.ndarray) -> int:
        """G, here by building `output_space` (subclasses may count without building it).

        Parameters
        ----------
        answers : numpy.ndarray
            The distinct answer vectors (R, K).

        Returns
        -------
        int
            The number of outputs.
        """
        return len(self.output_space(answers))

    def check(self, query: Query, domains: Sequence[Domain]) -> None:
        """Refuse a query whose number of answers K lies outside `answer_range`.

        Parameters
        ----------
        query : Query
            The query to release.
        domains : sequence of Domain
            The tuples' domains.

        Raises
        ------
        InputError
            When the query returns too few or too many answers.
        """
        k = answer_count(query, domains)
        lo, hi = self.answer_range
        if k < lo or (hi is not None and k > hi):
            want = f"exactly {lo}" if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
            raise InputError(f"the {self.kind} mechanism takes {want} answer{'s' if (hi or 2) > 1 else ''}, "
                             f"but the query '{query.spec}' returns {k}")

    def _answers(self, answers: np.ndarray) -> np.ndarray:
        """The answer vectors as a finite (R, K) float array, K within `answers`, or a one-line InputError."""
        a = np.atleast_2d(np.asarray(answers, dtype=float))
        lo, hi = self.answer_range
        if a.ndim != 2 or a.shape[1] < lo or (hi is not None and a.shape[1] > hi):
            raise InputError(f"the {self.kind} mechanism got answers of shape {np.shape(answers)}")
        if not np.all(np.isfinite(a)):
            raise InputError(f"the {self.kind} mechanism got a non-finite answer")
        return a

    def tuple_dp_leakage(self, query: Query, k: int, domains: Sequence[Domain]) -> tuple[float, str | None]:
        """Classic DP's leakage for tuple k (DESIGN §1, `dp`): exactly when the domains are finite and their
        product has at most ENUMERATED states (every x_{-k}, every pair of tuple k's values, every output:
        `classic_leakage`), else the textbook level at tuple k's sensitivity (`dp_bound`, with why it bounds).

        Parameters
        ----------
        query : Query
            The query the mechanism releases.
        k : int
            The tuple's index.
        domains : sequence of Domain
            The tuples' domains.

        Returns
        -------
        leakage : float
            The classic ε for tuple k.
        bound_reason : str or None
            Why `leakage` is only an upper bound, None when it is exact.
        """
        exact = classic_leakage(self, query, k, domains)
        return (exact, None) if exact is not None else self.dp_bound(query, k, domains)

    def dp_bound(self, query: Query, k: int, domains: Sequence[Domain]) -> tuple[float, str | None]:
        """`dp_leakage` at tuple k's L1 sensitivity, which bounds each answer's change; a bound when the
        query has several answers (the per-answer change may be smaller) or the guarantee is one.

        Parameters
        ----------
        query : Query
            The query the mechanism releases.
        k : int
            The tuple's index.
        domains : sequence of Domain
            The tuples' domains.

        Returns
        -------
        leakage : float
            The bound.
        bound_reason : str or None
            Why it is a bound (`dp_bound_reason`, several answers), None when neither applies.
        """
        value = self.dp_leakage(query.sensitivity(k, domains))
        reasons = [self.dp_bound_reason] if self.dp_bound_reason else []
        if answer_count(query, domains) > 1:
            reasons.append("the L1 sensitivity stands for the largest change of one answer")
        return value, ("; ".join(reasons) or None)

    @classmethod
    def build(cls, query: Query, domains: Sequence[Domain], *, scale: float | None = None,
              epsilon: float | None = None, params: dict[str, str] | None = None) -> Mechanism:
        """This mechanism from --scale, or from --epsilon through `scale_from` at the per-answer sensitivity
        (``--mechanism-param sensitivity=``, else the query's global L1 sensitivity), and its parameters.

        Parameters
        ----------
        query : Query
            The query to release.
        domains : sequence of Domain
            The tuples' domains.
        scale : float or None, optional
            The noise scale (--scale).
        epsilon : float or None, optional
            The privacy level that sets the scale (--epsilon).
        params : dict[str, str] or None, optional
            The texts of ``--mechanism-param NAME=VALUE``, one per name of `parameters`.

        Returns
        -------
        Mechanism
            The mechanism, checked against `query`.

        Raises
        ------
        InputError
            For both or neither of `scale` and `epsilon` (where a scale is needed), a non-positive value, an
            unknown or bad parameter, a sensitivity that is zero or unbounded or given beside `scale` (unused
            there), or a query it cannot release.
        """
        values = parse_params(cls.kind, cls.parameters, params or {})
        if scale is not None and epsilon is not None:
            raise InputError(f"give one of --scale and --epsilon for the {cls.kind} mechanism, not both")
        if epsilon is not None:
            _positive(epsilon, "epsilon")
            delta = sensitivity_for(query, domains, values.get("sensitivity"), cls.kind)
            scale = cls.scale_from(epsilon, delta, values)
            _positive(scale, f"the scale --epsilon {epsilon:g} sets")
        elif scale is not None:
            _positive(scale, "scale")
            if "sensitivity" in (params or {}):
                raise InputError(f"--mechanism-param sensitivity= is unused beside --scale: it sets the {cls.kind} "
                                 "mechanism's scale from --epsilon (give --epsilon, or drop it)")
        mech = cls._from(scale, epsilon, values)
        mech.check(query, domains)
        return mech

    @classmethod
    def scale_from(cls, epsilon: float, sensitivity: float, values: dict) -> float:
        return sensitivity / epsilon

    @classmethod
    def _from(cls, scale: float | None, epsilon: float | None, values: dict) -> Mechanism:
        raise NotImplementedError


def classic_leakage(mech: Mechanism, query: Query, k: int, domains: Sequence[Domain]) -> float | None:
    """max over x_{-k} in the product of the other domains, t ≠ t' in tuple k's and outputs y of
    |log p(y | q(t, x_{-k})) − log p(y | q(t', x_{-k}))|: classic DP's leakage for tuple k, exactly; None when
    a domain is not finite or the product has more than ENUMERATED states."""
    states = domain_states(domains)
    if states is None:
        return None
    with np.errstate(all="ignore"):
        q = np.asarray(query.values(states), dtype=float)
    answers, row = np.unique(q, axis=0, return_inverse=True)
    row = row.reshape(-1)
    others = np.delete(states, k, axis=1)
    group = np.unique(others, axis=0, return_inverse=True)[1].reshape(-1)
    pairs = {tuple(sorted(set(row[group == g].tolist()))) for g in range(int(group.max()) + 1)}
    pairs = {(u, v) for rows in pairs for u, v in itertools.combinations(rows, 2)}
    if not pairs:
        return 0.0
    if mech.continuous:
        best = 0.0
        for u, v in pairs:
            log_w = np.full((2, len(answers)), -np.inf)
            log_w[0, u] = log_w[1, v] = 0.0
            best = max(best, mech.sup_log_ratio(log_w, answers)[0])
        return best
    check_states(mech.output_count(answers) * len(answers), f"the {mech.kind} law over the domains' answers",
                 "cells")
    table = mech.log_prob(mech.output_space(answers), answers)  # (G, U)
    u, v = np.array(sorted(pairs)).T
    with np.errstate(invalid="ignore"):
        diff = np.abs(table[:, u] - table[:, v])
    diff[np.isnan(diff)] = -np.inf  # an output neither answer gives
    return max(0.0, float(diff.max()))


def positive_int(value: object, what: str, kind: str, most: int | None = None) -> int:
    """`value` as a positive integer (at most `most`), else a one-line InputError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1 or (most and value > most):
        limit = f" at most {most}" if most else ""
        raise InputError(f"{what} of the {kind} mechanism must be a positive integer{limit}, got {value}")
    return int(value)


def probability(value: object, what: str, kind: str, *, open_low: bool = False, open_high: bool = False) -> float:
    """`value` as a probability in [0, 1] (ends excluded as asked), else a one-line InputError."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > 0 if open_low else value >= 0) and (value < 1 if open_high else value <= 1)
    if not ok:
        span = f"{'(' if open_low else '['}0, 1{')' if open_high else ']'}"
        raise InputError(f"{what} of the {kind} mechanism must be in {span}, got {value}")
    return float(value)


def laplace_noise(rng: np.random.Generator, scale: float, shape: tuple[int, ...]) -> np.ndarray:
    """Laplace(0, scale) draws as a signed standard exponential (the ziggurat: faster than rng.laplace)."""
    z = rng.standard_exponential(shape)
    np.negative(z, out=z, where=rng.integers(0, 2, shape, dtype=np.int8).astype(bool))
    z *= scale
    return z
