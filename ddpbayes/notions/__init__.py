"""Privacy notions as sets of adversaries over the one quantity leak(i, K) (DESIGN §1): a
`Notion` per notion (`base`; `notion(name)` looks one up); `adversaries` yields each notion's adversaries and folds their leakages; `lattice` is seed 003's
greedy search of the pdp lattice."""

from ddpbayes.notions.adversaries import (
    TIE,
    adversaries,
    adversary_count,
    aggregate,
    check_notion,
    dp_leakage,
    lattice_summary,
    merged_profile,
    worst_by_target,
    worst_of,
)
from ddpbayes.notions.base import REGISTRY, Notion, notion
from ddpbayes.vocabulary import NOTIONS

__all__ = ["NOTIONS", "REGISTRY", "TIE", "Notion", "notion", "adversaries", "adversary_count", "aggregate", "check_notion", "dp_leakage", "lattice_summary",
           "merged_profile", "worst_by_target", "worst_of"]
