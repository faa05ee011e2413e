"""Independent draws of the query's answers given the adversary's knowledge x_K and the target's value t
(DESIGN §2.6): what a program is run on. A certified bound needs independent draws (Clopper–Pearson counts
Bernoulli trials), so the records are drawn exactly, never by MCMC:

- `EnumeratedRecords`: a finite model the exact engine enumerates; the states with X_i = t and X_K = x_K are
  drawn in proportion to their probability (latents are already summed out of the table);
- `GaussianRecords`: a jointly Gaussian model (the gaussian engine's reading of it): the other tuples given
  (x_K, t) are Gaussian with the Schur complement's covariance, drawn exactly;
- `ForwardRecords`: any model whose target and known tuples are discrete: prior draws of every tuple
  (`pm.draw`, ancestral sampling) kept when they match (t, x_K) — rejection sampling, exact for the
  conditional law, refused when the event is too rare to be drawn in the budget.

Each chooses the adversary's (x_K, t, t') from what it knows before any program runs (`candidate`), so the
choice costs the certificate nothing: the exact laws of the answers for the enumerated model (the pair whose
answer laws differ most in total variation), the ends of the target's domain with x_K at its mean for a Gaussian
model, a pilot of prior draws otherwise.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ddpbayes.engines.exact.joint import JointTable, joint_table
from ddpbayes.engines.gaussian.graph import tuple_covariance, tuple_mean
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


class GaussianRecords(Records):
    """Exact draws of a jointly Gaussian model's tuples given X_i = t and X_K = x_K (`engines.gaussian.graph`)."""

    def __init__(self, problem: Problem):
        self.problem = problem
        self.cov = tuple_covariance(problem.model)
        self.mean = tuple_mean(problem.model)

    def candidate(self, adv: Adversary) -> Candidate | None:
        """t, t' the ends of the target's domain (the widest pair: the gaussian engine's witness), x_K its mean."""
        dom = self.problem.model.domains[adv.target]
        if not (math.isfinite(dom.lo) and math.isfinite(dom.hi)) or dom.hi <= dom.lo:
            raise InputError(f"the program engine compares two values of the target: tuple {adv.target}'s domain {dom} "
                             "needs finite ends (give the model a bounded domain)")
        known = {k: float(self.mean[k]) for k in sorted(adv.known)}
        return Candidate(known, float(dom.hi), float(dom.lo),
                         "the ends of the target's domain, the known tuples at their means (a Gaussian model)")

    def answers(self, adv: Adversary, known_values: dict[int, float], t: float, n: int,
                rng: np.random.Generator) -> np.ndarray:
        given = [adv.target, *sorted(known_values)]
        rest = [k for k in range(len(self.mean)) if k not in given]
        x_given = np.array([t, *(known_values[k] for k in sorted(known_values))])
        x = np.empty((n, len(self.mean)))
        x[:, given] = x_given
        if rest:
            c_gg = self.cov[np.ix_(given, given)]
            gain = np.linalg.solve(c_gg, self.cov[np.ix_(given, rest)]).T  # (rest, given)
            mu = self.mean[rest] + gain @ (x_given - self.mean[given])
            cov = self.cov[np.ix_(rest, rest)] - gain @ self.cov[np.ix_(given, rest)]
            values, vectors = np.linalg.eigh((cov + cov.T) / 2)
            root = vectors * np.sqrt(np.clip(values, 0.0, None))
            x[:, rest] = mu + rng.standard_normal((n, len(rest))) @ root.T
        with np.errstate(over="ignore", invalid="ignore"):
            q = np.asarray(self.problem.query.values(x), dtype=float)
        if not np.all(np.isfinite(q)):
            raise InputError("the query's values are not finite on some draw of the records")
        return q


class ForwardRecords(Records):
    """Prior draws of the tuples kept when they match (t, x_K): ancestral sampling of the PyMC graph,
    vectorised once (`prior_sampler`) so that a batch of BATCH draws is one call."""

    def __init__(self, problem: Problem):
        self.problem = problem
        self._prior = prior_sampler(problem.model)  # draw(n, rng) -> (n, tuples)

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


def forward_reason(model) -> str | None:
    """Why prior draws are not the model's law (it conditions on data), or None."""
    m = model.model
    if m.observed_RVs or m.potentials:
        return "the model conditions on data (observed variables or potentials): its prior draws are not its law"
    return None


def prior_sampler(model):
    """draw(n, rng) -> (n, tuples): n independent prior draws of the tuple slots in one call. Each random variable
    whose parameters depend on no other one is given a batch dimension of size n; PyTensor vectorises the rest of
    the graph through them (`vectorize_graph`), so the draws are ancestral samples of the whole model."""
    from pymc.distributions.shape_utils import change_dist_size
    from pymc.pytensorf import compile as compile_pymc, reseed_rngs
    from pytensor.graph.replace import vectorize_graph
    from pytensor.graph.traversal import ancestors
    from pytensor.tensor.random.type import RandomGeneratorType
    import pytensor.tensor as pt

    rvs = model.model.basic_RVs
    roots = {rv for rv in rvs if not any(a in set(rvs) for a in ancestors(rv.owner.inputs))}
    n = pt.iscalar("draws")
    exprs = [s.expr for s in model.slots]
    try:
        batched = vectorize_graph(exprs, replace={rv: change_dist_size(rv, (n,), expand=True) for rv in roots})
        fn = compile_pymc([n], batched, random_seed=0)
    except Exception as error:  # an op PyTensor cannot vectorise: say which
        raise InputError(f"the model's prior cannot be drawn in batches ({type(error).__name__}: "
                         f"{' '.join(str(error).split())[:200]})") from None
    rngs = [v for v in fn.get_shared() if isinstance(v.type, RandomGeneratorType)]

    def draw(size: int, rng: np.random.Generator) -> np.ndarray:
        reseed_rngs(rngs, rng.integers(2**32, size=len(rngs)))
        return np.column_stack([np.asarray(d, dtype=float).reshape(size) for d in fn(size)])

    return draw

