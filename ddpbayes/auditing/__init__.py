"""The audit (DESIGN §1): `audit()` runs a problem's adversaries through an engine (`run`, its
cost refused beforehand by `cost`), judges the worst against a claim (`verdict`) and returns an
`AuditResult` (`result`); the information measures (`information`) and the joint composition
audit (`joint`) add their blocks to it."""

from ddpbayes.auditing.result import AuditResult
from ddpbayes.auditing.run import audit
from ddpbayes.auditing.verdict import judge

__all__ = ["AuditResult", "audit", "judge"]
