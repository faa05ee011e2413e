"""The attack's metrics (seed 002 Eq. 10–11) and Theorem 2's bound (seed 000).

- Inference error (Eq. 10): the great-circle distance in km between the target's true position
  and the centre of the MAP cell (Eq. 7), denormalised to latitude and longitude. Seed 002's
  Dist (Eq. 5) averages over the top-q places; here each user has one (average) position, q = 1.
- Leaked information (Eq. 11): H(D_i) − H(D_i | μ̃, D_−i) in bits, where H(D_i) is, as seed 002
  states, the entropy of the independent prior of Eq. 8 for both adversaries: what the dependent
  adversary gains from the friendship graph counts as leaked. `release_bits` is the part the
  release alone leaks, H(own prior) − H(posterior); for the independent adversary the two agree.
- Theorem 2 (seed 000): for an ε-DP mechanism the leaked information of a DP adversary is at most
  ε. Its ε is a log-likelihood ratio, in nats: in bits the bound is ε · log₂ e ≈ 1.443 ε.

`THEOREM_2`, `left_out_edges` and `car_line` say how to read the attack's table, in its text
(`ddpbayes attack`) and its report alike (issue #40).
"""

from __future__ import annotations

import math

import numpy as np

from ddpbayes.attack.grid import Grid
from ddpbayes.geo.data import haversine_km

PERCENTILES = np.arange(101)  # the error CDF as percentiles 0..100
MAX_BAYES_CELLS = 2500  # the Bayes estimate's (cells, cells) distances: 50 MB at most


def map_cells(log_post: np.ndarray) -> np.ndarray:
    """(T,) each row's MAP cell (Eq. 7; the first cell on ties)."""
    return np.argmax(log_post, axis=1)


def bayes_cells(log_post: np.ndarray, distance_km: np.ndarray) -> np.ndarray:
    """(T,) each row's cell of least posterior expected distance to the truth (the Bayes estimate
    under Eq. 10's loss, a reference beside Eq. 7's MAP; the first cell on ties); `distance_km`
    (cells, cells) between cell centres."""
    return np.argmin(np.exp(log_post) @ distance_km, axis=1)


def cell_distances(grid: Grid, lat_lon: tuple[np.ndarray, np.ndarray]) -> np.ndarray | None:
    """(cells, cells) great-circle km between cell centres, or None above `MAX_BAYES_CELLS` cells."""
    if grid.cells > MAX_BAYES_CELLS:
        return None
    lat, lon = lat_lon
    return haversine_km(lat[:, None], lon[:, None], lat[None, :], lon[None, :])


def theorem2_bound_bits(epsilon: float) -> float:
    """Seed 000 Thm. 2's bound ε (nats) in bits."""
    return epsilon / math.log(2)


def summary(errors_km: np.ndarray) -> dict[str, float]:
    """Mean and median inference error (Eq. 10)."""
    return {"mean_error_km": float(np.mean(errors_km)), "median_error_km": float(np.median(errors_km))}


def error_percentiles(errors_km: np.ndarray) -> list[float]:
    """The empirical CDF of the error as its percentiles 0, 1, ..., 100 (km)."""
    return [float(v) for v in np.percentile(errors_km, PERCENTILES)]


# Why a row's leaked bits may exceed Theorem 2's bound, in the table's text and the report's
THEOREM_2 = ("It bounds the leaked bits of an adversary whose prior is the histogram, the prior the theorem assumes "
             "(independent); the dependent and car adversaries start from another prior, and what it knows beyond the "
             "histogram (or lacks: negative bits) counts in their leaked bits, so only theirs can exceed the bound; "
             "the release's own part is their release bits.")


def left_out_edges(doc: dict) -> str:
    """What the edges file held beside the friendships kept: rows naming a user with no location, repeats, rows
    with an end outside the region."""
    parts = [f"{doc['dropped_edges']:,} name a user with no location",
             f"{doc['duplicate_edges']:,} repeat a friendship"]
    if doc.get("outside_edges"):
        parts.append(f"{doc['outside_edges']:,} have an end outside the region")
    return "the edges file's other rows are left out: " + ", ".join(parts)


def car_line(rows: list[dict]) -> str | None:
    """One line on the CAR adversary's negative leaked bits, where its prior knows less than the histogram (a
    larger entropy, at the first negative row's ε and known-set size); None where no car row is negative or
    that is not why."""
    car = next((r for r in rows if r["adversary"] == "car" and r["leaked_bits"] < 0), None)
    histogram = car and next((r for r in rows if r["adversary"] == "independent" and r["epsilon"] == car["epsilon"]
                              and r["n_prior"] == car["n_prior"]), None)
    if not histogram or car["prior_bits"] <= histogram["prior_bits"]:
        return None
    return (f"the fitted CAR model's conditional law as the prior; broader than the histogram (entropy "
            f"{car['prior_bits']:.3f} against {histogram['prior_bits']:.3f} bits), it knows less before the release, "
            "hence negative leaked bits")
