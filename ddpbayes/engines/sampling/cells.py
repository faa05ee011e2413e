"""A bound over a continuous target's whole domain from finitely many target values (DESIGN §2.3, issue #42.2).

The target domain [lo, hi] is cut into cells at the evaluated values (anchors). On a cell C of
width h, every t is within h/2 of an anchor a, and (`slope`) for every y

    |log L(y | t) − log L(y | a)| ≤ s(C) = h/2 · (g_hi(C) − g_lo(C) + κ),

[g_lo, g_hi] the model's score ∂log p/∂t over C and every value of the other variables, κ the
query's Laplace log-kernel slope in t. Hence for t in C, t' in C'

    leak(t, t') ≤ max over anchors a of C, a' of C' of leak(a, a') + s(C) + s(C'),

and the sup over the domain is at most the largest such cell-pair bound (a cell at an end with one
anchor, when an endpoint was approached from inside, has s = width · (range + κ)).

Second order, between two anchors a < c (h = c − a): with v_s(τ) = log ∫ e^{ℓ(τ,z)} k(y − q(s,z)) dz −
log ∫ e^{ℓ(τ,z)} dz (the kernel frozen at s), log L(y | t) = v_t(t), |v_s − v_s'| ≤ κ|s − s'|, and
v_s'' = Var_π(g) − Var_p(g) + E_π[H] − E_p[H] (π the kernel-tilted law, H = ∂²ℓ/∂t²), so
|v_s''| ≤ M = (g_hi − g_lo)²/4 + (H_hi − H_lo). Interpolating v_t between a and c:

    |log L(y | t) − [λ log L(y | a) + (1 − λ) log L(y | c)]| ≤ κ h/2 + M h²/8,   λ = (c − t)/h,

and a convex combination of the anchors' log-ratios is at most their largest, so the same
cell-pair bound holds with s(C) = min(h/2 (range + κ), κ h/2 + M h²/8) (`_slack`; the second
order needs the score continuous in t on the cell and H bounded, `Slope.curvature`; else first
order). Near an end where the score's range is large (a Beta record's 1/t) the slack falls from
linear in h with slope range/2 to κ/2 plus a quadratic term. Branch and
bound: the cell pair with the largest bound is refined (a new run at the midpoint of its cell with
the larger slack) until that bound is within `TOL` of the best anchor pair's value, or `REFINE_RUNS` new
target values were drawn; the bound holds at every step, refinement only tightens it. The leak
between anchors is the plug-in estimate, so the result bounds the estimated function over the
continuum; the sampling term is added as before (`engine`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ddpbayes.engines.sampling.estimate import Draws
from ddpbayes.engines.sampling.slope import Slope, Uncertified
from ddpbayes.engines.sampling.vector import pair_sup

TOL = 0.01  # refine until the certified bound is within this of the best evaluated pair
REFINE_RUNS = 12  # new target values per x_K at most


@dataclass(frozen=True)
class Certificate:
    """The bound over the continuum (`upper`, plug-in scale) or why there is none (`reason`)."""

    upper: float
    anchors: int
    reason: str | None = None


def refuse(reason: str) -> Certificate:
    return Certificate(math.nan, 0, reason)


def certify(slope: Slope, domain: tuple[float, float], group: list[Draws], kappa: float,
            draw: Callable[[float], Draws | None], b: np.ndarray) -> Certificate:
    """The certified bound for one x_K: refines `group` in place (new anchors' draws appended)."""
    lo, hi = domain
    leaks: dict[tuple[float, float], float] = {}
    ranges: dict[tuple[float, float], float] = {}
    try:
        for refined in range(REFINE_RUNS + 1):
            anchors = sorted(d.t for d in group)
            laws = {d.t: d.mixture() for d in group}
            best = _best(anchors, laws, leaks, b)
            upper, cell = _worst_pair(anchors, (lo, hi), slope, kappa, laws, leaks, ranges, b)
            if upper - best <= TOL or refined == REFINE_RUNS:
                break
            new = draw(0.5 * (cell[0] + cell[1]))
            if new is None:
                break
            group.append(new)
    except Uncertified as e:
        return refuse(str(e))
    except (ValueError, TypeError, IndexError, NotImplementedError) as e:  # a graph the interval rules cannot read
        return refuse(f"the slope bound could not read the model's log-density ({type(e).__name__})")
    return Certificate(upper, len(group))


def _leak(a: float, c: float, laws: dict, leaks: dict, b: np.ndarray) -> float:
    """The plug-in sup over y of log L(y|a) − log L(y|c) (memoised)."""
    if a == c:
        return 0.0
    if (a, c) not in leaks:
        (ac, _), (ca, _) = pair_sup(*laws[a], *laws[c], b)[0]
        leaks[(a, c)], leaks[(c, a)] = max(ac, 0.0), max(ca, 0.0)
    return leaks[(a, c)]


def _best(anchors: list[float], laws: dict, leaks: dict, b: np.ndarray) -> float:
    return max((_leak(a, c, laws, leaks, b) for a in anchors for c in anchors), default=0.0)


def _cells(anchors: list[float], domain: tuple[float, float]) -> list[tuple[float, float, tuple[float, ...]]]:
    """(left, right, anchors in it): the cells between anchors and, where an end was approached
    from inside, the sliver between the end and its nearest anchor."""
    lo, hi = domain
    cells = [(a, c, (a, c)) for a, c in zip(anchors, anchors[1:])]
    if anchors[0] > lo:
        cells.insert(0, (lo, anchors[0], (anchors[0],)))
    if anchors[-1] < hi:
        cells.append((anchors[-1], hi, (anchors[-1],)))
    return cells


def _slack(cell: tuple[float, float, tuple[float, ...]], slope: Slope, kappa: float, ranges: dict) -> float:
    """s(C): the first-order slack, or between two anchors the second-order one where it is smaller."""
    left, right, anchors = cell
    if (left, right) not in ranges:
        g_lo, g_hi = slope.bounds(left, right)
        ranges[(left, right)] = (g_hi - g_lo, _curvature_range(slope, left, right) if len(anchors) == 2 else math.inf)
    score_range, curvature_range = ranges[(left, right)]
    h = right - left
    if len(anchors) == 1:
        return h * (score_range + kappa)
    return min(h / 2 * (score_range + kappa), kappa * h / 2 + (score_range ** 2 / 4 + curvature_range) * h * h / 8)


def _curvature_range(slope: Slope, left: float, right: float) -> float:
    """H_hi − H_lo of ∂²ℓ/∂t² over the cell, or inf where it cannot be bounded (first order only)."""
    try:
        h_lo, h_hi = slope.curvature(left, right)
    except (Uncertified, ValueError, TypeError, IndexError, NotImplementedError):  # not smooth, or unreadable
        return math.inf
    return h_hi - h_lo


def _worst_pair(anchors: list[float], domain: tuple[float, float], slope: Slope, kappa: float, laws: dict,
                leaks: dict, ranges: dict, b: np.ndarray) -> tuple[float, tuple[float, float]]:
    """The largest cell-pair bound and the cell to refine for it (the wider of the pair's two)."""
    cells = _cells(anchors, domain)
    slack = [_slack(c, slope, kappa, ranges) for c in cells]
    worst, refine = -math.inf, (domain[0], domain[1])
    for i, ci in enumerate(cells):
        for j, cj in enumerate(cells):
            value = max(_leak(a, c, laws, leaks, b) for a in ci[2] for c in cj[2]) + slack[i] + slack[j]
            if value > worst:
                worst = value
                refine = ci[:2] if slack[i] >= slack[j] else cj[:2]
    return worst, refine
