"""A certified lower bound on the leakage between two output laws we can only sample (issue #28
item 2): search a distinguishing event on one sample (`event`), then count it on n_check FRESH
draws per side and bound its probability ratio with exact binomial intervals:

    eps_lcb = max(0, log(lower_a / upper_b))  (or b over a: `direction`)

with lower_a the Clopper–Pearson lower bound of P_a(E), upper_b the upper bound of P_b(E), each at
level 1 - (1 - confidence) / 2, so that eps_lcb <= log(P_a(E) / P_b(E)) <= the true leakage with
probability at least `confidence` (a union bound over the two sides; the event is fixed before the
check sample is drawn). It may FAIL a claim, never PASS one.

Draws come in batches of at most about 1e6 floats (`event.batch_rows`); hits are counted batch by
batch. The same `rng` (seed) gives the same certificate."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ddpbayes.engines.program import bounds
from ddpbayes.engines.program.event import TRAIN_ROWS, Draw, Event, Found, Search, batch_rows


@dataclass
class Nothing(Event):
    """The empty event (no event was found: every candidate had no hit)."""

    def contains(self, outputs: np.ndarray) -> np.ndarray:
        return np.zeros(len(outputs), dtype=bool)

    def describe(self) -> str:
        return "no event (no output distinguished the two laws on the search sample)"


@dataclass
class Certificate:
    """eps_lcb: the certified lower bound (confidence `confidence`); estimate: the plain log ratio
    of the check counts; event and direction ("a": P_a(E) / P_b(E); "b": the reverse); counts
    (k_a, k_b, n_check): the event's hits among n_check fresh draws per side; n_search: draws per
    side the search used (all candidates together); pair: the index of the chosen candidate pair
    (`certify_best`), 0 for `certify`; search_score: the event's conservative score on the search."""

    eps_lcb: float
    estimate: float
    event: Event
    direction: str
    counts: tuple[int, int, int]
    confidence: float
    n_search: int
    seconds: float
    pair: int = 0
    search_score: float = float("-inf")

    def as_dict(self) -> dict:
        return {"eps_lcb": self.eps_lcb, "estimate": self.estimate, "event": self.event.describe(),
                "direction": self.direction, "k_a": self.counts[0], "k_b": self.counts[1],
                "n_check": self.counts[2], "confidence": self.confidence, "n_search": self.n_search,
                "seconds": self.seconds, "pair": self.pair, "search_score": self.search_score}


def batches(draw: Draw, n: int, rng: np.random.Generator, first: int | None = None) -> Iterator[np.ndarray]:
    """n draws as (rows, d) float batches: the first of `first` rows (default TRAIN_ROWS), then
    batches of at most about 1e6 floats."""
    done, size = 0, min(n, first or TRAIN_ROWS)
    while done < n:
        x = np.asarray(draw(size, rng), dtype=float)
        x = x.reshape(len(x), -1)
        if len(x) != size:
            raise ValueError(f"draw({size}) returned {len(x)} rows")
        yield x
        done += size
        size = min(n - done, batch_rows(x.shape[1]))


def search(draw_a: Draw, draw_b: Draw, n: int, rng: np.random.Generator, *, alpha: float,
           n_target: int | None) -> Found | None:
    """The best event on n draws per side (DP-Sniper's search step)."""
    ra, rb = rng.spawn(2)
    first = max(1, min(TRAIN_ROWS, n // 2))
    gen_a, gen_b = batches(draw_a, n, ra, first), batches(draw_b, n, rb, first)
    found = Search(next(gen_a), next(gen_b))
    for x in gen_a:
        found.add(x, 0)
    for x in gen_b:
        found.add(x, 1)
    return found.best(alpha, n_target)


def count(event: Event, draw: Draw, n: int, rng: np.random.Generator) -> int:
    """Hits of `event` among n fresh draws, batch by batch."""
    return int(sum(int(np.count_nonzero(event.contains(x))) for x in batches(draw, n, rng, batch_rows(1))))


def check(event: Event, direction: str, draw_a: Draw, draw_b: Draw, *, n_check: int, confidence: float,
          rng: np.random.Generator) -> tuple[float, float, int, int]:
    """(eps_lcb, estimate, k_a, k_b) of `event` on n_check fresh draws per side."""
    ra, rb = rng.spawn(2)
    k_a, k_b = count(event, draw_a, n_check, ra), count(event, draw_b, n_check, rb)
    return (*ratio_bound(k_a, k_b, n_check, direction, confidence), k_a, k_b)


def ratio_bound(k_a: int, k_b: int, n: int, direction: str, confidence: float) -> tuple[float, float]:
    """(eps_lcb, estimate) from the check counts: the lower bound of the numerator's probability
    over the upper bound of the denominator's, each at (1 - confidence) / 2."""
    alpha = (1 - confidence) / 2
    k_num, k_den = (k_a, k_b) if direction == "a" else (k_b, k_a)
    lo, hi = bounds.lower(k_num, n, alpha), bounds.upper(k_den, n, alpha)
    eps_lcb = max(0.0, math.log(lo / hi)) if lo > 0 else 0.0
    estimate = math.log(k_num / k_den) if k_num and k_den else (math.inf if k_num else math.nan)
    return eps_lcb, estimate


def certify(draw_a: Draw, draw_b: Draw, *, n_search: int, n_check: int, confidence: float = 0.9,
            rng: np.random.Generator, project: bool = True) -> Certificate:
    """Search on n_search fresh draws per side, certify on n_check fresh draws per side.
    `project`: score the search's candidates by the bound they would get on n_check draws
    (`event.conservative_log_ratio` with n_target), else as if on the search sample."""
    return certify_best([(draw_a, draw_b)], n_search=n_search, n_check=n_check, confidence=confidence,
                        rng=rng, project=project)


def certify_best(pairs: Sequence[tuple[Draw, Draw]], *, n_search: int, n_check: int, confidence: float = 0.9,
                 rng: np.random.Generator, project: bool = True) -> Certificate:
    """Several candidate pairs of laws (input pairs, target values): each searched on its share
    n_search // len(pairs) of draws per side; the pair with the best search score is checked on
    n_check fresh draws per side (the check sample is never looked at before the choice)."""
    if not pairs:
        raise ValueError("no pair to certify")
    if n_search < 2 * len(pairs) or n_check < 1:
        raise ValueError(f"n_search must be at least 2 per pair and n_check at least 1 (got {n_search}, {n_check})")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    start = time.perf_counter()
    alpha = (1 - confidence) / 2
    share = n_search // len(pairs)
    streams = rng.spawn(len(pairs) + 1)
    best, chosen = None, 0
    for i, (draw_a, draw_b) in enumerate(pairs):
        found = search(draw_a, draw_b, share, streams[i], alpha=alpha, n_target=n_check if project else None)
        if found is not None and (best is None or found.score > best.score):
            best, chosen = found, i
    if best is None:
        event, direction, score = Nothing(), "a", float("-inf")
    else:
        event, direction, score = best.event, best.direction, best.score
    draw_a, draw_b = pairs[chosen]
    eps_lcb, estimate, k_a, k_b = check(event, direction, draw_a, draw_b, n_check=n_check, confidence=confidence,
                                        rng=streams[-1])
    return Certificate(eps_lcb, estimate, event, direction, (k_a, k_b, n_check), confidence, share * len(pairs),
                       time.perf_counter() - start, chosen, score)
