"""dp, the classic guarantee: K = all others, x_{-i} over the product of the domains. It is
model-free: the mechanism's leakage at the query's sensitivity to each tuple, no engine; a program's
(a black box) is a certified lower bound over neighbouring databases (`engines.certify_classic_dp`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ddpbayes.engines import AdversaryLeakage, Witness, certify_classic_dp
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import l2_sensitivity
from ddpbayes.notions.base import Notion, register
from ddpbayes.problem import Adversary, Problem
from ddpbayes.queries import Linear


class ClassicDP(Notion):
    name, source, model_free = "dp", "the classic guarantee", True

    def adversaries(self, n, targets, known=None, dependence_sets=None):
        everyone = frozenset(range(n))
        return (Adversary(i, everyone - {i}) for i in targets)

    def check_pairs(self, pairs: object, black_box: bool) -> None:
        if pairs is not None and not black_box:
            raise InputError("--pairs gives the neighbouring databases a program's classic dp is certified on; this "
                             "mechanism's law is known and its dp is computed over the whole domains")

    def leakage(self, problem: Problem, targets: Sequence[int], pairs: object = None) -> list[AdversaryLeakage]:
        """sup over x_{-i} in the product of domains, t, t', y: the mechanism's leakage at the
        query's L1 sensitivity to tuple i; infinite for an unbounded domain. A program's: a certified
        lower bound on the pairs given (`pairs`: `--pairs`) or searched (DESIGN §2.6)."""
        model, query, mech = problem.model, problem.query, problem.mechanism
        if mech.black_box:
            return certify_classic_dp(problem, targets, pairs)
        out = []
        for adv in self.adversaries(model.n, targets):
            i = adv.target
            dom = model.domains[i]
            value, reason = mech.tuple_dp_leakage(query, i, model.domains)
            profile = mech.classic_profile(l2_sensitivity(query, i, model.domains)) if mech.profile else None
            t, t_prime, y = _witness(problem, i)
            if math.isinf(value):
                reason = f"tuple {model.names[i]} has the unbounded domain {dom}: additive noise cannot hide it"
            bounds = query.sensitivity_range(i, model.domains)  # expr: on continuous domains
            ci = None if bounds is None or bounds[0] >= bounds[1] else (mech.dp_leakage(bounds[0]), value)
            if ci is not None:  # a sure range (no diagnostics), not a 95% interval
                reason = (f"the query's sensitivity to {model.names[i]} is bounded in [{bounds[0]:.6g}, {bounds[1]:.6g}], "
                          "not computed: the leakage lies between the two (give --sensitivity to state it)")
            y = None if mech.profile else y  # a profile's witness is a set of outputs, not one
            out.append(AdversaryLeakage(adv, value, Witness(adv, None, t, t_prime, y), ci=ci, reason=reason,
                                        profile=profile))
        return out


def _witness(problem: Problem, i: int) -> tuple[float, float, tuple[float, ...] | None]:
    """The values t, t' of tuple i (and output y) attaining the sup."""
    dom = problem.model.domains[i]
    if isinstance(problem.query, Linear):
        w = problem.query.weights(problem.model.n)[i]
        return (dom.hi, dom.lo, (math.inf,)) if w >= 0 else (dom.lo, dom.hi, (math.inf,))
    t, t_prime = problem.query.sensitivity_pair(i, problem.model.domains) or (None, None)
    return t, t_prime, None


DP = register(ClassicDP())
