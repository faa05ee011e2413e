"""The check on coupled runs (common random numbers; DESIGN §2.6 step 4): a program that declares
its randomness aligned (`Program.aligned`: row i of a call draws from the same positions of the
generator's stream whatever the answers) is run on the two inputs from two copies of one generator,
so that row i of the two outputs shares its noise and the pairs of rows are independent of one
another. The event's hits are then counted by pair, (both, only a, only b), and bounded by
`bounds.paired_ratio_lower`. For a shift of shared noise the two events are nested and only the
share of the pairs where both hit is uncertain: ReportNoisyMax3's event {max <= 1}, whose ratio is
e^0.25 on its pair, has 78% of its hit pairs in both and a log-ratio standard error 2.8 times
smaller than the two independent counts' at the same runs.

Whether to couple, and how to split the level between the bound's two parts, is chosen on a pilot
of coupled runs, a sixteenth of the check's budget, drawn before the check and never part of it
(`choose`): the counts the pilot would give at the check's size, projected, are bounded both ways
and the larger wins; a tie keeps the independent check (`certify._check`). The search keeps its
whole budget: an event search that is short of draws (SVT3's, whose events vary from seed to
seed) loses nothing to the pilot."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ddpbayes.engines.program import bounds
from ddpbayes.engines.program.event import Threshold

SHARES = (0.5, 0.75, 0.9, 0.99)  # the shares of alpha the pilot may give theta's bound (the rest is pi's)
PILOT_SHARE = 16  # the pilot's runs: a 1/PILOT_SHARE part of the check's
THRESHOLDS = 400  # a threshold event's candidate thresholds on the pilot (hits of the likelier input, log-spaced)


@dataclass(frozen=True)
class Design:
    """How the check counts its event: `coupled` (n_check pairs of runs from equal generators,
    `bounds.paired_ratio_lower` with theta's part `share` of alpha) or not (independent runs, a
    Poisson number per input, `bounds.rate_ratio_lower`)."""

    coupled: bool = False
    share: float = 0.5

    def describe(self) -> str:
        if not self.coupled:
            return "independent runs"
        return f"coupled runs (common random numbers; theta's share of the level {self.share:g})"


INDEPENDENT = Design()


def pilot_runs(n_check: int) -> int:
    """The coupled pilot's runs per input, taken from the check's n_check (which keeps at least 1)."""
    return min(n_check // PILOT_SHARE, n_check - 1)


def oriented(counts: tuple[int, int, int], direction: str) -> tuple[int, int, int]:
    """(both, only numerator, only denominator) of the pair counts (both, only a, only b)."""
    both, only_a, only_b = counts
    return (both, only_a, only_b) if direction == "a" else (both, only_b, only_a)


def projected(k_num, k_den, both, n_pilot: int, n_check: int, alpha: float, beta: float | None = None) -> np.ndarray:
    """The bounds (at 1 - alpha) that n_check runs would give, (1 + len(SHARES), candidates): the
    independent check's first, then the coupled one's at each share; from the pilot's counts
    (k_num, k_den: each input's hits, both: the runs hit on both, of n_pilot) with the parameters
    each check bounds taken as they are or, with beta, made pessimistic at beta first
    (Clopper–Pearson's bounds, as the search's judged scores, DESIGN §2.6 step 3): the numerator's
    share of the hits for the independent check, theta (up) and pi (down) for the coupled one, so
    that a rare tail's lucky counts do not outscore a central threshold and neither check is
    favoured by being judged twice."""
    proportion = (lambda bound, k, n: np.asarray(bound(k, np.maximum(n, 1e-300), beta))) if beta else \
        (lambda bound, k, n: np.asarray(k / np.maximum(n, 1e-300)))
    k_num, k_den, both = (np.asarray(v, dtype=float) for v in (k_num, k_den, both))
    scale = n_check / n_pilot
    num_share = proportion(bounds.lower, k_num, k_num + k_den)
    rows = [bounds.rate_ratio_lower(num_share * (k_num + k_den) * scale, (1 - num_share) * (k_num + k_den) * scale,
                                    alpha)]
    hit = k_num + k_den - both
    theta = proportion(bounds.upper, both, hit)
    pi = proportion(bounds.lower, k_num - both, hit - both)
    runs = hit * scale
    for share in SHARES:
        rows.append(bounds.paired_ratio_lower((1 - theta) * pi * runs, (1 - theta) * (1 - pi) * runs, theta * runs,
                                              alpha, share))
    return np.vstack([np.broadcast_to(r, np.shape(k_num)) for r in rows]).reshape(1 + len(SHARES), -1)


def _design(row: int) -> Design:
    return INDEPENDENT if row == 0 else Design(True, SHARES[row - 1])


def choose(counts: tuple[int, int, int], n_pilot: int, n_check: int, direction: str, alpha: float) -> Design:
    """The design whose projected bound (`projected`, the pilot's proportions as they are) is
    largest; ties keep the independent check."""
    both, num, den = oriented(counts, direction)
    table = projected(both + num, both + den, both, n_pilot, n_check, alpha)
    return _design(int(np.argmax(table[:, 0])))


def choose_threshold(event: Threshold, scores: tuple[np.ndarray, np.ndarray], n_check: int, direction: str,
                     alpha: float) -> tuple[Threshold, Design]:
    """A threshold event's threshold and the design, chosen together on the pilot's coupled scores
    (score_a, score_b, row i of the two from one generator): the search chose its threshold for
    independent runs, whose width favours larger events, where a coupled check's width is that of
    theta alone (ReportNoisyMax3: {max <= 1} has ratio e^0.25 exactly, a larger event less). The
    candidates: the search's threshold and up to THRESHOLDS others, the scores that leave 20 to all
    of the pilot's runs of the likelier input in the event; each is scored by its best `projected`
    bound, pessimistic at 0.25 over twice the candidates (the union bound over their two
    parameters' bounds), the search's threshold winning ties; the design at that threshold is then
    `choose`'s, on its counts as they are (pessimism there would move the level's share toward pi,
    whose bound it widens: one-time RAPPOR 0.5974 against 0.5981 at seed 0)."""
    sign = 1.0 if event.above else -1.0  # the event is {sign * score >= sign * tau}
    a, b = sign * scores[0], sign * scores[1]
    num, den = (a, b) if direction == "a" else (b, a)
    n_pilot = len(num)
    order = np.sort(num)
    ranks = np.unique(np.geomspace(min(20, n_pilot), n_pilot, THRESHOLDS).astype(int))
    taus = np.concatenate([[sign * event.tau], order[n_pilot - ranks]])
    k_num = n_pilot - np.searchsorted(order, taus, side="left")
    k_den = len(den) - np.searchsorted(np.sort(den), taus, side="left")
    both = n_pilot - np.searchsorted(np.sort(np.minimum(num, den)), taus, side="left")
    table = projected(k_num, k_den, both, n_pilot, n_check, alpha, 0.25 / (2 * len(taus)))
    col = int(np.argmax(table.max(axis=0)))  # the first maximum: ties keep the search's
    counts = (int(both[col]), int(k_num[col] - both[col]), int(k_den[col] - both[col]))
    return replace(event, tau=float(sign * taus[col])), choose(counts, n_pilot, n_check, "a", alpha)


def ratio_bound(counts: tuple[int, int, int], direction: str, design: Design, confidence: float
                ) -> tuple[float, float]:
    """(eps_lcb, estimate) from coupled counts: the log of `bounds.paired_ratio_lower` at 1 -
    confidence (0 if below 1) and the plain log ratio of the two inputs' hits."""
    both, num, den = oriented(counts, direction)
    ratio = bounds.paired_ratio_lower(num, den, both, 1 - confidence, design.share)
    eps_lcb = max(0.0, math.log(ratio)) if ratio > 0 else 0.0
    k_num, k_den = both + num, both + den
    estimate = math.log(k_num / k_den) if k_num and k_den else (math.inf if k_num else math.nan)
    return eps_lcb, estimate
