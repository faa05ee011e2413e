"""Seed 002 §IV's inference attack on location data (`ddpbayes attack`, DESIGN §7).

release.py    the provider: K-means partition, the centroids' L1 sensitivity, the LPM
adversary.py  what each target's adversary knows: known sets, its cluster, the CAR conditional
posterior.py  the grid posterior (Eq. 6), the histogram (Eq. 8) and CAR priors, entropies
metrics.py    inference error (Eq. 10), leaked information (Eq. 11), Theorem 2's bound
run.py        the experiment: inputs, seeding, progress, rows

Its report (`--report DIR`) is `ddpbayes.reports.render.attack`: attack/ is below reports/.

From Python: `load_data` reads the users, friendships and fits, `run_attack` runs the attack with
`AttackSettings` and returns an `AttackResult`. These names are imported from `run` on first use,
so that importing a submodule (`attack.grid`, `attack.metrics`) does not import the experiment.
"""

from __future__ import annotations

from ddpbayes.lazy import listing, on_first_use

_LAZY = {name: "ddpbayes.attack.run" for name in ("AttackData", "AttackResult", "AttackSettings", "load_data",
                                                  "run_attack")}

__all__ = ["AttackSettings", "AttackData", "AttackResult", "load_data", "run_attack"]

__getattr__ = on_first_use(__name__, _LAZY, globals())
__dir__ = listing(_LAZY, globals())
