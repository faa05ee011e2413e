"""The program engine (DESIGN §2.6): a certified lower bound on the leakage of a mechanism known only as a
program (`Mechanism.black_box`: `mechanism(answers, rng) -> output`).

Per adversary A(i, K): the pair to certify (x_K, t, t') is chosen before any program runs (`records`); the
records are drawn independently given (x_K, t) and given (x_K, t'), the program is run on their answers, a
distinguishing output event is found on one sample (DP-Sniper's scheme: Bichsel et al. 2021) and its
probability ratio bounded on a fresh one, of Poisson size per value, by one Clopper–Pearson bound on the
share of the hits (`certify`: the ratio of two Poisson rates). Each adversary is
certified at 1 − (1 − CONFIDENCE)/m for the m adversaries of the audit (Bonferroni), so the worst of them
holds at CONFIDENCE too. The result is a lower bound: the interval is (bound, inf), and a verdict can fail
a claim with it, never pass one.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ddpbayes.engines.base import AdversaryLeakage, Engine, Witness
from ddpbayes.engines.exact.joint import oversized_reason, unsupported_reason
from ddpbayes.engines.program.certify import certify
from ddpbayes.engines.program.classic import classic_leakage
from ddpbayes.engines.gaussian.graph import unsupported_reason as gaussian_reason
from ddpbayes.engines.program.records import (EnumeratedRecords, ForwardRecords, GaussianRecords, Records,
                                              forward_reason)
from ddpbayes.errors import InputError
from ddpbayes.model.supports import is_discrete
from ddpbayes.problem import Adversary, Problem
from ddpbayes.progress import Progress

CONFIDENCE = 0.95  # of the audit's certified lower bound, all adversaries together
MAX_ADVERSARIES = 64  # each costs 4 x --program-runs runs of the program


class ProgramEngine(Engine):
    name = "program"
    estimates = True

    def supports(self, problem: Problem) -> str | None:
        if not problem.mechanism.black_box:
            return "it certifies lower bounds for programs; this mechanism's law is known (exact engines)"
        return _records_reason(problem)

    def leakage(self, problem: Problem) -> list[AdversaryLeakage]:
        m = len(problem.adversaries)
        if m > MAX_ADVERSARIES:
            raise InputError(f"certifying a program costs {4 * problem.settings.program_runs:,} program runs per "
                             f"adversary: {m} adversaries are over {MAX_ADVERSARIES} (restrict --target or --known)")
        records = _records(problem)
        level = 1 - (1 - CONFIDENCE) / m
        runs = 4 * problem.settings.program_runs  # per adversary: search and check, two target values each
        with Progress("certifying the program", runs * m, "runs", enabled=problem.settings.progress,
                      slow_only=True) as bar:  # shown once it has taken a heartbeat (5 s)
            return [_certified(problem, records, adv, level, m, bar) for adv in problem.adversaries]

    def classic_leakage(self, problem: Problem, targets: list[int], pairs: object = None) -> list[AdversaryLeakage]:
        """Classic dp: certified on neighbouring databases, no model law (`classic`)."""
        return classic_leakage(problem, targets, pairs)

    def dependence_sets(self, problem: Problem) -> list[frozenset[int]]:
        """N(i) is the model's: from an exact engine that reads it, with any noise in place of the program."""
        from ddpbayes.engines.sampling.summed import exact_dependence  # the sampling package imports engines
        from ddpbayes.mechanisms import Laplace

        sets = exact_dependence(replace(problem, mechanism=Laplace(1.0)))
        if sets is None:
            raise InputError("the program engine finds dependence sets from an exact engine, and none reads this model")
        return sets


def _records_reason(problem: Problem) -> str | None:
    if _route(problem) is not None:
        return None
    return ("a certified bound needs independent draws of the records given the target's value: the model is "
            "neither enumerable, nor jointly Gaussian, nor has discrete tuples to draw by rejection")


def _route(problem: Problem) -> type[Records] | None:
    """How the records are drawn exactly: enumeration, the Gaussian conditional, or prior draws by rejection."""
    model = problem.model
    if unsupported_reason(model) is None and oversized_reason(model, problem.settings.max_states) is None:
        return EnumeratedRecords
    if gaussian_reason(model) is None:
        return GaussianRecords
    if all(is_discrete(slot.rv) for slot in model.slots) and forward_reason(model) is None:  # slots, not variables
        return ForwardRecords
    return None


def _records(problem: Problem) -> Records:
    return _route(problem)(problem)


def _certified(problem: Problem, records: Records, adv: Adversary, level: float, m: int,
               bar: Progress) -> AdversaryLeakage:
    candidate = records.candidate(adv)
    if candidate is None:
        bar.advance(4 * problem.settings.program_runs)
        return AdversaryLeakage(adv, 0.0, Witness(adv, None, None, None, None), ci=(0.0, 0.0),
                                reason="no known values leave two possible target values: nothing to learn",
                                diagnostics={"ok": True, "exact": True})
    mech, runs = problem.mechanism, problem.settings.program_runs
    rng = np.random.default_rng([problem.settings.seed, adv.target, *sorted(adv.known)])

    def draw(t: float):
        return lambda n, gen: mech.sample(records.answers(adv, candidate.known_values, t, n, gen), gen)

    cert = certify(draw(candidate.t), draw(candidate.t_prime), n_search=runs, n_check=runs, confidence=level,
                   rng=rng, progress=bar)
    k_a, k_b, n = cert.counts
    (n_a, n_b), t, t_prime = cert.runs, candidate.t, candidate.t_prime
    if cert.direction != "a":  # the event is likelier given t' than given t: name the pair the way it leaks
        t, t_prime, k_a, k_b, n_a, n_b = t_prime, t, k_b, k_a, n_b, n_a
    witness = Witness(adv, candidate.known_values, t, t_prime, None)
    reason = (f"certified lower bound at {level:.4g} confidence ({CONFIDENCE:g} over the {m} adversaries, Bonferroni):"
              f" the event {cert.event.describe()} had {k_a:,} of {n_a:,} fresh runs given t = {t:g} and {k_b:,} of "
              f"{n_b:,} given t' = {t_prime:g} (runs Poisson of mean {n:,}; Clopper–Pearson on the share of the hits); chosen on {cert.n_search:,} other runs per value; {candidate.why}")
    diagnostics = {"ok": True, "lower_bound_only": True, "program_runs": 2 * (runs + runs), "estimate": cert.estimate,
                   "event": cert.event.describe(), "confidence": level, "counts": [k_a, k_b, n]}
    return AdversaryLeakage(adv, cert.eps_lcb, witness, ci=(cert.eps_lcb, math.inf), reason=reason,
                            diagnostics=diagnostics, score=cert.eps_lcb)
