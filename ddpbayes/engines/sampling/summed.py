"""What the sampling engine does not sample: a model with no continuous variable is summed out
exactly, and N(i) comes from an exact engine where one reads the model (issue #27: MCMC only
over what cannot be summed; DESIGN §2.3).

Every tuple and latent of such a model has a finite support, so the structured engine (variable
elimination, for linear queries) or the exact engine (enumeration) gives the leakage exactly;
MCMC over those variables would only add Monte Carlo error (the forced sampling audit of the
household took 83 s for an error of 0.10). The result keeps the sampling engine's shape: an
interval of width zero and a diagnostics record that says the value was summed, by which engine.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ddpbayes.engines.base import AdversaryLeakage, Engine
from ddpbayes.engines.exact import ExactEngine
from ddpbayes.engines.gaussian import GaussianEngine
from ddpbayes.engines.sampling.mixture import same_at_every_draw
from ddpbayes.engines.structured import StructuredEngine
from ddpbayes.errors import InputError
from ddpbayes.model.supports import is_discrete
from ddpbayes.problem import Problem
from ddpbayes.queries import Query

_EXACT_ENGINES = (StructuredEngine(), ExactEngine())


def summing_engine(problem: Problem) -> Engine | None:
    """The exact engine that sums every variable of `problem`'s model out, or None when some
    variable is continuous (then it is sampled) or no exact engine takes the problem."""
    if not all(is_discrete(rv) for rv in problem.model.model.free_RVs):
        return None
    return next((e for e in _EXACT_ENGINES if e.supports(problem) is None), None)


def summed_leakage(problem: Problem, engine: Engine) -> list[AdversaryLeakage]:
    """`engine`'s exact leakage, as an interval of width zero that says how it was obtained."""
    how = (f"summed exactly by the {engine.name} engine: every variable of the model is discrete, so nothing is "
           "left to sample (no MCMC run)")
    return [replace(r, ci=(r.value, r.value), score=r.value,
                    diagnostics={"ok": True, "runs": 0, "summed": how, "exact": True})
            for r in engine.leakage(problem)]


def exact_dependence(problem: Problem) -> list[frozenset[int]] | None:
    """N(i) = {j : P(X_j | X_i = t) changes with t} from the first exact engine that reads the
    model (structured, with its quadrature over continuous latents; exact; gaussian), or None.
    The structural sets (a shared random ancestor) can be larger: a chain whose stay probability
    is p ~ Beta(2, 2) has P(X_1 = X_0) = E[p] = 1/2, so X_1 does not depend on X_0 although they
    share p, and ddp's adversary then knows X_1 (the exact engines' ddp 1.31055, the structural
    one's 1.21597 on bench_coverage's beta_chain)."""
    for engine in (*_EXACT_ENGINES, GaussianEngine()):
        if engine.supports(problem) is None:
            try:
                return engine.dependence_sets(problem)
            except InputError:
                continue
    return None


def summed_values(query: Query, x: np.ndarray) -> np.ndarray:
    """q of tuple draws x (chains, draws, n) or, summed, (chains, draws, C, n): (..., outputs). A
    summed run's configurations that do not change between draws (`Table.expand`'s view) are
    evaluated once, and their values broadcast to every draw (no copy per draw)."""
    with np.errstate(all="ignore"):
        if same_at_every_draw(x):
            q = np.asarray(query.values(x[0, 0]), dtype=float)
            return np.broadcast_to(q, (*x.shape[:-1], q.shape[-1]))
        return np.asarray(query.values(x.reshape(-1, x.shape[-1])), dtype=float).reshape(*x.shape[:-1], -1)
