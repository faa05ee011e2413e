"""Users' positions and friendships read from CSV files, the box positions are normalised in,
and great-circle distances (seed 002 §IV-A: the Gowalla location data and its social graph).

Seed 002 normalises every attribute of a location pattern into [0, 1] (§IV-A, after Eq. 4) and
measures inference errors as the earth-surface distance between coordinates (Eq. 5, Eq. 10).
Here a user's location pattern is one position (latitude, longitude): the shipped Gowalla files
hold each user's average check-in, not the paper's top-q locations.
"""

from __future__ import annotations

import csv
import math
import os
import stat
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.limits import check_memory

EARTH_RADIUS_KM = 6371.0088  # the IUGG mean Earth radius R1 = (2a + b) / 3 of WGS84
_INT64 = (-(2**63), 2**63 - 1)
CHECK_EVERY = 1 << 16  # rows between two looks at the machine's memory while a locations file streams in


@dataclass(frozen=True)
class Locations:
    """One position per user, in file order: `ids` (int64), `lat` and `lon` (float64 degrees).

    Parameters
    ----------
    ids : numpy.ndarray
        User ids, int64, one per user.
    lat, lon : numpy.ndarray
        Latitude and longitude in degrees, float64, one per user.
    """

    ids: np.ndarray
    lat: np.ndarray
    lon: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def index(self) -> dict[int, int]:
        """User id -> row.

        Returns
        -------
        dict[int, int]
            Each user id mapped to its row in the file order.
        """
        return {int(u): k for k, u in enumerate(self.ids)}


@dataclass(frozen=True)
class Edges:
    """Friendships between located users: `pairs` (E, 2) int64 rows into the `Locations` (i < j,
    sorted, each friendship once), and what was left out of them: `dropped` edges with an end
    that has no location, `duplicates` (a pair seen before, in either direction: the shipped
    file lists 401 friendships both ways) and `self_loops` between located users.

    Parameters
    ----------
    pairs : numpy.ndarray
        (E, 2) int64 rows into the `Locations`, i < j, sorted, each friendship once.
    dropped : int
        Edges left out because an end has no location.
    duplicates : int, default 0
        Edges left out because their pair was seen before (in either direction).
    self_loops : int, default 0
        Edges from a located user to herself, left out.
    """

    pairs: np.ndarray
    dropped: int
    duplicates: int = 0
    self_loops: int = 0


@dataclass(frozen=True)
class Box:
    """A latitude-longitude box (degrees, lo < hi); positions are normalised into [0, 1]^2 inside
    it, as seed 002 §IV-A normalises every attribute: x from longitude, y from latitude.

    Parameters
    ----------
    lat : tuple of float
        (lat_min, lat_max) in degrees, -90 <= lat_min < lat_max <= 90.
    lon : tuple of float
        (lon_min, lon_max) in degrees, -180 <= lon_min < lon_max <= 180.

    Raises
    ------
    InputError
        If a bound is missing or the bounds are out of order or off the globe.
    """

    lat: tuple[float, float]
    lon: tuple[float, float]

    def __post_init__(self):
        lat, lon = tuple(map(float, self.lat)), tuple(map(float, self.lon))
        if len(lat) != 2 or len(lon) != 2 or not (-90 <= lat[0] < lat[1] <= 90 and -180 <= lon[0] < lon[1] <= 180):
            raise InputError(f"a Box needs -90 <= lat_min < lat_max <= 90 and -180 <= lon_min < lon_max <= 180, "
                             f"got lat {self.lat}, lon {self.lon}")
        object.__setattr__(self, "lat", lat)
        object.__setattr__(self, "lon", lon)

    def normalise(self, lat, lon) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) = ((lon - lon_min) / (lon_max - lon_min), (lat - lat_min) / (lat_max - lat_min)).

        Parameters
        ----------
        lat, lon : float or array_like
            Positions in degrees (broadcast together).

        Returns
        -------
        tuple of numpy.ndarray
            (x, y), in [0, 1] for positions inside the box.
        """
        x = (np.asarray(lon, dtype=float) - self.lon[0]) / (self.lon[1] - self.lon[0])
        y = (np.asarray(lat, dtype=float) - self.lat[0]) / (self.lat[1] - self.lat[0])
        return x, y

    def denormalise(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        """(lat, lon) of normalised (x, y): the inverse of `normalise`.

        Parameters
        ----------
        x, y : float or array_like
            Normalised coordinates (x from longitude, y from latitude).

        Returns
        -------
        tuple of numpy.ndarray
            (lat, lon) in degrees.
        """
        lat = self.lat[0] + np.asarray(y, dtype=float) * (self.lat[1] - self.lat[0])
        lon = self.lon[0] + np.asarray(x, dtype=float) * (self.lon[1] - self.lon[0])
        return lat, lon

    def contains(self, lat, lon) -> np.ndarray:
        """Whether each position lies in the box (edges included).

        Parameters
        ----------
        lat, lon : float or array_like
            Positions in degrees (broadcast together).

        Returns
        -------
        numpy.ndarray
            Booleans, one per position.
        """
        lat, lon = np.asarray(lat, dtype=float), np.asarray(lon, dtype=float)
        return (self.lat[0] <= lat) & (lat <= self.lat[1]) & (self.lon[0] <= lon) & (lon <= self.lon[1])

    def __str__(self) -> str:
        return f"lat [{self.lat[0]:g}, {self.lat[1]:g}], lon [{self.lon[0]:g}, {self.lon[1]:g}]"


# The continental US in round degrees. It contains every shipped Gowalla position (latitude
# 25.7 to 49.3, longitude -123.2 to -68.8), with at least 0.7 degrees to spare on each side.
US_BOX = Box(lat=(24.0, 50.0), lon=(-125.0, -66.0))


def box_of(locations: Locations, margin: float = 0.5) -> Box:
    """The smallest box holding every position, widened by `margin` degrees on each side (and
    clipped to the globe): a box for users' own files.

    Parameters
    ----------
    locations : Locations
        The users' positions.
    margin : float, default 0.5
        Degrees added on each side.

    Returns
    -------
    Box
        The widened bounding box.

    Raises
    ------
    InputError
        If `margin` is negative or not finite, or if the box would be empty (every position has the
        same latitude or longitude and `margin` is 0).
    """
    if not (math.isfinite(margin) and margin >= 0):
        raise InputError(f"the box margin must be a finite number of degrees >= 0, got {margin}")
    lat = (max(-90.0, float(np.min(locations.lat)) - margin), min(90.0, float(np.max(locations.lat)) + margin))
    lon = (max(-180.0, float(np.min(locations.lon)) - margin), min(180.0, float(np.max(locations.lon)) + margin))
    if not (lat[0] < lat[1] and lon[0] < lon[1]):
        raise InputError(f"every position has the same latitude or longitude (lat {lat}, lon {lon}): give a margin > 0")
    return Box(lat=lat, lon=lon)


def haversine_km(lat1, lon1, lat2, lon2) -> np.ndarray:
    """Great-circle distance in km between positions in degrees, broadcast over arrays (seed 002
    Eq. 5's dist: the haversine formula on a sphere of radius EARTH_RADIUS_KM = 6371.0088).

    Parameters
    ----------
    lat1, lon1 : float or array_like
        First positions, in degrees.
    lat2, lon2 : float or array_like
        Second positions, in degrees.

    Returns
    -------
    numpy.ndarray
        Distances in km, of the broadcast shape.
    """
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dp, dl = p2 - p1, np.radians(np.asarray(lon2, dtype=float) - np.asarray(lon1, dtype=float))
    h = np.sin(dp / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def read_locations(path: str | Path, bytes_per_user: int = 0, need: str = "") -> Locations:
    """Users' positions from a CSV whose header holds `UserID,Latitude,Longitude` (exact names,
    any order, other columns ignored). A BOM, CRLF line endings, blank lines and a missing final
    newline are accepted. InputError, naming the file, line and column, for: a missing column or
    value, a non-integer id, a non-numeric or non-finite coordinate, a latitude outside [-90, 90]
    or a longitude outside [-180, 180], a repeated user id, an empty file or no data rows.

    The file is streamed row by row into typed arrays; with `bytes_per_user` (what the caller
    will allocate per user, `need` saying what for), reading stops with an InputError as soon as
    the users read so far would need more than the machine's available memory (DESIGN §7).

    Parameters
    ----------
    path : str or Path
        The CSV file (a regular file).
    bytes_per_user : int, default 0
        Bytes the caller will allocate per user; 0 skips the memory check.
    need : str, default ""
        What those bytes are for, named in the error.

    Returns
    -------
    Locations
        The users in file order.

    Raises
    ------
    InputError
        For an unreadable or invalid file (above), or when the users would not fit in memory.
    """
    ids, lat, lon, seen = array("q"), array("d"), array("d"), {}
    for line, cell in _records(path, ("UserID", "Latitude", "Longitude")):
        user = _integer(cell("UserID"), path, line, "UserID")
        if user in seen:
            raise InputError(f"{path}, line {line}, column 'UserID': user {user} repeats (first on line {seen[user]})")
        seen[user] = line
        ids.append(user)
        lat.append(_coordinate(cell("Latitude"), path, line, "Latitude", 90.0))
        lon.append(_coordinate(cell("Longitude"), path, line, "Longitude", 180.0))
        if bytes_per_user and len(ids) % CHECK_EVERY == 0:
            check_memory(len(ids) * bytes_per_user, f"{path}: {need} for the {len(ids):,} users read by line {line}",
                         advice="attack fewer users, or use fewer --workers")
    if bytes_per_user:
        check_memory(len(ids) * bytes_per_user, f"{path}: {need} for its {len(ids):,} users",
                     advice="attack fewer users, or use fewer --workers")
    return Locations(np.frombuffer(ids, dtype=np.int64).copy(), np.frombuffer(lat, dtype=np.float64).copy(),
                     np.frombuffer(lon, dtype=np.float64).copy())


def read_edges(path: str | Path, locations: Locations) -> Edges:
    """Friendships from a CSV whose header holds `Source,Destination` (user ids), as rows into
    `locations`. Friendship is undirected: (a, b) and (b, a) are one pair, kept once and counted
    in `duplicates`. An edge with an end that has no location is dropped and counted in
    `dropped` (the shipped file names many users outside the locations file); a self loop is
    dropped and counted in `self_loops` (a user is not her own friend). InputError for a
    missing column or value, a non-integer id, an empty file or no data rows, and when no edge
    joins two different located users.

    Parameters
    ----------
    path : str or Path
        The CSV file (a regular file).
    locations : Locations
        The located users the ids are looked up in.

    Returns
    -------
    Edges
        The located pairs and the counts of what was left out.

    Raises
    ------
    InputError
        For an unreadable or invalid file, or when no edge joins two different located users.
    """
    row_of = locations.index()
    seen, pairs = set(), []
    dropped = duplicates = self_loops = 0
    for line, cell in _records(path, ("Source", "Destination")):
        a, b = (_integer(cell(c), path, line, c) for c in ("Source", "Destination"))
        if a not in row_of or b not in row_of:
            dropped += 1
        elif a == b:
            self_loops += 1
        elif (pair := tuple(sorted((row_of[a], row_of[b])))) in seen:
            duplicates += 1
        else:
            seen.add(pair)
            pairs.append(pair)
    if not pairs:
        why = "only self loops" if self_loops else "the edges name no located user pair"
        raise InputError(f"{path}: no edge joins two located users ({why}; {dropped} edges name a user "
                         "without a location)")
    return Edges(np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2), dropped, duplicates, self_loops)


def _records(path: str | Path, columns: tuple[str, ...]) -> Iterator[tuple[int, Callable[[str], str]]]:
    """(line number, cell getter) for every non-blank data row of a CSV with these columns (a
    regular file: a device such as /dev/zero or a pipe is refused unread)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise InputError(f"{path} is not a regular file (a CSV with the columns {', '.join(columns)})")
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise InputError(f"{path} is empty")
            names = [h.strip() for h in header]
            missing = [c for c in columns if c not in names]
            if missing:
                raise InputError(f"{path}, line 1: the header lacks column(s) {', '.join(map(repr, missing))} "
                                 f"(it has {', '.join(map(repr, names))})")
            where = {c: names.index(c) for c in columns}
            rows = 0
            for row in reader:
                if not any(cell.strip() for cell in row):
                    continue
                rows += 1
                yield reader.line_num, _getter(row, where, path, reader.line_num)
            if rows == 0:
                raise InputError(f"{path} has a header but no data rows")
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc


def _getter(row: list[str], where: dict[str, int], path, line: int) -> Callable[[str], str]:
    def cell(column: str) -> str:
        k = where[column]
        if k >= len(row) or not row[k].strip():
            raise InputError(f"{path}, line {line}, column {column!r}: missing value")
        return row[k].strip()

    return cell


def _integer(text: str, path, line: int, column: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{path}, line {line}, column {column!r}: {text!r} is not an integer user id") from None
    if not _INT64[0] <= value <= _INT64[1]:
        raise InputError(f"{path}, line {line}, column {column!r}: user id {value} does not fit in 64 bits")
    return value


def _coordinate(text: str, path, line: int, column: str, bound: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{path}, line {line}, column {column!r}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise InputError(f"{path}, line {line}, column {column!r}: {text!r} is not a finite number")
    if abs(value) > bound:
        raise InputError(f"{path}, line {line}, column {column!r}: {value:g} lies outside [-{bound:g}, {bound:g}]")
    return value
