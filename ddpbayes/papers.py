"""The papers by name where a reader meets them: report text cites "Liu et al. 2016, Thm 3",
never the seed number the code uses ("seed 000 Thm 3"; docs/references.md maps the two).

`cite` rewrites the seed references in text the reports take from elsewhere (a model file's
docstring, an engine's notes), and in the docstrings the documentation site's API pages show
(docs/conf.py); the reports' own sentences name the papers directly.
"""

from __future__ import annotations

import re

LIU = "Liu et al. 2016"  # Liu, Chakraborty, Mittal, NDSS 2016 (DDP): seeds 000, 001, 002
LI = "Li et al. 2019"  # Li, Ren, Yang, Yang, IEEE TIFS 2019 (PDP): seed 003
WU = "Wu et al."  # Wu et al., identity DP (IDP): seed 004
PAPERS = {"000": LIU, "001": LIU, "002": LIU, "003": LI, "004": WU}

# the papers of the mechanisms with a joint output law (issue #28, DESIGN §5.2), as reports name them
DWORK_ROTH = "Dwork & Roth 2014"  # The Algorithmic Foundations of Differential Privacy: report-noisy-max (§3.3)
MCSHERRY_TALWAR = "McSherry & Talwar 2007"  # Mechanism Design via Differential Privacy (FOCS): the exponential mechanism
LYU = "Lyu et al. 2017"  # Lyu, Su, Li, Understanding the Sparse Vector Technique (PVLDB 10(6)): Algs. 1-6
ERLINGSSON = "Erlingsson et al. 2014"  # Erlingsson, Pihur, Korolova, RAPPOR (CCS)
GHOSH = "Ghosh et al. 2009"  # Ghosh, Roughgarden, Sundararajan, Universally Utility-Maximizing Privacy Mechanisms (STOC)
DING = "Ding et al. 2018"  # Ding, Wang, Wang, Zhang, Kifer, Detecting Violations of Differential Privacy (CCS)

# "seed 000", "Seeds 000/002/004", "seeds 000 and 003", "004", "000/001", then an optional "'s" or a locator
_NUMBERS = r"00[0-4](?:(?:/|, | and |–|-)00[0-4])*"
_SEEDS = re.compile(rf"(?:\b[Ss]eeds?\s)?(?<![\w.,+\-/–])({_NUMBERS})(?!\w|[.,/–-]\d|-[A-Za-z])('s\b)?")
_LOCATOR = re.compile(r" (?:§|(?:Thms?|Theorems?|Defs?|Eqs?|Figs?|Examples?|Lemmas?|Props?|Corollary|Table|Sec)\b)")
# "Wu et al. (seed 004)": the name already said
_NAMED = re.compile(r"(Liu et al\.(?: 2016)?|Li et al\.(?: 2019)?|Wu et al\.)\s\((?:[Ss]eeds?\s)?" + _NUMBERS + r"\)")


def cite(text: str) -> str:
    """`text` with every seed reference replaced by the paper's name ("Seed 004's contagious
    family" → "Wu et al.'s contagious family", "seed 000 Thm 3" → "Liu et al. 2016, Thm 3",
    "(004 §1, Example 2)" → "(Wu et al., §1, Example 2)", "seeds 000/004" → "Liu et al. 2016 and
    Wu et al.", "Wu et al. (seed 004)" → "Wu et al.")."""
    def name(m: re.Match) -> str:
        papers = list(dict.fromkeys(PAPERS[s] for s in re.findall(r"00[0-4]", m.group(1))))
        text = " and ".join(papers)
        if m.group(2):
            return text + "'s"
        return text + ("," if _LOCATOR.match(m.string, m.end()) else "")

    return _SEEDS.sub(name, _NAMED.sub(r"\1", text))
