"""Attack specs: the inference attack on location data (`ddpbayes attack --report`, DESIGN §7) as a
spec, so that every shipped report, the attack's too, is rebuilt from reports/specs/.

A spec whose only table is `[attack]`, with `ddpbayes attack`'s settings (all optional):

    [attack]
    k = 8                               # K-means clusters
    epsilons = [0.1, 0.5, 1, 2, 3]      # privacy budgets
    grid = 20                           # the posterior's G x G cells
    n_prior = ["all", 1195]             # known-set sizes: "all" or a count
    targets = 500                       # a seeded sample of the users (default all)
    seed = 0
    regions = ["us", "cities"]          # the first is shown in full (default ["us"])
    audit_users = 6                     # the near-friend model audited for a seeded sample (default 0: none)
    locations = "users.csv"             # own inputs, relative to the spec (default: the shipped Gowalla data)
    edges = "edges.csv"
    fit = "fit.json"
    near = "near.json"

`ddpbayes report SPEC --out DIR` writes the same report as `ddpbayes attack ... --report DIR`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ddpbayes.attack.run import MAX_AUDIT_USERS, MAX_GRID, REGIONS, AttackSettings
from ddpbayes.reports.input.keys import Problems, check_keys
from ddpbayes.settings import SEED_LIMIT

KEYS = {"k": (int, False), "epsilons": ((list, float), False), "grid": (int, False), "n_prior": (list, False),
        "targets": (int, False), "seed": (int, False), "locations": (str, False), "edges": (str, False),
        "fit": (str, False), "near": (str, False), "regions": (list, False), "audit_users": (int, False)}
INPUTS = ("locations", "edges", "fit", "near")


@dataclass(frozen=True)
class AttackSpec:
    """A validated attack spec: `path` is the spec file, `settings` the attack's, `inputs` the
    resolved input files (None: the shipped data)."""

    path: Path
    settings: AttackSettings
    inputs: dict[str, Path | None]
    regions: tuple[str, ...] = ("us",)
    audit_users: int = 0


def load_attack_spec(raw: dict, path: Path) -> AttackSpec:
    """Check a spec with `[attack]` (every value that can be checked without the data): every
    problem found, then all reported at once (`Problems`)."""
    problems = Problems(path)
    top = check_keys(raw, {"attack": (dict, True)}, problems, "")
    table = check_keys(top["attack"], KEYS, problems, "attack.") if "attack" in top else {}

    def bad(key: str, must: str) -> None:
        problems.add(f"key 'attack.{key}' must be {must}, got {table[key]!r}")

    checks = {"k": (lambda v: v >= 1, "a positive integer"),
              "epsilons": (lambda v: bool(v) and all(math.isfinite(e) and e > 0 for e in v),
                           "a non-empty list of finite numbers > 0"),
              "grid": (lambda v: 1 <= v <= MAX_GRID, f"an integer from 1 to {MAX_GRID}"),
              "n_prior": (lambda v: bool(v) and all(n == "all" or (type(n) is int and n >= 1) for n in v),
                          'a non-empty list of "all" or positive counts'),
              "targets": (lambda v: v >= 1, "a positive integer"),
              "seed": (lambda v: 0 <= v < SEED_LIMIT, f"an integer from 0 to {SEED_LIMIT - 1}"),
              "regions": (lambda v: bool(v) and all(isinstance(r, str) and r in REGIONS for r in v)
                          and len(set(v)) == len(v), f"a non-empty list of distinct regions from {', '.join(REGIONS)}"),
              "audit_users": (lambda v: 0 <= v <= MAX_AUDIT_USERS, f"an integer from 0 to {MAX_AUDIT_USERS}")}
    for key, (ok, must) in checks.items():
        if key in table and not ok(table[key]):
            bad(key, must)
    inputs = {}
    for key in INPUTS:
        inputs[key] = None if key not in table else (path.parent / table[key]).resolve()
        if inputs[key] is not None and not inputs[key].is_file():
            bad(key, f"an existing file (resolved to {inputs[key]})")
    problems.raise_any()
    given = {k: table[k] for k in ("k", "grid", "targets", "seed") if k in table}
    if "epsilons" in table:
        given["epsilons"] = tuple(dict.fromkeys(float(e) for e in table["epsilons"]))
    if "n_prior" in table:
        given["n_prior"] = tuple(dict.fromkeys(None if n == "all" else n for n in table["n_prior"]))
    regions = tuple(table.get("regions", ["us"]))
    return AttackSpec(path, AttackSettings(**given, region=regions[0]), inputs, regions, table.get("audit_users", 0))
