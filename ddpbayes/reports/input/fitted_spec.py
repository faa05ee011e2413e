"""Specs that name a fit (issue #41 item 4): a `[fit]` table gives the data table, the template and
its options; `ddpbayes report` fits it (or reuses the fit kept in the report's folder, keyed by the
data's sha256 and the options), audits one target under each notion with the parameters set each
way (`--parameters`), calibrates the Laplace scale for the claim under each, and sets classic DP's
answer beside (DESIGN §9.6).

    title = "..."                                   # optional
    description = "..."                             # optional
    query = "cluster"                               # the count of the target's cluster; or any query spec
                                                    # (a categorical outcome: "cluster:L", the count of level L,
                                                    # named as in the data, in the target's cluster)
    notions = ["idp", "pdp", "ddp"]
    target = 0
    known = "cluster"                               # optional: pdp's known set (the rest of the target's cluster, or indices)
    claim = 1.0                                     # the epsilon claimed, and calibrated for
    parameters = ["mean", "integrated:20", "draws:20"]
    calibrate = ["idp"]                             # optional: the notions calibrated (default every notion)
    seed = 0                                        # optional: the audits' seed
    [fit]
    data = "../../models/data/gambia_malaria.csv"   # relative to the spec, or a shipped data file
    template = "clustered"
    options = { cluster = "x,y", outcome = "pos" }  # `ddpbayes fit`'s template options (ordered = true: --ordered)
    seed = 0                                        # optional; draws, tune, chains as `fit` takes them
    [mechanism]
    kind = "laplace"
    scale = 1.0
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

from ddpbayes import shipped
from ddpbayes.encoding import JsonDocument
from ddpbayes.errors import InputError
from ddpbayes.limits import positive_finite
from ddpbayes.mechanisms import Laplace
from ddpbayes.notions import notion
from ddpbayes.plausible import parse_parameters
from ddpbayes.queries import parse_query
from ddpbayes.reports.input.keys import Problems, check_keys
from ddpbayes.settings import SEED_LIMIT
from ddpbayes.vocabulary import NOTIONS

CLUSTER_QUERY = "cluster"  # the count of the target's cluster, "cluster:L" of level L there (from the fit's table)
CLUSTER_KNOWN = "cluster"  # the known set: the rest of the target's cluster (built from the fit's table)
TEMPLATE = "clustered"  # the template whose fits are audited under --parameters (DESIGN §9.6)
TOP = {
    "title": (str, False), "description": (str, False), "query": (str, True), "notions": ((list, str), True),
    "target": ((list, int), True), "known": ((list, int), False), "claim": (float, True),
    "parameters": ((list, str), True), "calibrate": ((list, str), False), "seed": (int, False),
    "fit": (dict, True), "mechanism": (dict, True),
}
FIT = {"data": (str, True), "template": (str, True), "options": (dict, False), "seed": (int, False),
       "draws": (int, False), "tune": (int, False), "chains": (int, False)}
OPTIONS = ("cluster", "outcome", "covariates", "ordered", "coords")  # the clustered template's options, as `fit` takes them
FLAGS = ("ordered",)  # options that are switches (true or false), not column names
MECHANISM = {"kind": (str, True), "scale": (float, True)}


@dataclass(frozen=True)
class FitRequest(JsonDocument):
    """What to fit: the data file, the template, its options and NUTS's settings."""

    data: Path
    data_ref: str
    template: str
    options: dict
    seed: int = 0
    draws: int = 1000
    tune: int = 1000
    chains: int = 4

    def key(self) -> dict:
        """What a kept fit must match to be reused: the data's sha256, the template, options and settings."""
        return {"sha256": hashlib.sha256(self.data.read_bytes()).hexdigest(), "template": self.template,
                "options": self.options, "seed": self.seed, "draws": self.draws, "tune": self.tune,
                "chains": self.chains}

    def to_dict(self) -> dict:
        return {"data": self.data_ref, "template": self.template, "options": self.options, "seed": self.seed,
                "draws": self.draws, "tune": self.tune, "chains": self.chains}


@dataclass(frozen=True)
class FittedSpec(JsonDocument):
    """A validated spec naming a fit (module docstring)."""

    path: Path
    fit: FitRequest
    query: str
    notions: tuple[str, ...]
    target: int
    claim: float
    parameters: tuple[str, ...]
    scale: float
    calibrate: tuple[str, ...]
    known: tuple[int, ...] | str | None = None  # indices, or CLUSTER_KNOWN
    seed: int = 0
    title: str | None = None
    description: str | None = None
    model_ref: str = field(default="fit")

    def to_dict(self) -> dict:
        return {"title": self.title, "fit": self.fit.to_dict(), "query": self.query, "notions": list(self.notions),
                "target": self.target, "known": self.known if self.known in (None, CLUSTER_KNOWN) else list(self.known),
                "claim": self.claim, "parameters": list(self.parameters), "calibrate": list(self.calibrate),
                "mechanism": {"kind": Laplace.kind, "scale": self.scale}, "seed": self.seed}


def load_fitted_spec(raw: dict, path: Path) -> FittedSpec:
    """Check a spec with a `[fit]` table: every problem found, then all reported at once."""
    problems = Problems(path)
    rest = raw.get("known") == CLUSTER_KNOWN  # the rest of the target's cluster, not indices
    raw = {k: v for k, v in raw.items() if not (rest and k == "known")}
    good = check_keys(raw, TOP, problems, "")
    fit = check_keys(good.get("fit", {}), FIT, problems, "fit.")
    mech = check_keys(good.get("mechanism", {}), MECHANISM, problems, "mechanism.")
    data = _check_fit(fit, problems)
    _check_values(good, mech, problems)
    problems.raise_any()
    notions = tuple(raw["notions"])
    return FittedSpec(
        path=path, fit=FitRequest(data, fit["data"], fit["template"], dict(fit.get("options", {})),
                                  fit.get("seed", 0), fit.get("draws", 1000), fit.get("tune", 1000),
                                  fit.get("chains", 4)),
        query=raw["query"], notions=notions, target=raw["target"][0], claim=float(raw["claim"]),
        parameters=tuple(raw["parameters"]), scale=float(mech["scale"]),
        calibrate=tuple(raw.get("calibrate", notions)),
        known=CLUSTER_KNOWN if rest else None if "known" not in raw else tuple(raw["known"]), seed=raw.get("seed", 0),
        title=raw.get("title"), description=raw.get("description"))


def _check_fit(fit: dict, problems: Problems) -> Path | None:
    """`[fit]`: an existing data file, the clustered template, its options and NUTS's settings."""
    data = None
    if "data" in fit:
        data = data_file(fit["data"], problems.path)
        if not data.is_file():
            problems.add(f"key 'fit.data' must be an existing data file, relative to the spec, or a shipped one "
                         f"(models/data/), got {fit['data']!r} (resolved to {data})")
    if "template" in fit and fit["template"] != TEMPLATE:
        problems.add(f"key 'fit.template' must be '{TEMPLATE}' (the template audited under --parameters), "
                     f"got {fit['template']!r}")
    options = fit.get("options", {})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        problems.add(f"key 'fit.options' has unknown option '{unknown[0]}' (the clustered template takes "
                     f"{', '.join(OPTIONS)})")
    for key in ("cluster", "outcome"):
        if "template" in fit and key not in options:
            problems.add(f"key 'fit.options' must give '{key}' (a column of the data)")
    bad = [k for k, v in options.items() if k not in FLAGS and (not isinstance(v, str) or not v.strip())]
    if bad:
        problems.add(f"key 'fit.options.{bad[0]}' must be a column name (several: 'a,b'), got {options[bad[0]]!r}")
    for key in FLAGS:
        if key in options and not isinstance(options[key], bool):
            problems.add(f"key 'fit.options.{key}' must be true or false (--{key}), got {options[key]!r}")
    for key, least in (("seed", 0), ("draws", 1), ("tune", 0), ("chains", 2)):
        if key in fit and not (least <= fit[key] < (SEED_LIMIT if key == "seed" else 10**7)):
            problems.add(f"key 'fit.{key}' must be an integer of at least {least}, got {fit[key]!r}")
    return data


def data_file(given: str, spec: Path) -> Path:
    """The data file a spec names: relative to the spec's folder, else the shipped models/data/ file of that name."""
    local = (spec.parent / given).resolve()
    if local.exists() or Path(given).is_absolute():
        return local
    bundled = shipped.path(f"models/data/{Path(given).name}")
    return bundled if bundled.is_file() else local


def _check_values(raw: dict, mech: dict, problems: Problems) -> None:
    """The notions, target, known set, claim, parameters, query and mechanism."""
    notions = raw.get("notions")
    if notions is not None and (not notions or len(set(notions)) != len(notions) or
                                any(n not in NOTIONS or notion(n).model_free for n in notions)):
        problems.add(f"key 'notions' must be a non-empty list of distinct notions under a model "
                     f"({', '.join(n for n in NOTIONS if not notion(n).model_free)}), got {notions!r}")
    for key in raw.get("calibrate", []):
        if notions is not None and key not in notions:
            problems.add(f"key 'calibrate' must name notions of 'notions', got {key!r}")
    target = raw.get("target")
    if target is not None and (len(target) != 1 or target[0] < 0):
        problems.add(f"key 'target' must be one non-negative tuple index, got {target!r}")
    known = raw.get("known")
    if known is not None and (any(k < 0 for k in known) or set(known) & set(target or ())):
        problems.add(f"key 'known' must be non-negative tuple indices other than the target, got {known!r}")
    if "claim" in raw and not (math.isfinite(raw["claim"]) and raw["claim"] > 0):
        problems.add(f"key 'claim' must be a positive finite number, got {raw['claim']!r}")
    if "seed" in raw and not 0 <= raw["seed"] < SEED_LIMIT:
        problems.add(f"key 'seed' must be an integer from 0 to {SEED_LIMIT - 1}, got {raw['seed']!r}")
    for mode in raw.get("parameters", []):
        with problems.check():
            if parse_parameters(mode).mode == "draw":
                raise InputError(f"key 'parameters': draw:K is one draw; give mean, integrated:S or draws:S, got "
                                 f"{mode!r}")
    if raw.get("parameters") == []:
        problems.add("key 'parameters' must name at least one of mean, integrated:S, draws:S")
    kind, sep, level = raw.get("query", CLUSTER_QUERY).partition(":")
    if kind == CLUSTER_QUERY and sep and not level.strip():
        problems.add(f"key 'query' must name a level after 'cluster:' (cluster:L), got {raw['query']!r}")
    elif kind != CLUSTER_QUERY:
        with problems.check():
            parse_query(raw["query"])
    if "kind" in mech and mech["kind"] != Laplace.kind:
        problems.add(f"key 'mechanism.kind' must be '{Laplace.kind}' (the noise calibrated), got {mech['kind']!r}")
    if "scale" in mech and not positive_finite(mech["scale"]):
        problems.add(f"key 'mechanism.scale' must be a positive finite number, got {mech['scale']!r}")
