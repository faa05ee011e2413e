"""Seed 002 §IV's inference attack, end to end: K-means and LPM release at each ε, then every
target's posterior for the independent (Eq. 8) and the dependent (CAR) adversary, with the error
(Eq. 10) and the leaked information (Eq. 11). `--seed` fixes every random step through separate
streams: the clustering, the target sample, each target's known set and each ε's noise, so the
same seed gives the same numbers whatever the list of ε or the target sample.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ddpbayes import shipped
from ddpbayes.attack import adversary, metrics, posterior
from ddpbayes.attack.release import Partition, kmeans, lpm, sensitivity
from ddpbayes.errors import InputError
from ddpbayes.geo.car import CarFit, adjacency, car_precision, conditional, load_fit
from ddpbayes.geo.data import haversine_km, read_edges, read_locations
from ddpbayes.parallel import map_units
from ddpbayes.parallel.cluster import scheduler_address, worker_count
from ddpbayes.progress import Progress
from ddpbayes.settings import RunSettings

DATA = "models/data"  # the shipped Gowalla files, under `shipped.ROOT` (package data, DESIGN §4)
LOCATIONS, EDGES, FIT = (f"{DATA}/{name}" for name in ("gowalla_us_user_locations.csv", "gowalla_us_edges.csv",
                                                        "gowalla_fit.json"))
ADVERSARIES = ("independent", "dependent")
MAX_GRID = 1000
CELLS_PER_BLOCK = 2**20  # targets per block = this / G², at most MAX_BLOCK
MAX_BLOCK = 256
_KMEANS, _TARGETS, _KNOWN, _NOISE = range(4)  # random streams


@dataclass(frozen=True)
class AttackSettings:
    """The experiment's knobs; `n_prior` lists the known-set sizes (None: all others)."""

    k: int = 8
    epsilons: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0, 3.0)
    grid: int = 20
    n_prior: tuple[int | None, ...] = (None,)
    targets: int | None = None
    seed: int = 0

    def check(self, users: int) -> None:
        """InputError naming the first setting that cannot be used with `users` users."""
        if users < 2:
            raise InputError(f"the attack needs at least two located users, got {users}")
        if not 1 <= self.grid <= MAX_GRID:
            raise InputError(f"--grid must be between 1 and {MAX_GRID}, got {self.grid}")
        if not self.epsilons or any(not (math.isfinite(e) and e > 0) for e in self.epsilons):
            raise InputError(f"every epsilon must be a finite number > 0, got {list(self.epsilons)}")
        if not 1 <= self.k <= users:
            raise InputError(f"--k must be between 1 and the number of users ({users}), got {self.k}")
        for n in self.n_prior:
            if n is not None and not 1 <= n <= users - 1:
                raise InputError(f"--n-prior must be between 1 and the number of other users ({users - 1}), got {n}")
        if self.targets is not None and not 1 <= self.targets <= users:
            raise InputError(f"--targets must be between 1 and the number of users ({users}), got {self.targets}")
        if not 0 <= self.seed < 2**32:
            raise InputError(f"--seed must be an integer from 0 to 2^32 - 1, got {self.seed}")


@dataclass(frozen=True)
class AttackData:
    """Users (normalised into the fitted model's box), the located friendship pairs and the CAR fit."""

    lat: np.ndarray
    lon: np.ndarray
    points: np.ndarray  # (n, 2) normalised (x, y)
    pairs: np.ndarray  # (E, 2) located friendship pairs, row indices
    dropped_edges: int  # naming a user without a location
    duplicate_edges: int  # a pair listed again (either direction)
    fit: CarFit
    paths: dict[str, str] = field(default_factory=dict)  # the inputs as given (the shipped ones repo-relative)

    @property
    def users(self) -> int:
        return len(self.points)


@dataclass
class AttackResult:
    """`rows` (one per known-set size, ε and adversary), `meta`, and per-target arrays for figures."""

    rows: list[dict]
    meta: dict
    errors: dict[tuple[int, float, str], np.ndarray]  # (n_prior, ε, adversary) -> km per target
    has_friends: np.ndarray  # per target
    partition: Partition
    noisy: dict[float, np.ndarray]  # ε -> released centroids
    data: AttackData
    guess_errors: np.ndarray  # km per target of guessing the regional mean (a reference for Eq. 10)

    def to_json(self) -> dict:
        return {"rows": self.rows, **self.meta}

    def row(self, n_prior: int, epsilon: float, adversary: str) -> dict:
        """The row of one known-set size, ε and adversary."""
        return next(r for r in self.rows if (r["n_prior"], r["epsilon"], r["adversary"]) == (n_prior, epsilon, adversary))


def load_data(locations: str | Path | None = None, edges: str | Path | None = None,
              fit: str | Path | None = None, grid: int | None = None, where: RunSettings | None = None) -> AttackData:
    """Read the CSVs and the fit (the shipped Gowalla files by default, read from the installed
    package); every user must lie in the fit's box, whose coordinates the CAR model is fitted in.
    With the attack's `grid`, the locations stop streaming in once the users × G² float32 cell
    counts (`adversary.histogram_counts`) and a block of targets' masks over the users (a bool
    and a float32 each), held at once by each of this machine's workers (`where`), would not fit
    in its memory."""
    given = {"locations": locations, "edges": edges, "fit": fit}
    default = {"locations": LOCATIONS, "edges": EDGES, "fit": FIT}
    paths = {k: Path(v) if v else shipped.path(default[k]) for k, v in given.items()}
    shown = {k: str(v) if v else default[k] for k, v in given.items()}  # the shipped ones repo-relative
    for k, p in paths.items():
        if given[k] and p.exists() and not p.is_file():
            raise InputError(f"--{k} {p} is not a regular file (a device or a folder is not read)")
    missing = [f"{k} {p}" for k, p in paths.items() if not p.is_file()]
    if missing:
        hint = "" if all(given[k.split()[0]] for k in missing) else (
            " (the shipped Gowalla data is missing from the installed package: reinstall ddpbayes, or pass "
            "--locations, --edges and --fit)")
        raise InputError(f"missing input file: {', '.join(missing)}{hint}")
    cells = grid**2 if grid is not None and 1 <= grid <= MAX_GRID else 0
    block = max(1, min(MAX_BLOCK, CELLS_PER_BLOCK // max(1, cells)))  # as `run_attack` blocks the targets
    local = where is not None and not scheduler_address(where.scheduler)
    copies = worker_count(where.workers) if local else 1
    locs = read_locations(paths["locations"], copies * (4 * cells + 5 * block) if cells else 0,
                          f"the attack's users x {cells:,} cells float32 table and {block} targets' masks"
                          + (f", in each of {copies} workers," if copies > 1 else ""))
    links = read_edges(paths["edges"], locs)
    car = load_fit(paths["fit"])
    x, y = car.box.normalise(np.asarray(locs.lat, float), np.asarray(locs.lon, float))
    points = np.column_stack([x, y])
    outside = np.flatnonzero(~np.all((points >= 0) & (points <= 1), axis=1))
    if len(outside):
        raise InputError(f"user {locs.ids[outside[0]]} lies outside the fitted model's box {car.box} "
                         f"({len(outside)} users do)")
    return AttackData(np.asarray(locs.lat, float), np.asarray(locs.lon, float), points,
                      np.asarray(links.pairs, int).reshape(-1, 2), int(links.dropped), int(links.duplicates), car,
                      shown)


def run_attack(data: AttackData, settings: AttackSettings, progress: bool = True,
               where: RunSettings | None = None) -> AttackResult:
    """Release, attack and measure (module docstring). Each (known-set size, target block) is a
    unit of work (`parallel.map_units`; `where` says where they run: its workers or scheduler);
    a worker builds the release and the CAR precisions once, and the blocks are accumulated in
    order, so the numbers do not depend on where they ran."""
    start = time.perf_counter()
    settings.check(data.users)
    attack = _Attack(data, settings)
    key = _ATTACKS.keep(attack)
    grid = settings.grid
    block = max(1, min(MAX_BLOCK, CELLS_PER_BLOCK // grid**2))
    spans = [slice(s, min(s + block, len(attack.targets))) for s in range(0, len(attack.targets), block)]
    sizes = [data.users - 1 if m is None else m for m in settings.n_prior]
    per_block = len(settings.epsilons) * len(ADVERSARIES)
    bar = Progress("attack", len(sizes) * len(spans) * per_block,
                   "units (known-set size, target block, ε, adversary)", enabled=progress)
    units = [(key, data, settings, n_prior, span) for n_prior in sizes for span in spans]
    acc = _Accumulator(len(attack.targets))
    for entries in map_units(_block, units, RunSettings.of(where, progress=False), "attack", "blocks", bar=bar,
                             weight=lambda unit: per_block):
        for entry in entries:
            acc.add(*entry)
    targets = attack.targets
    has_friends = np.isin(targets, data.pairs.ravel())
    rows = [_row(key, acc, has_friends) for key in acc.errors]
    guess = _guess_errors(data, targets)
    meta = _meta(data, settings, attack.partition, attack.delta, targets, sizes, guess, time.perf_counter() - start)
    return AttackResult(rows, meta, acc.errors, has_friends, attack.partition, attack.noisy, data, guess)


class _Attack:
    """The provider's release at every ε and what every adversary needs, then the attack block by block."""

    def __init__(self, data: AttackData, settings: AttackSettings):
        seed = settings.seed
        self.data, self.settings = data, settings
        self.partition = kmeans(data.points, settings.k, _stream(seed, _KMEANS))
        self.delta = sensitivity(self.partition.sizes)
        self.noisy = {e: lpm(self.partition.centroids, self.delta / e, _stream(seed, _NOISE, _bits(e)))
                      for e in settings.epsilons}
        self.targets = _targets(data.users, settings.targets, seed)
        self.cells = posterior.cell_index(data.points, settings.grid)
        self.car = _PriorModel(data)

    def block(self, n_prior: int, span: slice) -> list[tuple]:
        """Both adversaries' posteriors (Eq. 6) for the targets in `span` at every ε: the
        `_Accumulator.add` arguments of each (ε, adversary)."""
        data, grid, n = self.data, self.settings.grid, self.data.users
        t = self.targets[span]
        mask = np.stack([adversary.known_row(n, i, n_prior, _stream(self.settings.seed, _KNOWN, n_prior, i))
                         for i in t])
        view = adversary.cluster_view(data.points, self.partition, t, mask)
        log_prior = {
            "independent": posterior.histogram_log_prior(adversary.histogram_counts(self.cells, mask, grid**2)),
            "dependent": posterior.gaussian_log_prior(*self.car.conditionals(t, mask, n_prior == n - 1), grid),
        }
        h_prior = {a: posterior.entropy_bits(lp) for a, lp in log_prior.items()}
        entries = []
        for e in self.settings.epsilons:
            log_lik = posterior.outer_sum(*posterior.log_likelihood(
                self.noisy[e][self.partition.labels[t]], view.expected_others, view.sigma, view.size,
                self.delta / e, grid))
            for a in ADVERSARIES:
                log_post = posterior.normalise(log_prior[a] + log_lik)
                lat, lon = data.fit.box.denormalise(*metrics.map_centres(log_post, grid).T)
                km = haversine_km(data.lat[t], data.lon[t], lat, lon)
                entries.append(((n_prior, e, a), span, km, h_prior["independent"], h_prior[a],
                                posterior.entropy_bits(log_post)))
        return entries


class _Kept:
    """The `_Attack` this process built last, by a digest of its inputs: a worker builds it once
    for all the blocks it runs (the release, the cells, the CAR precisions)."""

    def __init__(self):
        self.key: str | None = None
        self.attack: _Attack | None = None

    def keep(self, attack: _Attack) -> str:
        self.key, self.attack = _digest(attack.data, attack.settings), attack
        return self.key

    def get(self, key: str, data: AttackData, settings: AttackSettings) -> _Attack:
        if key != self.key:
            self.keep(_Attack(data, settings))
        return self.attack


_ATTACKS = _Kept()


def _block(unit: tuple[str, AttackData, AttackSettings, int, slice]) -> list[tuple]:
    """One unit of work: a (known-set size, target block) of the attack."""
    key, data, settings, n_prior, span = unit
    return _ATTACKS.get(key, data, settings).block(n_prior, span)


def _digest(data: AttackData, settings: AttackSettings) -> str:
    h = hashlib.sha256()
    for array in (data.points, data.pairs, data.lat, data.lon):
        h.update(np.ascontiguousarray(array).tobytes())
    h.update(repr((data.fit, settings)).encode())
    return h.hexdigest()


class _PriorModel:
    """The CAR fit's precision per coordinate and the users' centred coordinates: the dependent
    prior's conditionals, given all others (`geo.car.conditional`) or a known subset."""

    def __init__(self, data: AttackData):
        fit = data.fit
        W = adjacency(data.users, data.pairs)
        self.mu = np.asarray(fit.mu, float)
        self.Q = [car_precision(W, fit.alpha, tau).tocsr() for tau in fit.tau]
        self.centred = data.points - self.mu

    def conditionals(self, targets: np.ndarray, mask: np.ndarray, everyone: bool) -> tuple[np.ndarray, np.ndarray]:
        """(T, 2) means and standard deviations of each target's coordinates given its known others."""
        if everyone:
            pairs = [conditional(Q, self.centred[:, a], targets) for a, Q in enumerate(self.Q)]
            mean, var = (np.column_stack(v) for v in zip(*pairs))
        else:
            pairs = [adversary.subset_conditional(self.Q, self.centred, i, mask[r]) for r, i in enumerate(targets)]
            mean, var = (np.stack(v) for v in zip(*pairs))
        return mean + self.mu, np.sqrt(var)


class _Accumulator:
    """Per-target errors and entropies for each (n_prior, ε, adversary)."""

    def __init__(self, count: int):
        self.count = count
        self.errors: dict = {}
        self.base: dict = {}  # H(Eq. 8 prior)
        self.prior: dict = {}  # H(own prior)
        self.post: dict = {}

    def add(self, key, span: slice, km, h_base, h_prior, h_post) -> None:
        for store, values in ((self.errors, km), (self.base, h_base), (self.prior, h_prior), (self.post, h_post)):
            store.setdefault(key, np.empty(self.count))[span] = values


def _row(key, acc: _Accumulator, has_friends: np.ndarray) -> dict:
    n_prior, e, a = key
    km, post = acc.errors[key], acc.post[key]
    return {"epsilon": e, "adversary": a, "n_prior": n_prior, **metrics.summary(km),
            "leaked_bits": float(np.mean(acc.base[key] - post)),
            "release_bits": float(np.mean(acc.prior[key] - post)),
            "prior_bits": float(np.mean(acc.prior[key])), "posterior_bits": float(np.mean(post)),
            "bound_bits": metrics.theorem2_bound_bits(e),
            "mean_error_km_with_friends": _mean(km[has_friends]),
            "mean_error_km_without_friends": _mean(km[~has_friends])}


def _mean(values: np.ndarray) -> float | None:
    return float(np.mean(values)) if len(values) else None


def _meta(data: AttackData, s: AttackSettings, part: Partition, delta: float, targets: np.ndarray,
          sizes: list[int], guess: np.ndarray, seconds: float) -> dict:
    fit, box = data.fit, data.fit.box
    return {"k": s.k, "grid": s.grid, "seed": s.seed, "epsilons": list(s.epsilons), "n_priors": sizes,
            "users": data.users, "targets": len(targets), "located_edges": len(data.pairs),
            "dropped_edges": data.dropped_edges, "duplicate_edges": data.duplicate_edges,
            "box": {"lat": list(box.lat), "lon": list(box.lon)},
            "cluster_sizes": part.sizes.tolist(), "sensitivity": delta,
            "scales": {str(e): delta / e for e in s.epsilons},
            "car": {"alpha": float(fit.alpha), "tau": [float(t) for t in fit.tau], "mu": [float(m) for m in fit.mu]},
            "regional_mean_guess": metrics.summary(guess), "inputs": data.paths,
            "seconds": seconds}


def _guess_errors(data: AttackData, targets: np.ndarray) -> np.ndarray:
    """A reference for Eq. 10: the error of guessing the CAR fit's regional mean for every target,
    with neither the release nor any other user."""
    lat, lon = data.fit.box.denormalise(*data.fit.mu)
    return haversine_km(data.lat[targets], data.lon[targets], lat, lon)


def _targets(n: int, count: int | None, seed: int) -> np.ndarray:
    """All users, or a seeded sample of `count` of them (sorted)."""
    if count is None or count == n:
        return np.arange(n)
    return np.sort(_stream(seed, _TARGETS).choice(n, size=count, replace=False))


def _stream(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng([seed, *key])


def _bits(value: float) -> int:
    """A float's IEEE bits as an integer: a stream key for each ε."""
    return int(np.float64(value).view(np.uint64))
