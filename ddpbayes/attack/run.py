"""Seed 002 §IV's inference attack, end to end: K-means and LPM release at each ε, then every
target's posterior for the independent (Eq. 8), the dependent (Eq. 9, the near-friend model) and
the CAR adversary, over a region's grid, with the error (Eq. 10) and the leaked information
(Eq. 11). `--seed` fixes every random step through separate
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
from scipy import sparse

from ddpbayes import shipped
from ddpbayes.attack import adversary, metrics, posterior
from ddpbayes.attack.grid import Grid
from ddpbayes.attack.release import Partition, kmeans, lpm, sensitivity
from ddpbayes.encoding import JsonDocument
from ddpbayes.errors import InputError
from ddpbayes.geo.car import CarFit, adjacency, car_precision, conditional, load_fit
from ddpbayes.geo.data import Box, haversine_km, read_edges, read_locations
from ddpbayes.geo.near import NearFit, load_near_fit, plane_km
from ddpbayes.geo.regions import NAMES as REGIONS
from ddpbayes.geo.regions import Region, region
from ddpbayes.parallel import map_units
from ddpbayes.parallel.cluster import scheduler_address, worker_count
from ddpbayes.progress import Progress
from ddpbayes.settings import RunSettings

DATA = "models/data"  # the shipped Gowalla files, under `shipped.ROOT` (package data, DESIGN §4)
LOCATIONS, EDGES, FIT, NEAR = (f"{DATA}/{name}" for name in ("gowalla_us_user_locations.csv", "gowalla_us_edges.csv",
                                                              "gowalla_fit.json", "gowalla_near_fit.json"))
ADVERSARIES = ("independent", "dependent", "car")
MAX_GRID = 1000
MAX_AUDIT_USERS = 50  # users whose near-friend audit (sampling engine, minutes each) a report may ask for
CELLS_PER_BLOCK = 2**20  # targets per block = this / G², at most MAX_BLOCK
MAX_BLOCK = 256
MASK_BYTES = 12  # a user's bytes in a block's masks, per target (`load_data`)
_KMEANS, _TARGETS, _KNOWN, _NOISE = range(4)  # random streams


@dataclass(frozen=True)
class AttackSettings:
    """The experiment's knobs; `n_prior` lists the known-set sizes (None: all others).

    Parameters
    ----------
    k : int, default 8
        K-means clusters (seed 002's value).
    epsilons : tuple of float, default (0.1, 0.5, 1.0, 2.0, 3.0)
        The privacy budgets the centroids are released at.
    grid : int, default 20
        G: the posterior's G x G cells per box.
    n_prior : tuple of int or None, default (None,)
        How many others each adversary knows, drawn per target; None: all others.
    targets : int or None, default None
        Attack a seeded sample of this many users; None: all.
    seed : int, default 0
        Seeds k-means, the noise, the target sample and the known sets (separate streams).
    region : str, default "us"
        Where targets live and the grid lies: us, cities, ny, sf or la (`geo.regions`).
    """

    k: int = 8
    epsilons: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0, 3.0)
    grid: int = 20
    n_prior: tuple[int | None, ...] = (None,)
    targets: int | None = None
    seed: int = 0
    region: str = "us"

    def check(self, users: int) -> None:
        """InputError naming the first setting that cannot be used with `users` users.

        Parameters
        ----------
        users : int
            The located users in the region.

        Raises
        ------
        InputError
            If there are fewer than two users, or a setting is out of range for them.
        """
        if users < 2:
            raise InputError(f"the attack needs at least two located users in the region, got {users}")
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
        if self.region not in REGIONS:
            raise InputError(f"--region must be one of {', '.join(REGIONS)}, got {self.region!r}")


@dataclass(frozen=True)
class AttackData:
    """The region's users (normalised into its frame), the friendship pairs between them, the CAR
    and near-friend fits.

    Parameters
    ----------
    lat, lon : numpy.ndarray
        The users' positions in degrees.
    points : numpy.ndarray
        (n, 2) normalised (x, y) in the region's frame.
    pairs : numpy.ndarray
        (E, 2) located friendship pairs, as rows.
    dropped_edges : int
        Friendships naming a user without a location.
    duplicate_edges : int
        Friendships listed again (either direction).
    fit : CarFit
        The CAR model's fit.
    near : NearFit
        The near-friend model's fit.
    region : Region
        The region (`geo.regions`).
    outside_users : int, default 0
        Located users outside the region, left out.
    outside_edges : int, default 0
        Friendships with an end outside the region, left out.
    paths : dict[str, str], default {}
        The inputs as given (the shipped ones repo-relative).
    """

    lat: np.ndarray
    lon: np.ndarray
    points: np.ndarray  # (n, 2) normalised (x, y) in region.frame
    pairs: np.ndarray  # (E, 2) located friendship pairs, row indices
    dropped_edges: int  # naming a user without a location
    duplicate_edges: int  # a pair listed again (either direction)
    fit: CarFit
    near: NearFit
    region: Region
    outside_users: int = 0  # located users outside the region, left out
    outside_edges: int = 0  # friendships with an end outside the region, left out
    paths: dict[str, str] = field(default_factory=dict)  # the inputs as given (the shipped ones repo-relative)

    @property
    def km(self) -> np.ndarray:
        """(n, 2) positions on the near-friend fit's plane (`geo.near.plane_km`)."""
        return plane_km(self.lat, self.lon, self.near.box)

    @property
    def users(self) -> int:
        return len(self.points)


@dataclass
class AttackResult(JsonDocument):
    """`rows` (one per known-set size, ε and adversary), `meta`, and per-target arrays for figures.

    Parameters
    ----------
    rows : list of dict
        One per (known-set size, ε, adversary): inference errors in km (Eq. 10), leaked and released
        bits (Eq. 11) and Theorem 2's bound.
    meta : dict
        The inputs, the partition, the scales and the reference guesses (`to_json`'s other keys).
    errors : dict[tuple[int, float, str], numpy.ndarray]
        (n_prior, ε, adversary) -> km per target.
    has_friends : numpy.ndarray
        Per target, whether it has a located friend.
    partition : Partition
        The K-means partition.
    noisy : dict[float, numpy.ndarray]
        ε -> the released centroids.
    data : AttackData
        The data attacked.
    guess_errors : numpy.ndarray
        km per target of guessing the regional mean (a reference for Eq. 10).
    targets : numpy.ndarray or None, default None
        The attacked users' rows.
    """

    rows: list[dict]
    meta: dict
    errors: dict[tuple[int, float, str], np.ndarray]  # (n_prior, ε, adversary) -> km per target
    has_friends: np.ndarray  # per target
    partition: Partition
    noisy: dict[float, np.ndarray]  # ε -> released centroids
    data: AttackData
    guess_errors: np.ndarray  # km per target of guessing the regional mean (a reference for Eq. 10)
    targets: np.ndarray | None = None  # the attacked users' rows

    def to_dict(self) -> dict:
        return {"rows": self.rows, **self.meta}

    def row(self, n_prior: int, epsilon: float, adversary: str) -> dict:
        """The row of one known-set size, ε and adversary.

        Parameters
        ----------
        n_prior : int
            The known-set size.
        epsilon : float
            The privacy budget.
        adversary : str
            independent, dependent or car.

        Returns
        -------
        dict
            The row.

        Raises
        ------
        StopIteration
            If no row matches.
        """
        return next(r for r in self.rows if (r["n_prior"], r["epsilon"], r["adversary"]) == (n_prior, epsilon, adversary))


def load_data(locations: str | Path | None = None, edges: str | Path | None = None,
              fit: str | Path | None = None, grid: int | None = None, where: RunSettings | None = None,
              near: str | Path | None = None, region_name: str = "us") -> AttackData:
    """Read the CSVs and the fits (the shipped Gowalla files by default, read from the installed
    package) and keep the users of the region (`geo.regions`; "us": the CAR fit's box, which must hold
    every user, since the CAR model is fitted in it). With the attack's `grid`, the locations stop
    streaming in once a block of targets' masks over the users (MASK_BYTES a user and target: the known and
    same-cluster bools, their comparison and a float64 copy in `adversary.cluster_view`), held at once by each
    of this machine's workers (`where`), would not fit in its memory. The per-cell tables are (block, cells),
    at most 2^20 cells or one target's (`CELLS_PER_BLOCK`), whatever the users.

    Parameters
    ----------
    locations : str, Path or None, default None
        Users' CSV (UserID,Latitude,Longitude); None: the shipped Gowalla US users.
    edges : str, Path or None, default None
        Friendships' CSV (Source,Destination); None: the shipped Gowalla US edges.
    fit : str, Path or None, default None
        The CAR fit's JSON; None: the shipped one.
    grid : int or None, default None
        The attack's G, for the memory check; None: no check.
    where : RunSettings or None, default None
        Where the attack will run (its workers), for the memory check.
    near : str, Path or None, default None
        The near-friend fit's JSON; None: the shipped one.
    region_name : str, default "us"
        The region whose users are kept (`geo.regions`).

    Returns
    -------
    AttackData
        The region's users, friendships and fits.

    Raises
    ------
    InputError
        If an input is missing, not a regular file or invalid; if the users would not fit in memory;
        or, for region us, if a user lies outside the CAR fit's box.
    """
    given = {"locations": locations, "edges": edges, "fit": fit, "near": near}
    default = {"locations": LOCATIONS, "edges": EDGES, "fit": FIT, "near": NEAR}
    paths = {k: Path(v) if v else shipped.path(default[k]) for k, v in given.items()}
    shown = {k: str(v) if v else default[k] for k, v in given.items()}  # the shipped ones repo-relative
    for k, p in paths.items():
        if given[k] and p.exists() and not p.is_file():
            raise InputError(f"--{k} {p} is not a regular file (a device or a folder is not read)")
    missing = [f"{k} {p}" for k, p in paths.items() if not p.is_file()]
    if missing:
        hint = "" if all(given[k.split()[0]] for k in missing) else (
            " (the shipped Gowalla data is missing from the installed package: reinstall ddpbayes, or pass "
            "--locations, --edges, --fit and --near)")
        raise InputError(f"missing input file: {', '.join(missing)}{hint}")
    boxes = 3 if region_name == "cities" else 1
    cells = boxes * grid**2 if grid is not None and 1 <= grid <= MAX_GRID else 0
    block = max(1, min(MAX_BLOCK, CELLS_PER_BLOCK // max(1, cells)))  # as `run_attack` blocks the targets
    local = where is not None and not scheduler_address(where.scheduler)
    copies = worker_count(where.workers) if local else 1
    locs = read_locations(paths["locations"], copies * MASK_BYTES * block if cells else 0,
                          f"the masks of a block of {block} targets ({MASK_BYTES} bytes a user each)"
                          + (f", in each of {copies} workers," if copies > 1 else ""))
    links = read_edges(paths["edges"], locs)
    car, near_fit = load_fit(paths["fit"]), load_near_fit(paths["near"])
    area = region(region_name, car.box)
    lat, lon = np.asarray(locs.lat, float), np.asarray(locs.lon, float)
    inside = area.contains(lat, lon)
    if region_name == "us" and not inside.all():
        outside = np.flatnonzero(~inside)
        raise InputError(f"user {locs.ids[outside[0]]} lies outside the fitted model's box {car.box} "
                         f"({len(outside)} users do)")
    row = np.cumsum(inside) - 1
    pairs = np.asarray(links.pairs, int).reshape(-1, 2)
    kept = inside[pairs].all(axis=1)
    x, y = area.frame.normalise(lat[inside], lon[inside])
    return AttackData(lat[inside], lon[inside], np.column_stack([x, y]), row[pairs[kept]], int(links.dropped),
                      int(links.duplicates), car, near_fit, area, int((~inside).sum()), int((~kept).sum()), shown)


def run_attack(data: AttackData, settings: AttackSettings, progress: bool = True,
               where: RunSettings | None = None) -> AttackResult:
    """Release, attack and measure (module docstring). Each (known-set size, target block) is a
    unit of work (`parallel.map_units`; `where` says where they run: its workers or scheduler);
    a worker builds the release and the CAR precisions once, and the blocks are accumulated in
    order, so the numbers do not depend on where they ran.

    Parameters
    ----------
    data : AttackData
        What `load_data` read, for the region `settings` names.
    settings : AttackSettings
        The experiment's settings.
    progress : bool, default True
        Progress lines on stderr.
    where : RunSettings or None, default None
        Where the units run (workers, scheduler); None: the defaults.

    Returns
    -------
    AttackResult
        The rows, their metadata and the per-target errors.

    Raises
    ------
    InputError
        If a setting cannot be used with the region's users (`AttackSettings.check`).
    ValueError
        If `data` was read for another region than `settings.region`.

    Examples
    --------
    >>> from ddpbayes.attack import AttackSettings, load_data, run_attack
    >>> settings = AttackSettings(epsilons=(1.0,), targets=50)
    >>> result = run_attack(load_data(grid=settings.grid), settings, progress=False)
    >>> [(r["epsilon"], r["adversary"]) for r in result.rows]
    [(1.0, 'independent'), (1.0, 'dependent'), (1.0, 'car')]
    """
    start = time.perf_counter()
    if settings.region != data.region.name:
        raise ValueError(f"the data were read for region {data.region.name!r}, the settings name {settings.region!r}")
    settings.check(data.users)
    attack = _Attack(data, settings)
    key = _ATTACKS.keep(attack)
    block = max(1, min(MAX_BLOCK, CELLS_PER_BLOCK // attack.grid.cells))
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
    guess = _guess_errors(data, attack.partition, targets)
    meta = _meta(data, settings, attack, sizes, guess, time.perf_counter() - start)
    return AttackResult(rows, meta, acc.errors, has_friends, attack.partition, attack.noisy, data, guess["regional"],
                        targets)


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
        self.grid = Grid.of(data.region, settings.grid)
        self.cells = self.grid.index(data.points)
        self.lat_lon = self.grid.lat_lon(data.region.frame)
        self.distances = metrics.cell_distances(self.grid, self.lat_lon)
        self.friends = adjacency(data.users, data.pairs)
        self.car = _PriorModel(data, self.friends)
        self.km = data.km

    def block(self, n_prior: int, span: slice) -> list[tuple]:
        """Every adversary's posterior (Eq. 6) for the targets in `span` at every ε: the
        `_Accumulator.add` arguments of each (ε, adversary)."""
        data, grid, n = self.data, self.grid, self.data.users
        t = self.targets[span]
        mask = np.stack([adversary.known_row(n, i, n_prior, _stream(self.settings.seed, _KNOWN, n_prior, i))
                         for i in t])
        view = adversary.cluster_view(data.points, self.partition, t, mask)
        log_prior = {
            "independent": posterior.histogram_log_prior(adversary.histogram_counts(self.cells, mask, grid.cells)),
            "dependent": posterior.histogram_log_prior(adversary.weighted_counts(
                self.cells, mask, self.km, self.friends, t, data.near, grid.cells)),
            "car": posterior.gaussian_log_prior(*self.car.conditionals(t, mask, n_prior == n - 1), grid),
        }
        h_prior = {a: posterior.entropy_bits(lp) for a, lp in log_prior.items()}
        entries = []
        for e in self.settings.epsilons:
            log_lik = posterior.log_likelihood(self.noisy[e][self.partition.labels[t]], view.expected_others,
                                               view.sigma, view.size, self.delta / e, grid)
            for a in ADVERSARIES:
                log_post = posterior.normalise(log_prior[a] + log_lik)
                entries.append(((n_prior, e, a), span, self._errors(t, metrics.map_cells(log_post)),
                                None if self.distances is None else
                                self._errors(t, metrics.bayes_cells(log_post, self.distances)),
                                h_prior["independent"], h_prior[a], posterior.entropy_bits(log_post)))
        return entries

    def _errors(self, targets: np.ndarray, cells: np.ndarray) -> np.ndarray:
        """km from each target's true position to its estimated cell's centre (Eq. 10)."""
        lat, lon = self.lat_lon
        return haversine_km(self.data.lat[targets], self.data.lon[targets], lat[cells], lon[cells])


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
    h.update(repr((data.fit, data.near, data.region, settings)).encode())
    return h.hexdigest()


class _PriorModel:
    """The CAR fit's precision per coordinate and the users' centred coordinates (in the fit's box):
    the CAR adversary's conditionals, given all others (`geo.car.conditional`) or a known subset, in
    the region frame's coordinates (an affine map per coordinate: the identity for "us")."""

    def __init__(self, data: AttackData, W: sparse.csr_matrix):
        fit = data.fit
        self.mu = np.asarray(fit.mu, float)
        self.Q = [car_precision(W, fit.alpha, tau).tocsr() for tau in fit.tau]
        self.centred = np.column_stack(fit.box.normalise(data.lat, data.lon)) - self.mu
        self.scale, self.offset = _affine(fit.box, data.region.frame)

    def conditionals(self, targets: np.ndarray, mask: np.ndarray, everyone: bool) -> tuple[np.ndarray, np.ndarray]:
        """(T, 2) means and standard deviations of each target's coordinates given its known others."""
        if everyone:
            pairs = [conditional(Q, self.centred[:, a], targets) for a, Q in enumerate(self.Q)]
            mean, var = (np.column_stack(v) for v in zip(*pairs))
        else:
            pairs = [adversary.subset_conditional(self.Q, self.centred, i, mask[r]) for r, i in enumerate(targets)]
            mean, var = (np.stack(v) for v in zip(*pairs))
        return self.offset + self.scale * (mean + self.mu), self.scale * np.sqrt(var)


def _affine(box: Box, frame: Box) -> tuple[np.ndarray, np.ndarray]:
    """(scale, offset) per coordinate taking `box`'s normalised coordinates to `frame`'s."""
    spans = [(box.lon, frame.lon), (box.lat, frame.lat)]
    scale = np.array([(b[1] - b[0]) / (f[1] - f[0]) for b, f in spans])
    offset = np.array([(b[0] - f[0]) / (f[1] - f[0]) for b, f in spans])
    return scale, offset


class _Accumulator:
    """Per-target errors and entropies for each (n_prior, ε, adversary)."""

    def __init__(self, count: int):
        self.count = count
        self.errors: dict = {}
        self.bayes: dict = {}  # km of the Bayes estimate (None: too many cells)
        self.base: dict = {}  # H(Eq. 8 prior)
        self.prior: dict = {}  # H(own prior)
        self.post: dict = {}

    def add(self, key, span: slice, km, bayes, h_base, h_prior, h_post) -> None:
        for store, values in ((self.errors, km), (self.bayes, bayes), (self.base, h_base), (self.prior, h_prior),
                              (self.post, h_post)):
            if values is not None:
                store.setdefault(key, np.empty(self.count))[span] = values


def _row(key, acc: _Accumulator, has_friends: np.ndarray) -> dict:
    n_prior, e, a = key
    km, post, bayes = acc.errors[key], acc.post[key], acc.bayes.get(key)
    return {"epsilon": e, "adversary": a, "n_prior": n_prior, **metrics.summary(km),
            "bayes_mean_error_km": None if bayes is None else float(np.mean(bayes)),
            "leaked_bits": float(np.mean(acc.base[key] - post)),
            "release_bits": float(np.mean(acc.prior[key] - post)),
            "prior_bits": float(np.mean(acc.prior[key])), "posterior_bits": float(np.mean(post)),
            "bound_bits": metrics.theorem2_bound_bits(e),
            "mean_error_km_with_friends": _mean(km[has_friends]),
            "mean_error_km_without_friends": _mean(km[~has_friends])}


def _mean(values: np.ndarray) -> float | None:
    return float(np.mean(values)) if len(values) else None


def _meta(data: AttackData, s: AttackSettings, attack: _Attack, sizes: list[int], guess: dict[str, np.ndarray],
          seconds: float) -> dict:
    fit, near, frame, part = data.fit, data.near, data.region.frame, attack.partition
    return {"region": data.region.name, "k": s.k, "grid": s.grid, "cells": attack.grid.cells, "seed": s.seed,
            "epsilons": list(s.epsilons), "n_priors": sizes,
            "users": data.users, "targets": len(attack.targets), "located_edges": len(data.pairs),
            "users_with_friends": int(len(np.unique(data.pairs))),
            "dropped_edges": data.dropped_edges, "duplicate_edges": data.duplicate_edges,
            "outside_users": data.outside_users, "outside_edges": data.outside_edges,
            "box": {"lat": list(frame.lat), "lon": list(frame.lon)},
            "boxes": [{"name": name, "lat": list(b.lat), "lon": list(b.lon)}
                      for name, b in zip(data.region.labels(), data.region.boxes)],
            "cluster_sizes": part.sizes.tolist(), "sensitivity": attack.delta,
            "scales": {str(e): attack.delta / e for e in s.epsilons},
            "car": {"alpha": float(fit.alpha), "tau": [float(t) for t in fit.tau], "mu": [float(m) for m in fit.mu]},
            "near": {"weights": list(near.weights), "sigma_km": list(near.sigma_km),
                     "bandwidth_km": near.bandwidth_km},
            "regional_mean_guess": metrics.summary(guess["regional"]),
            "cluster_mean_guess": metrics.summary(guess["cluster"]),
            "bayes_estimate": attack.distances is not None, "inputs": data.paths,
            "seconds": seconds}


def _guess_errors(data: AttackData, part: Partition, targets: np.ndarray) -> dict[str, np.ndarray]:
    """References for Eq. 10 that use no release: guess, for every target, the mean position of the
    other users (the regional mean), or of the other members of its cluster (the partition the
    adversary knows; the regional mean for a cluster of one), averaged in the frame's coordinates."""
    p = data.points
    regional = (p.sum(axis=0) - p[targets]) / (len(p) - 1)
    c = part.labels[targets]
    others = (part.sizes[c] - 1)[:, None]
    cluster = np.where(others > 0, (part.sums[c] - p[targets]) / np.maximum(others, 1), regional)
    out = {}
    for name, guess in (("regional", regional), ("cluster", cluster)):
        lat, lon = data.region.frame.denormalise(guess[:, 0], guess[:, 1])
        out[name] = haversine_km(data.lat[targets], data.lon[targets], lat, lon)
    return out


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
