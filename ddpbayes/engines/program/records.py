"""Independent draws of the query's answers given the adversary's knowledge x_K and the target's value t
(DESIGN §2.6): what a program is run on. A certified bound needs independent draws (Clopper–Pearson counts
Bernoulli trials), so the records are drawn exactly, never by MCMC:

- `EnumeratedRecords`: a finite model the exact engine enumerates; the states with X_i = t and X_K = x_K are
  drawn in proportion to their probability (latents are already summed out of the table);
- `ForwardRecords`: any model whose target and known tuples are discrete: prior draws of every tuple
  (`pm.draw`, ancestral sampling) kept when they match (t, x_K) — rejection sampling, exact for the
  conditional law, refused when the event is too rare to be drawn in the budget.

Each chooses the adversary's (x_K, t, t') from what it knows before any program runs (`candidate`), so the
choice costs the certificate nothing: the exact laws of the answers for the enumerated model (the pair whose
answer laws differ most in total variation), a pilot of prior draws otherwise.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import pymc as pm

from ddpbayes.engines.exact.joint import JointTable, joint_table
from ddpbayes.errors import InputError
from ddpbayes.numerics import logsumexp
from ddpbayes.problem import Adversary, Problem

PILOT = 20_000  # prior draws that choose x_K, t, t' for a model that is not enumerated
BATCH = 50_000  # prior draws per batch of the rejection sampler
MIN_ACCEPT = 1e-4  # refuse an event (t, x_K) rarer than this under the prior: rejection would not finish


@dataclass(frozen=True)
class Candidate:
    """The adversary's pair to certify: known values x_K, the target values t and t', and why it was chosen."""

    known_values: dict[int, float]
    t: float
    t_prime: float
    why: str


class Records(ABC):
    """The query's answers (n, C) drawn given (x_K, X_i = t), independently."""

    @abstractmethod
    def candidate(self, adv: Adversary) -> Candidate | None:
        """The (x_K, t, t') to certify for `adv`; None when no x_K leaves two possible target values."""

    @abstractmethod
    def answers(self, adv: Adversary, known_values: dict[int, float], t: float, n: int,
                rng: np.random.Generator) -> np.ndarray:
        """`n` independent draws of the query's answers given X_K = x_K and X_i = t: (n, C)."""


class EnumeratedRecords(Records):
    """Draws from the enumerated joint of a finite model (`engines.exact.joint`)."""

    def __init__(self, problem: Problem):
        self.table: JointTable = joint_table(problem.model, problem.settings.max_states)
        with np.errstate(over="ignore", invalid="ignore"):
            self.q = np.asarray(problem.query.values(self.table.x), dtype=float)
        if not np.all(np.isfinite(self.q)):
            raise InputError("the query's values overflow double precision: rescale its weights")
        self.row = np.unique(self.q, axis=0, return_inverse=True)[1].reshape(-1)  # each state's distinct answer

    def candidate(self, adv: Adversary) -> Candidate | None:
        """The x_K group and pair (t, t') whose answer laws differ most in total variation (ties: the first)."""
        table, known = self.table, sorted(adv.known)
        group = table.ids(known)
        codes = table.codes[:, adv.target]
        n_t, n_rows = len(table.values[adv.target]), int(self.row.max()) + 1
        law = np.zeros((int(group.max()) + 1, n_t, n_rows))
        np.add.at(law, (group, codes, self.row), np.exp(table.logp - logsumexp(table.logp, axis=0)))
        mass = law.sum(axis=2)
        best = None
        for g in range(len(law)):
            possible = np.flatnonzero(mass[g] > 0)
            for a, b in itertools.combinations(possible, 2):
                tv = 0.5 * np.abs(law[g, a] / mass[g, a] - law[g, b] / mass[g, b]).sum()
                if best is None or tv > best[0] + 1e-12:
                    best = (tv, g, a, b)
        if best is None:
            return None
        tv, g, a, b = best
        member = int(np.flatnonzero(group == g)[0])
        values = table.values[adv.target]
        return Candidate({k: float(table.x[member, k]) for k in known}, float(values[a]), float(values[b]),
                         f"the known values and target pair whose answer laws differ most (total variation {tv:.4g}), "
                         "from the enumerated joint")

    def answers(self, adv: Adversary, known_values: dict[int, float], t: float, n: int,
                rng: np.random.Generator) -> np.ndarray:
        x = self.table.x
        keep = x[:, adv.target] == t
        for k, v in known_values.items():
            keep &= x[:, k] == v
        states = np.flatnonzero(keep)
        logp = self.table.logp[states]
        return self.q[states[rng.choice(len(states), size=n, p=np.exp(logp - logsumexp(logp, axis=0)))]]


class ForwardRecords(Records):
    """Prior draws of the tuples (ancestral sampling, `pm.draw`), kept when they match (t, x_K)."""

    def __init__(self, problem: Problem):
        self.problem = problem
        model = problem.model
        self.exprs = [s.rv if s.index is None else s.rv[s.index] for s in model.slots]

    def _prior(self, n: int, rng: np.random.Generator) -> np.ndarray:
        seed = int(rng.integers(2**32))
        draws = pm.draw(self.exprs, draws=n, random_seed=seed)
        return np.column_stack([np.asarray(d, dtype=float).reshape(n) for d in draws])

    def candidate(self, adv: Adversary) -> Candidate | None:
        """The most frequent x_K among PILOT prior draws with two target values, and its two most frequent ones."""
        rng = np.random.default_rng([self.problem.settings.seed, 7, adv.target, *sorted(adv.known)])
        x = self._prior(PILOT, rng)
        known = sorted(adv.known)
        keys, counts = np.unique(x[:, known], axis=0, return_counts=True) if known else (np.zeros((1, 0)), [PILOT])
        for j in np.argsort(-np.asarray(counts), kind="stable"):
            match = np.all(x[:, known] == keys[j], axis=1) if known else np.ones(PILOT, dtype=bool)
            values, freq = np.unique(x[match, adv.target], return_counts=True)
            if len(values) >= 2:
                a, b = np.argsort(-freq, kind="stable")[:2]
                return Candidate({k: float(v) for k, v in zip(known, keys[j])}, float(values[a]), float(values[b]),
                                 f"the most frequent known values and target values in {PILOT:,} prior draws")
        return None

    def answers(self, adv: Adversary, known_values: dict[int, float], t: float, n: int,
                rng: np.random.Generator) -> np.ndarray:
        kept, drawn = [], 0
        need = n
        while need > 0:
            x = self._prior(BATCH, rng)
            drawn += BATCH
            match = x[:, adv.target] == t
            for k, v in known_values.items():
                match &= x[:, k] == v
            kept.append(x[match][:need])
            need -= len(kept[-1])
            if need > 0 and drawn >= 20 * BATCH and (n - need) < MIN_ACCEPT * drawn:
                raise InputError(f"the event X_{adv.target} = {t:g} with the known values is too rare under the "
                                 f"prior to be drawn by rejection ({n - need} of {drawn:,} prior draws)")
        x = np.concatenate(kept)
        with np.errstate(over="ignore", invalid="ignore"):
            q = np.asarray(self.problem.query.values(x), dtype=float)
        if not np.all(np.isfinite(q)):
            raise InputError("the query's values are not finite on some prior draw")
        return q
