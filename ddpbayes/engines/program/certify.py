"""A certified lower bound on the leakage between two output laws we can only sample (issue #28
item 2): search a distinguishing event on one sample (`event`), then count it on FRESH draws, a
Poisson(n_check) number of them per side, and bound its probability ratio exactly:

    eps_lcb = max(0, log(pi_lo / (1 - pi_lo)))  (or b over a: `direction`)

with pi_lo the one-sided Clopper–Pearson lower bound, at level `confidence`, of pi = p_a / (p_a +
p_b) from k_a hits out of k_a + k_b: with Poisson numbers of runs the hits are independent
Poisson(n_check p) counts, so given their sum k_a is Bin(k_a + k_b, pi) (`bounds.rate_ratio_lower`)
and eps_lcb <= log(P_a(E) / P_b(E)) <= the true leakage with probability at least `confidence`
(the event is fixed before the check sample is drawn). One interval at the whole level, where
DP-Sniper's two (one per side, each at half of it) are about 1.8 times wider on the log scale. It
may FAIL a claim, never PASS one.

Draws come in batches of at most about 1e6 floats (`event.batch_rows`), each with its own
generator spawned from `rng`, so that `workers` processes (forked: a draw need not be picklable)
can run them and the certificate is the same for any number of workers; hits are counted batch
by batch, search batches reduced in the worker (`event.Search.reducer`) and merged in batch
order. Several candidate pairs share the search by successive halving (`search_pairs`). The same
`rng` (seed) gives the same certificate."""

from __future__ import annotations

import copy
import functools
import math
import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from ddpbayes.engines.program import bounds, paired
from ddpbayes.engines.program.event import Draw, Event, Found, Search, Threshold, batch_rows, train_rows
from ddpbayes.errors import InputError
from ddpbayes.limits import FITS_ANYWHERE, available_memory, check_memory
from ddpbayes.parallel.forked import Forked
from ddpbayes.progress import Progress


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
    (k_a, k_b, n_check): the event's hits among the fresh draws, `runs` (runs_a, runs_b) of them,
    each Poisson of mean n_check (both n_check for a coupled check); n_search: draws per side the
    search used (all candidates together); pair: the index of the
    chosen candidate pair (`certify_best`), 0 for `certify`; search_score: the event's conservative
    score on the search; design: how the check counted (`paired.Design`); joint: a coupled check's
    (both, only a, only b) hits; pilot: the coupled runs per input that chose the design (taken
    from the check's budget: n_check is what is left)."""

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
    runs: tuple[int, int] = (0, 0)
    design: paired.Design = paired.INDEPENDENT
    joint: tuple[int, int, int] | None = None
    pilot: int = 0

    def as_dict(self) -> dict:
        return {"eps_lcb": self.eps_lcb, "estimate": self.estimate, "event": self.event.describe(),
                "direction": self.direction, "k_a": self.counts[0], "k_b": self.counts[1],
                "n_check": self.counts[2], "confidence": self.confidence, "n_search": self.n_search,
                "runs": list(self.runs), "seconds": self.seconds, "pair": self.pair,
                "search_score": self.search_score, "design": self.design.describe(),
                "joint": list(self.joint) if self.joint else None, "pilot": self.pilot}


def plan(n: int, first: int, d: int) -> list[int]:
    """Batch sizes of n draws: `first` rows, then batches of at most about 1e6 floats (d per row)."""
    sizes, done, size = [], 0, min(n, first)
    while done < n:
        sizes.append(size)
        done += size
        size = min(n - done, batch_rows(d))
    return sizes


REFIT_GROWTH = 1.5  # a surviving pair's classifiers are retrained when its training batch can grow this much

Pairs = Sequence[tuple[Draw, Draw]]  # the candidate pairs of draws (a pool inherits them: a draw need not be picklable)


def _draw(pairs: Pairs, pair: int, side: int, n: int, rng: np.random.Generator) -> np.ndarray:
    x = np.asarray(pairs[pair][side](n, rng), dtype=float)
    x = x.reshape(len(x), -1)
    if len(x) != n:
        raise ValueError(f"draw({n}) returned {len(x)} rows")
    return x


BOTH = 2  # a task's side: both inputs run from copies of one generator (`_coupled`)


def _task(pairs: Pairs, task) -> object:
    """One batch: draw n rows of pair `pair`, side `side` with its own generator, and return them
    (`what` None), the reduced form for the search (`what` a Reducer) or the event's hits (side
    BOTH: the coupled hits)."""
    pair, side, n, rng, what = task
    if side == BOTH:
        return _coupled(pairs, pair, n, rng, what)
    x = _draw(pairs, pair, side, n, rng)
    if what is None:
        return x
    if isinstance(what, Event):
        return int(np.count_nonzero(what.contains(x)))
    return what(x)


def _coupled(pairs: Pairs, pair: int, n: int, rng: np.random.Generator, what) -> tuple:
    """n rows of each input drawn from two copies of `rng` (`paired`): `what` an event, its hits
    (both, only a, only b); else a function of the rows (a threshold event's score), its value on
    each input's. Runs that consumed different amounts of the generator show the program's
    randomness is not aligned (its rows would not pair up): refused."""
    twin = copy.deepcopy(rng)
    x_a, x_b = _draw(pairs, pair, 0, n, rng), _draw(pairs, pair, 1, n, twin)
    if rng.bit_generator.state != twin.bit_generator.state:
        raise InputError("the program declares its randomness aligned (`aligned = True`: drawn by shape, not by "
                         "value), but its runs on the two inputs drew different amounts of it: remove the declaration")
    if not isinstance(what, Event):
        return what(x_a), what(x_b)
    hit_a, hit_b = what.contains(x_a), what.contains(x_b)
    both = int(np.count_nonzero(hit_a & hit_b))
    return both, int(np.count_nonzero(hit_a)) - both, int(np.count_nonzero(hit_b)) - both


class Workers:
    """Runs batch tasks in order, in this process (workers=1) or in a forked pool
    (`parallel.Forked`): every batch has its own generator, so the results are the same for any
    number of workers. Each batch done advances `progress` (if any) by its draws. While it is open,
    BLAS runs one thread in this process and in the pool's (forked with that limit): its products
    here (a batch's scores, the classifier's small fits) gain nothing from threads, whose spinning
    cost the search up to two thirds of its CPU on a busy machine."""

    def __init__(self, pairs: Pairs, workers: int, progress: Progress | None = None):
        self.pairs = pairs
        self.blas = threadpool_limits(limits=1, user_api="blas")
        self.pool = None
        self.progress = progress
        if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            self.pool = Forked(functools.partial(_task, pairs), workers)

    def map(self, tasks: list, advance: list[int] | None = None) -> list:
        """The tasks' results in order; the progress advanced by each task's draws, or by `advance`."""
        advance = advance or [t[2] for t in tasks]
        done = (_task(self.pairs, t) for t in tasks) if self.pool is None or len(tasks) < 2 else self.pool.imap(tasks)
        results = []
        for step, result in zip(advance, done):
            results.append(result)
            if self.progress is not None:
                self.progress.advance(step)
        return results

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        self.blas.restore_original_limits()


class _PairSearch:
    """The search on one candidate pair, fed round by round (two generators, one per side, each
    spawning one child per batch)."""

    def __init__(self, index: int, rng: np.random.Generator):
        self.index = index
        self.rngs = rng.spawn(2)
        self.search: Search | None = None
        self.n = 0
        self.found: Found | None = None

    def first(self, workers: Workers, share: int) -> int:
        """Draw the first batch (the family's choice, the classifier's training set): its rows."""
        probe = _draw(workers.pairs, self.index, 0, 2, self.rngs[0].spawn(1)[0])  # the output dimension
        first = max(1, min(train_rows(probe.shape[1]), share // 2))
        rows = max(first, batch_rows(probe.shape[1]))  # the largest batch: the first, or a later one
        check_memory(8 * 2 * rows * probe.shape[1], f"a batch of {rows:,} outputs per value",
                     f"{probe.shape[1]:,} numbers each", advice="return fewer numbers per run")
        xa, xb = self._fresh(workers, first)
        self.search = Search(xa, xb)
        self.d = xa.shape[1]
        self.n = self.trained = first
        return first

    def grow(self, workers: Workers, share: int) -> int:
        """Retrain the classifiers (`Search.refit`) on a fresh first batch when this round's share
        allows one at least REFIT_GROWTH times the last (up to `train_rows`) and the machine's memory
        holds it: its rows, or 0."""
        rows = min(train_rows(self.d), share // 2)
        if rows < REFIT_GROWTH * self.trained or not self.search.classifies:
            return 0
        if 8 * 2 * rows * self.d > max(FITS_ANYWHERE, available_memory()):  # a better score, not a reason to refuse
            return 0
        self.search.refit(*self._fresh(workers, rows))
        self.n += rows
        self.trained = rows
        return rows

    def _fresh(self, workers: Workers, rows: int) -> list[np.ndarray]:
        """A first batch: `rows` fresh outputs of each side, each side's generator spawning one child."""
        return workers.map([(self.index, s, rows, self.rngs[s].spawn(1)[0], None) for s in (0, 1)])

    def tasks(self, n: int) -> list:
        reducer = self.search.reducer
        out = []
        for size in plan(n, batch_rows(self.d), self.d):
            out += [(self.index, s, size, self.rngs[s].spawn(1)[0], reducer) for s in (0, 1)]
        return out

    def merge(self, results: list, tasks: list) -> None:
        for r, t in zip(results, tasks):
            self.search.merge(r, t[1], t[2])
        self.n += sum(t[2] for t in tasks) // 2


def search_pairs(workers: Workers, n_pairs: int, n: int, rngs: list, *, alpha: float,
                 n_target: int | None) -> tuple[int, Found | None, int, int]:
    """The best (pair, event) on n draws per side in all: successive halving over the pairs (each
    round spends an equal share of n on the pairs left, then keeps the better half by search
    score), so that most of the search sample goes to the pairs that leak most. Returns (pair,
    found, draws per side used, output dimension)."""
    rounds = 1 + math.ceil(math.log2(n_pairs)) if n_pairs > 1 else 1
    alive = [_PairSearch(i, rngs[i]) for i in range(n_pairs)]
    used = 0
    for r in range(rounds):
        share = max(2, (n // rounds) // len(alive))
        if r == rounds - 1:
            share = max(2, (n - used) // len(alive))
        tasks, owners = [], []
        for p in alive:
            first = p.first(workers, share) if p.search is None else p.grow(workers, share)
            used += first
            rest = share - first
            if rest > 0:
                t = p.tasks(rest)
                tasks += t
                owners += [p] * len(t)
                used += rest
        results = workers.map(tasks)
        for p in alive:
            mine = [(res, t) for res, t, o in zip(results, tasks, owners) if o is p]
            p.merge([m[0] for m in mine], [m[1] for m in mine])
            p.found = p.search.best(alpha, n_target)
        ranked = sorted(alive, key=lambda p: (-(p.found.score if p.found else -math.inf), p.index))
        alive = ranked[:max(1, math.ceil(len(alive) / 2))] if r < rounds - 1 else ranked[:1]
    best = alive[0]
    return best.index, best.found, used, best.d


def search(draw_a: Draw, draw_b: Draw, n: int, rng: np.random.Generator, *, alpha: float,
           n_target: int | None, workers: int = 1) -> Found | None:
    """The best event on n draws per side (DP-Sniper's search step)."""
    pool = Workers([(draw_a, draw_b)], workers)
    try:
        return search_pairs(pool, 1, n, [rng], alpha=alpha, n_target=n_target)[1]
    finally:
        pool.close()


def count(event: Event, draw: Draw, n: int, rng: np.random.Generator) -> int:
    """Hits of `event` among n fresh draws, batch by batch (one generator spawned per batch)."""
    pool = Workers([(draw, draw)], 1)
    try:
        return _count(pool, 0, 0, event, n, rng, d=1)
    finally:
        pool.close()


def _count(workers: Workers, pair: int, side: int, event: Event, n: int, rng: np.random.Generator, d: int) -> int:
    sizes = plan(n, batch_rows(d), d)
    gens = rng.spawn(len(sizes))
    return int(sum(workers.map([(pair, side, size, g, event) for size, g in zip(sizes, gens)])))


def check(event: Event, direction: str, draw_a: Draw, draw_b: Draw, *, n_check: int, confidence: float,
          rng: np.random.Generator, workers: int = 1) -> tuple[float, float, int, int, int, int]:
    """(eps_lcb, estimate, k_a, k_b, runs_a, runs_b) of `event` on Poisson(n_check) fresh draws per side."""
    pool = Workers([(draw_a, draw_b)], workers)
    try:
        return _check(pool, 0, event, direction, n_check=n_check, confidence=confidence, rng=rng, d=1)
    finally:
        pool.close()


def _check(workers: Workers, pair: int, event: Event, direction: str, *, n_check: int, confidence: float,
           rng: np.random.Generator, d: int) -> tuple[float, float, int, int, int, int]:
    """(eps_lcb, estimate, k_a, k_b, runs_a, runs_b): each side runs a Poisson(n_check) number of
    fresh draws (`check_runs`), so that the hits are independent Poisson counts of means n_check
    p_a and n_check p_b and their ratio has one exact conditional bound (`ratio_bound`)."""
    ra, rb = rng.spawn(2)
    runs = check_runs(n_check, rng)
    plans = [plan(r, batch_rows(d), d) for r in runs]
    tasks = [(pair, side, size, g, event) for side, r, sizes in ((0, ra, plans[0]), (1, rb, plans[1]))
             for size, g in zip(sizes, r.spawn(len(sizes)))]
    hits = workers.map(tasks, [step for sizes in plans for step in _shares(n_check, sizes)])
    k_a, k_b = int(sum(hits[:len(plans[0])])), int(sum(hits[len(plans[0]):]))
    return (*ratio_bound(k_a, k_b, direction, confidence), k_a, k_b, *runs)


def _coupled_batches(workers: Workers, pair: int, what, n: int, rng: np.random.Generator, d: int) -> list:
    """`_coupled`'s results on n coupled runs per input, batch by batch (a generator spawned per
    batch, copied for the second input)."""
    sizes = plan(n, batch_rows(d), d)
    tasks = [(pair, BOTH, size, g, what) for size, g in zip(sizes, rng.spawn(len(sizes)))]
    return workers.map(tasks, [2 * size for size in sizes])


def _coupled_count(workers: Workers, pair: int, event: Event, n: int, rng: np.random.Generator,
                   d: int) -> tuple[int, int, int]:
    """(both, only a, only b) of `event` on n coupled runs per input."""
    hits = _coupled_batches(workers, pair, event, n, rng, d)
    return tuple(int(sum(h[j] for h in hits)) for j in range(3))


def _shares(n: int, sizes: list[int]) -> list[int]:
    """n split over batches in proportion to their sizes (the progress counts n_check per side
    whatever the Poisson number of runs)."""
    ends = np.round(n * np.cumsum(sizes) / max(sum(sizes), 1)).astype(int) if sizes else np.zeros(0, int)
    return np.diff(ends, prepend=0).tolist()


def check_runs(n_check: int, rng: np.random.Generator) -> tuple[int, int]:
    """The numbers of check runs of the two sides: independent Poisson(n_check), drawn before any
    run (Poissonisation: each side's hits are then Poisson(n_check p), independent of the other's)."""
    return tuple(int(v) for v in rng.poisson(n_check, size=2))


def ratio_bound(k_a: int, k_b: int, direction: str, confidence: float) -> tuple[float, float]:
    """(eps_lcb, estimate) from the check counts, the runs per side Poisson of one mean: the log of
    the exact conditional lower bound on the ratio of the two Poisson rates
    (`bounds.rate_ratio_lower` at 1 - confidence), and the plain log ratio of the hits."""
    k_num, k_den = (k_a, k_b) if direction == "a" else (k_b, k_a)
    ratio = bounds.rate_ratio_lower(k_num, k_den, 1 - confidence)
    eps_lcb = max(0.0, math.log(ratio)) if ratio > 0 else 0.0
    estimate = math.log(k_num / k_den) if k_num and k_den else (math.inf if k_num else math.nan)
    return eps_lcb, estimate


def certify(draw_a: Draw, draw_b: Draw, *, n_search: int, n_check: int, confidence: float = 0.9,
            rng: np.random.Generator, project: bool = True, workers: int = 1,
            progress: Progress | None = None, aligned: bool = False) -> Certificate:
    """Search on n_search fresh draws per side, certify on n_check fresh draws per side.
    `project`: score the search's candidates by the bound they would get on n_check draws
    (`event.conservative_log_ratio` with n_target), else as if on the search sample. `workers`:
    processes drawing the batches (the certificate does not depend on it). `progress`: a line
    advanced by the draws of each batch, 2 (n_search + n_check) in all. `aligned`: the draws'
    randomness is aligned (`certify_best`)."""
    return certify_best([(draw_a, draw_b)], n_search=n_search, n_check=n_check, confidence=confidence,
                        rng=rng, project=project, workers=workers, progress=progress, aligned=aligned)


def certify_best(pairs: Pairs, *, n_search: int, n_check: int, confidence: float = 0.9,
                 rng: np.random.Generator, project: bool = True, workers: int = 1,
                 progress: Progress | None = None, aligned: bool = False) -> Certificate:
    """Several candidate pairs of laws (input pairs, target values) share n_search draws per side,
    by successive halving on the search score (`search_pairs`); the best pair's event is checked
    on n_check fresh draws per side (the check sample is never looked at before the choice).
    `aligned`: draw_a(n, g) and draw_b(n, g) from equal generators g give row-aligned outputs
    (`paired`): a pilot of coupled runs, a sixteenth of the check's, chooses between the
    independent check and the coupled one, on the rest (and a threshold event's threshold with it)."""
    if not pairs:
        raise ValueError("no pair to certify")
    if n_search < 2 * len(pairs) or n_check < 1:
        raise ValueError(f"n_search must be at least 2 per pair and n_check at least 1 (got {n_search}, {n_check})")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    start = time.perf_counter()
    alpha = 1 - confidence
    streams = rng.spawn(len(pairs) + 2)  # each pair's search, the check, the coupled pilot
    n_pilot = paired.pilot_runs(n_check) if aligned else 0
    n_target, n_check = n_check, n_check - n_pilot  # the search scores as for the whole budget
    design, joint = paired.INDEPENDENT, None
    pool = Workers(pairs, workers, progress)
    try:
        chosen, best, used, d = search_pairs(pool, len(pairs), n_search, streams[:len(pairs)],
                                             alpha=alpha, n_target=n_target if project else None)
        if best is None:
            event, direction, score = Nothing(), "a", float("-inf")
        else:
            event, direction, score = best.event, best.direction, best.score
            if n_pilot and isinstance(event, Threshold):
                parts = _coupled_batches(pool, chosen, event.score, n_pilot, streams[-1], d)
                scores = tuple(np.concatenate([p[side] for p in parts]) for side in (0, 1))
                event, design = paired.choose_threshold(event, scores, n_check, direction, alpha)
            elif n_pilot:
                pilot = _coupled_count(pool, chosen, event, n_pilot, streams[-1], d)
                design = paired.choose(pilot, n_pilot, n_check, direction, alpha)
        if design.coupled:
            joint = _coupled_count(pool, chosen, event, n_check, streams[len(pairs)], d)
            eps_lcb, estimate = paired.ratio_bound(joint, direction, design, confidence)
            k_a, k_b, runs = joint[0] + joint[1], joint[0] + joint[2], (n_check, n_check)
        else:
            eps_lcb, estimate, k_a, k_b, *runs = _check(pool, chosen, event, direction, n_check=n_check,
                                                        confidence=confidence, rng=streams[len(pairs)], d=d)
    finally:
        pool.close()
    return Certificate(eps_lcb, estimate, event, direction, (k_a, k_b, n_check), confidence, used,
                       time.perf_counter() - start, chosen, score, tuple(runs), design, joint, n_pilot)
