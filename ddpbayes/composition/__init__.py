"""Several releases of the same data audited jointly (seed 000 §V-A, Thms 3–4; DESIGN §3.1b).

A composition stacks the releases' outputs into one vector output (`ComposedQuery`), each
coordinate perturbed by the noise of the release it belongs to (`mechanisms.composed`).
The engines audit the joint output exactly as any vector release. `summary` sets the joint
leakage next to the releases' own leakages under the same notion: the sequential bound Σ ε_t
(Thm 3), and when the releases touch disjoint tuples the parallel bound max ε_t (Thm 4), with
the dependent pairs across releases that break Thm 4's premise. Under Bayesian leakage (a
mixture over the unknown tuples) neither bound need hold: a violation is reported, never hidden.
"""

from ddpbayes.composition.release import Release, compose, parse_release
from ddpbayes.composition.summary import Leak, summary, summary_text, touched

__all__ = ["Leak", "Release", "compose", "parse_release", "summary",
           "summary_text", "touched"]
