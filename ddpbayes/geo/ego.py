"""A user's ego network (the user and her located friends) as a PyMC sub-model given everyone
else at their real positions: the adversary of pdp with K = the rest of the graph (DESIGN §7.1,
issue 30). Two dependence models, each over the ego network's 2m coordinates in the box's
normalised units (tuple a·m + j is coordinate a of member j, the target first, as the CAR model
orders them), domain Interval(0, 1):

- `car_submodel`: the CAR's Gaussian conditional (DESIGN §6): for each field, precision Q_EE and
  mean mu - Q_EE⁻¹ Q_EK (x_K - mu) (Rue & Held 2005 Thm. 2.5); x and y independent.
- `near_submodel`: the near-friend model (`geo.near`) written as a DAG on the ego network: the
  target ~ the population density p (the known users' kernel density: her friends are unknown
  here), and each friend f ~ p(x_f | x_-f) of `near.conditional_logpdf` with F(f) = the target (at
  her random position) and f's friends outside the ego network (known, real positions). Chosen
  here: a friendship between two of the target's friends is dropped (friends are independent
  given the target), and the population of every member's density is the known users only.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy import sparse
from scipy.special import logsumexp

from ddpbayes.errors import InputError
from ddpbayes.geo.car import CarFit, adjacency, car_precision
from ddpbayes.geo.data import Box
from ddpbayes.geo.kernels import KernelSum, log_kernel_sum
from ddpbayes.geo.near import NearFit, plane_km, sample_conditional
from ddpbayes.model import DependenceModel
from ddpbayes.model.domains import Interval

DEGREES = (1, 4)  # located friends of a sampled user: small ego networks


def friends_of(pairs: np.ndarray, n: int) -> list[np.ndarray]:
    """Each user's located friends (sorted rows)."""
    w = adjacency(n, pairs)
    return [w.indices[w.indptr[i]:w.indptr[i + 1]].copy() for i in range(n)]


def ego_members(friends: list[np.ndarray], user: int) -> np.ndarray:
    """The ego network's rows: the user, then her friends in increasing order."""
    return np.concatenate([[user], np.sort(friends[user])]).astype(np.int64)


def sample_users(friends: list[np.ndarray], count: int, seed: int, degrees: tuple[int, int] = DEGREES) -> np.ndarray:
    """`count` users among those with degrees[0] to degrees[1] located friends, sorted: one drawn uniformly
    (stream numpy default_rng([seed, 30]): the report's user, the whole sample when `count` is 1) and
    `count` - 1 more drawn uniformly without replacement among the others (stream [seed, 31]), so that a
    larger sample keeps the report's user."""
    eligible = np.flatnonzero([degrees[0] <= len(f) <= degrees[1] for f in friends])
    if not 1 <= count <= len(eligible):
        raise InputError(f"the sample needs 1 to {len(eligible)} users (those with {degrees[0]} to {degrees[1]} "
                         f"located friends), got {count}")
    first = np.random.default_rng([seed, 30]).choice(eligible, size=1, replace=False)
    more = np.random.default_rng([seed, 31]).choice(np.setdiff1d(eligible, first), size=count - 1, replace=False)
    return np.sort(np.concatenate([first, more]))


def car_conditional(points: np.ndarray, pairs: np.ndarray, fit: CarFit, members: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Mean (2m,) and precision (2m, 2m) of the ego network's coordinates (x of every member, then
    y) given every other user's, under the fitted CAR: block diagonal, one Q_EE per field."""
    n = len(points)
    w = adjacency(n, pairs)
    known = np.setdiff1d(np.arange(n), members)
    means, blocks = [], []
    for a in range(2):
        q = car_precision(w, fit.alpha, fit.tau[a]).tocsr()
        q_ee = q[members][:, members].toarray()
        shift = q[members][:, known] @ (points[known, a] - fit.mu[a])
        means.append(fit.mu[a] - np.linalg.solve(q_ee, shift))
        blocks.append(q_ee)
    return np.concatenate(means), sparse.block_diag(blocks).toarray()


def car_submodel(points: np.ndarray, pairs: np.ndarray, fit: CarFit, members: np.ndarray) -> DependenceModel:
    """The CAR conditional (`car_conditional`) as one pm.MvNormal "pos" given its precision."""
    mean, precision = car_conditional(points, pairs, fit, members)
    with pm.Model() as m:
        pm.MvNormal("pos", mu=mean, tau=precision)
    return DependenceModel(m, tuples="pos", domains=Interval(0.0, 1.0))


def km_map(box: Box) -> tuple[np.ndarray, np.ndarray]:
    """(offset, scale) with plane_km of a normalised position u equal to offset + scale · u (both
    maps are affine in latitude and longitude)."""
    lat, lon = box.denormalise(np.array([0.0, 1.0]), np.array([0.0, 1.0]))
    corners = plane_km(lat, lon, box)
    return corners[0], corners[1] - corners[0]


def _log_normal2(d2, var: float):
    return -d2 / (2 * var) - math.log(2 * math.pi * var)


class NearEgo:
    """The near sub-model's pieces: known users and friends in km, and its log-density and draws.
    Every kernel sum over known users is truncated to those near the point, or, summed in full,
    tabulated over the box (`geo.kernels`, `geo.grid`: each within its stated `error` of the full
    sum; `density_error` bounds the log-density's)."""

    def __init__(self, points_km: np.ndarray, friends: list[np.ndarray], fit: NearFit, members: np.ndarray):
        self.fit, self.m = fit, len(members)
        outside = np.ones(len(points_km), bool)
        outside[members] = False
        self.others = points_km[outside]
        # each friend's known friends (outside the ego network), real positions in km
        self.anchors = [points_km[np.setdiff1d(friends[f], members)] for f in members[1:]]
        self.offset, self.scale = km_map(fit.box)
        corners = np.stack([self.offset, self.offset + self.scale])
        self.domain = corners.min(axis=0), corners.max(axis=0)  # the box in km, where the tables are
        h2 = fit.bandwidth_km ** 2
        self._pop = self._sum(self.others, h2)
        self._z = {s: self._sum(self.others, s * s + h2) for s in fit.sigma_km}
        self._near = [{s: self._anchor_sum(known, s) for s in fit.sigma_km} if len(known) else {}
                      for known in self.anchors]

    def _anchor_sum(self, known: np.ndarray, s: float) -> tuple[KernelSum, float]:
        """Σ_g N(x; x_g, s² I) / Z_{g,s} over a friend's known friends g, as a weighted kernel sum
        (the known friends' normalisers Z_g are constants, computed in full): the sum with weights
        Z_min / Z_g, and log Z_min to subtract."""
        d2 = ((known[:, None, :] - self.others[None]) ** 2).sum(-1)
        log_z = logsumexp(_log_normal2(d2, s * s + self.fit.bandwidth_km ** 2), axis=1) - math.log(len(self.others))
        return self._sum(known, s * s, np.exp(-(log_z - log_z.min()))), log_z.min()

    def _sum(self, points: np.ndarray, variance: float, weights: np.ndarray | None = None) -> KernelSum:
        """A kernel sum tabulated over the box (`geo.kernels`; over at most FULL_POINTS points, summed in full)."""
        return KernelSum(points, variance, weights, domain=self.domain)

    def _log_mean_normal(self, kernel: KernelSum, x, var: float, count: int):
        """log mean over `count` points of N(x; o, var I) from a truncated sum's log S̃."""
        return log_kernel_sum(kernel, x) - math.log(2 * math.pi * var) - math.log(count)

    def logp(self, value):
        """log density of the ego network's normalised coordinates (2m,), Jacobian included."""
        fit, h2, m, n = self.fit, self.fit.bandwidth_km ** 2, self.m, len(self.others)
        x = self.offset + self.scale * pt.stack([value[:m], value[m:]], axis=1)  # (m, 2) km
        total = pt.sum(self._log_mean_normal(self._pop, x, h2, n)) + m * math.log(abs(self.scale[0] * self.scale[1]))
        log_z_target = {s: self._log_mean_normal(self._z[s], x[:1], s * s + h2, n)[0] for s in fit.sigma_km}
        for j, (known, sums) in enumerate(zip(self.anchors, self._near), start=1):
            terms = [pt.as_tensor(math.log(fit.weights[0]))]
            for w, s in zip(fit.weights[1:], fit.sigma_km):
                if w == 0:
                    continue
                near = _log_normal2(pt.sum((x[j] - x[0]) ** 2), s * s) - log_z_target[s]
                if len(known):  # the known friends' kernels over their normalisers (constants)
                    kernel, shift = sums[s]
                    near = pt.logaddexp(near, log_kernel_sum(kernel, x[j]) - math.log(2 * math.pi * s * s) - shift)
                terms.append(math.log(w) + near - math.log(len(known) + 1))
            total = total + pt.logsumexp(pt.stack(terms))
        return total

    def density_error(self) -> float:
        """The width of the range of log π̃ - log π over the ego network's positions, π̃ this
        log-density and π the full one: each sum's log errs within [-below, above] (its `error`);
        the m population sums add theirs, and each friend's log-sum-exp of near terms (the target's
        normaliser subtracted, the known friends' sum added, w_0 exact) moves within [-max(above_z,
        below_a), max(below_z, above_a)] over the scales. Truncated sums only: (3m - 2) λ."""
        pop = sum(self._pop.error)
        down = max((self._z[s].error[1] for s in self.fit.sigma_km), default=0.0)
        up = max((self._z[s].error[0] for s in self.fit.sigma_km), default=0.0)
        friends = 0.0
        for sums in self._near:
            anchors = [k.error for k, _ in sums.values()]
            friends += max([down] + [a[0] for a in anchors]) + max([up] + [a[1] for a in anchors])
        return self.m * pop + friends

    def submodel(self) -> DependenceModel:
        """The near-friend model of the ego network (module docstring) as one pm.CustomDist "pos":
        its log-density in PyTensor, exact draws for PyMC's prior (starting points). Declared
        multimodal (a kernel density over the known users' cities): the sampling engine draws it by
        SMC directly, without a NUTS run first whose chains would sit in different cities (DESIGN §7.1);
        each member's two coordinates a block, moved together by SMC's Metropolis-within-Gibbs kernel
        (one friend's city at a time, the others held: DESIGN §2.3)."""

        def random(anchor, rng=None, size=None):
            count = int(np.prod(size)) if size is not None else 1
            out = np.stack([self.draw(rng) for _ in range(count)])
            return out.reshape(anchor.shape if size is None else (*np.atleast_1d(size), *anchor.shape))

        with pm.Model() as m:
            pm.CustomDist("pos", np.zeros(2 * self.m), logp=lambda value, anchor: self.logp(value), random=random,
                          signature="(n)->(n)")
        return DependenceModel(m, tuples="pos", domains=Interval(0.0, 1.0), multimodal=True,
                              blocks=[(j, self.m + j) for j in range(self.m)])

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One exact draw (2m,) of the ego network, target first (`near.sample_conditional`)."""
        target = sample_conditional(rng, self.others, np.empty((0, 2)), self.fit, 1)
        km = [target] + [sample_conditional(rng, self.others, np.vstack([target, k]), self.fit, 1)
                         for k in self.anchors]
        u = (np.vstack(km) - self.offset) / self.scale
        return np.concatenate([u[:, 0], u[:, 1]])


def near_submodel(points_km: np.ndarray, friends: list[np.ndarray], fit: NearFit, members: np.ndarray
                  ) -> DependenceModel:
    """The near-friend model of the ego network (`NearEgo.submodel`); `points_km` are every user's
    positions on `plane_km(lat, lon, fit.box)`."""
    return NearEgo(np.asarray(points_km, float), friends, fit, members).submodel()
