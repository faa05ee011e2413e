"""Independent brute-force reference for leak(i, K) (DESIGN §1), written from the definition.

Nothing here imports ddpbayes. A joint law is a numpy array `joint` of shape (d_0, ..., d_{n-1})
(P(X_0 = values[0][a_0], ..., X_{n-1} = values[n-1][a_{n-1}])), enumerated state by state; the
supremum over outputs y is a maximum over an explicit grid of y (dense points, every
breakpoint, and points beyond the extreme query values). It deliberately does NOT use the
engine's "breakpoints and limits only" shortcut: the dense grid is what checks that shortcut.

    L(y | t, x_K) = sum_{x : x_i = t, x_K} P(x) p_M(y | q(x)) / P(X_i = t, X_K = x_K)
    leak(i, K)    = max over x_K (P(x_K) > 0), t, t' (P(t, x_K) > 0), y in grid of
                    log L(y | t, x_K) - log L(y | t', x_K)
"""

from __future__ import annotations

import itertools
import math

import numpy as np

# ----------------------------------------------------------------------------- log space


def logsumexp(a, axis: int | None = None, keepdims: bool = False) -> np.ndarray:
    """log Σ exp(a) along `axis`, shifted by the finite maximum: scipy.special.logsumexp's sum (to
    rounding) without its per-call overhead (about 0.1 ms), which dominated references that call it
    thousands of times."""
    a = np.asarray(a, dtype=float)
    top = np.max(a, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - top), axis=axis, keepdims=True)) + top
    return out if keepdims else (out.reshape(())[()] if axis is None else np.squeeze(out, axis=axis))

# ----------------------------------------------------------------------------- joint tables


def states(joint: np.ndarray, values) -> tuple[np.ndarray, np.ndarray]:
    """Every configuration of positive probability: X (S, n) values and p (S,)."""
    joint = np.asarray(joint, dtype=float)
    assert abs(joint.sum() - 1.0) < 1e-9, joint.sum()
    xs, ps = [], []
    for idx in itertools.product(*[range(s) for s in joint.shape]):
        p = joint[idx]
        if p > 0:
            xs.append([values[k][a] for k, a in enumerate(idx)])
            ps.append(p)
    return np.asarray(xs, dtype=float), np.asarray(ps, dtype=float)


def independent_joint(marginals) -> np.ndarray:
    """Outer product of 1-d probability vectors."""
    out = np.array(1.0)
    for m in marginals:
        out = np.multiply.outer(out, np.asarray(m, dtype=float))
    return out


# ----------------------------------------------------------------------------- kernels (log p(y|q) up to constants)


def laplace_log_kernel(b: float):
    """log prod_c Lap_b(y_c - q_c) without the constant -C log(2b) (it cancels in ratios)."""

    def k(y: np.ndarray, q: np.ndarray) -> np.ndarray:  # y (G, C), q (S, C) -> (G, S)
        return -np.abs(y[:, None, :] - q[None, :, :]).sum(axis=2) / b

    return k


def rr_log_kernel(eps: float):
    """Randomized response: each reported bit equals the true one with prob keep = e^eps/(1+e^eps)."""
    keep = math.exp(eps) / (1 + math.exp(eps))

    def k(y: np.ndarray, q: np.ndarray) -> np.ndarray:
        same = y[:, None, :] == q[None, :, :]
        return np.where(same, math.log(keep), math.log(1 - keep)).sum(axis=2)

    return k


# ----------------------------------------------------------------------------- y grids


def scalar_grid(qvals, b: float, dense: int = 2001) -> np.ndarray:
    """A y grid for a scalar query: a dense linspace well past both extremes, every breakpoint,
    the midpoints between breakpoints and two points beyond the extremes. Beyond the largest
    (smallest) query value the Laplace log-ratio is constant in y (the common factor e^{-y/b}
    (e^{+y/b}) cancels), so a point beyond each extreme gives the y -> +-inf limit exactly."""
    q = np.unique(np.asarray(qvals, dtype=float))
    lo, hi = q.min(), q.max()
    pad = 3 * b + 1
    pts = [np.linspace(lo - pad, hi + pad, dense), q, (q[:-1] + q[1:]) / 2, [lo - 1, hi + 1, lo - 50 * b, hi + 50 * b]]
    return np.unique(np.concatenate(pts))[:, None]


def coordinate_grid(qvals: np.ndarray, extra_per_gap: int = 3) -> np.ndarray:
    """A product grid for a vector query: per coordinate every breakpoint, `extra_per_gap`
    points inside every gap and one point beyond each extreme (the limit)."""
    axes = []
    for c in range(qvals.shape[1]):
        q = np.unique(qvals[:, c])
        pts = [q, [q.min() - 1.0, q.max() + 1.0]]
        for a, z in zip(q[:-1], q[1:]):
            pts.append(np.linspace(a, z, extra_per_gap + 2)[1:-1])
        axes.append(np.unique(np.concatenate(pts)))
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1)


def integer_grid(qvals, pad: int = 3) -> np.ndarray:
    """Every integer output from min q - pad to max q + pad (geometric noise has integer outputs)."""
    q = np.asarray(qvals, dtype=float)
    return np.arange(q.min() - pad, q.max() + pad + 1)[:, None]


def binary_outputs(n: int) -> np.ndarray:
    return np.asarray(list(itertools.product([0.0, 1.0], repeat=n)))


# ----------------------------------------------------------------------------- the leakage itself


def log_likelihoods(X, p, q, log_kernel, ygrid, target, known, known_values):
    """{t: log L(y | t, x_K) on the grid} for the values t possible given x_K."""
    known = list(known)
    sel = np.ones(len(p), dtype=bool)
    for k, v in zip(known, known_values):
        sel &= X[:, k] == v
    out = {}
    for t in np.unique(X[sel, target]):
        rows = sel & (X[:, target] == t)
        lp = np.log(p[rows])
        lk = log_kernel(ygrid, q[rows])  # (G, S_rows)
        out[float(t)] = logsumexp(lk + lp[None, :], axis=1) - logsumexp(lp)
    return out


def leak_grid(X, p, q, log_kernel, ygrid, target, known=()):
    """max over x_K, t, t' and y in `ygrid` of log L(y|t,x_K) - log L(y|t',x_K); also the argmax."""
    known = sorted(known)
    q = np.asarray(q, dtype=float)
    if q.ndim == 1:
        q = q[:, None]
    best, arg = 0.0, None
    kvals = {tuple(r) for r in X[:, known]} if known else {()}
    for kv in sorted(kvals):
        ll = log_likelihoods(X, p, q, log_kernel, ygrid, target, known, kv)
        ts = sorted(ll)
        for t, u in itertools.permutations(ts, 2):
            r = ll[t] - ll[u]
            g = int(np.argmax(r))
            if r[g] > best:
                best, arg = float(r[g]), (kv, t, u, ygrid[g])
    return best, arg


def leak_bruteforce(joint, values, weights, b, target, known=(), dense: int = 2001):
    """leak(target, known) for the linear query w·x released with Laplace(b), on a dense y grid."""
    X, p = states(joint, values)
    q = X @ np.asarray(weights, dtype=float)
    return leak_grid(X, p, q, laplace_log_kernel(b), scalar_grid(q, b, dense), target, known)[0]


def idp_posterior_odds(joint, values, weights, b, target, ygrid):
    """004 Thm. 1 route for a binary target: for each y, posterior odds P(X_i=1|y)/P(X_i=0|y)
    over prior odds P(X_i=1)/P(X_i=0), computed with Bayes' rule on the joint (plain
    probabilities, no log-space tricks). Returns the ratio on the grid."""
    X, p = states(joint, values)
    q = X @ np.asarray(weights, dtype=float)
    y = np.asarray(ygrid, dtype=float).reshape(-1)
    dens = np.exp(-np.abs(y[:, None] - q[None, :]) / b) / (2 * b)  # p(y | x) for each state
    joint_y = dens * p[None, :]  # P(x, y)
    is1 = X[:, target] == 1
    post1 = joint_y[:, is1].sum(axis=1) / joint_y.sum(axis=1)
    post0 = joint_y[:, ~is1].sum(axis=1) / joint_y.sum(axis=1)
    prior1, prior0 = p[is1].sum(), p[~is1].sum()
    return (post1 / post0) / (prior1 / prior0)


# ----------------------------------------------------------------------------- joints and closed forms written by hand

PH, PS, PB = 0.2, 0.8, 0.1  # household.build defaults: p_house, p_sick, p_base


def household_joint(n, ph=PH, ps=PS, pb=PB):
    """P(x) = ph prod ps^x (1-ps)^(1-x) + (1-ph) prod pb^x (1-pb)^(1-x)  (h marginalised)."""
    joint = np.zeros((2,) * n)
    for x in np.ndindex(*joint.shape):
        s = sum(x)
        joint[x] = ph * ps**s * (1 - ps) ** (n - s) + (1 - ph) * pb**s * (1 - pb) ** (n - s)
    return joint


def household_idp_closed_form(n, b, ph=PH, ps=PS, pb=PB):
    """Hand derivation for the count with Laplace(b), target i (all targets alike by symmetry).

    Given X_i = t, h has posterior P(h | t) ∝ P(h) p_h^t (1 - p_h)^{1-t} (p_1 = ps, p_0 = pb), and
    the other n-1 members are Binomial(n-1, p_h) given h. So

        L(y | t) = sum_h P(h|t) sum_s Bin(s; n-1, p_h) e^{-|y - t - s|/b} / (2b).

    The log-ratio is monotone between the breakpoints y in {0, ..., n} (004 Lemma 1) and constant
    beyond them; as y -> +-inf, L(y|t) e^{+-y/b}·2b -> sum_h P(h|t) e^{+-t/b} (1 - p_h + p_h e^{+-1/b})^{n-1}
    (the binomial moment generating function). The sup is the max over those n + 3 points."""
    prior = {1: ph, 0: 1 - ph}
    p_of = {1: ps, 0: pb}

    def post_h(t):
        w = {h: prior[h] * p_of[h] ** t * (1 - p_of[h]) ** (1 - t) for h in (0, 1)}
        z = w[0] + w[1]
        return {h: w[h] / z for h in (0, 1)}

    def log_l(y, t):
        ph_t = post_h(t)
        total = 0.0
        for h in (0, 1):
            for s in range(n):
                binom = math.comb(n - 1, s) * p_of[h] ** s * (1 - p_of[h]) ** (n - 1 - s)
                total += ph_t[h] * binom * math.exp(-abs(y - t - s) / b)
        return math.log(total)

    def log_limit(sign, t):
        ph_t = post_h(t)
        return math.log(
            sum(ph_t[h] * math.exp(sign * t / b) * (1 - p_of[h] + p_of[h] * math.exp(sign / b)) ** (n - 1) for h in (0, 1))
        )

    values = [abs(log_l(y, 1) - log_l(y, 0)) for y in range(n + 1)]
    values += [abs(log_limit(+1, 1) - log_limit(+1, 0)), abs(log_limit(-1, 1) - log_limit(-1, 0))]
    return max(values)


def markov_joint(n=4, p0=0.5, p_stay1=0.9, p_up=0.2):
    """x0 ~ Bern(p0), x_t ~ Bern(p_stay1 if x_{t-1} else p_up): P(x) = P(x0) prod_t P(x_t | x_{t-1})."""
    joint = np.zeros((2,) * n)
    for x in np.ndindex(*joint.shape):
        pr = p0 if x[0] else 1 - p0
        for t in range(1, n):
            p1 = p_stay1 if x[t - 1] else p_up
            pr *= p1 if x[t] else 1 - p1
        joint[x] = pr
    return joint
