"""The audit (DESIGN §1): `audit()` runs a problem's adversaries through an engine and judges the
result against a claim (`run`); the information measures (`information`) and the joint
composition audit (`joint`) add their blocks to it."""

from ddpbayes.auditing.run import AuditResult, audit, judge

__all__ = ["AuditResult", "audit", "judge"]
