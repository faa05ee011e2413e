"""What a mechanisms-under-dependence report computes (issue #28 item 5, DESIGN §5.2): for every case of
the spec, the mechanism's nominal ε (its classic DP level: the model-free notion, `--notion dp`) and its
leakage under each other notion the case names, all by `ddpbayes.audit` on the case's model, query and
mechanism, so the report shows what `ddpbayes audit ... --notion N` prints.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from ddpbayes.auditing import AuditResult, audit
from ddpbayes.errors import InputError
from ddpbayes.model import DependenceModel
from ddpbayes.notions import DP, notion
from ddpbayes.reports.input.mechanisms_spec import MechanismCase, MechanismsSpec
from ddpbayes.settings import RunSettings


@dataclass
class CaseResult:
    """One case: its nominal ε (the model-free notion's audit) and every other notion's audit."""

    case: MechanismCase
    model: DependenceModel
    nominal: AuditResult
    results: dict[str, AuditResult]  # notion name -> audit (the model-free notion is `nominal`)
    seconds: float

    def ratio(self, name: str) -> float | None:
        """The notion's leakage over the nominal ε; None when the quotient means nothing (nominal 0 or unbounded)."""
        return ratio(self.results[name].leakage, self.nominal.leakage)

    @property
    def worst(self) -> tuple[str, AuditResult] | None:
        """The notion (other than the model-free one) with the largest leakage, None when the case has none."""
        if not self.results:
            return None
        return max(self.results.items(), key=lambda kv: kv[1].leakage)


@dataclass
class MechanismsView:
    spec: MechanismsSpec
    cases: list[CaseResult]


def ratio(leakage: float, nominal: float) -> float | None:
    if not math.isfinite(nominal) or nominal <= 0:
        return None
    return leakage / nominal


def collect_mechanisms(spec: MechanismsSpec, load: Callable[[MechanismCase], DependenceModel],
                       say: Callable[[str], None], where: RunSettings | None = None) -> MechanismsView:
    """Every case's audits, in the spec's order; `load` builds (or reuses) a case's model. An error
    from a case's values names the case (`case[k]`)."""
    cases = []
    for case in spec.cases:
        say(f"case {case.index + 1}/{len(spec.cases)}: {case.label}")
        try:
            cases.append(_run(case, load(case), spec.seed, where))
        except InputError as exc:
            raise InputError(f"key 'case[{case.index}]' ({case.label}): {exc}") from exc
    return MechanismsView(spec, cases)


def _run(case: MechanismCase, model: DependenceModel, seed: int, where: RunSettings | None) -> CaseResult:
    start = time.perf_counter()
    settings = case.settings(where, seed)

    def run(which) -> AuditResult:
        return audit(model, case.query, case.mechanism, which, information=None, settings=settings,
                     **case.audit_kwargs())

    nominal = run(DP)
    results = {name: run(name) for name in case.notions if not notion(name).model_free}
    return CaseResult(case, model, nominal, results, time.perf_counter() - start)
