"""`audit` of a spec's model, query and mechanism for any notion: the one way a report audits."""

from __future__ import annotations

from dataclasses import dataclass

from ddpbayes.auditing import AuditResult, audit
from ddpbayes.model import DependenceModel
from ddpbayes.notions import Notion
from ddpbayes.reports.input.spec import Spec
from ddpbayes.settings import RunSettings


@dataclass(frozen=True)
class Auditor:
    """`audit` of the spec's model, query and mechanism for any notion, with the spec's settings
    and where units run (`where`: workers, scheduler, progress); `overrides` replace any of them.
    Picklable, so an audit can itself be a unit of work (the sweep's points)."""

    spec: Spec
    model: DependenceModel
    where: RunSettings = RunSettings()

    def __call__(self, notion: str | Notion, **overrides) -> AuditResult:
        kwargs = {**self.spec.audit_kwargs(notion, self.where), "information": None, **overrides}  # measures: on request
        return audit(self.model, self.spec.query_object(), self.spec.kind, notion, **kwargs)
