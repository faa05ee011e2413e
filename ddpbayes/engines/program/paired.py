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
from dataclasses import dataclass

from ddpbayes.engines.program import bounds

SHARES = (0.5, 0.75, 0.9, 0.99)  # the shares of alpha the pilot may give theta's bound (the rest is pi's)
PILOT_SHARE = 16  # the pilot's runs: a 1/PILOT_SHARE part of the check's


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


def choose(counts: tuple[int, int, int], n_pilot: int, n_check: int, direction: str, alpha: float) -> Design:
    """The design whose bound, on the pilot's counts scaled to n_check runs, is largest."""
    both, num, den = oriented(counts, direction)
    scale = n_check / n_pilot
    best, design = bounds.rate_ratio_lower((both + num) * scale, (both + den) * scale, alpha), INDEPENDENT
    for share in SHARES:
        value = bounds.paired_ratio_lower(num * scale, den * scale, both * scale, alpha, share)
        if value > best:
            best, design = value, Design(True, share)
    return design


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
