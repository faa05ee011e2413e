"""A hidden-regime model of daily records: a hidden Markov chain of work regimes, one observed
"at home" record per day.

R_0..R_{n-1} is the person's work regime on each day, a Markov chain the release never shows
(latent, marginalised by the engines): with the defaults, k = 2 regimes, 0 = a spell at the
office and 1 = a spell working from home. Day 0 follows `initial` (uniform by default); each
next day keeps the regime or switches to another one with the probabilities of `transition`
(k x k, row = the previous day's regime; by default it stays with probability 0.8 and otherwise moves to
one of the other k - 1 regimes uniformly: spells of five days on average, a working week, whose
stationary law is the uniform start). The record of day k is X_k | R_k ~ `emission[R_k]`
(k x m): binary by default, X_k = 1 if the person is at home that day, with P(X_k = 1 | R_k = r)
rising from 0.2 (office) to 0.9 (home office), evenly spaced over the k regimes; m > 2 columns
give records in {0..m-1}. Tables are Python literals on the command line, e.g.
`-p k=3 -p "emission=[[0.9, 0.1], [0.5, 0.5], [0.2, 0.8]]"`.

The tuples are the records X_0..X_{n-1}. They are dependent only through the hidden regimes, so
unlike markov_chain.py the records are not a Markov chain: knowing the neighbouring days does
not screen a day off from the rest, as every day tells about the regime spell around it. This is
the temporal correlation of time-series releases that seed 003 cites (003 §II-A, refs. [19, 22,
37]), with the dependence coming from a hidden state as in household.py, here one per day.

Expected, for the count with Laplace(b) (--epsilon eps gives b = 1/eps):
- Equal emission rows: the records do not depend on the regime and are independent
  Bernoulli(emission[0][1]): every notion gives 1/b (003 Thm. 1, independent.py). So do equal
  transition rows with `initial` equal to that row (independent regimes, independent records).
- emission = identity (k = 2, X_k = R_k): markov_chain.py with p01 = p10 = 1 - 0.8 and its
  stationary start; for n = 5 and b = 1, idp = 1.96426 for days 0 and 4, 2.49980 for days 1
  and 3, 2.66253 for day 2 (markov_chain.py's own brute-force values).
- Defaults (n = 6, k = 2, b = 1), by brute force in plain numpy (the joint of records and
  regimes enumerated over its 4096 states, the regimes summed out, the mixture of Laplace
  densities of the count given X_i = t and x_K, the log-ratio maximised on the breakpoints
  y = 0..6 and both tails y -> +-inf): idp = 1.53276 for days 0 and 5, 1.76789 for days 1 and
  4, 1.86862 for days 2 and 3 (the chain is reversible from its stationary start, so day i and
  day n - 1 - i leak alike): between independence (1/b) and the same chain seen directly
  (emission = identity at n = 6: 1.97541, 2.53370, 2.76162), as the emission's noise hides part
  of the regime. Every day depends on every other, so ddp = idp. Every configuration has positive
  probability, so pdp with every other day known is dp = 1/b; but knowing both neighbours of
  day 2 (K = {1, 3}) still leaks 1.30153, not 1/b: the hidden regime lets the farther days speak.
  The pdp lattice is not monotone in |K|: for day 0, knowing the last day (K = {5}) leaks 1.55848
  > idp (a stronger adversary leaks more, DESIGN §3.2), K = {1} only 1.26722; the lattice's
  maximum is idp of the middle days, 1.86862.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pymc as pm

from ddpbayes import DependenceModel


def build(
    n: int = 6,
    k: int = 2,
    transition: Sequence[Sequence[float]] | None = None,
    initial: Sequence[float] | None = None,
    emission: Sequence[Sequence[float]] | None = None,
) -> DependenceModel:
    """Regimes r0..r{n-1} (latent) and records x0..x{n-1} (the tuples), built day by day."""
    if n < 1:
        raise ValueError(f"n must be at least 1 day, got {n}")
    if k < 2:
        raise ValueError(f"k must be at least 2 regimes, got {k}")
    transition = _probabilities("transition", default_transition(k) if transition is None else transition, (k, k))
    initial = _probabilities("initial", np.full(k, 1.0 / k) if initial is None else initial, (k,))
    emission = _probabilities("emission", default_emission(k) if emission is None else emission, (k, None))
    with pm.Model() as m:
        regime = pm.Categorical("r0", p=initial)
        _record("x0", emission, regime)
        for day in range(1, n):
            regime = pm.Categorical(f"r{day}", p=pm.math.constant(transition)[regime])
            _record(f"x{day}", emission, regime)
    return DependenceModel(m, tuples=[f"x{day}" for day in range(n)])


def default_transition(k: int) -> np.ndarray:
    """Stay in the regime with probability 0.8, else move to one of the other k - 1 uniformly."""
    return np.where(np.eye(k, dtype=bool), 0.8, 0.2 / (k - 1))


def default_emission(k: int) -> np.ndarray:
    """P(at home | regime r) evenly spaced from 0.2 to 0.9: rows (P(x = 0), P(x = 1))."""
    home = np.linspace(0.2, 0.9, k)
    return np.stack([1.0 - home, home], axis=1)


def _record(name: str, emission: np.ndarray, regime) -> None:
    """The day's record given its regime: Bernoulli for a binary table, Categorical otherwise."""
    if emission.shape[1] == 2:
        pm.Bernoulli(name, p=pm.math.constant(emission[:, 1])[regime])
    else:
        pm.Categorical(name, p=pm.math.constant(emission)[regime])


def _probabilities(name: str, table, shape: tuple[int | None, ...]) -> np.ndarray:
    """`table` as a float array of `shape` (None: any size from 2 on) whose last axis holds
    probability vectors; ValueError saying what is wrong otherwise."""
    a = np.asarray(table, dtype=float)
    if a.ndim != len(shape) or any(a.shape[d] != size if size else a.shape[d] < 2 for d, size in enumerate(shape)):
        want = " x ".join(str(size) if size else "m (m >= 2)" for size in shape)
        raise ValueError(f"{name} must be a {want} table, got shape {a.shape}")
    if not np.all((a >= 0) & (a <= 1)) or not np.allclose(a.sum(axis=-1), 1.0, rtol=0, atol=1e-9):
        raise ValueError(f"{name} must hold probability vectors (entries in [0, 1] summing to 1), got {a.tolist()}")
    return a
