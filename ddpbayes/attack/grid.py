"""The adversary's candidate positions: G × G cells in each box of a region (seed 002 §IV-C, "we
discretize the estimated region"; §IV-D, "each city into 20 × 20 grids"), in the frame's
normalised coordinates.

Cell b·G² + ix·G + iy of box b has centre (x0 + (ix + ½)·w, y0 + (iy + ½)·h), w and h the box's
cell sides. One box equal to the frame is the unit square of seed 002's single grid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ddpbayes.geo.data import Box
from ddpbayes.geo.regions import Region


@dataclass(frozen=True)
class Grid:
    """`size` cells per side in each of `boxes`, (x0, x1, y0, y1) in the frame's [0, 1]²."""

    size: int
    boxes: tuple[tuple[float, float, float, float], ...]

    @classmethod
    def unit(cls, size: int) -> Grid:
        """The unit square as one box."""
        return cls(size, ((0.0, 1.0, 0.0, 1.0),))

    @classmethod
    def of(cls, region: Region, size: int) -> Grid:
        """The region's boxes in its frame's coordinates."""
        frame = region.frame
        boxes = []
        for box in region.boxes:
            x, y = frame.normalise(np.array(box.lat), np.array(box.lon))
            boxes.append((float(x[0]), float(x[1]), float(y[0]), float(y[1])))
        return cls(size, tuple(boxes))

    @property
    def cells(self) -> int:
        return len(self.boxes) * self.size**2

    def edges(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Box b's G + 1 cell edges along x and along y."""
        x0, x1, y0, y1 = self.boxes[b]
        u = np.arange(self.size + 1) / self.size
        return x0 + u * (x1 - x0), y0 + u * (y1 - y0)

    def axis_centres(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Box b's G cell centres along x and along y."""
        ex, ey = self.edges(b)
        return (ex[:-1] + ex[1:]) / 2, (ey[:-1] + ey[1:]) / 2

    def centres(self) -> np.ndarray:
        """(cells, 2) every cell's centre, in cell order."""
        out = []
        for b in range(len(self.boxes)):
            cx, cy = self.axis_centres(b)
            out.append(np.stack(np.meshgrid(cx, cy, indexing="ij"), axis=-1).reshape(-1, 2))
        return np.concatenate(out)

    def index(self, points: np.ndarray) -> np.ndarray:
        """The cell of each normalised point (n, 2), in the first box holding it (a box's far edges
        belong to its last cells); −1 for a point in no box."""
        out = np.full(len(points), -1)
        g = self.size
        for b, (x0, x1, y0, y1) in reversed(list(enumerate(self.boxes))):
            inside = (points[:, 0] >= x0) & (points[:, 0] <= x1) & (points[:, 1] >= y0) & (points[:, 1] <= y1)
            ix = np.clip(np.floor((points[:, 0] - x0) / (x1 - x0) * g).astype(int), 0, g - 1)
            iy = np.clip(np.floor((points[:, 1] - y0) / (y1 - y0) * g).astype(int), 0, g - 1)
            out = np.where(inside, b * g * g + ix * g + iy, out)
        return out

    def assemble(self, per_box: Callable[[int], tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """(T, cells) from per-coordinate (T, G) log terms of each box b (`per_box(b)` -> x and y
        tables), added into cell order."""
        parts = []
        for b in range(len(self.boxes)):
            ax, ay = per_box(b)
            parts.append((ax[:, :, None] + ay[:, None, :]).reshape(len(ax), -1))
        return np.concatenate(parts, axis=1)

    def lat_lon(self, frame: Box) -> tuple[np.ndarray, np.ndarray]:
        """Every cell centre's latitude and longitude."""
        c = self.centres()
        return frame.denormalise(c[:, 0], c[:, 1])
