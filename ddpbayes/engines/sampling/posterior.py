"""Posterior route: the adversary's own inference (DESIGN §2.3; 004 Theorem 1).

The adversary observes the output y and the known values x_K, samples the posterior of the
database by MCMC (the model conditioned on x_K, with the mechanism's log-density at y as one
more potential), and compares the posterior odds of two target values with their prior odds;
by Bayes' rule, log(posterior odds / prior odds) = log L(y | t) - log L(y | t'), the quantity
of the likelihood route, which it cross-checks. Needs a discrete target (odds of events
X_i = t). Outputs tried: the prior predictive's extremes pushed out by the noise scale (where
the ratio reaches its limits) and its median. As in the likelihood route (`estimate`), (x_K, y,
t, t') is chosen on the choosing runs and bounded on fresh runs of the chosen prior and
posterior (`bounding`). The runs sample every variable (the target's draws are counted).
"""

from __future__ import annotations

import math

import arviz as az
import numpy as np
import pymc as pm
import pytensor

from ddpbayes.engines.base import AdversaryLeakage, Witness
from ddpbayes.engines.sampling.estimate import Z95, split_chains
from ddpbayes.engines.sampling.runs import (Chains, Run, bounding, quiet_arviz, roles, sample_event, sample_events,
                                            summarise)
from ddpbayes.errors import InputError
from ddpbayes.model import Finite
from ddpbayes.model.condition import TUPLES, ImpossibleEvent, condition
from ddpbayes.parallel import map_units
from ddpbayes.problem import Adversary, Problem
from ddpbayes.settings import RunSettings


def posterior_leakage(problem: Problem, adv: Adversary, known_sets, settings: RunSettings) -> AdversaryLeakage:
    model = problem.model
    dom = model.domains[adv.target]
    if not isinstance(dom, Finite):
        raise InputError("--method posterior compares odds of target values: it needs a discrete target")
    if problem.query.weights(model.n) is None or not problem.mechanism.laplace:
        raise InputError("--method posterior conditions on one noisy output: it needs a scalar linear query (sum, count, "
                         "mean, linear:) with Laplace or geometric noise; use the likelihood route")
    w, b = problem.query.weights(model.n), problem.mechanism.scale
    levels = np.asarray(dom.values)
    sample_events(model, [dict(known) for known in known_sets], settings, "sampling (priors)")
    priors = []
    for known in known_sets:
        try:
            priors.append((known, sample_event(model, dict(known), settings)))
        except ImpossibleEvent:
            continue
    jobs = [(model, known, w, b, float(y), settings) for known, prior in priors for y in _outputs(prior.x @ w, b)]
    _posterior_runs(jobs)
    best, runs = None, []
    for known, prior in priors:
        runs.append((prior, prior.x @ w))
        for y in _outputs(prior.x @ w, b):
            post = _posterior_run(model, known, w, b, float(y), settings)
            runs.append((post, post.x @ w))
            log_odds = _log_odds(post, adv.target, levels) - _log_odds(prior, adv.target, levels)
            a, c = int(np.argmax(log_odds)), int(np.argmin(log_odds))
            if best is None or log_odds[a] - log_odds[c] > best[0]:
                best = (log_odds[a] - log_odds[c], known, a, c, float(y))
    if best is None:
        raise InputError(f"no x_K value with at least two possible target values for {adv}")
    score, known, a, c, y = best
    held, se, fresh = _bound(model, adv.target, levels[[a, c]], known, w, b, y, settings)
    diagnostics = {**summarise([r.diagnose(q) for r, q in [*runs, *((r, r.x @ w) for r in fresh)]]),
                   "method": "posterior", "held_out": held, "held_out_se": se, **roles(settings, "prior and posterior, every x_K and output tried", "the chosen prior and posterior"),
                   "pass_blocked": "the posterior route bounds the leakage at the outputs it tried only; "
                                   "a pass needs the likelihood route"}
    ci = (max(0.0, held - Z95 * se), max(0.0, held) + Z95 * se)
    witness = Witness(adv, dict(known), float(levels[a]), float(levels[c]), (y,))
    return AdversaryLeakage(adv, max(held, 0.0), witness, ci=ci, diagnostics=diagnostics, score=score)


def _bound(model, target: int, pair: np.ndarray, known: dict, w: np.ndarray, b: float, y: float,
           settings: RunSettings) -> tuple[float, float, list[Run]]:
    """The chosen log odds ratio on fresh runs (`bounding`: other seeds, twice the chains) of the
    prior and the posterior at the chosen (x_K, y): the first half of the chains estimates, the
    larger of the two halves' standard errors scales it (as the likelihood route, `estimate`)."""
    fresh = bounding(settings)
    prior = sample_event(model, dict(known), fresh)
    post = _posterior_run(model, known, w, b, y, fresh)

    def measure(part: slice) -> tuple[float, float]:
        odds = _log_odds(post, target, pair, part) - _log_odds(prior, target, pair, part)
        return float(odds[0] - odds[1]), _se(post, prior, target, pair, part)

    held, se, _ = split_chains(fresh.chains, measure)
    return held, se, [prior, post]


def _outputs(q: np.ndarray, b: float) -> np.ndarray:
    return np.unique([q.min() - b, float(np.median(q)), q.max() + b])


def _posterior_runs(jobs: list[tuple]) -> None:
    """The posterior runs not drawn yet, a run per unit of work (`parallel.map_units`), into the
    model's cache."""
    if not jobs:
        return
    model, settings = jobs[0][0], jobs[0][-1]
    todo = [job for job in jobs if not model.has_memo("sampling", _posterior_key(*job[1:]))]
    quiet = [(*job[:-1], RunSettings.of(settings, progress=False)) for job in todo]
    for job, run in zip(todo, map_units(_posterior_unit, quiet, settings, "sampling (posteriors)", "MCMC runs")):
        model.memo("sampling", _posterior_key(*job[1:]), lambda run=run: run)


def _posterior_unit(job: tuple) -> Run:
    return _posterior_run(*job)


def _posterior_key(known: dict, w: np.ndarray, b: float, y: float, settings: RunSettings) -> tuple:
    return ("posterior", tuple(sorted(known.items())), tuple(w), b, y, settings.draws, settings.tune, settings.chains,
            settings.seed, settings.role)


def _posterior_run(model, known: dict, w: np.ndarray, b: float, y: float, settings: RunSettings) -> Run:
    """MCMC draws of the tuples given x_K and the noisy output y (cached on the model)."""
    key = _posterior_key(known, w, b, y, settings)

    def draw() -> Run:
        chains, output = _posterior_chains(model, known, w, b)
        chains.cond.pin(known)
        output.set_value(y)
        return chains.run(settings, key if settings.role == "choose" else (key, settings.role))

    return model.memo("sampling", key, draw)


def _posterior_chains(model, known: dict, w: np.ndarray, b: float) -> tuple[Chains, pytensor.compile.SharedVariable]:
    """The model given x_K and an output (a shared value), with its steps compiled once."""
    def build() -> tuple[Chains, pytensor.compile.SharedVariable]:
        cond = condition(model, known)
        with cond.model:
            output = pytensor.shared(0.0, name="ddp_output_value")
            pm.Potential("ddp_output", -abs(output - pm.math.dot(cond.model[TUPLES], w)) / b)
        return Chains(cond), output

    return model.memo("sampling", ("posterior-chains", frozenset(known), tuple(w), b), build)


def _frequencies(run: Run, target: int, levels: np.ndarray, chains: slice = slice(None)) -> np.ndarray:
    x = run.x[chains, :, target]
    counts = np.array([(x == v).sum() for v in levels], dtype=float)
    return (counts + 0.5) / (x.size + 0.5 * len(levels))  # Jeffreys: no log of zero


def _log_odds(run: Run, target: int, levels: np.ndarray, chains: slice = slice(None)) -> np.ndarray:
    return np.log(_frequencies(run, target, levels, chains))


def _se(post: Run, prior: Run, target: int, pair: np.ndarray, chains: slice = slice(None)) -> float:
    """Delta-method standard error of the log odds ratio on some chains, ESS-corrected.

    Within one run the frequencies of two levels are multinomial: Var(log p_a - log p_c) =
    ((1 - p_a)/p_a + (1 - p_c)/p_c + 2) / N, the +2/N from Cov(p_a, p_c) = -p_a p_c / N (for
    a binary target p_c = 1 - p_a and this is 1/(N p (1 - p))). The two runs are independent."""
    var = 0.0
    for run in (post, prior):
        x = run.x[chains, :, target]
        terms, ess = 2.0, float(x.size)
        for v in pair:
            ind = (x == v).astype(float)
            p = max(ind.mean(), 0.5 / ind.size)
            terms += (1 - p) / p
            if np.ptp(ind) > 0:
                with quiet_arviz():
                    ess = min(ess, float(az.ess(ind, method="bulk")))
        var += terms / max(ess, 1.0)
    return math.sqrt(var)
