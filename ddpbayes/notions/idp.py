"""idp, identity DP (004 Def. 3): the weakest adversary, who knows no other tuple (K = {})."""

from __future__ import annotations

from ddpbayes.notions.base import Notion, register
from ddpbayes.problem import Adversary


class IdentityDP(Notion):
    name, source, weakest = "idp", "Wu et al., Def. 3", True

    def adversaries(self, n, targets, known=None, dependence_sets=None):
        return (Adversary(i) for i in targets)

    def known_set_count(self, n, targets, known=None):
        return 1  # every adversary knows nothing


IDP = register(IdentityDP())
