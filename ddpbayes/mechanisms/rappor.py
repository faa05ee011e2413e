"""RAPPOR (issue #28): Erlingsson, Pihur & Korolova 2014, "RAPPOR: Randomized Aggregatable Privacy-Preserving
Ordinal Response" (CCS 2014), §3 steps 1–3 (`rappor`) and steps 1–2 (`one_time_rappor`), as DP-Sniper's
Rappor and OneTimeRappor run them.

Step 1: the answer v (one integer) sets Bloom-filter bits B_j for j = murmur3_32(str(v), seed=i) mod m,
i < h (`hashes`, m = `filter_size`). Step 2 (permanent randomized response): each bit becomes 1 with
probability f/2, 0 with probability f/2, else stays B_j. Step 3 (instantaneous): the report bit is 1 with
probability q if the permanent bit is 1, p if it is 0. The bits are independent given B, so
  P(y_j = 1 | B_j = 1) = (1 − f/2) q + (f/2) p,   P(y_j = 1 | B_j = 0) = (f/2) q + (1 − f/2) p
(one-time RAPPOR: 1 − f/2 and f/2), and log p(y | v) is the sum over the m bits: exact.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.limits import check_states
from ddpbayes.mechanisms.base import _positive
from ddpbayes.mechanisms.joint import JointMechanism, integer_range, parse_params, positive_int, probability

_MASK = 0xFFFFFFFF


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit (Austin Appleby, public domain) of `data`, as a SIGNED int32 like
    python's `mmh3.hash` returns."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & _MASK
    n = len(data) // 4 * 4
    for i in range(0, n, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * c1) & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        k = (k * c2) & _MASK
        h ^= k
        h = ((h << 13) | (h >> 19)) & _MASK
        h = (h * 5 + 0xE6546B64) & _MASK
    tail = data[n:]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * c1) & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        k = (k * c2) & _MASK
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


@dataclass(frozen=True)
class Rappor(JointMechanism):
    """RAPPOR steps 1–3 on one integer answer. Output: the m report bits (d = m).
    Classic ε: the paper's ε_1 = h ln(q*(1 − p*) / (p*(1 − q*))) for one report, q* = P(y=1|B=1),
    p* = P(y=1|B=0) (an upper bound: attained when two values' Bloom bits do not overlap); ε_∞ =
    2h ln((1 − f/2)/(f/2)) (the permanent response, over every report) is reported too, as the
    result's `mechanism.epsilon_permanent`.

    Parameters
    ----------
    hashes : int, optional
        h, the Bloom filter's hash functions (1 to 64; default 4).
    filter_size : int, optional
        m, the Bloom filter's bits (1 to 65536; default 20).
    f : float, optional
        Permanent randomized response: a bit is replaced by a fair coin with probability f
        (default 0.75).
    p : float, optional
        Instantaneous response: P(report 1 | permanent bit 0) (default 0.45).
    q : float, optional
        Instantaneous response: P(report 1 | permanent bit 1) (default 0.55).

    Raises
    ------
    InputError
        For `hashes` or `filter_size` out of range, or a probability outside [0, 1].
    """

    hashes: int = 4
    filter_size: int = 20
    f: float = 0.75
    p: float = 0.45
    q: float = 0.55
    kind = "rappor"
    aliases = ("rappor_full",)
    answer_range = (1, 1)
    parameters = {"hashes": (int, 4, "h, the Bloom filter's hash functions"),
                  "filter_size": (int, 20, "m, the Bloom filter's bits"),
                  "f": (float, 0.75, "permanent randomized response: a bit is replaced by a fair coin with "
                        "probability f"),
                  "p": (float, 0.45, "instantaneous response: P(report 1 | permanent bit 0)"),
                  "q": (float, 0.55, "instantaneous response: P(report 1 | permanent bit 1)")}
    dp_bound_reason = "RAPPOR's ε is attained only by two values whose Bloom bits do not overlap"

    def __post_init__(self):
        positive_int(self.hashes, "--mechanism-param hashes=", self.kind, 64)
        positive_int(self.filter_size, "--mechanism-param filter_size=", self.kind, 1 << 16)
        probability(self.f, "--mechanism-param f=", self.kind)
        probability(self.p, "--mechanism-param p=", self.kind)
        probability(self.q, "--mechanism-param q=", self.kind)

    @classmethod
    def build(cls, query, domains, *, scale=None, epsilon=None, params=None):
        """From `--mechanism-param` alone (one-time RAPPOR also from --epsilon): no noise scale to set.

        Parameters
        ----------
        query : Query
            The query to release.
        domains : sequence of Domain
            The tuples' domains.
        scale : float or None, optional
            Refused when given.
        epsilon : float or None, optional
            One-time RAPPOR: the ε_∞ that sets f; refused by RAPPOR.
        params : dict[str, str] or None, optional
            The texts of ``--mechanism-param NAME=VALUE``.

        Returns
        -------
        Mechanism
            The mechanism, checked against `query`.

        Raises
        ------
        InputError
            For a scale, an epsilon it does not take, a bad parameter or a query it cannot release.
        """
        cls._settable(scale, epsilon, params or {})
        mech = cls._from(None, epsilon, parse_params(cls.kind, cls.parameters, params or {}))
        mech.check(query, domains)
        return mech

    @classmethod
    def _settable(cls, scale, epsilon, params: dict) -> None:
        if scale is not None or epsilon is not None:
            raise InputError(f"the {cls.kind} mechanism is set by its parameters (--mechanism-param f=, p=, q=), not by "
                             "--scale or --epsilon")

    @classmethod
    def _from(cls, scale, epsilon, values):
        return cls(values["hashes"], values["filter_size"], values["f"], values["p"], values["q"])

    def check(self, query, domains) -> None:
        """One integer answer (the value whose Bloom filter is reported).

        Parameters
        ----------
        query : Query
            The query to release.
        domains : sequence of Domain
            The tuples' domains.

        Raises
        ------
        InputError
            When the query does not return one integer answer.
        """
        super().check(query, domains)
        if integer_range(query, domains) is None:
            raise InputError(f"the {self.kind} mechanism reports one integer value: use an integer query (integer "
                             "weights on integer-valued tuples)")

    @property
    def one_probabilities(self) -> tuple[float, float]:
        """(P(y_j = 1 | B_j = 0), P(y_j = 1 | B_j = 1))."""
        h = self.f / 2
        return h * self.q + (1 - h) * self.p, (1 - h) * self.q + h * self.p

    def bit_log_probabilities(self) -> np.ndarray:
        """log P(y_j = y | B_j = b) as a table [b, y] (2, 2), each entry from the logs of its own terms so that
        a probability within 1e-16 of 1 (1 − f/2 at f < 1e-16) keeps its complement, and 0 gives −inf.

        Returns
        -------
        numpy.ndarray
            [[log P(0 | 0), log P(1 | 0)], [log P(0 | 1), log P(1 | 1)]].
        """
        keep, flip = _keep_flip(self.f)
        with np.errstate(divide="ignore"):
            one, zero = np.log([self.p, self.q]), np.log1p(-np.array([self.p, self.q]))
        # P(y | b) = (1 − f/2) P_inst(y | b) + (f/2) P_inst(y | 1 − b), P_inst(1 | b) = (p, q)[b]
        return np.array([[np.logaddexp(keep + zero[b], flip + zero[1 - b]),
                          np.logaddexp(keep + one[b], flip + one[1 - b])] for b in (0, 1)])

    def bloom(self, values: np.ndarray) -> np.ndarray:
        """The Bloom filters (R, m) of the integer answers `values` (R,).

        Parameters
        ----------
        values : numpy.ndarray
            The integer answers (R,).

        Returns
        -------
        numpy.ndarray
            The 0/1 filters (R, m): bit murmur3_32(str(v), seed=i) mod m set for i < h.
        """
        out = np.zeros((len(values), self.filter_size))
        for r, v in enumerate(values):
            for i in range(self.hashes):
                out[r, murmur3_32(str(int(v)).encode(), i) % self.filter_size] = 1.0
        return out

    def _filters(self, answers: np.ndarray) -> np.ndarray:
        a = self._answers(answers)[:, 0]
        if np.any(a != np.round(a)) or np.any(np.abs(a) > 2.0 ** 53):
            raise InputError(f"the {self.kind} mechanism takes one integer answer, got {a[a != np.round(a)][:1]}")
        return self.bloom(a)

    def output_space(self, answers: np.ndarray) -> np.ndarray:
        """Every pattern of the m bits whose Bloom value differs among the given answers; each other bit is
        the same under every answer and contributes the same factor to every row of `log_prob`, so it
        cancels in every likelihood ratio: it is set to its most likely report value.

        Parameters
        ----------
        answers : numpy.ndarray
            The distinct answers (R, 1), integers.

        Returns
        -------
        numpy.ndarray
            The outputs (G, m), G = 2 to the number of varying bits.

        Raises
        ------
        InputError
            For a non-integer answer, or G above --max-states.
        """
        b = np.unique(self._filters(answers), axis=0)
        varying = np.flatnonzero(b.min(axis=0) != b.max(axis=0))
        check_states(2 ** len(varying), f"the {self.kind} output space ({len(varying)} varying bits)", "outputs")
        p0, p1 = self.one_probabilities
        base = np.where(b[0] == 1, float(p1 >= 0.5), float(p0 >= 0.5))
        out = np.tile(base, (2 ** len(varying), 1))
        out[:, varying] = (np.arange(2 ** len(varying))[:, None] >> np.arange(len(varying))[None, :]) & 1
        return out

    def output_count(self, answers: np.ndarray) -> int:
        """2 to the number of bits whose Bloom value differs among the answers.

        Parameters
        ----------
        answers : numpy.ndarray
            The distinct answers (R, 1), integers.

        Returns
        -------
        int
            G.
        """
        b = self._filters(answers)
        return 2 ** int(np.sum(b.min(axis=0) != b.max(axis=0)))

    def log_prob(self, outputs: np.ndarray, answers: np.ndarray) -> np.ndarray:
        """log p(y | v): the sum over the m independent report bits (exact).

        Parameters
        ----------
        outputs : numpy.ndarray
            The report bits (G, m).
        answers : numpy.ndarray
            The answers (R, 1), integers.

        Returns
        -------
        numpy.ndarray
            The log-probabilities (G, R); -inf for an output that is not 0/1.

        Raises
        ------
        InputError
            When an output does not have m bits, or an answer is not an integer.
        """
        y = np.asarray(outputs, dtype=float).reshape(len(outputs), -1)
        if y.shape[1] != self.filter_size:
            raise InputError(f"{self.kind} outputs have {y.shape[1]} bits, the filter {self.filter_size}")
        b = self._filters(answers).astype(int)  # (R, m)
        table = self.bit_log_probabilities()
        l0, l1 = table[b, 0], table[b, 1]  # (R, m): log P(y_j = 0 | B_j), log P(y_j = 1 | B_j)
        ones, zeros = (y == 1).astype(float), (y == 0).astype(float)
        # a bit of probability 0 makes its output impossible: counted apart, as 0 · (−inf) would be nan
        out = ones @ np.where(np.isinf(l1), 0.0, l1).T + zeros @ np.where(np.isinf(l0), 0.0, l0).T
        impossible = ones @ np.isinf(l1).T.astype(float) + zeros @ np.isinf(l0).T.astype(float)
        valid = np.all((y == 0) | (y == 1), axis=1)[:, None]
        return np.where(valid & (impossible == 0), out, -np.inf)

    def sample(self, answers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One report per answer: its Bloom filter, each bit set to 1 with P(y_j = 1 | B_j).

        Parameters
        ----------
        answers : numpy.ndarray
            The answers (S, 1), integers.
        rng : numpy.random.Generator
            The random generator.

        Returns
        -------
        numpy.ndarray
            The reports (S, m).
        """
        a = self._answers(answers)[:, 0]
        values, inverse = np.unique(a, return_inverse=True)
        b = self._filters(values[:, None])[inverse.ravel()]
        return self._randomize(b, rng)

    def _randomize(self, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The report bits given the Bloom bits: steps 2 and 3 compose, bit by bit, into one coin with
        P(y_j = 1 | B_j) (`one_probabilities`), the same law as drawing the permanent bit first."""
        p0, p1 = self.one_probabilities
        return (rng.random(b.shape) < np.where(b == 1, p1, p0)).astype(float)

    def dp_leakage(self, sensitivity: float) -> float:
        """The paper's ε_1 = h ln(q*(1 − p*) / (p*(1 − q*))) for one report, whatever the change.

        Parameters
        ----------
        sensitivity : float
            The L1 sensitivity (only whether it is positive matters).

        Returns
        -------
        float
            ε_1 (inf when a report bit is certain), 0 when the sensitivity is not positive or p* = q*.
        """
        if sensitivity <= 0:
            return 0.0
        (l00, l01), (l10, l11) = self.bit_log_probabilities()
        if l01 == l11 and l00 == l10:
            return 0.0
        if math.isinf(min(l00, l01, l10, l11)):
            return math.inf
        return self.hashes * abs(float((l11 + l00) - (l01 + l10)))

    def permanent_epsilon(self) -> float:
        """ε_∞ = 2h ln((1 − f/2)/(f/2)), the paper's bound over every report (the permanent response).

        Returns
        -------
        float
            ε_∞, inf when f = 0.
        """
        keep, flip = _keep_flip(self.f)
        return 2 * self.hashes * (keep - flip) if self.f > 0 else math.inf

    def describe(self) -> dict:
        p0, p1 = self.one_probabilities
        return {"kind": self.kind, "epsilon": self.dp_leakage(1.0), "epsilon_permanent": self.permanent_epsilon(),
                "hashes": self.hashes, "filter_size": self.filter_size, "f": self.f, "p": self.p, "q": self.q,
                "output": f"{self.filter_size} bits, P(1 | Bloom bit 1) = {p1:.6g}, P(1 | Bloom bit 0) = {p0:.6g}"}


@dataclass(frozen=True)
class OneTimeRappor(Rappor):
    """One-time RAPPOR, steps 1–2 (the permanent response is the report): P(y_j = 1 | B_j) = 1 − f/2 or f/2.
    Classic ε: ε_∞ = 2h ln((1 − f/2)/(f/2)) (an upper bound, attained by non-overlapping Bloom bits);
    --epsilon sets f = 2/(1 + e^{ε/(2h)}) as the paper's ε_∞ does.

    Parameters
    ----------
    hashes : int, optional
        h, the Bloom filter's hash functions (1 to 64; default 4).
    filter_size : int, optional
        m, the Bloom filter's bits (1 to 65536; default 20).
    f : float, optional
        A bit is replaced by a fair coin with probability f (default 0.95).
    p, q : float, optional
        Unused by the one-time law (Rappor's fields, defaults 0.45 and 0.55).

    Raises
    ------
    InputError
        For `hashes` or `filter_size` out of range, or a probability outside [0, 1].
    """

    f: float = 0.95
    kind = "one_time_rappor"
    aliases = ("one-time-rappor", "onetime_rappor")
    parameters = {"hashes": Rappor.parameters["hashes"], "filter_size": Rappor.parameters["filter_size"],
                  "f": (float, 0.95, "a bit is replaced by a fair coin with probability f")}

    @classmethod
    def _settable(cls, scale, epsilon, params: dict) -> None:
        if scale is not None:
            raise InputError(f"the {cls.kind} mechanism is set by --epsilon or --mechanism-param f=, not --scale")
        if epsilon is not None and "f" in params:
            raise InputError(f"give one of --epsilon and --mechanism-param f= for the {cls.kind} mechanism, not both")

    @classmethod
    def _from(cls, scale, epsilon, values):
        hashes = positive_int(values["hashes"], "--mechanism-param hashes=", cls.kind, 64)
        return cls(hashes, values["filter_size"], values["f"] if epsilon is None else f_for(epsilon, hashes))

    @property
    def one_probabilities(self) -> tuple[float, float]:
        """(P(y_j = 1 | B_j = 0), P(y_j = 1 | B_j = 1)) = (f/2, 1 − f/2)."""
        return self.f / 2, 1 - self.f / 2

    def bit_log_probabilities(self) -> np.ndarray:
        """log P(y_j = y | B_j = b) as a table [b, y]: log(1 − f/2) where y = b, log(f/2) where not.

        Returns
        -------
        numpy.ndarray
            [[log(1 − f/2), log(f/2)], [log(f/2), log(1 − f/2)]].
        """
        keep, flip = _keep_flip(self.f)
        return np.array([[keep, flip], [flip, keep]])

    def dp_leakage(self, sensitivity: float) -> float:
        """ε_∞ = 2h ln((1 − f/2)/(f/2)), whatever the change.

        Parameters
        ----------
        sensitivity : float
            The L1 sensitivity (only whether it is positive matters).

        Returns
        -------
        float
            ε_∞, 0 when the sensitivity is not positive.
        """
        return self.permanent_epsilon() if sensitivity > 0 else 0.0

    def describe(self) -> dict:
        return {"kind": self.kind, "epsilon": self.permanent_epsilon(), "hashes": self.hashes,
                "filter_size": self.filter_size, "f": self.f,
                "output": f"{self.filter_size} bits, each Bloom bit kept with probability {1 - self.f / 2:.6g}"}


def f_for(epsilon: float, hashes: int) -> float:
    """The f whose ε_∞ = 2h ln((1 − f/2)/(f/2)) is `epsilon`: 2 e^{−x} / (1 + e^{−x}), x = ε/(2h); refused
    when f is below the smallest normal double (its ε would be rounded)."""
    _positive(epsilon, "epsilon")
    x = epsilon / (2 * hashes)
    f = 2.0 * math.exp(-x) / (1.0 + math.exp(-x))
    if f < sys.float_info.min:
        most = 2 * hashes * math.log(2 / sys.float_info.min - 1)
        raise InputError(f"--epsilon {epsilon:g} of the one_time_rappor mechanism needs f = 2/(1 + e^(ε/(2h))) below "
                         f"the smallest normal double: with h = {hashes} hashes ε is at most {most:.6g} (f=0 gives "
                         "deterministic reports, leakage inf)")
    return f


def _keep_flip(f: float) -> tuple[float, float]:
    """(log(1 − f/2), log(f/2)), each kept to full precision: log(f/2) is −inf at f = 0."""
    return math.log1p(-f / 2), (math.log(f) - math.log(2) if f > 0 else -math.inf)
