"""The near-friend model (near.py, DESIGN §6.1) as a PyMC model: its pseudo-likelihood
Σ_i log p(x_i | x_-i) over the users with friends (Besag 1975), one pm.Potential written in
PyTensor that equals the sum of `near.conditional_logpdf` exactly. The population of user i is
everyone else, so

    Z^(i)_{f,s} = (Σ_k N(x_f; x_k, v_s I) - N(x_f; x_i, v_s I)) / (n - 1),   v_s = σ_s² + h²,

the sum over all n users (f's own term included, as in the KDE of i's others) taken once per
friend-user from a (friend-users × n) matrix of squared distances, the target's own term taken
out per edge (at most half the sum, since f's own term is at least as large: no cancellation).
The mean over a user's friends is a log-sum-exp per user, users bucketed by degree into padded
matrices (each at most twice its edges). Users without friends add only their population term,
a constant, and are left out.

The sums over all n users cost most: `LogKernelSums` does them in numpy (one sorted matrix,
terms below e^-50 skipped), about 16 ms per log-density and gradient against 110 to 240 ms for
the same sums as a compiled PyTensor graph. Priors: w ~ Dirichlet(1, ..., 1) over (population,
scale 1, ..., scale S); log σ ~ N(log 100, 2), ordered (σ_1 < ... < σ_S, which names the
components). `ddpbayes fit --template graph --model near` (fitting/graph.py) and
models/gowalla_near.py fit it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

SCALES = 2  # DESIGN §6.1: two scales score higher than one on held-out friendships


@dataclass(frozen=True)
class NearData:
    """The constants of the pseudo-likelihood (module docstring): positions (n, 2) km, bandwidth
    h, the users with friends (`targets`) and their population terms log p(x_i), the directed
    edges (target i, friend f) with their squared distances `d2` and the target's degree, the
    friend-users' squared distances to every user (`d2_friends`, row `frow[e]` for edge e), and
    `buckets`: (rows into `targets`, edge index matrix, mask) per degree class, one row per target."""

    points: np.ndarray
    h: float
    targets: np.ndarray
    log_pop: np.ndarray
    edge_target: np.ndarray
    edge_friend: np.ndarray
    d2: np.ndarray
    degree: np.ndarray
    d2_friends: np.ndarray
    frow: np.ndarray
    buckets: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]

    @property
    def bucket_order(self) -> np.ndarray:
        """The targets' rows (into `targets`) in the order `target_loglik` returns them."""
        return np.concatenate([rows for rows, _, _ in self.buckets])


def near_data(points: np.ndarray, pairs: np.ndarray, h: float) -> NearData:
    """The constants for friendships `pairs` (E, 2) among `points` (n, 2) km (module docstring)."""
    n = len(points)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    i = np.concatenate([pairs[:, 0], pairs[:, 1]])
    f = np.concatenate([pairs[:, 1], pairs[:, 0]])
    order = np.lexsort((f, i))
    i, f = i[order], f[order]
    degree = np.bincount(i, minlength=n)
    targets = np.flatnonzero(degree)
    d2_all = ((points[targets, None, :] - points[None, :, :]) ** 2).sum(axis=-1)  # (T, n)
    d2_all[np.arange(len(targets)), targets] = np.inf
    log_pop = logsumexp(-d2_all / (2 * h * h), axis=1) - math.log(2 * math.pi * h * h) - math.log(n - 1)
    friend_users, frow = np.unique(f, return_inverse=True)
    d2_friends = ((points[friend_users, None, :] - points[None, :, :]) ** 2).sum(axis=-1)
    start = np.concatenate([[0], np.cumsum(degree[targets])])
    classes = np.ceil(np.log2(degree[targets])).astype(int)
    buckets = []
    for c in np.unique(classes):
        rows = np.flatnonzero(classes == c)
        width = int(degree[targets[rows]].max())
        offset = np.arange(width)
        mask = offset[None, :] < degree[targets[rows]][:, None]
        buckets.append((rows, np.where(mask, start[rows][:, None] + offset[None, :], 0), mask))
    return NearData(points, float(h), targets, log_pop, i, f, ((points[i] - points[f]) ** 2).sum(axis=1),
                    degree[i], d2_friends, frow, tuple(buckets))


def _log_kernel_sums_op():
    """The PyTensor Op class (built on first use: PyTensor loads only when a model is built)."""
    import pytensor.tensor as pt
    from pytensor.gradient import DisconnectedType
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op

    class LogKernelSums(Op):
        """At a scalar v, for a constant (m, n) matrix of squared distances each of whose rows holds a
        0: the (m,) log Σ_k exp(-d2[r, k] / (2 v)), and as a second output their derivatives in v (the
        gradient). The rows are sorted once and the terms with d2 > 100 v skipped (each below e^-50, all
        of them below n e^-50 < 1e-18 of a sum >= 1: within float64 rounding); numpy's vectorised exp,
        5 to 10 times faster here than the compiled graph of the same sums."""

        def __init__(self, d2: np.ndarray):
            self.d2 = np.sort(d2, axis=1)
            self.column_min = self.d2.min(axis=0)  # non-decreasing: past column c, every row is past column_min[c]

        def make_node(self, v):
            return Apply(self, [pt.as_tensor_variable(v)], [pt.dvector(), pt.dvector()])

        def perform(self, node, inputs, outputs):
            v = float(inputs[0])
            d2 = self.d2[:, :np.searchsorted(self.column_min, 100.0 * v)]
            e = np.exp(d2 * (-0.5 / v))
            total = e.sum(axis=1)
            outputs[0][0] = np.log(total)
            outputs[1][0] = np.einsum("ij,ij->i", e, d2) / (total * 2.0 * v * v)

        def grad(self, inputs, output_grads):
            if not isinstance(output_grads[1].type, DisconnectedType):
                raise NotImplementedError("LogKernelSums: the derivative output has no gradient")
            return [pt.dot(output_grads[0], self(inputs[0])[1])]

    return LogKernelSums


def target_loglik(data: NearData, w, sigma, scales: int):
    """log p(x_i | x_-i) of each user with friends (module docstring), in `data.bucket_order`, as a
    PyTensor vector of the weights w (scales + 1,) and the scales σ (scales,) in km."""
    import pytensor.tensor as pt

    n, h2 = len(data.points), data.h**2
    sums = _log_kernel_sums_op()(data.d2_friends)
    terms = []
    for s in range(scales):
        v = sigma[s] ** 2 + h2
        log_sum = sums(v)[0] - pt.log(2 * np.pi * v)  # (friend-users,)
        own = -data.d2 / (2 * v) - pt.log(2 * np.pi * v) - log_sum[data.frow]  # the target's share of f's sum
        log_z = log_sum[data.frow] + pt.log1p(-pt.exp(own)) - math.log(n - 1)
        terms.append(pt.log(w[s + 1]) - data.d2 / (2 * sigma[s] ** 2) - pt.log(2 * np.pi * sigma[s] ** 2) - log_z
                     - np.log(data.degree))
    per_edge = pt.concatenate(terms)
    edges = len(data.d2)
    parts = []
    for rows, index, mask in data.buckets:
        values = pt.switch(np.tile(mask, scales), per_edge[np.concatenate([index + s * edges for s in range(scales)],
                                                                          axis=1)], -np.inf)
        population = pt.log(w[0]) * pt.ones((len(index), 1))
        parts.append(data.log_pop[rows] + pt.logsumexp(pt.concatenate([population, values], axis=1), axis=1))
    return pt.concatenate(parts)


def pseudo_loglik(data: NearData, w, sigma, scales: int):
    """Σ over the users with friends of log p(x_i | x_-i), a PyTensor scalar."""
    return target_loglik(data, w, sigma, scales).sum()


def pymc_model(data: NearData, scales: int = SCALES):
    """The PyMC model (module docstring): w ~ Dirichlet(1), ordered log σ ~ N(log 100, 2), the
    pseudo-likelihood as the Potential "pseudo_loglik"."""
    import pymc as pm
    import pytensor.tensor as pt

    with pm.Model() as m:
        w = pm.Dirichlet("w", a=np.ones(scales + 1))
        log_sigma = pm.Normal("log_sigma", mu=math.log(100.0), sigma=2.0, shape=scales,
                              transform=pm.distributions.transforms.ordered,
                              initval=np.linspace(math.log(30.0), math.log(300.0), scales))
        sigma = pm.Deterministic("sigma", pt.exp(log_sigma))
        pm.Potential("pseudo_loglik", pseudo_loglik(data, w, sigma, scales))
    return m


def target_loglik_function(data: NearData, scales: int = SCALES):
    """A compiled function (w, σ) -> log p(x_i | x_-i) per user with friends, in `data.bucket_order`
    (the pointwise terms of LOO, fitting/graph.py)."""
    import pytensor
    import pytensor.tensor as pt

    w, sigma = pt.dvector("w"), pt.dvector("sigma")
    return pytensor.function([w, sigma], target_loglik(data, w, sigma, scales))
