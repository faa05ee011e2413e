"""Where the attack looks: the continental US as one box, or seed 002 §IV-D's cities (NY, SF, LA),
each its own box of G × G cells (issue 30).

Seed 002 discretises each city into 20 × 20 grids; its communities (Fig. 2) are Manhattan, Queens
and Brooklyn, San Jose and Oakland, Pasadena, Long Beach and Beverly Hills, so each city here is its
metropolitan area in round degrees. A region's users are those inside one of its boxes; positions
are normalised into the region's frame (the smallest box holding its boxes), as seed 002 normalises
every attribute into [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.geo.data import Box

NEW_YORK = Box(lat=(40.45, 41.0), lon=(-74.3, -73.65))  # Manhattan, Queens, Brooklyn, Newark
SAN_FRANCISCO = Box(lat=(37.2, 38.0), lon=(-122.6, -121.75))  # San Francisco, Oakland, San Jose
LOS_ANGELES = Box(lat=(33.7, 34.25), lon=(-118.7, -117.9))  # Los Angeles, Pasadena, Long Beach, Beverly Hills
CITIES = {"ny": NEW_YORK, "sf": SAN_FRANCISCO, "la": LOS_ANGELES}
NAMES = ("us", "cities", *CITIES)


@dataclass(frozen=True)
class Region:
    """A named union of boxes; `boxes[b]` gets cells b·G² .. (b + 1)·G² − 1."""

    name: str
    boxes: tuple[Box, ...]

    @property
    def frame(self) -> Box:
        """The smallest box holding every box of the region."""
        return Box(lat=(min(b.lat[0] for b in self.boxes), max(b.lat[1] for b in self.boxes)),
                   lon=(min(b.lon[0] for b in self.boxes), max(b.lon[1] for b in self.boxes)))

    def contains(self, lat, lon) -> np.ndarray:
        """Whether each position lies in one of the boxes."""
        return np.any([b.contains(lat, lon) for b in self.boxes], axis=0)

    def describe(self) -> str:
        return "; ".join(f"{name} {box}" for name, box in zip(self.labels(), self.boxes))

    def labels(self) -> list[str]:
        names = {box: name for name, box in CITIES.items()}
        return [names.get(b, self.name) for b in self.boxes]


def region(name: str, us: Box) -> Region:
    """The region called `name` ("us": the fitted model's box `us`; "cities": NY, SF and LA; or one city)."""
    if name == "us":
        return Region("us", (us,))
    if name == "cities":
        return Region("cities", tuple(CITIES.values()))
    if name in CITIES:
        return Region(name, (CITIES[name],))
    raise InputError(f"--region must be one of {', '.join(NAMES)}, got {name!r}")
