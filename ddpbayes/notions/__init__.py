"""Privacy notions as sets of adversaries over the one quantity leak(i, K) (DESIGN §1): a
`Notion` per notion (`base`; `notion(name)` looks one up), one module each (`dp`, `idp`, `pdp`,
`ddp`) exporting the notion itself; `worst` folds the adversaries' leakages into the notion's;
`lattice` is pdp's lattice: seed 003's greedy search and its summary by layer."""

from ddpbayes.notions.base import REGISTRY, Notion, notion
from ddpbayes.notions.dp import DP
from ddpbayes.notions.idp import IDP
from ddpbayes.notions.pdp import PDP
from ddpbayes.notions.ddp import DDP
from ddpbayes.notions.worst import TIE, aggregate, fold_targets, merged_profile, worst_by_target, worst_of
from ddpbayes.vocabulary import NOTIONS

__all__ = ["DDP", "DP", "IDP", "NOTIONS", "PDP", "REGISTRY", "TIE", "Notion", "aggregate", "fold_targets",
           "merged_profile", "notion", "worst_by_target", "worst_of"]
