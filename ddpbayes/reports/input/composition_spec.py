"""Composition specs: several releases of one model audited jointly (DESIGN §3.1b).

A spec with `releases` instead of `query` and `[mechanism]`:

    title = "..."                                   # optional
    description = "..."                             # optional
    model = "../../models/household.py"
    params = { n = 4 }                              # optional
    releases = ["linear:1,1,0,0:laplace:1", "linear:0,0,1,1:laplace:2"]   # as `audit --release`
    notions = ["dp", "idp", "pdp", "ddp"]
    engine = "auto"                                 # optional; seed, target, claim, draws, tune, chains too
    sweep = [0.25, 0.5, 1, 2, 4]                    # optional: factors on every release's noise

What the report computes from it: `reports.views.composition`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ddpbayes.encoding import JsonDocument
from ddpbayes.limits import positive_finite
from ddpbayes.reports.input.keys import Problems, check_keys, model_file
from ddpbayes.settings import MIN_DRAWS, SEED_LIMIT, RunSettings
from ddpbayes.vocabulary import ENGINES, NOTIONS

DEFAULT_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
KEYS = {
    "title": (str, False), "description": (str, False), "model": (str, True), "params": (dict, False),
    "releases": ((list, str), True), "notions": ((list, str), True), "claim": (float, False),
    "engine": (str, False), "seed": (int, False), "target": ((list, int), False), "draws": (int, False),
    "tune": (int, False), "chains": (int, False), "sweep": ((list, float), False),
}


@dataclass(frozen=True)
class CompositionSpec(JsonDocument):
    """A validated composition spec; `path` is the spec file, `model` the resolved model file."""

    path: Path
    model: Path
    model_ref: str
    releases: tuple[str, ...]
    notions: tuple[str, ...]
    params: dict
    sweep: tuple[float, ...]
    claim: float | None = None
    engine: str = "auto"
    seed: int = 0
    target: tuple[int, ...] | None = None
    draws: int | None = None
    tune: int | None = None
    chains: int | None = None
    title: str | None = None
    description: str | None = None

    def settings(self) -> RunSettings:
        return RunSettings.of(engine=self.engine, seed=self.seed, draws=self.draws, tune=self.tune, chains=self.chains)

    def to_dict(self) -> dict:
        return {"title": self.title, "model": self.model_ref, "params": self.params, "releases": list(self.releases),
                "notions": list(self.notions), "claim": self.claim, "engine": self.engine, "seed": self.seed,
                "target": None if self.target is None else list(self.target), "draws": self.draws, "tune": self.tune,
                "chains": self.chains, "sweep": list(self.sweep)}


def load_composition_spec(raw: dict, path: Path) -> CompositionSpec:
    """Check a spec with `releases` (every value that can be checked without the model): every
    problem found, then all reported at once (`Problems`)."""
    problems = Problems(path)
    good = check_keys(raw, KEYS, problems, "")

    def bad(key: str, must: str) -> None:
        problems.add(f"key '{key}' must be {must}, got {good[key]!r}")

    model = None
    if "model" in good:
        with problems.check():
            model = model_file(good["model"], path)
    if "releases" in good and len(good["releases"]) < 2:
        bad("releases", "a list of at least two QUERY:MECHANISM:PARAM strings")
    notions = good.get("notions")
    if notions is not None and (not notions or len(set(notions)) != len(notions)
                                or any(n not in NOTIONS for n in notions)):
        bad("notions", f"a non-empty list of distinct notions from {', '.join(NOTIONS)}")
    checks = {"engine": (lambda v: v in ("auto", *ENGINES), f"one of auto, {', '.join(ENGINES)}"),
              "claim": (lambda v: positive_finite(v) or v == 0, "a non-negative finite number"),
              "seed": (lambda v: 0 <= v < SEED_LIMIT, f"an integer from 0 to {SEED_LIMIT - 1}"),
              "draws": (lambda v: v >= MIN_DRAWS, f"an integer of at least {MIN_DRAWS}"),
              "tune": (lambda v: v >= 0, "a non-negative integer"), "chains": (lambda v: v >= 1, "a positive integer"),
              "target": (lambda v: bool(v) and min(v) >= 0, "a non-empty list of non-negative tuple indices"),
              "sweep": (lambda v: len(v) >= 2 and all(map(positive_finite, v)),
                        "a list of at least two positive finite factors")}
    for key, (ok, must) in checks.items():
        if key in good and not ok(good[key]):
            bad(key, must)
    problems.raise_any()
    return CompositionSpec(
        path=path, model=model, model_ref=raw["model"], releases=tuple(raw["releases"]), notions=tuple(notions),
        params=raw.get("params", {}), sweep=tuple(sorted({float(v) for v in raw.get("sweep", DEFAULT_FACTORS)})),
        claim=None if raw.get("claim") is None else float(raw["claim"]), engine=raw.get("engine", "auto"),
        seed=raw.get("seed", 0), target=None if "target" not in raw else tuple(raw["target"]),
        draws=raw.get("draws"), tune=raw.get("tune"), chains=raw.get("chains"), title=raw.get("title"),
        description=raw.get("description"))
