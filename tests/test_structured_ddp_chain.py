"""ddp on a long 4-state chain by the structured engine (DESIGN §2.1b, §3.1), against a computation written here.

x_0 ~ π (the stationary law of a random transition matrix P), x_j | x_{j−1} ~ P[x_{j−1}], n = 2,000 days, the sum
of the days' values 0..3 released with Laplace noise. On a stationary chain P(X_{i+d} | X_i = t) = P^d[t] and
P(X_{i−d} | X_i = t) = P̃^d[t] with the reversed chain P̃[t, u] = π(u) P[u, t] / π(t), so N(i), the days whose law
changes with t by more than 1e-10 (DESIGN §2.1b), is read off the powers of P and P̃. The ddp adversary knows
every day outside N(i) and i; by the Markov property only the borders of the unknown run [lo, hi] around i enter,
and the known days' sum shifts y alone, so leak(i) = max over the borders' values, t ≠ t' and y of
log Σ_s P(S = s | t, borders) e^{−|y − s|/b} / Σ_s P(S = s | t', borders) e^{−|y − s|/b}, S the run's sum, from a
forward pass over (value, partial sum) along the run; each ratio is monotone between consecutive integers and
constant beyond the support, so y on the integers of the support suffices.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

from ddpbayes import DependenceModel
from ddpbayes.auditing import audit
from ddpbayes.mechanisms.laplace import Laplace

N, K = 2000, 4
TOLERANCE = 1e-10  # DESIGN §2.1b: a law that moves with t by more than this puts the day in N(i)


def stationary(P: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eig(P.T)
    pi = np.real(vectors[:, np.argmin(np.abs(values - 1))])
    return pi / pi.sum()


def reach(step: np.ndarray) -> list[int]:
    """The distances d ≥ 1 at which P(X_{i±d} | X_i = t) = step^d[t] moves with t by more than TOLERANCE (some
    entry against row 0), walked until the rows agree to 1e-15 in total variation."""
    laws, out, d = np.eye(len(step)), [], 0
    while 0.5 * np.abs(laws - laws[0]).sum(axis=1).max() > 1e-15:
        d += 1
        laws = laws @ step
        gap = np.abs(laws - laws[0]).max()
        assert abs(gap - TOLERANCE) > 1e-13, "a law within rounding of the tolerance: choose another seed"
        if gap > TOLERANCE:
            out.append(d)
    return out


def run_sums(P: np.ndarray, pi: np.ndarray, lo: int, hi: int, target: int, left: bool, right: bool) -> np.ndarray:
    """P(S = s, X_target = t, x_{hi+1} | x_{lo−1}) over the days lo..hi (S their sum): (ka, kb, t, s), ka = K with
    a left border, else 1 (the run starts at day 0, X_0 ~ π); likewise kb."""
    k, top = len(pi), (K - 1) * (hi - lo + 1)
    starts = P if left else pi[None]
    out = np.zeros((len(starts), k if right else 1, k, top + 1))
    for a, start in enumerate(starts):
        for t in range(k):
            f = np.zeros((k, top + 1))  # (value of the current day, partial sum)
            f[np.arange(k), np.arange(k)] = start
            for m in range(lo, hi + 1):
                if m > lo:
                    moved = P.T @ f
                    f = np.zeros_like(f)
                    for x in range(k):
                        f[x, x:] = moved[x, :top + 1 - x]
                if m == target:
                    f[np.arange(k) != t] = 0.0
            out[a, :, t] = (P.T @ f) if right else f.sum(axis=0, keepdims=True)
    return out


def run_leak(sums: np.ndarray, b: float) -> float:
    """max over the borders, t ≠ t' and y on the support's integers of the log-ratio of the Laplace mixtures."""
    s = np.arange(sums.shape[-1])
    kernel = np.exp(-np.abs(s[:, None] - s[None, :]) / b)  # (y, s)
    laws = sums / sums.sum(axis=-1, keepdims=True)
    logs = np.log(laws @ kernel.T)  # (ka, kb, t, y)
    return float((logs.max(axis=2) - logs.min(axis=2)).max())


def chain_model(P: np.ndarray, pi: np.ndarray) -> DependenceModel:
    with pm.Model() as m:
        prev = pm.Categorical("x0", p=pi)
        for j in range(1, N):
            prev = pm.Categorical(f"x{j}", p=pt.as_tensor_variable(P)[prev])
    return DependenceModel(m, tuples=[f"x{j}" for j in range(N)])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ddp_of_a_long_four_state_chain_against_its_runs(seed):
    """A 2,000-day chain under a random transition matrix, the targets of its first and last 80 days and 80 in the
    middle (every distinct run: N(i) reaches fewer than 80 days): N(i) from the powers of P and P̃, and leak(i)
    from the run's sum law given its borders (about 4 s CPU a seed, most of it the model's 2,000 variables)."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(K), size=K)
    pi = stationary(P)
    reverse = (pi[None, :] * P.T) / pi[:, None]
    ahead, back = reach(P), reach(reverse)
    assert max(ahead + back) < 80
    targets = [*range(80), *range(N // 2 - 40, N // 2 + 40), *range(N - 80, N)]
    b = float(rng.uniform(0.5, 3.0))
    found = audit(chain_model(P, pi), "sum", Laplace(b), "ddp", engine="structured", target=targets,
                  information=None)
    assert found.engine == "structured"
    memo: dict = {}
    for i in targets:
        near = {i + d for d in ahead if i + d < N} | {i - d for d in back if i - d >= 0}
        assert set(found.dependence_sets[i]) == near
        lo, hi = min(near | {i}), max(near | {i})
        assert near | {i} == set(range(lo, hi + 1))  # one run around i
        key = (i - lo, hi - i, lo > 0, hi < N - 1)
        if key not in memo:
            memo[key] = run_leak(run_sums(P, pi, lo, hi, i, lo > 0, hi < N - 1), b)
        assert found.per_target[i] == pytest.approx(memo[key], abs=1e-10), i
    assert found.leakage == pytest.approx(max(memo.values()), abs=1e-10)
